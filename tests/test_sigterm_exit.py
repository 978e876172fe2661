"""How a SIGTERM stop of SGLang's launcher ends, release by release, read from the real wheels.

Up to 0.5.18 ``sigterm_watchdog`` ends with ``kill_process_tree(os.getpid(), include_parent=True)``: the launcher
SIGKILLs itself (wait status -9, SIGTERM_SELF_KILL). From 0.5.19 it passes ``include_parent=False`` and then exits
0 (0.5.19) or stops uvicorn through its server stop hook (0.5.20 on): wait status 0 (SIGTERM_CLEAN_EXIT). The
contract's :func:`sigterm_exit_status`, its located SIGTERM_CLEAN_EXIT citations and the reference server's
``--sim-rules`` must all say what each wheel's watchdog does. The live servers' wait status is
tests/sglang_cpu/test_live_contract.py (0.5.18, 0.5.19, 0.5.21 measured).
"""

from __future__ import annotations

import pytest

from harness.contract import facts as contract
from harness.contract.check import check_sources
from harness.contract.locate import function_span
from harness.contract.sources import lines_of
from harness.contract.wheels import WheelSources
from tests.helpers import release_wheel

LINE = ("0.5.12.post1", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21",
        "0.5.22", "0.5.23")
_TM = "srt/managers/tokenizer_manager.py"


def _watchdog_kill(sources: WheelSources) -> tuple[int, str]:
    """The line and text of the kill in ``TokenizerManager.sigterm_watchdog``: its last step."""
    lines = lines_of(sources, _TM)
    assert lines is not None
    span = function_span(lines, "TokenizerManager.sigterm_watchdog")
    assert span is not None
    kills = [(n, lines[n - 1].strip()) for n in range(span[0], span[1] + 1) if "kill_process_tree(" in lines[n - 1]]
    assert len(kills) == 1, kills
    return kills[0]


def test_the_exit_status_per_release_is_the_boundary_of_0_5_19() -> None:
    assert [contract.sigterm_exit_status(v) for v in ("0.5.12.post1", "0.5.18", "0.5.19", "0.5.19.post1", "0.5.23")] \
        == [-9, -9, 0, 0, 0]
    assert contract.sigterm_exit_status(None) == contract.sigterm_exit_status("main") == contract.SIGTERM_SELF_KILL
    assert contract.sigterm_exit_status("0.5.19rc1") == contract.SIGTERM_SELF_KILL  # a pre-release comes before


@pytest.mark.slow
@pytest.mark.parametrize("version", LINE)
def test_each_wheels_watchdog_ends_as_the_contract_says(version: str) -> None:
    sources = release_wheel(version)
    line, text = _watchdog_kill(sources)
    expected = contract.sigterm_exit_status(version)
    spares_itself = "include_parent=False" in text
    assert spares_itself == (expected == contract.SIGTERM_CLEAN_EXIT), (version, line, text, expected)
    if not spares_itself:
        assert text == "kill_process_tree(os.getpid(), include_parent=True)", (version, line, text)
    located = {(loc.text, loc.status, loc.found) for loc in check_sources(sources, version)
               if loc.fact == "SIGTERM_CLEAN_EXIT"}
    # From 0.5.19 the children-only kill holds on the watchdog's own line; before, it is absent and holds so.
    assert all(status == "holds" for _, status, _ in located), located
    kill = next(found for t, _, found in located if t.startswith("kill_process_tree("))
    assert kill == ((line,) if spares_itself else ()), (version, kill, line)


def test_the_reference_server_follows_the_release_asked_for() -> None:
    from harness.sim.release_rules import DEFAULT_RULES, rules_for

    assert DEFAULT_RULES.sigterm_exit == contract.sigterm_exit_status(DEFAULT_RULES.name)
    for version in ("0.5.12", *LINE, "0.5.99"):
        assert rules_for(version).sigterm_exit == contract.sigterm_exit_status(version), version
