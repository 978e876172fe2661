"""``harness.contract.facts`` against the real sglang 0.5.14 and 0.5.15 packages (the cached --no-deps environments).

Three kinds of check: every citation's text is on its line (and absent where the contract says so);
what runs on CPU runs (the flag parser's defaults, ``FINISH_ABORT.to_json``, the health handler and the
warm-up code, compiled from the release's own source and driven with stand-ins for the server's
state); and what the source spells is what the contract spells (rank tags, metric names).
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import textwrap
import time
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from harness.contract import facts as contract
from tests.real_sglang import RealSGLang, real_sglang

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=contract.VERSIONS)
def release(request: pytest.FixtureRequest) -> RealSGLang:
    return real_sglang(request.param)


def test_every_citation_is_on_its_line(release: RealSGLang) -> None:
    wrong = []
    for fact in contract.FACTS:
        for cite in fact.cites:
            where = cite.line(release.version)
            if not (release.package / cite.file).is_file():  # a file one release lacks (arg_groups/overrides.py)
                if where is not None:
                    wrong.append(f"{fact.name}: {cite.file} is missing")
                continue
            lines = release.source(cite.file).splitlines()
            if where is None:
                if any(cite.text in line for line in lines):
                    wrong.append(f"{fact.name}: {cite.text!r} should be absent from {cite.file}")
            elif where > len(lines) or cite.text not in lines[where - 1]:
                actual = [i + 1 for i, line in enumerate(lines) if cite.text in line]
                wrong.append(f"{fact.name}: {cite.file}:{where} lacks {cite.text!r} (found at {actual})")
    assert not wrong, "\n".join(wrong)


def test_string_facts_appear_in_their_citations() -> None:
    """A spelled-out value is spelled so in SGLang (ABORT_KEYS are checked by running ``to_json`` instead)."""
    for fact in contract.FACTS:
        if fact.name == "ABORT_KEYS":
            continue
        values = fact.value if isinstance(fact.value, tuple) else (fact.value,)
        for value in values:
            if isinstance(value, str):
                assert any(value.split("{")[0] in c.text for c in fact.cites), (fact.name, value)


# -- what the source spells ----------------------------------------------------------------------


def test_rank_tags_in_the_order_the_scheduler_builds_them(release: RealSGLang) -> None:
    tags = re.findall(r'prefix \+= f" (\w+)\{', release.source("srt/managers/scheduler.py"))
    assert tuple(tags) == contract.LOG_RANK_TAGS


def test_metric_names_are_registered(release: RealSGLang) -> None:
    names = set(re.findall(r'name="(sglang:\w+)"', release.source("srt/observability/metrics_collector.py")))
    assert set(contract.METRIC_NAMES) <= names


def test_fix_marker_only_after_the_fix(release: RealSGLang) -> None:
    worker = release.source("srt/speculative/frozen_kv_mtp_worker_v2.py")
    assert (contract.FIX_MARKER in worker) == (release.version == "0.5.15")


# -- what runs on CPU ----------------------------------------------------------------------------


def test_parser_defaults_and_flags(release: RealSGLang) -> None:
    code = textwrap.dedent(f"""
        import argparse, json
        from sglang.srt.server_args import ServerArgs
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        plain = vars(parser.parse_args(["--model-path", "m"]))
        flagged = vars(parser.parse_args(["--model-path", "m", "{contract.SKIP_SERVER_WARMUP_FLAG}",
                                          "--speculative-draft-model-quantization",
                                          "{contract.DRAFT_QUANTIZATION_UNQUANT}"]))
        print(json.dumps({{"plain": {{k: plain[k] for k in {list(contract.DEFAULTS)!r}}},
                          "skip": flagged["skip_server_warmup"],
                          "draft_q": flagged["speculative_draft_model_quantization"]}}))
    """)
    done = release.run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["plain"] == contract.DEFAULTS
    assert got["skip"] is True and got["draft_q"] == contract.DRAFT_QUANTIZATION_UNQUANT


def _compile_functions(source: str, filename: str, names: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """Compile the release's own top-level functions/classes/assignments ``names`` (decorators dropped)."""
    tree = ast.parse(source, filename)
    picked: list[ast.stmt] = []
    for node in tree.body:
        name = getattr(node, "name", None)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in names:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                node.decorator_list = []
            picked.append(node)
    assert {getattr(n, "name", None) or n.targets[0].id for n in picked} == set(names)  # type: ignore[attr-defined]
    import __future__

    # its module imports need packages a --no-deps environment lacks, so the functions are compiled alone
    code = compile(ast.Module(body=picked, type_ignores=[]), filename, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)  # the release's own code, compiled from its file
    return namespace


