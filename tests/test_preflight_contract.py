"""Pre-flight's contract check: a release whose facts drifted ends the run as infra, naming the fact, before a start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.build import Build
from harness.contract import facts as contract
from harness.launch import contract_gate as preflight_contract
from harness.launch.contract_gate import contract_gap, needed_by
from harness.pipeline import RunOptions, execute_run
from harness.records.outcome import Outcome, Phase
from harness.scenario import load_file, select_cases
from tests.helpers import copy_cited, release_wheel

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
EAGER = "tokens=276,path=eager"


def _case(path: Path, name: str = EAGER):
    (case,) = select_cases(load_file(path), name)
    return case


def _scenario_with(tmp_path: Path, **args: object) -> Path:
    data = yaml.safe_load(LONG.read_text())
    data["server"]["args"].update(args)
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _build_at(package: Path, version: str) -> Build:
    return Build("python", f"python:{package}", "/nonexistent/python", ("python", "-m", "sglang.launch_server"),
                 version=version, location=str(package))


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_what_a_case_depends_on(tmp_path: Path) -> None:
    assert needed_by(_case(LONG)) == {"every run", "speculative"}
    assert needed_by(_case(_scenario_with(tmp_path, **{"enable-metrics": True, "api-key": "k"}))) == {
        "every run", "speculative", "metrics", "auth"}
    assert set(contract.NEEDS) <= {f.name for f in contract.FACTS}  # every tagged name is a fact


@pytest.mark.slow
@pytest.mark.parametrize("version", contract.VERSIONS)
def test_the_real_releases_hold_every_fact_a_seed_case_depends_on(version: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.real_sglang import real_sglang

    package = real_sglang(version).package  # before the cache moves: the shared environment
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    build = _build_at(package, version)
    assert contract_gap(build, _case(LONG)) is None


@pytest.mark.slow
def test_a_drifted_fact_is_named_only_for_the_cases_that_depend_on_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.real_sglang import real_sglang

    package = copy_cited(real_sglang("0.5.15").package, tmp_path / "sglang")
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    _replace(package / "srt/observability/metrics_collector.py", 'name="sglang:spec_accept_length"',
             'name="sglang:spec_decode_accept_length"')  # a release renames the gauge
    build = _build_at(package, "0.5.15")
    assert contract_gap(build, _case(LONG)) is None  # no --enable-metrics: the gauge is not read
    gap = contract_gap(build, _case(_scenario_with(tmp_path, **{"enable-metrics": True})))
    assert gap is not None and "contract fact METRIC_NAMES" in gap and "sglang:spec_accept_length" in gap
    assert "sglang/srt/observability/metrics_collector.py:415" in gap


@pytest.mark.slow
def test_the_answer_is_kept_per_build_until_a_cited_file_changes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.real_sglang import real_sglang

    package = copy_cited(real_sglang("0.5.14").package, tmp_path / "sglang")
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    calls: list[str] = []
    real_check = preflight_contract.check_sources

    def counting(sources, version, reference=None):  # a spy: the real check, counted
        calls.append(version)
        return real_check(sources, version, reference)

    monkeypatch.setattr(preflight_contract, "check_sources", counting)
    build = _build_at(package, "0.5.14")
    case = _case(LONG)
    assert contract_gap(build, case) is None and contract_gap(build, case) is None
    assert len(calls) == 1
    _replace(package / "srt/entrypoints/http_server.py", contract.READY_LINE, "The server is up.")
    gap = contract_gap(build, case)
    assert len(calls) == 2 and gap is not None and "contract fact READY_LINE" in gap
    assert contract_gap(build, case) == gap and len(calls) == 2


@pytest.mark.slow
def test_a_run_on_a_release_whose_facts_changed_is_infra_before_a_server_starts(tmp_path: Path) -> None:
    """A whole sglang that renamed a meta_info key the harness reads: its own parser accepts the flags, then
    pre-flight names the fact, and no server is started (no log)."""
    from tests.real_sglang import real_sglang

    real = real_sglang("0.5.15")
    copy = tmp_path / "site" / "sglang"
    shutil.copytree(real.package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    _replace(copy / "srt/managers/tokenizer_manager.py", 'meta_info["spec_verify_ct"] = recv_obj.spec_verify_ct[i]',
             'meta_info["verify_steps"] = recv_obj.spec_verify_ct[i]')
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{copy.parent}" exec "{real.python}" "$@"\n')
    wrapper.chmod(0o755)
    result = execute_run(_case(LONG), f"python:{wrapper}", role="after",
                         options=RunOptions(out_root=tmp_path / "out", progress=False))
    assert result.outcome is Outcome.INFRA and result.phase is Phase.PREFLIGHT, result.reason
    assert "contract fact SPEC_META_INFO_KEYS" in result.reason and "tokenizer_manager.py:2368" in result.reason
    assert not Path(result.server.log).exists(), "nothing may be launched"


def test_what_sglang_does_on_sigterm_never_ends_a_run(tmp_path: Path) -> None:
    """The SIGTERM facts are the reference server's model of SGLang's teardown; no verdict rests on them, so a
    release that moved them is reported by ``sglang-repro contract`` and still runs (issue 24)."""
    sigterm = {f.name for f in contract.FACTS if f.name.startswith("SIGTERM_")}
    assert len(sigterm) == 7 and {contract.needs(f) for f in contract.FACTS if f.name in sigterm} == {"teardown"}
    for case in (_case(LONG), _case(_scenario_with(tmp_path, **{"enable-metrics": True, "api-key": "k"}))):
        assert "teardown" not in needed_by(case)


@pytest.mark.slow
def test_what_a_build_is_never_gates_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix marker, the eager rule, the draft path: what a speculative run is meant to find out (kind
    "profile", harness.contract.profile), so a release without them is a release to test, not to refuse."""
    from tests.real_sglang import real_sglang

    package = copy_cited(real_sglang("0.5.15").package, tmp_path / "sglang")
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(tmp_path / "cache"))
    _replace(package / "srt/speculative/frozen_kv_mtp_worker_v2.py", contract.FIX_MARKER, "forward_batch.out_cache_loc = ()")
    assert contract.needs(contract.FACTS[[f.name for f in contract.FACTS].index("FIX_MARKER")]) == "profile"
    assert contract_gap(_build_at(package, "0.5.15"), _case(LONG)) is None


