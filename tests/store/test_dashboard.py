"""The dashboard: built from a real store, escaped, offline, rendered by real headless Chromium."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.dashboard.site import CSP, FIT, _page
from harness.incidents.review import review
from harness.records.outcome import Outcome
from harness.store.store import new_batch, open_store
from tests.helpers import make_record
from tests.store._cdp import visit

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

EVIL = '<script>alert("pwned")</script>'
_QUIET = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
          "--disable-features=Translate,OptimizationHints,MediaRouter", "--enable-logging=stderr", "--v=0"]


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    return path


_SIM_PROFILE = {"model": "the CPU reference server (a model of SGLang, not SGLang)", "rules": "0.5.14 (default)",
                "eager_max_steps": 1, "topk_backends": ["triton"], "swa_refill": "unguarded"}


def _store_with_history(url: str, tmp_path: Path) -> None:
    rng = random.Random(3)
    with open_store(url) as store:
        for night in range(1, 13):
            batch = new_batch("nightly", f"night-{night:02d}", started_at=f"2026-11-{night:02d}T02:00:00+00:00")
            tput = 200.0 if night <= 8 else 150.0
            spec = "sim:post-fix" if night <= 8 else "sim:post-fix,step-cost-ms=20"  # the slow build
            # what each build is (run records' build.profile): the first follows 0.5.14's rules, the slow one's
            # profile could not be read (its reason is markup: shown escaped)
            profile = (_SIM_PROFILE if night <= 8 else {"unavailable": f"no wheel {EVIL}"})
            art = tmp_path / "runs" / f"n{night}"
            art.mkdir(parents=True)
            recs = [make_record(run_id=f"n{night}-t{t}", trial=t, spec=spec, started_at=batch.started_at, artifacts=str(art),
                                profile=profile,
                                metrics={"accept_length": 1.84 * (1 + 0.01 * rng.gauss(0, 1)),
                                         "output_throughput_tok_s": tput * (1 + 0.02 * rng.gauss(0, 1))})
                    for t in range(3)]
            recs.append(make_record(run_id=f"n{night}-crash", case=f"case {EVIL}", spec=spec, started_at=batch.started_at,
                                    outcome=Outcome.CRASH if night > 10 else Outcome.PASS,
                                    signature=EVIL if night > 10 else None, reason=f"log line {EVIL}",
                                    metrics={} if night > 10 else {"accept_length": 1.8}))
            store.record_many(recs, batch)
            review(store, batch.id)


def _chrome(url: str, *extra: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_chromium(), *_QUIET, *extra, url], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_dashboard_renders_offline_with_the_step_and_nothing_unescaped(run_cli, tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    _store_with_history(str(db), tmp_path)
    out = tmp_path / "dash"
    proc = run_cli("dashboard", "--store", str(db), "-o", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    pages = sorted(out.glob("*.html"))
    assert [p.name for p in pages] == ["index.html", "scenario-store-test-scenario.html"]
    for page in pages:
        text = page.read_text()
        assert EVIL not in text and "&lt;script&gt;" in text or "\\u003cscript\\u003e" in text
        assert f'content="{CSP}"'.replace("'", "&#x27;") in text
        # Every script, link and image is local: no scheme, no protocol-relative URL.
        for ref in re.findall(r'(?:src|href)="([^"]*)"', text):
            assert not re.match(r"^(?:[a-z]+:)?//", ref), ref
    assert (out / "plotly.min.js").stat().st_size > 1_000_000  # the copy from the plotly package
    index = (out / "index.html").read_text()
    scenario = (out / "scenario-store-test-scenario.html").read_text()
    assert "step" in scenario  # the change is marked
    assert '"ticks":["sim:post-fix\\u003cbr\\u003e11-01"' in scenario and "2026-11-01" in scenario  # build, night; date on hover
    assert ">trial 0</a>" in scenario  # run folders labelled by trial, not by a cut run id
    assert "new-signature" in index and "sglang-repro compare" in index  # the open incidents table
    # The overview's columns: the metrics compare judges, headed by the registry's short names.
    assert "<th>accept length</th><th>noise</th><th>output tok/s</th><th>noise</th></tr>" in index
    # What each build is: a column beside the build on the overview (the latest point's) and per point.
    assert "<th>build</th><th>build profile</th>" in index and "<th>build profile</th>" in scenario
    assert f"profile unavailable: no wheel {EVIL}" not in index
    assert "profile unavailable: no wheel &lt;script&gt;" in index
    assert "follows sglang 0.5.14 (default)&#x27;s rules (eager at --speculative-num-steps &lt;= 1)" in scenario
    # Builds of the CPU reference server are said to be that on every page that shows them, and each such build
    # carries the mark the notice names; the noise is explained.
    assert all("not SGLang" in text for text in (index, scenario))
    mark = 'class="buildmark">reference server (CPU model, not SGLang)</span>'
    assert index.count(mark) == 2 and scenario.count(mark) >= 16, (index.count(mark), scenario.count(mark))
    assert "noise: the robust spread of a series&#x27; nights around its level" in index

    page = (out / "scenario-store-test-scenario.html").resolve()
    shot = tmp_path / "dashboard.png"
    _chromium()
    probe = ("JSON.stringify([document.querySelectorAll('.main-svg').length, "
             "Array.from(document.querySelectorAll('td.profile')).map(function (t) { return t.textContent; }), "
             "Array.from(document.querySelectorAll('.xtick text')).map(function (t) { return t.textContent; }), "
             "Array.from(document.querySelectorAll('.js-plotly-plot')).map(function (el) { return "
             "Array.from(el.querySelectorAll('.annotation-text')).map(function (t) { return t.textContent; }); })])")
    seen = visit(page.as_uri(), evaluate=probe, screenshot=shot)
    charts, shown, ticks, notes = json.loads(seen.value)
    assert charts >= 4, "plotly did not draw the charts"
    # the browser shows each listed point's build profile as text (the unreadable one's reason included)
    assert "follows sglang 0.5.14 (default)'s rules (eager at --speculative-num-steps <= 1)" in shown, shown
    assert f"profile unavailable: no wheel {EVIL}" in shown, shown
    # The x axis names builds, not point indices: both builds of the history are there.
    # Each tick is the build and its night, so two nights of one build are told apart without hovering.
    assert ticks and {t[:-5] for t in ticks} == {"sim:post-fix", "sim:post-fix,step-cost-ms=20"}, ticks
    assert all(re.fullmatch(r".*11-\d\d", t) for t in ticks) and len(set(ticks)) == 12, ticks  # one per night
    # Every chart drawn shows the incident that names its case (the step's, the new signature's).
    assert len(notes) >= 3 and all(any(n.startswith("incident ") for n in chart) for chart in notes), notes
    # The case that crashed on its last nights keeps its chart of the nights it passed, the crashes marked on it.
    assert any(chart.count("crash") == 2 for chart in notes), notes
    assert not seen.exceptions, seen.exceptions
    assert not [c for c in seen.console if c.startswith(("error", "warning"))], seen.console
    assert seen.requests and all(u.startswith("file://") for u in seen.requests), seen.requests
    assert any(u.endswith("/plotly.min.js") for u in seen.requests)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


# What the browser measures at a width: the page's own width, and per table the box it sits in (its class, its
# right edge, and whether it scrolls sideways within itself), and the right edge of each next step's command.
_WIDTHS = ("JSON.stringify({page: document.documentElement.scrollWidth, view: window.innerWidth, "
           "tables: Array.from(document.querySelectorAll('table')).map(function (t) { var box = t.parentElement; "
           "return [box.className, Math.round(box.getBoundingClientRect().right), box.scrollWidth > box.clientWidth "
           "? getComputedStyle(box).overflowX : 'fits']; }), "
           "steps: Array.from(document.querySelectorAll('table.incidents code')).map(function (c) { "
           "return Math.round(c.getBoundingClientRect().right); })})")


def test_tables_fit_a_1400_px_window_or_scroll_within_themselves(run_cli, tmp_path: Path) -> None:
    """In a 1400 px window no page scrolls sideways: every table fits or scrolls in a box of its own, and an
    incident's next step wraps inside its cell. Shown to matter: the same overview without those rules (``FIT``)
    is wider than the window, its next step cut off at the edge."""
    db = tmp_path / "results.db"
    _store_with_history(str(db), tmp_path)
    # A seed scenario's names, as long as they come: its incident's next step is a compare of two long specs.
    rng = random.Random(5)
    with open_store(str(db)) as store:
        for night in range(1, 13):
            batch = new_batch("nightly", f"night-{night:02d}", started_at=f"2026-11-{night:02d}T03:00:00+00:00")
            spec = "sim:post-fix,draft-agreement=0.7" if night <= 8 else "sim:post-fix,draft-agreement=0.7,step-cost-ms=20"
            store.record_many([make_record(
                run_id=f"long-{night}-{case}", scenario="frozen-kv-mtp-long-prompt-28264", spec=spec,
                case=f"tokens=2048,path={case},draft=topk1,hicache=on", started_at=batch.started_at,
                metrics={"accept_length": 1.84, "output_throughput_tok_s": (200 if night <= 8 else 170) * (
                    1 + 0.01 * rng.gauss(0, 1))}) for case in ("eager", "graph")], batch)
            review(store, batch.id)
    out = tmp_path / "dash"
    assert run_cli("dashboard", "--store", str(db), "-o", str(out), timeout=300).returncode == 0
    _chromium()
    for page in ("index.html", "scenario-frozen-kv-mtp-long-prompt-28264.html"):
        seen = json.loads(visit((out / page).as_uri(), evaluate=_WIDTHS, window=(1400, 900),
                                screenshot=tmp_path / f"{page}.1400.png").value)
        assert seen["view"] == 1400 and seen["page"] <= seen["view"], (page, seen)
        assert seen["tables"] and all(cls == "scroll" and right <= 1400 and how in ("fits", "auto")
                                      for cls, right, how in seen["tables"]), (page, seen["tables"])
        assert seen["steps"] and max(seen["steps"]) <= 1400, (page, seen["steps"])
    # The control: the overview with the two rules taken out of its style.
    index = (out / "index.html").read_text()
    bare = out / "bare.html"
    assert FIT in index
    bare.write_text(index.replace(FIT, ""))
    seen = json.loads(visit(bare.as_uri(), evaluate=_WIDTHS, window=(1400, 900)).value)
    assert seen["page"] > 1400 and max(seen["steps"]) > 1400, seen
    print(f"screenshots: {sorted(str(p) for p in tmp_path.glob('*.1400.png'))}")


def test_the_policy_really_blocks_a_remote_load(tmp_path: Path) -> None:
    page = tmp_path / "probe.html"
    page.write_text(_page("probe", '<img src="http://example.invalid/x.png"><p id="ok">ok</p>'))
    proc = _chrome(page.as_uri(), "--virtual-time-budget=3000", "--dump-dom", cwd=tmp_path)
    assert 'id="ok"' in proc.stdout
    assert "Content Security Policy" in proc.stderr, proc.stderr[-2000:]
    assert json.dumps(CSP)  # the policy is one plain string


def test_the_dashboard_shows_an_incidents_names_and_state_over_its_nights(run_cli, tmp_path: Path) -> None:
    """A level change renamed drift in place, then accepted by ``store ack``: real headless Chromium reads the
    incidents table and finds one incident with both names and the nights of each, resolved: accepted."""
    from tests.series.nights import record_drift

    db = tmp_path / "results.db"
    with open_store(str(db)) as store:
        record_drift(store)
        (row,) = store.alert_rows()
    ack = run_cli("store", "ack", str(row["incident"]), "--store", str(db))
    assert ack.returncode == 0, ack.stderr
    out = tmp_path / "dash"
    proc = run_cli("dashboard", "--store", str(db), "-o", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr
    _chromium()
    probe = ("JSON.stringify(Array.from(document.querySelectorAll('tr.incident')).map(function (tr) { return "
             "[tr.dataset.state, tr.cells[0].textContent, Array.from(tr.querySelectorAll('ul.names li'))"
             ".map(function (li) { return li.textContent; }), tr.cells[2].innerText, tr.cells[9].textContent]; }))")
    for page in ("index.html", "scenario-store-test-scenario.html"):
        seen = visit((out / page).resolve().as_uri(), evaluate=probe)
        (shown,) = json.loads(seen.value)
        state, status, names, nights, fingerprint = shown
        assert (state, status, fingerprint) == ("resolved", "resolved: accepted", row["incident"]), shown
        # Nights 41 and 44, first bad night-36 (40, 41 and 34 before issue 47's raised threshold on short segments;
        # 44 and 46 until its third round's trimmed noise reading).
        assert [n.split(" (")[0] for n in names] == ["night-41: level-change", "night-44: drift"], names
        assert all("RSS step" in n for n in names)  # each name with its evidence
        assert nights.startswith("opened night-36") and "closed ack " in nights, nights
        assert not seen.exceptions, seen.exceptions


def test_a_javascript_artifacts_path_is_no_link_and_runs_nothing_in_chromium(run_cli, tmp_path: Path) -> None:
    """Issue 37: an imported record whose ``artifacts`` is ``javascript:...`` must not become a clickable href.

    The dashboard is built from the site's own folder, where the relative path ``javascript:document.title=...``
    is, to a browser, the script URL itself. Real Chromium loads the page, lists every anchor whose scheme is
    javascript:, clicks every anchor of the page, and reads the title back."""
    from harness.records.run_record import record_to_dict

    # The site appends "/" to a run folder's link: ";/x" makes that a regular expression, so the whole href is
    # a script that runs (the CSP is the only thing left to block it once the link is written).
    payload = "javascript:document.title='PWNED';/x"
    folder = tmp_path / "imported" / "evil"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(record_to_dict(make_record(run_id="evil", artifacts=payload))))
    db = tmp_path / "results.db"
    done = run_cli("store", "import", str(tmp_path / "imported"), "--store", str(db))
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    site.mkdir()
    done = run_cli("dashboard", "--store", str(db), "-o", str(site), cwd=site, timeout=300)
    assert done.returncode == 0, done.stderr
    page = site / "scenario-store-test-scenario.html"
    assert ">trial 0<" in page.read_text()  # the record is on the page, as its label
    _chromium()
    probe = ("(function () { var title = document.title; var all = Array.from(document.querySelectorAll('a'));"
             " var js = all.filter(function (a) { return a.protocol === 'javascript:'; }).map(function (a) {"
             " return a.getAttribute('href'); });"
             " all.filter(function (a) { return a.textContent === 'trial 0'; }).forEach(function (a) {"
             " a.removeAttribute('target'); a.click(); });"
             " return new Promise(function (done) { setTimeout(function () {"
             " done(JSON.stringify([js, title, document.title, location.href])); }, 500); }); })()")
    seen = visit(page.resolve().as_uri(), evaluate=probe)
    js, title_before, title_after, where = json.loads(seen.value)
    assert js == [], js  # no anchor with a javascript: scheme in the DOM
    assert title_after == title_before and "PWNED" not in title_after, (title_before, title_after)
    assert where.startswith("file://"), where
