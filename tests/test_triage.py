"""``sglang-repro triage`` as a real subprocess over fixture logs and pasted texts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "logs"
PASTES = ROOT / "fixtures" / "triage"
EAGER_TITLE = "Frozen-KV MTP eager draft reuses the prefill's out_cache_loc (broadcast shape [N])"

pytestmark = pytest.mark.slow


def triage(*args: str | Path, releases: bool = False) -> subprocess.CompletedProcess[str]:
    extra = [] if releases else ["--no-releases"]
    return subprocess.run(
        [sys.executable, "-m", "harness", "triage", *extra, *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )


def verdict_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith(" ")]


def test_one_verdict_line_per_file_and_bug_exit_code() -> None:
    logs = [LOGS / n for n in ("frozen_kv_mtp_271.log", "cuda_oom.log", "unrelated_broadcast.log", "clean.log")]
    proc = triage(*logs)
    assert proc.returncode == 1, proc.stderr
    assert verdict_lines(proc.stdout) == [
        f"{logs[0]}: frozen-kv-mtp-stale-out-cache-loc (bug) {EAGER_TITLE} [confirmed] by its message and 8 of 9 "
        "frames (draft, draft_forward, forward, _forward_raw, ...)",
        f"{logs[1]}: cuda-out-of-memory (bug) CUDA out of memory [confirmed]",
        f"{logs[2]}: none",
        f"{logs[3]}: none",
    ]
    assert "  line 51 (traceback): seen its message on the exception line; 8 of 9 of its frames" in proc.stdout
    assert "  missing: frame eager_runner.py load_batch" in proc.stdout
    assert proc.stderr == ""


def test_nothing_matched_exits_zero() -> None:
    proc = triage(LOGS / "clean.log", LOGS / "unrelated_broadcast.log")
    assert proc.returncode == 0, proc.stderr
    assert [line.split(": ", 1)[1] for line in proc.stdout.splitlines()] == ["none", "none"]


def test_only_infra_exits_three() -> None:
    proc = triage(LOGS / "no_accelerator.log", LOGS / "clean.log")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[0].endswith("no-accelerator (infra) No accelerator available [confirmed]")


def test_missing_file_is_bad_input_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "absent.log"
    proc = triage(LOGS / "clean.log", missing)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"sglang-repro: {missing}: no such log file"


def test_custom_catalogue_and_bad_catalogue(tmp_path: Path) -> None:
    good = tmp_path / "cat.yaml"
    good.write_text(
        "version: 1\nsignatures:\n  - id: ready\n    title: Ready\n    kind: infra\n    upstream: []\n"
        "    message: fired up and ready to roll\n"
    )
    proc = triage("--catalogue", good, LOGS / "clean.log")
    assert proc.returncode == 3 and verdict_lines(proc.stdout) == [f"{LOGS / 'clean.log'}: ready (infra) Ready [confirmed]"]

    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("fired up", "fired (up"))
    proc = triage("--catalogue", bad, LOGS / "clean.log")
    assert proc.returncode == 2
    assert f"{bad}:3: signature 'ready': message: bad regex" in proc.stderr

    family = tmp_path / "family.yaml"
    family.write_text(good.read_text() + "    family: nowhere\n")
    proc = triage("--catalogue", family, LOGS / "clean.log")
    assert proc.returncode == 2 and "family: 'nowhere' is not one of the catalogue's families" in proc.stderr


def test_excerpt_shows_the_traceback() -> None:
    proc = triage("--excerpt", LOGS / "sim_pre_fix_eager.log")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "  line 23:" in lines
    assert "harness/sim/cuda_graph_buffer_registry.py" in proc.stdout
    assert lines[-1].endswith("RuntimeError: output with shape [1] doesn't match the broadcast shape [276]")


def test_a_pasted_issue_body_is_probable_and_does_not_fail_by_default() -> None:
    body = PASTES / "sglang-28264-issue-body.md"
    proc = triage(body)
    assert proc.returncode == 0, proc.stderr
    assert verdict_lines(proc.stdout) == [f"{body}: frozen-kv-mtp-stale-out-cache-loc (bug) {EAGER_TITLE} [probable] by 7 of "
                                          "9 frames (draft_forward, forward, _forward_raw, execute|forward_decode, ...)"]
    assert "traceback cut before its exception line" in proc.stdout
    assert triage("--fail-on", "probable", body).returncode == 1
    title = "Error: \" output with shape [1] doesn't match the broadcast shape [276] \""
    proc = triage("--title", title, body)
    assert proc.returncode == 1 and "[confirmed] by its message and 7 of 9 frames" in verdict_lines(proc.stdout)[0]
    assert "its message in the title" in proc.stdout


def test_json_has_one_object_per_file_and_finding() -> None:
    proc = triage("--format", "json", PASTES / "sglang-29516-issue-body.md", LOGS / "clean.log")
    assert proc.returncode == 0, proc.stderr  # possible is below the default --fail-on
    rows = json.loads(proc.stdout)
    assert {r["file"] for r in rows} == {str(PASTES / "sglang-29516-issue-body.md"), str(LOGS / "clean.log")}
    assert all({"file", "level", "signature"} <= set(r) for r in rows)
    assert {"file": str(LOGS / "clean.log"), "level": "none", "signature": None}.items() <= rows[-1].items()
    paste = [r for r in rows if r["signature"] == "mrope-draft-extend-fill-from-width"]
    assert paste and {r["level"] for r in paste} == {"possible"} and paste[0]["family"] == "frozen-kv-mtp-28264"


def test_the_version_verdict_from_the_frames() -> None:
    proc = triage(PASTES / "sglang-28264-issue-body.md", releases=True)
    assert proc.returncode == 0, proc.stderr
    assert ("  fixed: known bug, fixed in 0.5.15 (PR #29616); 0.5.13 and 0.5.13.post1 lack the fix (its 7 sglang "
            "frames fit 0.5.13, 0.5.13.post1 line for line, no other release)") in proc.stdout.splitlines()
    proc = triage("--version", "0.5.15", PASTES / "sglang-28264-issue-body.md")
    assert "  fixed: 0.5.15 has the fix (0.5.15, PR #29616): a regression or a new bug (--version)" in proc.stdout


def test_bless_adds_a_fixture_in_one_step(tmp_path: Path) -> None:
    pasted = tmp_path / "pasted.md"
    shutil.copy(PASTES / "sglang-pr-28817-message-only.md", pasted)
    pasted.write_text("\n".join(x for x in pasted.read_text().split("\n") if not x.startswith("# ")))
    out = tmp_path / "fixtures"
    source = "https://github.com/sgl-project/sglang/pull/28817"
    proc = triage("--bless", pasted, "--expect", "frozen-kv-mtp-stale-out-cache-loc:probable", "--source", source,
                  "--fixtures", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = (out / "pasted.md").read_text()
    assert written.startswith(f"# source: {source}\n# expect: frozen-kv-mtp-stale-out-cache-loc:probable\n# line: ")
    line = int(written.split("\n")[2].split(": ")[1])
    assert written.split("\n")[line - 1] == "RuntimeError: output with shape [1] doesn't match the broadcast shape [271]"
    again = triage("--bless", pasted, "--expect", "none", "--source", source, "--fixtures", out)
    assert again.returncode == 2 and "a fixture of that name exists" in again.stderr
    wrong = triage("--bless", pasted, "--expect", "cuda-out-of-memory", "--source", source,
                   "--fixtures", tmp_path / "other")
    assert wrong.returncode == 1 and "not cuda-out-of-memory" in wrong.stdout
    bad = triage("--bless", pasted, "--expect", "frozen-kv-mtp-stale-out-cache-loc:sure", "--source", source,
                 "--fixtures", tmp_path / "third")
    assert bad.returncode == 2 and "LEVEL one of possible, probable, confirmed" in bad.stderr
