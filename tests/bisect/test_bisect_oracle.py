"""The bisection's pure parts: the oracle's decisions, the sequential test, release ordering, the build kind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.bisect.oracle import (
    Decision,
    Limits,
    Target,
    Trial,
    Verdict,
    clean_trials_needed,
    decide,
)
from harness.bisect.releases import (
    order_versions,
    parse_range,
    search_releases,
    tag_for,
)
from harness.bisect.sequential import Side, endpoint_difference, sequential_test, without_stalls
from harness.build import parse_build_spec, resolve_build
from harness.records.outcome import Outcome
from harness.util.errors import InfraError, UserError
from tests.helpers import GIT_IDENTITY, git

SIG = "frozen-kv-mtp-stale-out-cache-loc"
OTHER = "cuda-illegal-memory-access"


def t(outcome: str, signature: str | None = None, **metrics: float) -> Trial:
    return Trial(Outcome(outcome), signature, f"{outcome} {signature or ''}".strip(), None, metrics)


def decided(trials: list[Trial], target: Target, limits: Limits) -> Decision:
    """The oracle's decision, asserting it made one (decide returns None for one more trial)."""
    d = decide(trials, target, limits)
    assert d is not None
    return d


def test_the_searched_signature_is_bad_and_another_one_is_never_bad():
    target, limits = Target(signature=SIG), Limits(max_inconclusive=3)
    assert decided([t("crash", SIG)], target, limits).verdict is Verdict.BAD
    # Another catalogued signature, or an unknown crash: one more trial, never bad.
    assert decide([t("crash", OTHER)], target, limits) is None
    assert decide([t("crash", OTHER), t("crash", "unknown")], target, limits) is None
    d = decided([t("crash", OTHER)] * 3, target, limits)
    assert d.verdict is Verdict.SKIP and OTHER in d.reason
    # ... and the clean run that follows decides good.
    assert decided([t("crash", OTHER), t("pass")], target, limits).verdict is Verdict.GOOD
    # The searched signature after an unrelated crash still decides bad.
    assert decided([t("crash", OTHER), t("crash", SIG)], target, limits).verdict is Verdict.BAD


def test_infra_is_a_skip_at_once_with_its_reason():
    d = decided([t("infra")], Target(signature=SIG), Limits())
    assert d.verdict is Verdict.SKIP and d.reason.startswith("infra:")
    assert decide([t("timeout")], Target(signature=SIG), Limits()) is None  # a timeout: one more trial


def test_a_flaky_crash_needs_enough_clean_trials():
    # 1 in 10 crashed at the bad endpoint: one clean run proves nothing.
    target = Target(signature=SIG, crash_rate=0.1)
    assert clean_trials_needed(0.1, 0.01) == 44
    limits = Limits(max_trials=50)
    assert decide([t("pass")] * 10, target, limits) is None
    assert decided([t("pass")] * 44, target, limits).verdict is Verdict.GOOD
    assert decided([t("pass")] * 8, target, Limits(max_trials=8)).verdict is Verdict.SKIP
    assert clean_trials_needed(1.0, 0.01) == 1
    assert clean_trials_needed(0.5, 0.01) == 7


def test_sequential_test_decides_near_an_endpoint_and_waits_in_between():
    good, bad = [100.0, 101.0, 99.0], [120.0, 121.0, 119.5]
    assert sequential_test([100.5], good, bad).side is Side.GOOD
    assert sequential_test([120.2], good, bad).side is Side.BAD
    assert sequential_test([110.0], good, bad).side is Side.UNDECIDED
    assert sequential_test([110.0, 118.0, 121.0], good, bad).side is Side.BAD
    # The metric decides through the oracle; failing runs give no sample.
    target = Target(metric="itl_ms_p50", good_samples=tuple(good), bad_samples=tuple(bad))
    assert decide([t("pass", itl_ms_p50=119.0)], target, Limits()) is None  # one sample never decides
    assert decided([t("pass", itl_ms_p50=119.0)] * 3, target, Limits()).verdict is Verdict.BAD
    # A stalled trial (a gross outlier) among three does not decide the step.
    stalled = [t("pass", itl_ms_p50=v) for v in (100.5, 99.8, 190.0)]
    assert decided(stalled, target, Limits()).verdict is Verdict.GOOD
    assert decided([t("pass", itl_ms_p50=110.0)] * 8, target, Limits(max_trials=8)).verdict is Verdict.SKIP
    assert decide([t("crash", OTHER)], target, Limits()) is None


def test_stalled_trials_are_set_aside():
    assert without_stalls([1473, 1517, 1507, 1555, 2047]) == (1473, 1517, 1507, 1555)
    assert without_stalls([100.0, 101.0, 99.0, 103.0]) == (100.0, 101.0, 99.0, 103.0)  # ordinary spread stays
    assert without_stalls([5.0, 500.0]) == (5.0, 500.0)  # too few to judge


def test_endpoint_difference():
    rel, p = endpoint_difference([100.0, 101.0, 99.0], [120.0, 121.0, 119.5])
    assert rel == pytest.approx(0.2, abs=0.01) and p < 0.01
    rel, p = endpoint_difference([100.0, 130.0, 70.0], [101.0, 99.0, 100.0])
    assert p > 0.5


