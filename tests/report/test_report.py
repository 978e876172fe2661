"""The three reports, from a realistic comparison; the HTML one also in a real headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.compare.verdicts import ComparisonReport, RoleResult, build_report, compare_case
from harness.report import load_report, render_html, render_json, render_markdown, write_reports
from harness.report.markdown import MAX_CHARS
from harness.util.errors import UserError
from tests.run_records import judged

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

SIG = "frozen-kv-mtp-stale-out-cache-loc"
HOSTILE = "<script>alert(1)</script>"
REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")

TRACEBACK = f"""[2026-07-01 10:00:03] Scheduler hit an exception: Traceback (most recent call last):
  File "harness/sim/frozen_kv_mtp_worker.py", line 88, in draft_forward
    self.model_runner.forward(batch)
  File "harness/sim/model_runner.py", line 140, in forward
    return self._forward_raw(batch)
  File "harness/sim/model_runner.py", line 151, in _forward_raw
    return self.forward_decode(batch)
  File "harness/sim/model_runner.py", line 170, in forward_decode
    view = self._eager_fb_view(batch)
  File "harness/sim/model_runner.py", line 190, in _eager_fb_view
    self.registry.fill_from(batch)
  File "harness/sim/cuda_graph_buffer_registry.py", line 60, in fill_from
    self._grouped_foreach_copy_(dst, src)
  File "harness/sim/cuda_graph_buffer_registry.py", line 72, in _grouped_foreach_copy_
    torch._foreach_copy_(dst, src)
