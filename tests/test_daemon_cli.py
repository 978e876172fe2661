"""The test daemons' shared ``start|stop DIR`` entry (tests/daemon_cli.py), through a real interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_cli import daemon_main

ROOT = Path(__file__).resolve().parent.parent


def test_start_prints_what_start_returns_and_stop_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[str, Path]] = []

    def start(folder: Path) -> str:
        calls.append(("start", folder))
        return f"url-for-{folder.name}"

    def stop(folder: Path) -> None:
        calls.append(("stop", folder))

    daemon_main(start, stop, ["prog", "start", str(tmp_path / "pg")])
    assert capsys.readouterr().out == "url-for-pg\n"
    daemon_main(start, stop, ["prog", "stop", str(tmp_path / "pg")])
    assert calls == [("start", tmp_path / "pg"), ("stop", tmp_path / "pg")]
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("module", ["tests.store._postgres", "tests.slurm._cluster"])
@pytest.mark.parametrize("args", [[], ["restart", "x"], ["start"], ["stop", "a", "b"]])
def test_each_daemon_refuses_a_bad_command_line_with_its_usage(module: str, args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("start|stop DIR"), proc.stderr
