"""benchmarks/bench_hostile.py counts what it is there to count: a few of its tries, run against this checkout
(no failure) and against tiny fake checkouts whose CLI breaks the README's promise in one way each (every try
a failure, for the reason planted). Real subprocesses, as the benchmark always runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TRIES = "validate_a_fifo,triage_a_fifo,schema_indent_999999999"  # none needs the checkout's scenarios

pytestmark = pytest.mark.slow


def _bench(checkout: Path, tmp_path: Path, only: str = TRIES) -> dict[str, Any]:
    out = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_hostile.py"), "--checkout",
                           str(checkout), "--only", only, "--work", str(tmp_path / "work"), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(out.read_text())
    assert summary == json.loads(done.stdout)
    return summary


def _fake_checkout(root: Path, main: str) -> Path:
    """A checkout whose ``python -m harness`` is ``main`` (it has harness/cli.py, as the benchmark asks)."""
    package = root / "harness"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("")
    (package / "__main__.py").write_text(main)
    return root


def test_this_checkout_passes_the_smoke_subset(tmp_path: Path) -> None:
    summary = _bench(REPO, tmp_path)
    assert summary["tries"] == 3 and summary["failures"] == 0, summary["results"]
    assert all(r["verdict"] == "ok" for r in summary["results"])


def test_a_cli_that_prints_a_traceback_is_counted_as_failing_every_try(tmp_path: Path) -> None:
    fake = _fake_checkout(tmp_path / "fake", "import sys\nraise RuntimeError('planted')\n")
    summary = _bench(fake, tmp_path)
    assert summary["tries"] == 3 and summary["failures"] == 3, summary["results"]
    for r in summary["results"]:
        assert r["verdict"] == "fail" and "a traceback" in r["problems"], r
        assert "exit 1, not 2" in r["problems"], r


def test_a_cli_that_accepts_everything_quietly_fails_on_its_exit_code(tmp_path: Path) -> None:
    fake = _fake_checkout(tmp_path / "fake", "import sys\nsys.exit(0)\n")
    summary = _bench(fake, tmp_path)
    assert summary["failures"] == 3, summary["results"]
    assert all(r["problems"] == ["exit 0, not 2"] for r in summary["results"]), summary["results"]


def test_a_cli_that_writes_through_a_link_is_counted(tmp_path: Path) -> None:
    # It follows the dangling link at --store and creates its target, exit 2 with one line: only the write fails it.
    main = ("import sys\nfrom pathlib import Path\na = sys.argv[1:]\n"
            "Path(a[a.index('--store') + 1]).write_text('x')\n"
            "sys.stderr.write('sglang-repro: refused\\n')\nsys.exit(2)\n")
    fake = _fake_checkout(tmp_path / "fake", main)
    summary = _bench(fake, tmp_path, only="store_is_a_dangling_link")
    [result] = summary["results"]
    assert result["problems"] == ["wrote outside: target.db"], result