RuntimeError: output with shape [1] doesn't match the broadcast shape [276]
prompt echoed in the log: {HOSTILE} | a pipe & an ampersand ``` fence
"""


def _normal(mean: float, sd: float, n: int, seed: int) -> tuple[float, ...]:
    return tuple(float(v) for v in np.random.default_rng(seed).normal(mean, sd, n))


def _role(role, build, outcomes, *, excerpt="", signatures=None, **metrics) -> RoleResult:
    return RoleResult(
        role=role,
        build=build,
        build_kind=build.split(":", 1)[0],
        version="sim-0.1.0 (CPU model)" if build.startswith("sim:") else "0.5.15",
        outcomes=tuple(outcomes),
        signatures=tuple(signatures or [None] * len(outcomes)),
        reasons=tuple(
            "" if o == "pass" else f"server crashed: {SIG} (RuntimeError ... broadcast shape [276]) {HOSTILE}"
            for o in outcomes
        ),
        metrics=metrics,
        artifact_dirs=tuple(f"../../runs/{role}-trial-{i + 1} dir" for i in range(len(outcomes))),
        excerpt=excerpt,
        reference_server=build.startswith(("sim:", "simsrc:")),
    )


def sample_report() -> ComparisonReport:
    """Case 1: the bug reproduces before the fix and is gone after it. Case 2: both pass, after is 2x slower."""
    n = 6
    crash_roles = [
        _role("before", "sim:pre-fix", ["crash"] * n, signatures=[SIG] * n, excerpt=TRACEBACK,
              accept_length=(math.nan,) * n, output_throughput_tok_s=(math.nan,) * n),
        _role("after", "sim:post-fix", ["pass"] * n, accept_length=_normal(2.6, 0.04, n, 1),
              output_throughput_tok_s=_normal(900, 20, n, 2)),
    ]
    crash_case = compare_case("num_steps=1", {"speculative_num_steps": 1, "disable_cuda_graph": True}, crash_roles,
                              judged(crash_roles, {"before": ("crash", SIG), "after": ("pass", None)}))
    slow_roles = [
        _role("before", "sim:post-fix", ["pass"] * n, accept_length=_normal(2.9, 0.03, n, 3),
              output_throughput_tok_s=_normal(1200, 30, n, 4)),
        _role("after", "sim:post-fix,step-cost-ms=8", ["pass"] * n, accept_length=_normal(2.9, 0.03, n, 5),
              output_throughput_tok_s=_normal(610, 20, n, 6)),
    ]
    slow_case = compare_case("num_steps=3", {"speculative_num_steps": 3, "disable_cuda_graph": False}, slow_roles,
                             judged(slow_roles, {"before": ("pass", None), "after": ("pass", None)}))
    return build_report(
        "20260701T100000-frozen-kv-mtp",
        "frozen-kv-mtp-eager-draft",
        "scenarios/frozen_kv_mtp/eager_draft.yaml",
        [crash_case, slow_case],
        notes=[f"{c}: acceptance measured with ignore_eos: true (the draft keeps proposing)"
               for c in ("num_steps=1", "num_steps=3")],
        created_at="2026-07-01T10:00:00+00:00",
    )


# ---------------------------------------------------------------- at a glance


def test_the_summary_says_the_fix_removed_the_crash_and_states_a_repeated_notice_once():
    """Before -> after outcomes come first; a removed crash is said as that, not as 'not enough data'."""
    md = render_markdown(sample_report())
    assert "| Case | Outcome (before → after) | At a glance | Expectations |" in md
    assert "| `num_steps=1` | crash → pass | crash removed | held |" in md
    assert "| `num_steps=3` | pass → pass | performance worse | held |" in md
    assert "2 cases: 1 crash removed, 1 worse" in md
    assert md.count("acceptance measured with ignore_eos") == 1
    assert "every case: acceptance measured with ignore_eos" in md
    # the footnote says what the data had, beside the rule it applied
    assert "num_steps=1: before 6 trials (0 passing), after 6 trials (6 passing)" in md
    assert "at least 5 passing trials per side" in md
    html = render_html(sample_report())
    summary = html[html.index("<table>"):html.index("</table>")]
    assert "Outcome (before → after)" in summary and "Values" not in summary
    assert 'o-crash">crash</span> → <span class="badge o-pass">pass' in summary
    assert ">crash removed<" in summary and "not enough data" not in summary
    assert html.count("acceptance measured with ignore_eos") == 1


def test_the_terminal_summary_gives_outcomes_and_each_verdict_with_its_interval():
    from harness.commands.compare import summary

    lines = summary(sample_report())
    crash, slow = lines
    assert crash.startswith("num_steps=1") and "crash -> pass" in crash
    assert f"crash removed ({SIG})" in crash and "not enough data" not in crash
    assert "pass -> pass" in slow
    assert re.search(r"output throughput worse \(−4\d\.\d%, 95% CI \[−\d+\.\d%, −\d+\.\d%\], p=", slow, re.I), slow
    assert re.search(r"acceptance length \(measured requests\) same \([+−]\d\.\d%, 95% CI \[", slow, re.I), slow


# ---------------------------------------------------------------- Markdown


def test_markdown_leads_with_the_verdict_and_tables():
    md = render_markdown(sample_report())
    lines = md.splitlines()
    assert lines[0].startswith("## sglang-repro compare: frozen-kv-mtp-eager-draft")
    assert "All 4 expectations held · performance: worse" in lines[2]
    assert "| **before** | `sim:pre-fix` — *reference server (CPU model, not SGLang)*" in md
    assert "crash ×6" in md and "crash frozen-kv-mtp-stale-out-cache-loc" in md
    assert re.search(r"\| Output throughput \(tok/s\) \|.*\| −4\d\.\d% \|.*\| ▼ \*\*worse\*\* \|", md)
    assert "not enough data" in md  # the crash case has no passing "before" trial
    assert "[trial 1](<../../runs/before-trial-1 dir>)" in md
    assert len(md) < MAX_CHARS


def test_markdown_escapes_table_cells_and_fences_excerpts():
    md = render_markdown(sample_report())
    assert HOSTILE not in md.replace(f"prompt echoed in the log: {HOSTILE}", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md  # the reason, in a table-free bullet
    # The excerpt holds a ``` run, so its fence is longer and the block stays closed.
    assert "````text\n" in md and "\n````\n" in md
    _assert_tables_are_rectangular(md)


def _assert_tables_are_rectangular(md: str) -> None:
    """Every row of a Markdown table has as many unescaped pipes as its header: no stray pipe split a cell."""
    widths: list[int] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            widths.append(len(re.findall(r"(?<!\\)\|", line)))
        elif widths:
            assert len(set(widths)) == 1, f"ragged table: {widths}"
            widths = []


def test_markdown_tables_survive_pipes_and_backticks_in_data():
    role = _role("after", "pip:sglang==0.5.15", ["pass"] * 3, accept_length=(2.0,) * 3)
    role = RoleResult(**{**role.__dict__, "version": "0.5.15 | `dirty` tree"})
    crashed = _role("before", "sim:pre-fix", ["crash"] * 3, signatures=["a|b"] * 3)
    case = compare_case("c", {}, [crashed, role], judged([crashed, role], {"after": ("pass", None), "before": ("crash", "a|b")}))
    md = render_markdown(build_report("r", "s", "f.yaml", [case]))
    _assert_tables_are_rectangular(md)
    assert "`` 0.5.15" not in md and "0.5.15 \\| `dirty` tree" in md
    assert "| **before** | crash a\\|b |" in md