def test_abort_reason_shape(release: RealSGLang) -> None:
    path = "srt/managers/schedule_batch.py"
    ns = _compile_functions(release.source(path), path, ("BaseFinishReason", "FINISH_ABORT"), {})
    reason = ns["FINISH_ABORT"]("client went away", status_code=503).to_json()
    assert tuple(reason) == contract.ABORT_KEYS
    assert reason["type"] == contract.ABORT_TYPE and reason["status_code"] == 503


class _Status:
    Starting, Up, UnHealthy = "Starting", "Up", "UnHealthy"


class _Response:
    def __init__(self, status_code: int = 200, **_: object) -> None:
        self.status_code = status_code


def _health_namespace(*, status: str, generation: bool, answers_after_s: float | None) -> dict[str, Any]:
    """Stand-ins for the server state ``health_generate`` reads; the scheduler answers after ``answers_after_s``."""
    manager = types.SimpleNamespace(
        gracefully_exit=False, server_status=status, is_generation=True, last_receive_tstamp=0.0,
        rid_to_state={}, server_args=types.SimpleNamespace(disaggregation_mode="null"), sent=[],
    )

    async def generate_request(obj: Any, request: Any) -> AsyncIterator[dict[str, Any]]:
        manager.sent.append(obj)
        if answers_after_s is not None:
            await asyncio.sleep(answers_after_s)
            manager.last_receive_tstamp = time.time()
        yield {}
        await asyncio.sleep(3600)

    manager.generate_request = generate_request
    env = types.SimpleNamespace(get=lambda: generation)
    return {
        "_global_state": types.SimpleNamespace(tokenizer_manager=manager), "ServerStatus": _Status,
        "envs": types.SimpleNamespace(SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=env), "Response": _Response,
        "HEALTH_CHECK_RID_PREFIX": contract.HEALTH_CHECK_RID_PREFIX, "HEALTH_CHECK_TIMEOUT": 3,
        "GenerateReqInput": lambda **kw: types.SimpleNamespace(**kw), "EmbeddingReqInput": None,
        "DisaggregationMode": types.SimpleNamespace(NULL=types.SimpleNamespace(value="null")),
        "FAKE_BOOTSTRAP_HOST": "x", "asyncio": asyncio, "time": time, "logger": types.SimpleNamespace(
            info=lambda *a, **k: None, error=lambda *a, **k: None), "uuid": __import__("uuid"),
    }


def _run_health(release: RealSGLang, path: str, **state: Any) -> tuple[int, float, dict[str, Any]]:
    http = "srt/entrypoints/http_server.py"
    ns = _compile_functions(release.source(http), http, ("health_generate",), _health_namespace(**state))
    request = types.SimpleNamespace(url=types.SimpleNamespace(path=path))
    started = time.monotonic()
    response = asyncio.run(ns["health_generate"](request))
    return response.status_code, time.monotonic() - started, ns


def test_health_is_503_while_starting(release: RealSGLang) -> None:
    for path in (contract.HEALTH_PATH, contract.HEALTH_GENERATE_PATH):
        status, elapsed, _ = _run_health(release, path, status=_Status.Starting, generation=True, answers_after_s=0)
        assert status == contract.HEALTH_STARTING_STATUS and elapsed < 0.5