def test_release_ordering_and_range():
    assert parse_range("0.5.10..0.5.20") == ("0.5.10", "0.5.20")
    with pytest.raises(UserError):
        parse_range("0.5.10")
    listed = ["0.5.9", "0.5.20", "0.5.10", "0.5.11rc1", "0.5.11", "0.5.2", "0.5.21"]
    assert order_versions(listed, "0.5.10", "0.5.20") == ["0.5.10", "0.5.11rc1", "0.5.11", "0.5.20"]
    with pytest.raises(UserError, match="0.5.12 is not among"):
        order_versions(listed, "0.5.12", "0.5.20")
    with pytest.raises(UserError, match="not a version"):
        order_versions(["x.y"], "0.1", "0.2")
    assert tag_for("0.5.14", ["v0.5.13", "v0.5.14"]) == "v0.5.14"
    assert tag_for("0.5.14", ["0.5.14"]) == "0.5.14"
    assert tag_for("0.5.15", ["v0.5.14"]) is None


def test_release_search_steps_over_untestable_releases():
    from harness.bisect.probe import StepRecord

    versions = [f"0.{i}" for i in range(10)]
    first_new, untestable = 6, {5}
    seen = []

    def judge(v: str, k: int) -> StepRecord:
        i = versions.index(v)
        seen.append(i)
        verdict = Verdict.SKIP if i in untestable else Verdict.BAD if i >= first_new else Verdict.GOOD
        return StepRecord("release", v, v, verdict, verdict.value, "", (), 0, 0.0)

    found = search_releases(versions, judge, is_new=lambda r: r.verdict is Verdict.BAD, started=0.0)
    # 0.5 cannot be tried: the change is in 0.5 or 0.6, and the search says so instead of guessing.
    assert (found.last_old, found.first_new) == (None, None)
    assert found.candidates == ("0.5", "0.6")
    untestable.clear()
    found = search_releases(versions, judge, is_new=lambda r: r.verdict is Verdict.BAD, started=0.0)
    assert (found.last_old, found.first_new) == ("0.5", "0.6")
    assert len(found.steps) <= 4


def _git(repo: Path, *args: str) -> None:
    git(repo, *args, env={**GIT_IDENTITY, "PATH": "/usr/bin:/bin"})  # a bare environment: no HOME, so no ~/.gitconfig


def test_simsrc_build_runs_the_checkouts_own_reference_server(tmp_path):
    import shutil

    repo = tmp_path / "proj"
    (repo / "harness").mkdir(parents=True)
    (repo / "harness" / "__init__.py").write_text("")
    shutil.copytree(Path(__file__).resolve().parents[2] / "harness" / "sim", repo / "harness" / "sim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = repo / "harness" / "sim" / "__init__.py"
    init.write_text(init.read_text().replace('DEFAULT_REVISION = "post-fix"', 'DEFAULT_REVISION = "pre-fix"'))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    spec = parse_build_spec(f"simsrc:{repo},step-cost-ms=3")
    assert spec.kind == "simsrc" and spec.fields["knob.step-cost-ms"] == "3"
    build = resolve_build(spec, cache_dir=tmp_path / "cache")
    assert build.is_reference and build.version is not None and build.version.startswith("pre-fix") and build.commit
    assert build.env["PYTHONPATH"] == str(repo) and "--sim-revision" not in build.launcher
    assert build.launcher[-2:] == ("--sim-step-cost-ms", "3")
    # The launcher really imports the checkout's harness.sim, not the harness on the caller's path.
    done = subprocess.run([*build.launcher[:1], "-c", "import harness.sim as s; print(s.__file__, s.DEFAULT_REVISION)"],
                          capture_output=True, text=True, env={**build.env}, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == [str(init), "pre-fix"]
    # A syntax error anywhere in its harness/: the build does not install.
    (repo / "harness" / "sim" / "sampling.py").write_text("def broken(:\n")
    with pytest.raises(InfraError, match="does not install"):
        resolve_build(spec, cache_dir=tmp_path / "cache")
    other = tmp_path / "other"
    other.mkdir()
    (other / "README").write_text("not this project\n")
    _git(other, "init", "-q")
    _git(other, "add", "-A")
    _git(other, "commit", "-qm", "one")
    with pytest.raises(UserError, match="not a checkout of sglang-repro"):
        resolve_build(f"simsrc:{other}", cache_dir=tmp_path / "cache")


def test_simsrc_flags_are_parsed_by_the_checkouts_own_parser(tmp_path):
    import shutil

    from harness.build import Build
    from harness.launch.preflight import check_flags

    repo = tmp_path / "proj"
    (repo / "harness").mkdir(parents=True)
    (repo / "harness" / "__init__.py").write_text("")
    shutil.copytree(Path(__file__).resolve().parents[2] / "harness" / "sim", repo / "harness" / "sim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cli = repo / "harness" / "sim" / "cli_args.py"
    cli.write_text(cli.read_text().replace('    p.add_argument("--enable-mixed-chunk", action="store_true")\n', ""))
    build = Build("simsrc", f"simsrc:{repo}", sys.executable, (sys.executable, "-m", "harness.sim.server"),
                  {"PYTHONPATH": str(repo), "PYTHONSAFEPATH": "1"}, None, None, True)
    assert check_flags(build, ["--model-path", "m"]).ok
    check = check_flags(build, ["--model-path", "m", "--enable-mixed-chunk"])
    assert not check.ok and "--enable-mixed-chunk" in check.message