def _wheel_package(version: str, dest: Path) -> Path:
    """The cited files of release ``version``, unzipped from its real wheel (nothing installed)."""
    sources = release_wheel(version)
    for name in contract.cited_files():
        text = sources.text(name)
        if text is not None:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_text(text)
    return dest


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.12.post1", "0.5.13.post1", "0.5.23"])
def test_every_seed_case_on_the_reporters_release_ends_for_the_gpus_only(version: str, tmp_path: Path) -> None:
    """sglang#28264 was reported on 0.5.13.x (its traceback matches 0.5.13.post1 line for line): pre-flight of
    every seed case there finds the contract whole, and only the hardware (no GPU here) missing, bar the CPU scenarios
    that ask for none (gpus: 0), which find nothing missing. So do the oldest
    release of the line (0.5.12.post1: the decode statistics in the scheduler's mixin) and the newest (0.5.23:
    ServerArgs' fields in arg_groups/fields/, /server_info through build_server_info), their wordings recorded."""
    from harness.launch.launcher import hardware_gap
    from harness.scenario import load_paths

    build = _build_at(_wheel_package(version, tmp_path / "sglang"), version)
    cases = [case for loaded in load_paths([str(REPO / "scenarios")]) for case in loaded.cases]
    assert len(cases) >= 20
    for case in cases:
        assert contract_gap(build, case) is None, case.name
        if case.scenario.hardware.gpus > 0:
            assert hardware_gap(case) is not None, case.name  # this machine has no GPU: the only thing missing
        else:  # a real-SGLang CPU scenario (scenarios/sglang_cpu/) asks for no GPU: nothing is missing here
            assert hardware_gap(case) is None, case.name
