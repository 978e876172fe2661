"""The seed's bug on real SGLang (issue 51): real 0.5.14 crashes, real 0.5.15 serves, on this CPU.

A tiny random Gemma-4 target and a ``Gemma4AssistantForCausalLM`` draft made at test time
(:mod:`harness.build.sglang_cpu.tiny_gemma4`), the seed's flags (``--speculative-algorithm NEXTN
--speculative-num-steps 1 --disable-cuda-graph --attention-backend triton --disable-overlap-schedule``), 276
``input_ids`` and ``max_new_tokens`` 8. SGLang's warm-up is skipped so the request that crashes is the seed's
own 276-token one (with the warm-up, 0.5.14 already dies on its warm-up prompt, the same message with that
prompt's length). Real SGLang, plain-torch kernels, CPU: every frame below is SGLang's own code.

The greedy tokens of the real server, with and without speculation, are held to Hugging Face transformers'
``generate`` on the same weights, run in the release's own interpreter. The server runs in float32 (Gemma 4
defaults to bfloat16, ``model_config.py`` "we downcast float32 to bfloat16"), as the reference does.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.build.environments import venv_python
from harness.build.sglang_cpu import LABEL, ensure_cpu_env
from tests.helpers import free_port
from tests.sglang_cpu.live import CpuServer, running_server, start_cpu_server, stop_cpu_server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]

TINY_GEMMA4 = Path(__file__).resolve().parents[2] / "harness" / "build" / "sglang_cpu" / "tiny_gemma4.py"
PROMPT_LEN, MAX_NEW = 276, 8
SEED_MESSAGE = "RuntimeError: output with shape [1] doesn't match the broadcast shape [276]"
# The seed's traceback from the draft worker down (issue 51; the 0.5.14 file:line of each frame).
SEED_FRAMES = (
    ("srt/speculative/frozen_kv_mtp_worker_v2.py", 765, "forward_batch_generation"),
    ("srt/speculative/frozen_kv_mtp_worker_v2.py", 455, "draft"),
    ("srt/speculative/frozen_kv_mtp_worker_v2.py", 527, "draft_forward"),
    ("srt/model_executor/model_runner.py", 2939, "forward"),
    ("srt/model_executor/model_runner.py", 3065, "_forward_raw"),
    ("srt/model_executor/runner/eager_runner.py", 193, "execute"),
    ("srt/model_executor/runner/eager_runner.py", 222, "_execute_decode"),
    ("srt/model_executor/runner/eager_runner.py", 174, "load_batch"),
    ("srt/model_executor/cuda_graph_buffer_registry.py", 463, "fill_from"),
)
_FRAME = re.compile(r'File "(?P<path>[^"]*/sglang/(?P<rel>srt/[^"]+))", line (?P<line>\d+), in (?P<fn>\w+)')
CRASH_WAIT_S = 120.0

HF_GREEDY = """
import json, sys, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
ids = json.loads(sys.argv[2])
with torch.no_grad():
    out = model.generate(torch.tensor([ids]), max_new_tokens=int(sys.argv[3]), min_new_tokens=int(sys.argv[3]),
                         do_sample=False)