def test_health_generates_one_token_and_takes_at_least_the_poll_interval(release: RealSGLang) -> None:
    status, elapsed, ns = _run_health(release, contract.HEALTH_PATH, status=_Status.Up, generation=True,
                                      answers_after_s=0.05)
    assert status == 200
    assert elapsed >= contract.HEALTH_CHECK_POLL_S  # why a probe timeout of 1 s never sees an answer
    assert elapsed < contract.HEALTH_PROBE_TIMEOUT_S
    (sent,) = ns["_global_state"].tokenizer_manager.sent
    assert tuple(sent.input_ids) == contract.HEALTH_CHECK_INPUT_IDS
    assert sent.sampling_params == {"max_new_tokens": 1, "temperature": 0.0}
    assert sent.rid.startswith(contract.HEALTH_CHECK_RID_PREFIX)


def test_health_without_generation_answers_at_once_on_health_only(release: RealSGLang) -> None:
    status, elapsed, _ = _run_health(release, contract.HEALTH_PATH, status=_Status.Up, generation=False,
                                     answers_after_s=None)
    assert status == 200 and elapsed < 0.5
    # /health_generate still generates; with no answer it ends 503 after the (shortened) timeout
    status, _, ns = _run_health(release, contract.HEALTH_GENERATE_PATH, status=_Status.Up, generation=False,
                                answers_after_s=None)
    assert status == 503 and ns["_global_state"].tokenizer_manager.server_status == _Status.UnHealthy


def _run_warmup(release: RealSGLang, model_info: dict[str, Any], *, skip: bool = False,
                warmup_ok: bool = True) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Run the release's ``_wait_and_warmup`` and ``_execute_server_warmup`` with stand-in HTTP and logging."""
    posts: list[tuple[str, dict[str, Any]]] = []
    logged: list[str] = []

    def post(url: str, json: dict[str, Any], **_: object) -> Any:
        posts.append((url, json))
        return types.SimpleNamespace(status_code=200 if warmup_ok else 500, text="", json=dict)

    def get(url: str, **_: object) -> Any:
        assert url.endswith(contract.WARMUP_MODEL_INFO_PATH)
        return types.SimpleNamespace(status_code=200, text="", json=lambda: model_info)

    killed: list[int] = []
    ns: dict[str, Any] = {
        "requests": types.SimpleNamespace(get=get, post=post,
                                          exceptions=types.SimpleNamespace(RequestException=OSError)),
        "time": types.SimpleNamespace(sleep=lambda s: None, time=time.time),
        "logger": types.SimpleNamespace(info=lambda m, *a: logged.append(str(m) % a if a else str(m)),
                                        error=lambda m, *a: logged.append(str(m))),
        "get_exception_traceback": lambda: "Traceback ...", "kill_process_tree": killed.append,
        "is_mps": lambda: False, "os": types.SimpleNamespace(getpid=lambda: 1),
        "envs": types.SimpleNamespace(SGLANG_WARMUP_TIMEOUT=types.SimpleNamespace(get=lambda: -1)),
        "_global_state": types.SimpleNamespace(tokenizer_manager=types.SimpleNamespace(
            served_model_name="m", server_status=_Status.Starting)),
        "ServerStatus": _Status, "FAKE_BOOTSTRAP_HOST": "x", "np": None, "Optional": None, "Callable": None,
        "ServerArgs": None, "delete_directory": None, "_wait_weights_ready": None,
    }
    http = "srt/entrypoints/http_server.py"
    _compile_functions(release.source(http), http,
                       ("MINIMUM_PNG_PICTURE_BASE64", "_execute_server_warmup", "_wait_and_warmup"), ns)
    args = types.SimpleNamespace(
        url=lambda: "http://127.0.0.1:30000", api_key=None, ssl_verify=lambda: True, skip_tokenizer_init=False,
        dp_size=1, tp_size=1, disaggregation_mode="null", debug_tensor_dump_input_file=None,
        checkpoint_engine_wait_weights_before_ready=False, skip_server_warmup=skip, delete_ckpt_after_loading=False,
    )
    ns["_wait_and_warmup"](args, None, ns["_execute_server_warmup"])
    return posts, logged