def test_markdown_fits_a_github_comment_with_huge_excerpts():
    report = sample_report()
    huge = "x" * 200_000 + "\nRuntimeError: the end\n"
    big_case = compare_case(
        "big", {}, [_role("before", "sim:pre-fix", ["crash"] * 3, excerpt=huge), _role("after", "sim:post-fix", ["pass"] * 3)]
    )
    report = build_report(report.id, report.scenario, report.file, [*report.cases] + [big_case] * 40)
    md = render_markdown(report)
    assert len(md) <= MAX_CHARS
    assert "see report.html" in md
    small = render_markdown(build_report(report.id, report.scenario, report.file, [big_case]))
    assert "RuntimeError: the end" in small and "characters cut" in small and len(small) < 10_000


# ---------------------------------------------------------------- HTML


class _TagChecker(HTMLParser):
    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


def test_html_is_well_formed_self_contained_and_escaped():
    page = render_html(sample_report())
    checker = _TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.stack == []
    tags = [t for t, _ in checker.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags and "iframe" not in tags
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for _, attrs in checker.tags:
        for name in ("src", "href", "action", "xlink:href"):
            value = attrs.get(name) or ""
            assert not re.match(r"^[a-z][a-z0-9+.-]*:|^//", value, re.I), f"{name}={value!r} leaves the file"
    assert "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page
    assert 'href="../../runs/before-trial-1%20dir"' in page


def test_html_puts_the_verdict_first_and_labels_the_reference_server():
    page = render_html(sample_report())
    body = page.split("<body>", 1)[1]
    assert body.startswith('<header class="verdict tone-bad">')
    assert body.index("All 4 expectations held · performance: worse") < body.index("<table")
    assert page.count("reference server (CPU model, not SGLang)") >= 4
    assert page.count("<svg") == 4  # two metrics x two cases
    assert "Output throughput (tok/s) per trial" in page


def test_html_does_not_link_paths_with_a_scheme():
    role = _role("before", "pip:sglang==0.5.14", ["pass"] * 5, accept_length=(2.0,) * 5)
    role = RoleResult(**{**role.__dict__, "artifact_dirs": ("javascript:alert(1)",) * 5})
    case = compare_case("c", {}, [role])
    page = render_html(build_report("r", "s", "f.yaml", [case]))
    assert 'href="javascript' not in page and "<code>javascript:alert(1)</code>" in page
    assert "reference server" not in page
    assert "Only one role" in page


# ---------------------------------------------------------------- JSON and files


def test_write_reports_writes_three_files_that_agree(tmp_path):
    report = sample_report()
    paths = write_reports(report, tmp_path / "reports" / "compare" / report.id)
    assert {p.name for p in paths.values()} == {"report.md", "report.html", "report.json"}
    assert sorted(p.name for p in paths["json"].parent.iterdir()) == ["report.html", "report.json", "report.md"]
    data = json.loads(paths["json"].read_text())
    assert data["verdict"] == "worse" and data["all_expectations_held"] is True
    case = data["cases"][1]
    assert case["metrics"][1]["metric"] == "output_throughput_tok_s"
    assert case["metrics"][1]["p_value"] < 0.01 and len(case["roles"][0]["metrics"]["accept_length"]) == 6
    assert data["cases"][0]["roles"][0]["build_label"].endswith("reference server (CPU model, not SGLang)")
    assert load_report(paths["json"]).to_dict() == report.to_dict()
    assert paths["markdown"].read_text() == render_markdown(report)
    assert render_json(report) == paths["json"].read_text()


def test_load_report_errors_name_the_file(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match=r"report.json:1: not valid JSON"):
        load_report(bad)
    bad.write_text(json.dumps({"schema_version": 1}))
    with pytest.raises(UserError, match="missing field 'id'"):
        load_report(bad)
    with pytest.raises(UserError, match="cannot read"):
        load_report(tmp_path / "absent.json")


# ---------------------------------------------------------------- headless Chromium


async def _inspect_in_chromium(page_url: str, user_dir: Path, log_path: Path, timeout: float) -> dict:
    """Open ``page_url`` in headless Chromium over the DevTools protocol; collect errors and a screenshot."""
    import aiohttp

    argv = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={user_dir}",
        "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--window-size=1280,900",
        "about:blank",
    ]
    deadline = time.monotonic() + timeout
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    try:
        port_file = user_dir / "DevToolsActivePort"
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {proc.returncode}; log: {log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"chromium did not open its DevTools port; log: {log_path}")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        client_timeout = aiohttp.ClientTimeout(total=max(deadline - time.monotonic(), 1))
        async with aiohttp.ClientSession(timeout=client_timeout) as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with http.ws_connect(ws_url, max_msg_size=0) as ws:
                return await _drive(ws, page_url, deadline)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def _drive(ws, page_url: str, deadline: float) -> dict:
    next_id = 0
    found: dict[str, Any] = {"errors": [], "requests": [], "dialogs": []}
    loaded = asyncio.Event()
    pending: dict[int, asyncio.Future] = {}

    async def send(method: str, **params):
        nonlocal next_id
        next_id += 1
        fut = asyncio.get_running_loop().create_future()
        pending[next_id] = fut
        await ws.send_json({"id": next_id, "method": method, "params": params})
        return await asyncio.wait_for(fut, max(deadline - time.monotonic(), 0.1))

    async def reader():
        async for msg in ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in pending:
                fut = pending.pop(data["id"])
                if "error" in data:
                    fut.set_exception(RuntimeError(f"DevTools error: {data['error']}"))
                else:
                    fut.set_result(data.get("result", {}))
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found["errors"].append(details.get("exception", {}).get("description") or details.get("text"))
            elif method == "Runtime.consoleAPICalled":
                found["errors"].append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found["errors"].append(f"{params['entry']['source']}: {params['entry']['text']}")
            elif method == "Network.requestWillBeSent":
                found["requests"].append(params["request"]["url"])
            elif method == "Page.javascriptDialogOpening":
                found["dialogs"].append(params.get("message"))
                asyncio.ensure_future(send("Page.handleJavaScriptDialog", accept=True))
            elif method == "Page.loadEventFired":
                loaded.set()

    task = asyncio.ensure_future(reader())
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            await send(f"{domain}.enable")
        await send("Page.navigate", url=page_url)
        await asyncio.wait_for(loaded.wait(), max(deadline - time.monotonic(), 0.1))
        probe = await send(
            "Runtime.evaluate",
            returnByValue=True,
            expression="""JSON.stringify({
                scripts: document.scripts.length,
                headline: document.querySelector('header.verdict .title').textContent,
                headlineTop: document.querySelector('header.verdict').getBoundingClientRect().top,
                pre: Array.from(document.querySelectorAll('pre')).map(p => p.textContent).join('\\n'),
                svgs: document.querySelectorAll('svg.plot').length,
                circles: document.querySelectorAll('svg.plot circle').length,
                crosses: document.querySelectorAll('svg.plot path').length,
                height: document.documentElement.scrollHeight,
                summary: Array.from(document.querySelectorAll('table')[0].rows).map(r => r.innerText),
                summaryBottom: document.querySelectorAll('table')[0].getBoundingClientRect().bottom,
                notices: document.querySelectorAll('p.notice').length,
            })""",
        )
        found["page"] = json.loads(probe["result"]["value"])
        height = min(int(found["page"]["height"]), 6000)
        shot = await send(
            "Page.captureScreenshot", format="png", captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1},
        )
        found["png"] = base64.b64decode(shot["data"])
        await asyncio.sleep(0.3)  # late console or CSP reports arrive as events
        return found
    finally:
        task.cancel()


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian package 'chromium')")
def test_html_report_loads_in_headless_chromium(tmp_path):
    paths = write_reports(sample_report(), tmp_path / "compare")
    user_dir = tmp_path / "chromium-profile"
    user_dir.mkdir()
    found = asyncio.run(
        _inspect_in_chromium(paths["html"].as_uri(), user_dir, tmp_path / "chromium.log", timeout=60)
    )
    shot = tmp_path / "report-html.png"
    shot.write_bytes(found["png"])
    kept = Path(os.environ.get("SGLANG_REPRO_TEST_ARTIFACTS", REPO / "reports" / "test-artifacts"))
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, kept / "report-html.png")
    print(f"screenshot of report.html: {kept / 'report-html.png'} (and {shot})")

    assert found["errors"] == [], found["errors"]
    assert found["dialogs"] == [], "the escaped excerpt ran as script"
    assert all(url == paths["html"].as_uri() for url in found["requests"]), found["requests"]
    page = found["page"]
    assert page["scripts"] == 0
    assert page["headline"].endswith("All 4 expectations held · performance: worse")
    assert page["headlineTop"] < 40
    assert HOSTILE in page["pre"] and "broadcast shape [276]" in page["pre"]
    # A dot per measured trial (2 metrics x (6 + 6 + 6)), a cross per crashed one (2 metrics x 6).
    assert (page["svgs"], page["circles"], page["crosses"]) == (4, 36, 12)
    assert found["png"][:8] == b"\x89PNG\r\n\x1a\n" and len(found["png"]) > 10_000
    # At a glance: the summary is on the first screen, with before -> after and "crash removed"; a notice
    # repeated for every case is shown once (plus the reference-server notice).
    assert page["summaryBottom"] < 900, page["summaryBottom"]
    assert "crash → pass" in page["summary"][1] and "crash removed" in page["summary"][1], page["summary"]
    assert "pass → pass" in page["summary"][2] and "worse" in page["summary"][2], page["summary"]
    assert page["notices"] == 2
