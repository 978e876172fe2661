"""Shared by the issue-37 probe tests: one command line in-process, its exit code and the lines it printed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.cli import main

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=eager"


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    took_s: float

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]


def cli(argv: Sequence[object], capsys: pytest.CaptureFixture[str]) -> Ran:
    began = time.monotonic()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 99
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err, time.monotonic() - began)


def refused(argv: Sequence[object], capsys: pytest.CaptureFixture[str], *, within_s: float = 10.0) -> str:
    """``argv`` exits 2 within ``within_s`` with one line on stderr and no traceback; that line."""
    ran = cli(argv, capsys)
    assert ran.code == 2, (argv, ran.code, ran.err)
    assert len(ran.err_lines) == 1 and "Traceback" not in ran.err, ran.err
    assert ran.took_s < within_s, f"{argv}: {ran.took_s:.1f} s before refusing"
    return ran.err_lines[0]
