"""``sglang-repro issue`` from the four kinds of finding (issue 48's done-when): a reference-server crash run, a nightly
incident of a slowdown, the demo bisection and a minimization's output. Each ``issue.md`` has the four sections of
SGLang's bug template (read back by a CommonMark parser), a launch command whose flags the real 0.5.14 and 0.5.23
parsers accept, a client script that reproduces the finding against the reference server run alone with plain
Python, and none of the secrets planted in the crash run's environment and log.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.build import resolve_build
from harness.launch.preflight import check_flag_sets
from harness.signatures.catalogue import Catalogue
from tests.helpers import start_server, stop_server
from tests.upstream import sources

pytestmark = [pytest.mark.slow, pytest.mark.standin]

SECTIONS = ["Checklist", "Describe the bug", "Reproduction", "Environment"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each finding's report folder, written by the command as a user runs it (no secret in its environment)."""
    root = tmp_path_factory.mktemp("issue-sources")
    made: dict[str, list[str | Path]] = {
        "run": [sources.crash_run(root / "run")],
        "bisect": [sources.demo_bisection(root / "bisect")],
        "minimize": [sources.minimization(root / "minimize")],
    }
    url, incident = sources.slowdown_incident(root / "results.db")
    made["incident"] = ["--incident", incident, "--store", url]
    out: dict[str, Path] = {}
    for name, args in made.items():
        folder = root / "issues" / name
        done = sources.harness("issue", *args, "-o", folder, "--allow-reference-server", "--force")
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
        assert f"issue: {folder / 'issue.md'}" in done.stdout
        out[name] = folder
    return out


def _body(folder: Path) -> str:
    return (folder / "issue.md").read_text(encoding="utf-8")


def _fences(body: str) -> list[tuple[str, str]]:
    return [(t.info, t.content) for t in MarkdownIt("commonmark").parse(body) if t.type == "fence"]


@pytest.mark.parametrize("name", ["run", "incident", "bisect", "minimize"])
def test_the_report_has_the_templates_four_sections(reports: dict[str, Path], name: str) -> None:
    tokens = MarkdownIt("commonmark").parse(_body(reports[name]))
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h3"]
    assert headings == SECTIONS
    title = (reports[name] / "title.txt").read_text(encoding="utf-8").strip()
    assert title.startswith("[Bug] ") and "gemma-4-31B-it" in title and len(title) <= 256
    assert "not SGLang" in title  # a reference-server finding says so, in the title too
    assert len(_body(reports[name])) < 65_536


def test_each_title_names_what_broke(reports: dict[str, Path]) -> None:
    titles = {n: (f / "title.txt").read_text(encoding="utf-8") for n, f in reports.items()}
    assert "output with shape [1] doesn't match the broadcast shape [276]" in titles["run"]
    assert "broadcast shape [2]" in titles["minimize"]  # the minimized prompt: 2 tokens
    assert re.search(r"Output throughput -2\d\.\d% \(", titles["incident"]), titles["incident"]


def _launch_flags(body: str) -> list[str]:
    command = next(content for info, content in _fences(body) if info == "sh" and "sglang.launch_server" in content)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    return argv[3:]


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_the_launch_flags_parse_with_the_real_release(reports: dict[str, Path], version: str) -> None:
    build = resolve_build(f"pip:sglang=={version},deps=none")
    flag_sets = [_launch_flags(_body(f)) for f in reports.values()]
    assert all("--model-path" in flags and not any(f.startswith("--sim-") for f in flags) for flags in flag_sets)
    checks = check_flag_sets(build, flag_sets)
    assert [c.message for c in checks if not c.ok] == []
    bogus = check_flag_sets(build, [[*flag_sets[0], "--definitely-not-a-flag"]])[0]
    assert not bogus.ok  # the parser can say no


def _record(folder: Path) -> dict:
    return json.loads((folder / "attachments" / "result.json").read_text(encoding="utf-8"))


