"""Every flag of every seed case parses with the real sglang 0.5.14 and 0.5.15 parsers (installed --no-deps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.build import resolve_build
from harness.launch.preflight import check_flag_sets
from harness.scenario import load_paths, server_flags

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("version", ["0.5.14", "0.5.15"])
def test_seed_scenarios_parse_with_the_real_release(version):
    build = resolve_build(f"pip:sglang=={version},deps=none")
    assert build.version == version
    cases = [case for item in load_paths([REPO / "scenarios"]) for case in item.cases]
    checks = check_flag_sets(build, [server_flags(case.scenario, port=30000) for case in cases])
    rejected = {case.id: check.message for case, check in zip(cases, checks) if not check.ok}
    assert not rejected
    bogus = check_flag_sets(build, [server_flags(cases[0].scenario) + ["--definitely-not-a-flag"]])[0]
    assert not bogus.ok and "unrecognized arguments: --definitely-not-a-flag" in bogus.message
