"""``python -m sglang.check_env`` kept with a run (harness.build.check_env), and the report's Environment from it: on
a host without an accelerator SGLang's own script cannot run (0.5.14 ``check_env.py:584-595`` names no environment
class for a CPU and ends in a NameError), and the report says it could not, with that line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.build import resolve_build
from harness.build.check_env import CHECK_ENV_FILE, capture_check_env, read_check_env
from harness.upstream import IssueOptions, finding_from_path, write_issue
from tests.upstream.test_known_bug import _real_build_run

pytestmark = pytest.mark.slow


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a host with a GPU: check_env can run here")
def test_a_gpu_less_host_keeps_that_check_env_could_not_run_and_the_report_says_so(tmp_path: Path) -> None:
    run = _real_build_run(tmp_path / "run", "0.5.16")
    build = resolve_build("pip:sglang==0.5.14,deps=none")
    assert capture_check_env(build, run) == run / CHECK_ENV_FILE
    kept = read_check_env(run)
    assert kept is not None and kept["exit_code"] == 1 and kept["argv"] == ["python", "-m", "sglang.check_env"]
    assert "NameError: name 'env' is not defined" in kept["output"]
    written = write_issue(finding_from_path(run), IssueOptions(out=tmp_path / "issue"))
    assert written.folder is not None
    body = (written.folder / "issue.md").read_text(encoding="utf-8")
    assert ("`python3 -m sglang.check_env` could not run on the machine that ran the server (exit 1: "
            "`NameError: name 'env' is not defined`)") in body
    assert "NameError" in (written.folder / "attachments" / "check_env.txt").read_text(encoding="utf-8")


def test_the_reference_server_has_no_check_env(tmp_path: Path) -> None:
    assert capture_check_env(resolve_build("sim:pre-fix"), tmp_path) is None
    assert not (tmp_path / CHECK_ENV_FILE).exists() and read_check_env(tmp_path) is None
    (tmp_path / CHECK_ENV_FILE).write_text(json.dumps({"exit_code": 0}), encoding="utf-8")  # no output: not one
    assert read_check_env(tmp_path) is None
