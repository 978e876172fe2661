"""The pytest plugin, black-box through pytester: collection, markers, gating, sharding, leasing,
reporting, and a real ``-n 2 -m sim`` run of the seed scenarios on the reference server."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.scenario import load_paths, select_cases
from harness.server.lease import lease_gpus

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "scenarios" / "frozen_kv_mtp"
# The #28264 scenario's cases (L40S x4, HiCache, slow), however many it has: the counts below follow from it.
LONG = len(select_cases(load_paths([SEEDS / "long_prompt_stale_out_cache_loc.yaml"])[0], None))
# The end-to-end run's cases of it: the 276-token prompt on the eager path, with and without SGLang's warm-up.
PICKED = "long_prompt and 276 and eager and not chunk256"
PICKED_CASES = sum(1 for c in select_cases(load_paths([SEEDS / "long_prompt_stale_out_cache_loc.yaml"])[0], None)
                   if "276" in c.name and "eager" in c.name and "chunk256" not in c.name)
# Its busy-batch / cached-prompt companion (same hardware and markers), counted the same way.
BUSY = len(select_cases(load_paths([SEEDS / "stale_out_cache_loc_busy_batch_cached_prompt.yaml"])[0], None))
L40S = "0:NVIDIA L40S:46:8.9"

# A conftest that replaces the run itself (the plugin's documented hook) with one that only holds a
# port lease for a while and records what the plugin gave it: everything around it (gating, GPU
# leasing, judging, reporting) is the plugin's real code.
FAKE_RUNNER = '''
import json, os, time
from pathlib import Path
from harness.server.lease import lease_port
from harness.records.run_record import record_from_dict

def pytest_sglang_repro_run(item, case, role, spec, trial, gpus):
    with lease_port() as port:
        start = time.time()
        time.sleep(float(os.environ.get("FAKE_RUN_S", "0")))
        end = time.time()
    outcome = os.environ.get("FAKE_OUTCOME", "pass")
    run_dir = Path(os.environ["SGLANG_REPRO_REPORTS"]) / "runs" / f"{case.name}-{role}-t{trial}"
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "server.log"
    log.write_text(os.environ.get("FAKE_LOG", "ready\\n"))
    with open(os.environ["LEASE_LOG"], "a") as fh:
        fh.write(json.dumps({"item": item.nodeid, "gpus": list(gpus), "need": case.scenario.hardware.gpus,
                             "start": start, "end": end, "port": port.port, "pid": os.getpid()}) + "\\n")
    signature = os.environ.get("FAKE_SIGNATURE") or None
    return record_from_dict(dict(
        scenario={"name": case.scenario.name, "file": str(case.file)},
        case={"name": case.name, "values": case.values},
        build={"kind": spec.split(":")[0], "spec": spec, "role": role},
        trial=trial, outcome=outcome, signature=signature,
        phase=os.environ.get("FAKE_PHASE") or None,
        reason=os.environ.get("FAKE_REASON", "all checks held"),
        metrics={"accept_length": 2.5, "output_throughput_tok_s": 123.0, "requests_ok": 4, "requests_failed": 0},
        server={"log": str(log)}, host={}, started_at="", duration_s=end - start,
        harness_version="test", artifacts=str(run_dir),
    ))
'''


def _scenario(name: str, *, gpus: int = 1, cases: int = 1, trials: int = 1, expect: str = "pass",
              extra: str = "") -> str:
    matrix = ""
    if cases > 1:
        matrix = "matrix:\n  seed:\n    field: workload.prompt.seed\n    values: [" + \
                 ", ".join(str(i) for i in range(cases)) + "]\n"
    return textwrap.dedent(f"""\
        name: {name}
        description: a test scenario
        hardware: {{gpus: {gpus}}}
        server: {{model: test/model}}
        workload: {{requests: 1, prompt: {{tokens: 8}}, max_new_tokens: 4, trials: {trials}}}
        builds:
          after: {{spec: "python:/nonexistent/python", sim: post-fix}}
        expect:
          after: {{outcome: {expect}}}
        """) + matrix + extra


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    """A pytester folder with the plugin registered, isolated reports, locks and (no) GPUs."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("SGLANG_REPRO_REPORTS", str(state / "reports"))
    monkeypatch.setenv("SGLANG_REPRO_LOCK_DIR", str(state / "locks"))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", "")  # the same answers on a GPU runner
    monkeypatch.setenv("LEASE_LOG", str(state / "leases.jsonl"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    pytester.state = state  # type: ignore[attr-defined]
    return pytester


def _copy_seeds(pytester: pytest.Pytester) -> None:
    shutil.copytree(SEEDS, pytester.path / "scenarios" / "frozen_kv_mtp")


def _write(pytester: pytest.Pytester, rel: str, text: str) -> None:
    path = pytester.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# Plugins this suite does not need: hypothesis alone costs ~2 s per pytester run.
QUIET = ("-p", "no:hypothesispytest", "-p", "no:anyio")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*QUIET, *args)


def _run_subprocess(pytester: pytest.Pytester, *args: str, timeout: float) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*QUIET, *args, timeout=timeout)


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