def test_warmup_of_a_multimodal_model_is_a_chat_with_an_image_and_8_tokens(release: RealSGLang) -> None:
    posts, logged = _run_warmup(release, {"is_generation": True, "has_image_understanding": True})
    ((url, body),) = posts
    assert url.endswith(contract.WARMUP_CHAT_PATH)
    assert body["max_tokens"] == contract.WARMUP_MAX_NEW_TOKENS
    content = body["messages"][0]["content"]
    assert [c["type"] for c in content] == ["image_url", "text"]
    assert content[1]["text"] == contract.WARMUP_IMAGE_PROMPT
    assert logged[-1] == contract.READY_LINE


def test_warmup_of_a_text_model_is_generate_with_8_tokens(release: RealSGLang) -> None:
    posts, logged = _run_warmup(release, {"is_generation": True, "has_image_understanding": False})
    ((url, body),) = posts
    assert url.endswith(contract.GENERATE_PATH)
    assert body["text"] == contract.WARMUP_TEXT
    assert body["sampling_params"]["max_new_tokens"] == contract.WARMUP_MAX_NEW_TOKENS
    assert logged[-1] == contract.READY_LINE


def test_skip_warmup_sends_nothing_and_is_ready_at_once(release: RealSGLang) -> None:
    posts, logged = _run_warmup(release, {"is_generation": True}, skip=True)
    assert posts == [] and logged == [contract.READY_LINE]


def test_failed_warmup_never_prints_the_ready_line(release: RealSGLang) -> None:
    posts, logged = _run_warmup(release, {"is_generation": True, "has_image_understanding": True}, warmup_ok=False)
    assert len(posts) == 1
    assert contract.READY_LINE not in logged
    assert any(line.startswith(contract.WARMUP_FAILED_LINE) for line in logged)


def test_gemma4_image_processor_makes_256_soft_tokens_of_the_warmup_image(release: RealSGLang) -> None:
    """Measured with the transformers each release's environment pins: the image part of Gemma-4's warm-up prompt."""
    code = textwrap.dedent("""
        import base64, io, re, sys
        from PIL import Image
        from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
        source = open(sys.argv[1], encoding="utf-8").read()
        png = re.search(r'MINIMUM_PNG_PICTURE_BASE64 = "([^"]+)"', source).group(1)
        image = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
        print(image.size[0], image.size[1], Gemma4ImageProcessorPil()(images=[image])["num_soft_tokens_per_image"][0])
    """)
    script = code.replace("sys.argv[1]", repr(str(release.package / "srt/entrypoints/http_server.py")))
    done = release.run(script)
    assert done.returncode == 0, done.stderr[-2000:]
    width, height, soft = map(int, done.stdout.split()[-3:])
    assert (width, height) == (contract.WARMUP_IMAGE_PX, contract.WARMUP_IMAGE_PX)
    assert soft == contract.WARMUP_IMAGE_SOFT_TOKENS_GEMMA4


def test_the_harness_takes_its_constants_from_the_contract_and_the_reference_server_spells_its_own() -> None:
    """The harness reads SGLang by the contract's words; the reference server writes SGLang's words in its own
    code (harness.sim.sglang_words), equal but not the same object: tests/sim/test_spelling.py holds them equal."""
    from harness.server import process as server
    from harness.sim import server as sim_server

    assert server.READY_LINE is contract.READY_LINE
    assert sim_server.READY_LINE == contract.READY_LINE
    assert "from harness.contract" not in Path(sim_server.__file__).read_text(encoding="utf-8")


def test_sigterms_last_step_kills_the_launcher_itself(release: RealSGLang) -> None:
    """The end of SGLang's SIGTERM path, run from the release itself: ``kill_process_tree(os.getpid(),
    include_parent=True)`` SIGKILLs the calling process (SIGTERM_SELF_KILL), so the sys.exit(0) after it never
    runs."""
    code = ("import os\nfrom sglang.srt.utils.common import kill_process_tree\n"
            "kill_process_tree(os.getpid(), include_parent=True)\nprint('survived')")
    done = release.run(code)
    assert done.returncode == contract.SIGTERM_SELF_KILL, (done.returncode, done.stderr[-2000:])
    assert "survived" not in done.stdout