print(json.dumps(out[0, len(ids):].tolist()))
"""


@dataclass(frozen=True)
class TinyGemma4:
    target: Path
    draft: Path


@pytest.fixture(scope="module")
def tiny_gemma4(tmp_path_factory: pytest.TempPathFactory) -> TinyGemma4:
    """Made with transformers' own classes, in the real-SGLang environment's interpreter (the harness has none)."""
    python = venv_python(ensure_cpu_env("0.5.15"))
    dest = tmp_path_factory.mktemp("tiny-gemma4")
    done = subprocess.run([str(python), str(TINY_GEMMA4), str(dest), "--seed", "0"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    made = json.loads(done.stdout.strip().splitlines()[-1])
    return TinyGemma4(Path(made["target"]), Path(made["draft"]))


@pytest.fixture(scope="module")
def prompt_ids() -> list[int]:
    rng = random.Random(276)
    return [rng.randrange(4, 512) for _ in range(PROMPT_LEN)]  # ids 0-3 are the tokenizer's specials


def _flags(model: TinyGemma4, *, speculative: bool) -> list[str]:
    flags = ["--attention-backend", "triton", "--disable-overlap-schedule", "--skip-server-warmup", "--dtype", "float32"]
    if speculative:
        flags += ["--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", str(model.draft),
                  "--speculative-num-steps", "1", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]
    return flags


def _env() -> dict[str, str]:
    # 0.5.14/0.5.15 validate port + 10000 as a gRPC port (server_args.py 0.5.14 :2761-2769) even with gRPC off.
    return {"SGLANG_GRPC_PORT": str(free_port())}


def _wait_http(server: CpuServer, timeout: float = 120.0) -> None:
    """With the warm-up skipped SGLang logs its ready line before uvicorn listens: wait for /health to answer 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.proc.poll() is None:
        try:
            if server.request("GET", "/health", timeout=5.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"sglang {server.version}: /health never answered 200:\n{server.log_text()[-3000:]}")


def _generate(server: CpuServer, ids: list[int]) -> tuple[int, dict[str, object] | None, float]:
    _wait_http(server)
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0}}
    try:
        status, data, seconds = server.request("POST", "/generate", body, timeout=300)
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0, None, 0.0  # the server went away without answering
    return status, (json.loads(data) if status == 200 else None), seconds


@dataclass(frozen=True)
class Crash:
    status: int
    log: str
    ready_s: float


@pytest.fixture(scope="module")
def crash_0_5_14(tiny_gemma4: TinyGemma4, prompt_ids: list[int], tmp_path_factory: pytest.TempPathFactory) -> Crash:
    """The seed's request on 0.5.14, sent from a thread while the log is watched for the scheduler's exception.

    After the scheduler dies, SGLang's launcher waits 5 s plus 60 s "for CUDA coredumps" before it kills its tree
    and the request's connection closes; the log already holds the traceback, so the tree is killed at once.
    """
    log = tmp_path_factory.mktemp("sglang-0.5.14-seed") / "server.log"
    server = start_cpu_server("0.5.14", tiny_gemma4.target, log, _flags(tiny_gemma4, speculative=True), env=_env())
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            _wait_http(server)
            request = pool.submit(_generate, server, prompt_ids)
            deadline = time.monotonic() + CRASH_WAIT_S
            while "RuntimeError" not in server.log_text() and not request.done() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1.0)  # the rest of the traceback's lines
            text = server.log_text()
        finally:
            stop_cpu_server(server, signal.SIGKILL, grace=10.0)
        status = request.result(timeout=60)[0]
    return Crash(status, text, server.ready_s or 0.0)


@dataclass(frozen=True)
class Served:
    status: int
    answer: dict[str, object] | None
    log: str
    ready_s: float
    request_s: float


def _serve(version: str, model: TinyGemma4, ids: list[int], log: Path, *, speculative: bool) -> Served:
    with running_server(version, model.target, log, _flags(model, speculative=speculative), env=_env()) as server:
        status, answer, seconds = _generate(server, ids)
        return Served(status, answer, server.log_text(), server.ready_s or 0.0, seconds)


@pytest.fixture(scope="module")
def served_0_5_15(tiny_gemma4: TinyGemma4, prompt_ids: list[int], tmp_path_factory: pytest.TempPathFactory) -> Served:
    return _serve("0.5.15", tiny_gemma4, prompt_ids, tmp_path_factory.mktemp("sglang-0.5.15-seed") / "server.log",
                  speculative=True)


@pytest.fixture(scope="module")
def plain_0_5_15(tiny_gemma4: TinyGemma4, prompt_ids: list[int], tmp_path_factory: pytest.TempPathFactory) -> Served:
    return _serve("0.5.15", tiny_gemma4, prompt_ids, tmp_path_factory.mktemp("sglang-0.5.15-plain") / "server.log",
                  speculative=False)