def _leases(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.state / "leases.jsonl"  # type: ignore[attr-defined]
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_one_item_per_case_and_role_with_readable_ids(project: pytest.Pytester) -> None:
    _copy_seeds(project)
    result = _run(project, "--collect-only", "-q", "--strict-markers")
    ids = _collected(result)
    base = "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml::tokens=271,path=eager"
    assert [i for i in ids if i.startswith(base + "::")] == [
        f"{base}::before", f"{base}::before[sim]", f"{base}::after", f"{base}::after[sim]"]
    # 2 (accept-length guard) + LONG + BUSY + 1 (NVFP4) cases, 2 roles each, real and reference-server items.
    assert len(ids) == (2 + LONG + BUSY + 1) * 2 * 2
    assert "scenarios/frozen_kv_mtp/trtllm_swa_nvfp4_graph_draft.yaml::default::after[sim]" in ids


def test_keyword_selection_still_works(project: pytest.Pytester) -> None:
    _copy_seeds(project)
    ids = _collected(_run(project, "--collect-only", "-q", "-k", "long_prompt and 2048 and graph and sim"))
    assert ids == [
        "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml::tokens=2048,path=graph::before[sim]",
        "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml::tokens=2048,path=graph::after[sim]",
    ]


@pytest.mark.parametrize(("expr", "count"), [
    ("gpu", (2 + LONG + BUSY + 1) * 2),
    ("sim", (2 + LONG + BUSY + 1) * 2),
    ("l40s and gpus4 and sm89 and hicache", (LONG + BUSY) * 2),
    ("gpus1 and sm80 and accept_length", 4),
    ("b200 and b300 and gb300 and sm100 and nvfp4", 2),
    ("frozen_kv_mtp and slow", (2 + LONG + BUSY + 1) * 2 * 2),
    ("sim and (l40s or gpus1 or gpus4)", 0),  # hardware markers are for real items only
])
def test_markers_select_items(project: pytest.Pytester, expr: str, count: int) -> None:
    _copy_seeds(project)
    result = _run(project, "--collect-only", "-q", "--strict-markers", "-m", expr)
    assert len(_collected(result)) == count
    assert "not found in `markers` configuration option" not in result.stdout.str()


def test_bad_scenario_file_is_a_collection_error_naming_the_line(project: pytest.Pytester) -> None:
    _write(project, "scenarios/bad.yaml", _scenario("bad-one").replace("max_new_tokens: 4", "max_new_tokens: 0"))
    result = _run(project, "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*scenarios/bad.yaml:*workload.max_new_tokens*"])


def test_yaml_outside_scenarios_is_not_collected(project: pytest.Pytester) -> None:
    _write(project, "fixtures/bad.yaml", "not: a scenario\n")
    _write(project, "scenarios/ok.yaml", _scenario("ok-one"))
    ids = _collected(_run(project, "--collect-only", "-q"))
    assert ids == ["scenarios/ok.yaml::default::after", "scenarios/ok.yaml::default::after[sim]"]


