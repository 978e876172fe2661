"""Speculative decoding on real SGLang on the CPU: NGRAM, STANDALONE and EAGLE (a chain and a tree).

Each algorithm's server must give, token for token, the plain server's greedy output (speculation may not change
it); its per-request accounting must add up in SGLang's own terms; the contract's speculative facts are observed
on it. Verification needs the ``intel_amx`` attention backend (torch_native refuses TARGET_VERIFY), kept on a CPU
without AMX through SGLang's ``override_platform(has_amx=True)`` (``server_environment(keep_intel_amx=True)``),
which ``runtime_context`` has from 0.5.19 on: 0.5.14, 0.5.15 and 0.5.18 check ``cpu_has_amx_support()`` directly
(``server_args.py`` 0.5.14 :4667-4671), so speculation runs from :data:`SPEC_SINCE` on (measured: all four
algorithms on 0.5.21, the EAGLE tree on 0.5.23; 0.5.19 does not start: the ``extend_attention_cpu`` port takes
0.5.21's arguments, docs/builds.md).

STANDALONE with the target as its own draft settles the "about 30% acceptance" question with evidence: SGLang's
STANDALONE draft reuses EAGLE's draft extend, which shifts the draft's input left by one token
(``srt/speculative/eagle_worker_v2.py`` 0.5.21 :915-935, in ``_draft_extend_for_prefill`` :899:
``torch.cat((input_ids[1:], tail_tokens[i]))`` :930 for every algorithm; STANDALONE changes only the capture mode,
:951-958, and ``StandaloneDraftWorker(EagleDraftWorker)``, ``standalone_worker_v2.py`` 0.5.21 :39, does not override
the method; the same shift in 0.5.19 :804, 0.5.20 :897, 0.5.22 :944, 0.5.23 :995), so a self-draft sees the
sequence less its first token. Re-enacted with Hugging Face transformers (``hf_spec_sim.py``, no SGLang code and
no port), that reading predicts the server's per-request acceptance histogram exactly (radix cache off). With the
radix cache on it drops further: a cached prefix's last draft slot holds the shifted token of the request that wrote it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.version import Version

from harness.build.environments import venv_python
from harness.build.sglang_cpu import STANDINS_DIR, ensure_cpu_env
from harness.build.sglang_cpu.environment import AMX_ENV
from harness.build.sglang_cpu.tiny_models import make_tiny_eagle_draft
from harness.contract import facts as contract
from tests.sglang_cpu.live import CpuServer, start_cpu_server, stop_cpu_server
from tests.sglang_cpu.observe import SPEC_MAX_NEW_TOKENS, SPEC_PROMPTS, Observations

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]

SPEC_SINCE = "0.5.19"
_CPU = ("--device", "cpu", "--attention-backend", "intel_amx", "--disable-cuda-graph", "--mem-fraction-static", "0.6",
        "--max-total-tokens", "4096")
_STEPS = 3
# What SGLang computes the tiny float32 checkpoint in (0.5.21 srt/configs/model_config.py:2126-2128).
_SERVER_DTYPE = "float16"
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "NGRAM": ("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"),
    "STANDALONE": ("--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "{target}",
                   "--speculative-num-steps", str(_STEPS), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(_STEPS + 1), "--disable-radix-cache"),
    "EAGLE": ("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "{eagle}",
              "--speculative-num-steps", str(_STEPS), "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", str(_STEPS + 1)),
    "EAGLE-tree": ("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "{eagle}",
                   "--speculative-num-steps", str(_STEPS), "--speculative-eagle-topk", "2",
                   "--speculative-num-draft-tokens", "6"),
}


@dataclass
class SpecRun:
    algorithm: str
    version: str
    answers: dict[str, dict[str, object]] = field(default_factory=dict)
    server_info: dict[str, object] = field(default_factory=dict)
    metrics: str = ""
    log: str = ""


def _spec_release(release: str) -> str:
    if Version(release) < Version(SPEC_SINCE):
        pytest.skip(f"sglang {release}: no override_platform to keep intel_amx on a CPU without AMX")
    return release


@pytest.fixture(scope="module")
def eagle_draft(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_eagle_draft(tmp_path_factory.mktemp("tiny-eagle"), tiny_llama)


def _serve(server: CpuServer, algorithm: str) -> SpecRun:
    run = SpecRun(algorithm, server.version)
    for prompt in SPEC_PROMPTS:
        run.answers[prompt] = server.generate({"text": prompt, "sampling_params": {
            "max_new_tokens": SPEC_MAX_NEW_TOKENS, "temperature": 0}}, timeout=600)
    info = server.json("GET", contract.SERVER_INFO_PATHS[0])
    assert isinstance(info, dict)
    run.server_info = info
    run.metrics = server.request("GET", contract.METRICS_PATH)[1].decode()
    return run


@pytest.fixture(scope="module", params=sorted(ALGORITHMS))
def spec_run(request: pytest.FixtureRequest, release: str, tiny_llama: Path, eagle_draft: Path,
             tmp_path_factory: pytest.TempPathFactory) -> SpecRun:
    version = _spec_release(release)
    algorithm = str(request.param)
    flags = [f.format(target=tiny_llama, eagle=eagle_draft) for f in ALGORITHMS[algorithm]]
    log = tmp_path_factory.mktemp(f"spec-{algorithm}") / f"sglang-{version}.log"
    server = start_cpu_server(version, tiny_llama, log, [*flags, "--enable-metrics"], env={AMX_ENV: "1"},
                              defaults=_CPU)
    try:
        run = _serve(server, algorithm)
    finally:
        stopped = stop_cpu_server(server)
    run.log = server.log_text()
    assert stopped.survivors == (), f"{algorithm}: left after SIGTERM: {stopped.survivors}"
    return run


def _meta(run: SpecRun, prompt: str) -> dict[str, object]:
    meta = run.answers[prompt]["meta_info"]
    assert isinstance(meta, dict)
    return meta


def test_speculation_does_not_change_greedy_output(spec_run: SpecRun, plain_server: Observations) -> None:
    for prompt in SPEC_PROMPTS:
        assert spec_run.answers[prompt]["output_ids"] == plain_server.greedy[prompt], (
            f"{spec_run.algorithm} on real sglang {spec_run.version}: greedy output differs from the plain server's "
            f"for {prompt!r}")


def test_the_intel_amx_backend_was_kept(spec_run: SpecRun) -> None:
    assert spec_run.server_info.get("attention_backend") == "intel_amx", spec_run.server_info.get("attention_backend")
    assert "will fallback to torch_native" not in spec_run.log


def test_each_requests_accounting_adds_up(spec_run: SpecRun) -> None:
    for prompt in SPEC_PROMPTS:
        meta = _meta(spec_run, prompt)
        verify = meta["spec_verify_ct"]
        completion = meta["completion_tokens"]
        histogram = meta[contract.SPEC_HISTOGRAM_KEYS[0]]
        assert isinstance(verify, int) and isinstance(completion, int) and isinstance(histogram, list)
        assert meta["spec_accept_length"] == pytest.approx(completion / verify)
        assert sum(histogram) == verify, "every verify step lands in one bucket"
        assert sum(j * n for j, n in enumerate(histogram)) == meta["spec_num_correct_drafts"]


def test_speculative_contract_facts_hold_live(spec_run: SpecRun) -> None:
    problems = []
    for prompt in SPEC_PROMPTS:
        meta = _meta(spec_run, prompt)
        problems += [f"SPEC_META_INFO_KEYS: meta_info lacks {k}" for k in contract.SPEC_META_INFO_KEYS if k not in meta]
        if contract.SPEC_HISTOGRAM_KEYS[0] not in meta:
            problems.append(f"SPEC_HISTOGRAM_KEYS: meta_info lacks {contract.SPEC_HISTOGRAM_KEYS[0]}")
    spec_metrics = [n for n in contract.METRIC_NAMES if "spec_" in n]
    problems += [f"METRIC_NAMES: /metrics lacks {n}" for n in spec_metrics if n not in spec_run.metrics]
    assert not problems, f"real sglang {spec_run.version}, {spec_run.algorithm}: " + "; ".join(problems)


def _hf_simulation(version: str, model: Path, prompt: str) -> dict[str, dict[str, list[int]]]:
    python = venv_python(ensure_cpu_env(version))
    done = subprocess.run([str(python), str(Path(__file__).with_name("hf_spec_sim.py")), str(model), prompt,
                           str(SPEC_MAX_NEW_TOKENS), str(_STEPS), _SERVER_DTYPE], capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(STANDINS_DIR), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_standalone_self_draft_acceptance_is_eagles_shift(spec_run: SpecRun, tiny_llama: Path) -> None:
    if spec_run.algorithm != "STANDALONE":
        pytest.skip("the STANDALONE server only")
    for prompt in SPEC_PROMPTS:
        predicted = _hf_simulation(spec_run.version, tiny_llama, prompt)
        observed = _meta(spec_run, prompt)[contract.SPEC_HISTOGRAM_KEYS[0]]
        assert observed == predicted["shifted"]["histogram"], (
            f"STANDALONE self-draft on {prompt!r}: SGLang's histogram {observed}, transformers with EAGLE's one-token "
            f"shift predicts {predicted['shifted']['histogram']} (without it: {predicted['unshifted']['histogram']})")
        assert observed != predicted["unshifted"]["histogram"] or predicted["shifted"] == predicted["unshifted"]
