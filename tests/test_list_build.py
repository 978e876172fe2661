"""Issue 46, cases 6 and 7: ``list --build SPEC`` shows a case in that build's words (read from the release's real
wheel, never installed), a ``--set`` that a matrix value overrides is one warning naming both, and the reference
server's ``rules=`` knob is documented where knobs are. The other cases: tests/test_release_line_guards.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import release_wheel

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


def test_list_renders_a_case_in_the_builds_words() -> None:
    release_wheel("0.5.23")
    release_wheel("0.5.13.post1")
    scenario = "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    new = _cli("list", scenario, "--build", "pip:sglang==0.5.23")
    assert new.returncode == 0, new.stderr
    eager = [line for line in new.stdout.splitlines() if "path=eager" in line]
    assert eager
    argv = new.stdout.split(eager[0], 1)[1].splitlines()[1]
    assert "--disable-cuda-graph" not in argv and "--cuda-graph-backend-decode disabled" in argv
    assert "--disable-cuda-graph is deprecated in sglang 0.5.23 (srt/server_args.py:411" in new.stdout + new.stderr
    old = _cli("list", scenario, "--build", "pip:sglang==0.5.13.post1")
    assert old.returncode == 0 and "--disable-cuda-graph" in old.stdout
    assert _cli("list", scenario, "--build", "nonsense").returncode == 2


def test_a_set_that_the_matrix_overrides_is_one_warning_naming_both() -> None:
    scenario = "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
    done = _cli("list", scenario, "--set", "server.args.disable-cuda-graph=null")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "--set server.args.disable-cuda-graph=null" in line]
    assert len(warnings) == 1, done.stderr
    assert "matrix.path.eager" in warnings[0] and "server.args.disable-cuda-graph" in warnings[0]


def test_the_rules_knob_is_documented_where_knobs_are() -> None:
    for doc in ("docs/reference-server.md", "docs/builds.md"):
        text = (ROOT / doc).read_text()
        assert "rules=" in text and "--sim-rules" in text, doc