def test_real_items_skip_with_what_hardware_is_missing(project: pytest.Pytester) -> None:
    _copy_seeds(project)
    result = _run(project, "-m", "gpu", "-ra")
    result.assert_outcomes(skipped=(2 + LONG + BUSY + 1) * 2)
    result.stdout.fnmatch_lines([
        f"SKIPPED [[]{(LONG + BUSY) * 2}[]] *hardware: needs 4 GPUs matching L40S with >= 44 GiB and compute capability >= 8.9, "
        "found 0 (host has: no GPUs) (needs a GPU host; there, --set hardware.gpu_name=NAME --set hardware.gpus=N *",
        "SKIPPED [[]2[]] *hardware: needs 1 GPU matching B200|B300|GB200|GB300 with >= 80 GiB*found 0*",
    ])


def test_hardware_gate_reads_the_gpus_present(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_seeds(project)
    three = ",".join(L40S.replace("0:", f"{i}:", 1) for i in range(3))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", three + ",3:NVIDIA L40:46:8.9")
    result = _run(project, "-m", "gpu and l40s", "-ra", "-k", "271 and eager and before")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs 4 GPUs matching L40S*found 3 (host has: NVIDIA L40S 46 GiB cc 8.9, *"
                                 "NVIDIA L40 46 GiB cc 8.9) (to run it on this host's GPUs: "
                                 "--set hardware.gpu_name=L40S --set hardware.gpus=3)"])


def test_build_without_sglang_is_skipped_as_infra(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_seeds(project)
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", ",".join(L40S.replace("0:", f"{i}:", 1) for i in range(4)))
    # This interpreter has no sglang: the build cannot be tried, so the item is neither failed nor passed.
    result = _run(project, "-m", "gpu", "-ra", "-k", "271 and eager and before",
                               f"--build=before=python:{sys.executable}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*infra: *sglang*"])


@pytest.mark.parametrize(("args", "message"), [
    (["--build", "after"], "*--build*'after' is not ROLE=SPEC*"),
    (["--build", "after=sim:post-fix"], "*reference server runs in the [[]sim[]] items*"),
    (["--build", "after=conda:x"], "*SPEC must start with one of python:, pip:, src:*"),
    (["--trials", "0"], "*--trials*must be at least 1*"),
    (["--shard", "3/2"], "*--shard*K must be between 1 and N*"),
    (["--shard", "two"], "*--shard*'two' is not K/N*"),
    (["--gpu-lease-timeout", "-1"], "*--gpu-lease-timeout*must be greater than 0*"),
])
def test_bad_options_are_usage_errors(project: pytest.Pytester, args: list[str], message: str) -> None:
    result = _run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_build_for_an_unknown_role_is_warned_about(project: pytest.Pytester) -> None:
    _write(project, "scenarios/ok.yaml", _scenario("ok-one"))
    result = _run(project, "--collect-only", "-q", "--build", "aftr=pip:sglang==0.5.15")
    result.stdout.fnmatch_lines(["*--build aftr: no selected scenario item has that role (roles: after)*"])


