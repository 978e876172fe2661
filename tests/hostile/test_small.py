"""Issue 37, the small ones: broken pipes, file names that would forge lines, mistyped stores, echoed input,
a FIFO as a checkout, a dashboard that writes before it refuses, a record's artifacts as a javascript: href."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dashboard.site import build_site
from harness.records.run_record import record_to_dict
from harness.store.store import new_batch, open_store
from tests.helpers import make_record
from tests.hostile._probe import REPO, SEED, cli, refused


@pytest.mark.parametrize("argv", [["list", str(SEED), "--format", "json"],
                                  ["ci-matrix", str(SEED), "--format", "github"]], ids=["list", "ci-matrix"])
def test_a_closed_pipe_is_a_quiet_exit_not_a_traceback(argv: list[str]) -> None:
    # The reader is gone before the command writes a byte (`... | head` that has had enough): every write fails.
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 0, (code, err)


def test_a_file_name_with_a_newline_or_an_escape_cannot_forge_an_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = tmp_path / "x\nFORGED.yaml:1:1: all good\x1b[2J"
    os.mkfifo(forged)
    ran = cli(["validate", forged], capsys)
    assert ran.code == 2
    assert len(ran.err_lines) == 1 and "\x1b" not in ran.err, repr(ran.err)
    assert "\\n" in ran.err_lines[0] and "\\x1b" in ran.err_lines[0]


@pytest.mark.slow
def test_metrics_refuses_a_result_json_with_wrong_field_types(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from harness.pipeline import RunOptions, execute_run
    from harness.scenario import load_file, select_cases

    data = yaml.safe_load(SEED.read_text())
    data["matrix"]["tokens"] = {"24": {"workload.prompt.tokens": 24}}  # a light run: short prompts, 3 requests
    data["workload"].update(requests=3, max_new_tokens=12, concurrency=2)
    scenario = tmp_path / "light.yaml"
    scenario.write_text(yaml.safe_dump(data))
    (case,) = select_cases(load_file(scenario), "tokens=24,path=graph")
    run = Path(execute_run(case, "sim:post-fix", options=RunOptions(out_root=tmp_path, progress=False)).artifacts)
    assert cli(["metrics", run], capsys).code == 0
    for bad in ({"metrics": {"accept_length": "1.8"}}, {"metrics": [1, 2]}, [1]):
        (run / "result.json").write_text(json.dumps(bad))
        line = refused(["metrics", run], capsys)
        assert "result.json" in line and ("metrics" in line or "not a run record" in line), line


@pytest.mark.parametrize("action", [["alerts"], ["ack", "abc"], ["export", "--format", "csv", "-o", "X"]])
def test_a_mistyped_store_path_creates_no_store(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                action: list[str]) -> None:
    argv = ["store", *[str(tmp_path / a) if a == "X" else a for a in action], "--store", str(tmp_path / "typo.db")]
    line = refused(argv, capsys)
    assert "no such store" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_store_ack_of_a_huge_string_does_not_echo_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    open_store(str(store)).close()
    line = refused(["store", "ack", "f" * 100_000, "--store", store], capsys)
    assert len(line) < 500, len(line)


def test_bisect_cleanup_of_a_fifo_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "repo"
    os.mkfifo(fifo)
    line = refused(["bisect", "--cleanup", "--repo", fifo], capsys)
    assert "not a folder" in line, line


def test_the_dashboard_writes_nothing_before_refusing_a_linked_page(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    with open_store(str(store)) as opened:
        opened.record(make_record(run_id="r1"), new_batch("import"))
    site = tmp_path / "site"
    site.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (site / "index.html").symlink_to(victim)
    refused(["dashboard", "--store", store, "-o", site], capsys, within_s=60)
    assert sorted(p.name for p in site.iterdir()) == ["index.html"]
    assert victim.read_text() == "keep"


def test_a_javascript_artifacts_path_is_never_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.chdir(site)  # relative to the site, the path "javascript:..." would be the href itself
    record = make_record(run_id="evil", artifacts="javascript:alert(document.domain)")
    folder = tmp_path / "elsewhere" / "evil"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(record_to_dict(record)))
    with open_store(str(tmp_path / "s.db")) as store:
        from harness.store.transfer import import_folders

        import_folders(store, [tmp_path / "elsewhere"])
        build_site(store, site)
    pages = "".join(p.read_text() for p in site.glob("*.html"))
    assert 'href="javascript:' not in pages