def _reference_server(folder: Path, log: Path):
    """The reference server as the finding's run started it (its own launcher's flags, host and port left out)."""
    argv = _record(folder)["server"]["argv"]
    flags = argv[argv.index("harness.sim.server") + 1:]
    for name in ("--host", "--port"):
        i = flags.index(name)
        del flags[i:i + 2]
    return start_server(flags, log)


def _plain_python(script: Path, port: int) -> subprocess.CompletedProcess[str]:
    # -I -S: no site-packages, no PYTHONPATH, no current folder: the harness cannot be imported, only the stdlib.
    return subprocess.run([sys.executable, "-I", "-S", str(script), "--port", str(port), "--timeout", "60"],
                          cwd=script.parent, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", ["run", "minimize"])
def test_the_client_script_alone_reproduces_the_crash(reports: dict[str, Path], name: str, tmp_path: Path) -> None:
    script = reports[name] / "attachments" / "client.py"
    server = _reference_server(reports[name], tmp_path / "server.log")
    try:
        done = _plain_python(script, server.port)
        server.wait(30)
    finally:
        stop_server(server)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "request(s) failed" in done.stdout
    match = Catalogue.load().match_text(server.log_text())
    assert match is not None and match.signature.id == "frozen-kv-mtp-stale-out-cache-loc"


def test_the_slowdowns_client_script_runs_the_workload(reports: dict[str, Path], tmp_path: Path) -> None:
    script = reports["incident"] / "attachments" / "client.py"
    server = _reference_server(reports["incident"], tmp_path / "server.log")
    try:
        done = _plain_python(script, server.port)
    finally:
        stop_server(server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"0 of 4 request\(s\) failed; 128 output tokens", done.stdout), done.stdout


def test_the_bisections_report_carries_the_culprit_and_needs_no_client(reports: dict[str, Path]) -> None:
    body = _body(reports["bisect"])
    assert "The bisection's culprit" in body and "confirmed with fresh trials: yes" in body
    assert "the eager draft keeps the prefill" in body  # the culprit commit's subject
    # The demo history's culprit crashes in SGLang's own warm-up request, before the server is ready.
    assert "Starting the server is enough" in body and not (reports["bisect"] / "attachments" / "client.py").exists()


def test_the_incidents_report_charts_the_nights(reports: dict[str, Path]) -> None:
    body = _body(reports["incident"])
    assert "![" in body and "(attachments/chart.png)" in body
    png = (reports["incident"] / "attachments" / "chart.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    rows = (reports["incident"] / "attachments" / "chart.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "group,side,trial,value" and sum(",after," in r for r in rows) == 7 * 3
    assert "13 nights before the first bad one and 7 from it on" in body


def _planted_hits(folder: Path) -> list[str]:
    host = socket.gethostname()
    hits = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        hits += [f"{path.name}: {name}" for name, value in sources.SECRETS.items() if value in text]
        if "alice-planted" in text:
            hits.append(f"{path.name}: home folder")
        if len(host) > 1 and re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", text):
            hits.append(f"{path.name}: host name {host}")
    return hits


def test_no_planted_secret_home_folder_or_host_name_survives(reports: dict[str, Path]) -> None:
    run = reports["run"]
    assert (run / "attachments" / "server.log").is_file()
    log = (run / "attachments" / "server.log").read_text(encoding="utf-8")
    assert "~/models/gemma-4-31B-it" in log and "<host>" in log and "<redacted>" in log  # scrubbed, not dropped
    assert [h for folder in reports.values() for h in _planted_hits(folder)] == []


def test_keep_paths_keeps_them_and_still_redacts(reports: dict[str, Path], tmp_path: Path) -> None:
    source = _record(reports["run"])["artifacts"]  # the run folder, as the report names it
    done = sources.harness("issue", source.replace("~", str(Path.home()), 1), "-o", tmp_path / "kept",
                           "--allow-reference-server", "--force", "--keep-paths")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "kept" / "attachments" / "server.log").read_text(encoding="utf-8")
    assert sources.HOME_PATH in log
    assert not any(v in log for v in sources.SECRETS.values())