def test_bad_injected_inventory_is_a_usage_error(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", "0,zero")
    result = _run(project, )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*SGLANG_REPRO_GPU_INVENTORY: entry 'zero'*"])


@pytest.mark.parametrize("n", [2, 3])
def test_shards_together_hold_every_item_exactly_once(project: pytest.Pytester, n: int) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    _write(project, "scenarios/three.yaml", _scenario("three", cases=3))
    project.makepyfile(test_unit="\n".join(f"def test_{i}(): pass" for i in range(7)))
    for selection in ([], ["-m", "sim"]):
        wanted = _collected(_run(project, "--collect-only", "-q", *selection))
        shards = [_collected(_run(project, "--collect-only", "-q", *selection, "--shard", f"{k}/{n}"))
                  for k in range(1, n + 1)]
        assert sorted(itertools.chain.from_iterable(shards)) == sorted(wanted)
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
        if not selection:
            first = shards[0]
    assert len(wanted) == 3
    # Deterministic: the same slice twice, and it runs what it collected.
    result = _run(project, "--shard", f"1/{n}")
    real = [i for i in first if "three.yaml" in i and not i.endswith("[sim]")]
    result.assert_outcomes(passed=len(first) - len(real), skipped=len(real))  # no GPUs: real items skip
    assert sorted(r["item"] for r in _leases(project)) == sorted(i for i in first if i.endswith("[sim]"))


@pytest.mark.slow
def test_xdist_workers_lease_disjoint_gpus(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    for gpus in (1, 2, 4):
        _write(project, f"scenarios/need{gpus}.yaml", _scenario(f"need-{gpus}", gpus=gpus, cases=4))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", ",".join(map(str, range(8))))
    monkeypatch.setenv("FAKE_RUN_S", "0.4")
    summary = project.state / "summary.md"  # type: ignore[attr-defined]
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = project.path / "junit.xml"
    result = _run_subprocess(project, "-n", "4", "-m", "gpu", "--gpu-lease-timeout", "60", f"--junitxml={junit}",
                             timeout=120)
    result.assert_outcomes(passed=12)
    # Reports travel from the workers: the controller alone writes the table and the XML.
    assert summary.read_text().count("| passed | pass |") == 12
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == 12
    assert all({p.get("name"): p.get("value") for p in c.iter("property")}["outcome"] == "pass" for c in cases)
    runs = _leases(project)
    assert sorted(r["need"] for r in runs) == [1] * 4 + [2] * 4 + [4] * 4
    assert len({r["pid"] for r in runs}) > 1, "the runs did not spread over workers"
    overlapping = 0
    for a, b in itertools.combinations(runs, 2):
        assert len(a["gpus"]) == a["need"] and set(a["gpus"]) <= set(range(8))
        if a["start"] < b["end"] and b["start"] < a["end"]:
            overlapping += 1
            assert not set(a["gpus"]) & set(b["gpus"]), (a, b)
            assert a["port"] != b["port"], (a, b)
    assert overlapping, "no two runs were concurrent; the test proves nothing"


@pytest.mark.slow
def test_waiting_for_gpus_is_bounded(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    _write(project, "scenarios/need4.yaml", _scenario("need-4", gpus=4))
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", ",".join(map(str, range(8))))
    with lease_gpus(5, range(8), timeout_s=5):  # leaves 3 free: never enough
        result = _run_subprocess(project, "-m", "gpu", "-ra",
                                              "--gpu-lease-timeout", "1", timeout=60)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*infra: timed out after 1 s waiting for 4 free GPUs*"])
    assert _leases(project) == []


def test_failure_report_junit_and_step_summary(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    _write(project, "scenarios/crashy.yaml", _scenario("crashy", gpus=0, trials=2))
    summary = project.state / "summary.md"  # type: ignore[attr-defined]
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("FAKE_OUTCOME", "crash")
    monkeypatch.setenv("FAKE_SIGNATURE", "frozen-kv-mtp-stale-out-cache-loc")
    monkeypatch.setenv("FAKE_REASON", "during workload: stale out_cache_loc | broadcast")
    monkeypatch.setenv("FAKE_LOG", "INFO boot\nTraceback (most recent call last):\n  File \"x.py\", line 1, in fill_from\n"
                                   "RuntimeError: output with shape [1] doesn't match the broadcast shape [271]\n")
    junit = project.path / "junit.xml"
    result = _run(project, "-k", "not sim", f"--junitxml={junit}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*expected pass, got crash frozen-kv-mtp-stale-out-cache-loc (trial 1 of 2)",
        "*outcome:    crash",
        "*signature:  frozen-kv-mtp-stale-out-cache-loc",
        "*reason:     during workload: stale out_cache_loc | broadcast",
        "*metrics:    accept_length=2.5 output_throughput_tok_s=123 requests_ok=4 requests_failed=0",
        "*artifacts:  */runs/default-after-t0",
        "*server log: */server.log (last traceback)",
        "*| RuntimeError: output with shape [[]1[]] doesn't match the broadcast shape [[]271[]]",
    ])
    assert len(_leases(project)) == 1, "a failing trial must stop the item"
    case = ET.parse(junit).getroot().find(".//testcase")
    assert case is not None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["outcome"] == "crash" and props["metric.accept_length"] == "2.5"
    assert props["scenario"] == "crashy" and props["role"] == "after" and props["build"] == "python:/nonexistent/python"
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "| `scenarios/crashy.yaml::default::after` | failed | crash | frozen-kv-mtp-stale-out-cache-loc | 2.5 | 123 |" \
        in text
    assert "stale out_cache_loc \\| broadcast" not in text  # the detail of a failure is its first line
    assert "expected pass, got crash" in text


def test_every_trial_must_hold(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    _write(project, "scenarios/fine.yaml", _scenario("fine", gpus=0, trials=2))
    _run(project, "-k", "not sim").assert_outcomes(passed=1)
    assert [r["item"] for r in _leases(project)] == ["scenarios/fine.yaml::default::after"] * 2
    _run(project, "-k", "not sim", "--trials", "3").assert_outcomes(passed=1)
    assert len(_leases(project)) == 5


def test_infra_outcome_is_a_skip_unless_expected(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n' + FAKE_RUNNER)
    _write(project, "scenarios/a.yaml", _scenario("plain", gpus=0))
    _write(project, "scenarios/b.yaml", _scenario("wants-infra", gpus=0, expect="infra"))
    monkeypatch.setenv("FAKE_OUTCOME", "infra")
    monkeypatch.setenv("FAKE_REASON", "pre-flight: model test/model not found")
    result = _run(project, "-k", "not sim", "-ra")
    result.assert_outcomes(skipped=1, passed=1)
    result.stdout.fnmatch_lines(["SKIPPED*infra: pre-flight: model test/model not found (trial 1 of 1)"])


@pytest.mark.slow
def test_sim_items_fail_with_the_servers_own_traceback(project: pytest.Pytester) -> None:
    seed = (SEEDS / "long_prompt_stale_out_cache_loc.yaml").read_text()
    wrong = seed.replace("expect:\n  before:\n    outcome: crash\n    signature: frozen-kv-mtp-stale-out-cache-loc\n"
                         "    phase: workload\n    evidence: https://github.com/sgl-project/sglang/pull/28817\n",
                         "expect:\n  before: {outcome: pass}\n")
    assert wrong != seed
    _write(project, "scenarios/wrong.yaml", wrong)
    result = _run_subprocess(project, "-m", "sim", "-k", "271 and eager and before",
                                          timeout=180)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*expected pass, got crash frozen-kv-mtp-stale-out-cache-loc (trial 1 of 1)",
        "*artifacts:  *",
        "*| RuntimeError: output with shape [[]1[]] doesn't match the broadcast shape [[]271[]]*",
    ])


@pytest.mark.slow
def test_seed_scenarios_on_the_reference_server_end_to_end(project: pytest.Pytester) -> None:
    _copy_seeds(project)
    # Every case of every seed scenario already runs on the reference server as this repository's own items
    # (testpaths has scenarios/, so `make test` collects them through this same plugin). What this run adds is
    # the plugin in a fresh project under `-n 2`, its run records in that project's reports: one case of each
    # kind does that (the workload's crash, the warm-up's crash, a pass, the NVFP4 graph draft's crash), so the
    # other cases (2048 tokens, the graph path, the chunked prefills) are left to the repository's items.
    # The bound only ends a hung session: 30 s a run (a reference server's start and a light workload take
    # 2-5 s quiet; 400 s in all ran out at a load average of 15 on 2 cores). Speed is benchmarks/' business.
    result = _run_subprocess(project, "-n", "2", "-m", "sim", "-k", f"({PICKED}) or nvfp4",
                             timeout=30 * (PICKED_CASES * 2 + 2))
    result.assert_outcomes(passed=PICKED_CASES * 2 + 2)
    runs = [json.loads((r / "result.json").read_text())
            for r in (project.state / "reports" / "runs").iterdir()]  # type: ignore[attr-defined]
    assert len(runs) == PICKED_CASES * 2 + 2
    for run in runs:
        assert run["build"]["reference_server"] is True
        assert run["expectation"]["held"] is True, run
    outcomes = {(run["scenario"]["name"], run["case"]["name"], run["build"]["role"]): run["outcome"] for run in runs}
    assert outcomes["frozen-kv-mtp-long-prompt-28264", "tokens=276,path=eager", "before"] == "crash"
    assert outcomes["frozen-kv-mtp-long-prompt-28264", "tokens=276,path=eager", "after"] == "pass"
    phases = {(run["case"]["name"], run["build"]["role"]): run["phase"] for run in runs
              if run["scenario"]["name"] == "frozen-kv-mtp-long-prompt-28264"}
    assert phases["tokens=276,path=eager", "before"] == "workload"  # warm-up skipped: the workload's crash
    assert phases["tokens=276+warmup,path=eager", "before"] == "warm-up"  # SGLang's own warm-up crashed
    assert outcomes["frozen-kv-mtp-trtllm-swa-nvfp4-29021", "default", "before"] == "crash"
    assert {run["build"]["spec"].split(",")[0] for run in runs} == {"sim:pre-fix", "sim:post-fix"}

def test_the_run_is_handed_the_gpus_the_item_leased() -> None:
    # The item holds the lease across its trials; a run that leased again would wait on itself.
    from harness.pytest_plugin.runner import _options

    assert _options((2, 5)).gpus == (2, 5)
    assert _options(()).gpus is None


# ---------------------------------------------------------------- --set: your GPU in one step


H200 = ",".join(f"{i}:NVIDIA H200:141:9.0" for i in range(8))


def test_a_skipped_item_names_the_override_that_would_run_it(project: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """On an 8 x H200 host the L40S scenario is skipped with the --set line that points it at the host."""
    _copy_seeds(project)
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", H200)
    result = _run(project, "-m", "gpu", "-ra", "-k", "271 and eager and before")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs 4 GPUs matching L40S*found 0*(to run it on this host's GPUs: "
                                 "--set hardware.gpu_name=H200 --set hardware.gpus=4)"])


def test_set_points_every_scenario_at_this_host(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the overrides the hardware gate passes and the item gets as far as the model, whose skip names the
    download or the override that would run it (nothing is started: the model is not on disk)."""
    _copy_seeds(project)
    monkeypatch.setenv("SGLANG_REPRO_GPU_INVENTORY", H200)
    monkeypatch.setenv("HF_HUB_CACHE", str(project.path / "empty-hf-cache"))
    result = _run(project, "-m", "gpu", "-ra", "-k", "271 and eager and before",
                  "--set", "hardware.gpu_name=H200", "--set", "hardware.gpus=8",
                  "--set", "server.model=/nonexistent/gemma-4-31B-it", f"--build=before=python:{sys.executable}")
    result.assert_outcomes(skipped=1)
    assert "hardware:" not in result.stdout.str()
    result.stdout.fnmatch_lines(["SKIPPED*infra: *"])


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "hardware.gpus=eight"],
     "*long_prompt_stale_out_cache_loc.yaml: --set hardware.gpus=eight: hardware.gpus: Input should be a valid integer*"),
    (["--set", "hardwar.gpus=8"], "*--set hardwar.gpus=8: hardwar: unknown key 'hardwar'; did you mean 'hardware'?*"),
])
def test_a_bad_override_is_named_at_collection(project: pytest.Pytester, args: list[str], message: str) -> None:
    _copy_seeds(project)
    result = _run(project, "--collect-only", "-q", *args)
    assert result.ret != 0
    result.stdout.fnmatch_lines([message])


def test_an_override_without_a_field_is_a_usage_error(project: pytest.Pytester) -> None:
    result = _run(project, "--set", "gpus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--set*expected FIELD=VALUE*"])