@pytest.fixture(scope="module")
def hf_tokens(tiny_gemma4: TinyGemma4, prompt_ids: list[int]) -> list[int]:
    python = venv_python(ensure_cpu_env("0.5.15"))
    done = subprocess.run([str(python), "-c", HF_GREEDY, str(tiny_gemma4.target), json.dumps(prompt_ids), str(MAX_NEW)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    tokens = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(tokens) == MAX_NEW
    return [int(t) for t in tokens]


def _scheduler_traceback(log: str) -> Iterator[tuple[str, str, int, str]]:
    """(path, path under sglang/, line, function) of each frame of the scheduler's exception, in order."""
    start = log.find("Scheduler hit an exception: Traceback")
    assert start >= 0, f"no scheduler exception in the log:\n{log[-3000:]}"
    block = log[start:log.find(SEED_MESSAGE, start) + len(SEED_MESSAGE)]
    for match in _FRAME.finditer(block):
        yield match["path"], match["rel"], int(match["line"]), match["fn"]


def test_0_5_14_crashes_with_the_seeds_message_from_sglangs_own_frames(crash_0_5_14: Crash) -> None:
    assert "Detected Gemma4AssistantForCausalLM draft; promoting --speculative-algorithm NEXTN to FROZEN_KV_MTP" \
        in crash_0_5_14.log
    assert crash_0_5_14.status != 200, "0.5.14 answered the seed's request"
    lines = crash_0_5_14.log.splitlines()
    assert SEED_MESSAGE in lines, f"the seed's message is not a line of the log:\n{crash_0_5_14.log[-3000:]}"
    frames = list(_scheduler_traceback(crash_0_5_14.log))
    tail = [(rel, line, fn) for _, rel, line, fn in frames][-len(SEED_FRAMES):]
    assert tail == list(SEED_FRAMES), "\n".join(f"{r}:{n} {f}" for r, n, f in tail)
    # The innermost frame is the CPU branch of fill_from: the installed source at that line is the plain copy.
    path, _, line, _ = frames[-1]
    assert Path(path).read_text(encoding="utf-8").splitlines()[line - 1].strip() == "dst.copy_(src)"
    # No kernel of this build is in the traceback: the shapes are SGLang's bookkeeping, not a port's output.
    assert "sglang_cpu_ports" not in crash_0_5_14.log[crash_0_5_14.log.find("Scheduler hit an exception"):]


def test_0_5_15_serves_the_seed_with_sglangs_own_acceptance(served_0_5_15: Served) -> None:
    assert "promoting --speculative-algorithm NEXTN to FROZEN_KV_MTP" in served_0_5_15.log
    assert served_0_5_15.status == 200 and served_0_5_15.answer is not None, served_0_5_15.log[-3000:]
    output_ids = served_0_5_15.answer["output_ids"]
    assert isinstance(output_ids, list) and len(output_ids) == MAX_NEW
    meta = served_0_5_15.answer["meta_info"]
    assert isinstance(meta, dict)
    assert meta["prompt_tokens"] == PROMPT_LEN and meta["completion_tokens"] == MAX_NEW
    # SGLang's own accounting (0.5.15 tokenizer_manager.py:2351-2364): prefill gives one token, each verify one
    # plus its correct drafts; accept length is completion tokens per verify, one draft proposed per verify.
    verify_ct, correct = int(meta["spec_verify_ct"]), int(meta["spec_num_correct_drafts"])
    assert verify_ct + correct == MAX_NEW - 1
    assert meta["spec_num_proposed_drafts"] == verify_ct
    assert meta["spec_accept_length"] == pytest.approx(MAX_NEW / verify_ct)
    assert "Traceback" not in served_0_5_15.log


def test_real_greedy_tokens_equal_transformers_with_and_without_speculation(
        served_0_5_15: Served, plain_0_5_15: Served, hf_tokens: list[int]) -> None:
    assert served_0_5_15.answer is not None and plain_0_5_15.answer is not None
    assert plain_0_5_15.answer["output_ids"] == hf_tokens, f"{LABEL}: plain server vs transformers"
    assert served_0_5_15.answer["output_ids"] == hf_tokens, f"{LABEL}: speculative server vs transformers"
