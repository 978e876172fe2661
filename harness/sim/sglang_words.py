"""SGLang's words as the reference server writes them: log lines, paths, keys, messages and defaults.

Each is copied from SGLang's source, with the file (under ``python/sglang/``) and its line in 0.5.14 and 0.5.15
written beside it, by the reference server's own hand: it imports nothing from the harness's contract
(``harness.contract.facts``), which records the same facts for the harness to read SGLang by. The two are
independent spellings of one source; ``tests/sim/test_spelling.py`` holds them equal word for word and names
the fact that differs. So an end-to-end test on the reference server checks the harness against words it did
not take from its own constants.
"""

from __future__ import annotations

from typing import Final

__all__ = ["AUTH_EXEMPT_PREFIXES", "CHILD_CRASHED_LINE", "CHILD_FAILED_LINE", "CHILD_FAILED_RUNNING_LINE",
           "DRAFT_QUANTIZATION_UNQUANT", "ENV_FALSE", "ENV_TRUE", "FROZEN_KV_MTP_MAX_RUNNING_DEFAULT",
           "GENERATE_PATH", "HEALTH_CHECK_INPUT_IDS", "HEALTH_CHECK_POLL_S", "HEALTH_CHECK_RID_PREFIX",
           "HEALTH_CHECK_TIMEOUT_ENV", "HEALTH_CHECK_TIMEOUT_S", "HEALTH_GENERATION_DEFAULT",
           "HEALTH_GENERATION_ENV", "HEALTH_PATH", "HEALTH_STARTING_STATUS", "READY_LINE", "SIGTERM_DRAIN_LINE",
           "SIGTERM_CLEAN_EXIT", "SIGTERM_CLEAN_EXIT_SINCE", "SIGTERM_FORCE_ENV", "SIGTERM_LINE",
           "SIGTERM_SCHEDULER_WAIT_S", "SIGTERM_SELF_KILL", "UNAUTHORIZED_ERROR", "UVICORN_RUNNING",
           "WARMUP_CHAT_PATH", "WARMUP_FAILED_LINE", "WARMUP_IMAGE_PROMPT", "WARMUP_IMAGE_SOFT_TOKENS_GEMMA4",
           "WARMUP_MAX_NEW_TOKENS", "WARMUP_TEXT"]

# -- The HTTP API ----------------------------------------------------------------------------------------

# srt/entrypoints/http_server.py 0.5.14:765, 0.5.15:786: "/generate",
GENERATE_PATH: Final = '/generate'

# srt/entrypoints/http_server.py 0.5.14:561, 0.5.15:578: @app.get("/health")
HEALTH_PATH: Final = '/health'

# srt/entrypoints/http_server.py 0.5.14:575, 0.5.15:592: server_status == ServerStatus.Starting:
# srt/entrypoints/http_server.py 0.5.14:576, 0.5.15:593: return Response(status_code=503)
HEALTH_STARTING_STATUS: Final = 503

# srt/utils/auth.py 0.5.14:100, 0.5.15:100: path.startswith("/health")
# srt/utils/auth.py 0.5.14:100, 0.5.15:100: path.startswith("/metrics")
# srt/utils/auth.py 0.5.14:144, 0.5.15:144: return AuthDecision(allowed=_check_bearer_token(authorization_heade...
AUTH_EXEMPT_PREFIXES: Final = ('/health', '/metrics')

# srt/utils/auth.py 0.5.14:191, 0.5.15:191: "Unauthorized"
UNAUTHORIZED_ERROR: Final = 'Unauthorized'

# -- /health's generation check --------------------------------------------------------------------------

# srt/environ.py 0.5.14:716, 0.5.15:765: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(True)
# srt/entrypoints/http_server.py 0.5.14:579, 0.5.15:596: not envs.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION.get()
HEALTH_GENERATION_ENV: Final = 'SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION'

# srt/environ.py 0.5.14:716, 0.5.15:765: SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(True)
HEALTH_GENERATION_DEFAULT: Final = True

# srt/entrypoints/http_server.py 0.5.14:182, 0.5.15:186: HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT...
HEALTH_CHECK_TIMEOUT_ENV: Final = 'SGLANG_HEALTH_CHECK_TIMEOUT'

# srt/entrypoints/http_server.py 0.5.14:182, 0.5.15:186: HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT...
HEALTH_CHECK_TIMEOUT_S: Final = 20

# srt/entrypoints/http_server.py 0.5.14:616, 0.5.15:633: await asyncio.sleep(1)
HEALTH_CHECK_POLL_S: Final = 1.0

# srt/entrypoints/http_server.py 0.5.14:584, 0.5.15:601: sampling_params = {"max_new_tokens": 1, "temperature": 0.0}
# srt/entrypoints/http_server.py 0.5.14:592, 0.5.15:609: input_ids=[0],
HEALTH_CHECK_INPUT_IDS: Final = (0,)

# srt/constants.py 0.5.14:12, 0.5.15:12: HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"
HEALTH_CHECK_RID_PREFIX: Final = 'HEALTH_CHECK'

# -- Environment booleans (EnvBool, case-insensitive) ----------------------------------------------------

# srt/environ.py 0.5.14:122, 0.5.15:117: if value in ["true", "1", "yes", "y"]:
ENV_TRUE: Final = ('true', '1', 'yes', 'y')

# srt/environ.py 0.5.14:124, 0.5.15:119: if value in ["false", "0", "no", "n"]:
ENV_FALSE: Final = ('false', '0', 'no', 'n')

# -- Start-up and warm-up --------------------------------------------------------------------------------

# uvicorn's own start line (uvicorn/server.py), printed through SGLang's uvicorn log config
UVICORN_RUNNING: Final = 'Uvicorn running on'

# srt/entrypoints/http_server.py 0.5.14:2145, 0.5.15:2169: logger.info("The server is fired up and ready to roll!")
READY_LINE: Final = 'The server is fired up and ready to roll!'

# srt/entrypoints/http_server.py 0.5.14:2050, 0.5.15:2074: json_data["text"] = ["The capital city of France is"] * server_...
WARMUP_TEXT: Final = 'The capital city of France is'

# srt/entrypoints/http_server.py 0.5.14:2007, 0.5.15:2031: max_new_tokens = 8 if model_info["is_generation"] else 1
WARMUP_MAX_NEW_TOKENS: Final = 8

# srt/entrypoints/http_server.py 0.5.14:1999, 0.5.15:2023: is_vlm = bool(model_info.get("has_image_understanding", False))
# srt/entrypoints/http_server.py 0.5.14:2002, 0.5.15:2026: request_name = "/v1/chat/completions"
# srt/entrypoints/http_server.py 0.5.14:658, 0.5.15:675: "has_image_understanding": model_config.is_image_understandable_m...
# srt/configs/model_config.py 0.5.14:400, 0.5.15:405: self.is_image_understandable_model = enable_multimodal and hasattr(
WARMUP_CHAT_PATH: Final = '/v1/chat/completions'

# srt/entrypoints/http_server.py 0.5.14:2040, 0.5.15:2064: "text": "Describe the image.",
# srt/entrypoints/http_server.py 0.5.14:1965, 0.5.15:1989: MINIMUM_PNG_PICTURE_BASE64 =
WARMUP_IMAGE_PROMPT: Final = 'Describe the image.'

# not SGLang's code: what transformers' Gemma-4 image processor (as pinned by 0.5.14/0.5.15) makes of the warm-up PNG
WARMUP_IMAGE_SOFT_TOKENS_GEMMA4: Final = 256

# srt/entrypoints/http_server.py 0.5.14:2120, 0.5.15:2144: logger.error(f"Initialization failed. warmup error: {last_trace...
WARMUP_FAILED_LINE: Final = 'Initialization failed. warmup error:'

# -- A child process that dies ---------------------------------------------------------------------------

# srt/entrypoints/engine.py 0.5.14:885, 0.5.15:897: subprocess_watchdog = SubprocessWatchdog(
# srt/entrypoints/engine.py 0.5.14:882, 0.5.15:894: names = [f"scheduler_{i}" for i in range(len(processes))]
# srt/entrypoints/http_server.py 0.5.14:2276, 0.5.15:2300: tokenizer_manager._subprocess_watchdog = subprocess_watchdog
# srt/utils/watchdog.py 0.5.14:213, 0.5.15:213: if proc.is_alive() or proc.exitcode == 0:
# srt/utils/watchdog.py 0.5.14:217, 0.5.15:217: f"Subprocess {name} (pid={proc.pid}) crashed "
# srt/utils/watchdog.py 0.5.14:219, 0.5.15:219: f"Triggering SIGQUIT for cleanup..."
# srt/utils/watchdog.py 0.5.14:221, 0.5.15:221: os.kill(os.getpid(), signal.SIGQUIT)
CHILD_CRASHED_LINE: Final = 'Triggering SIGQUIT for cleanup...'

# srt/entrypoints/engine.py 0.5.14:1303, 0.5.15:1328: Received sigquit from a child process. It usually means the child f...
CHILD_FAILED_LINE: Final = 'Received sigquit from a child process. It usually means the child failed.'

# srt/managers/tokenizer_manager.py 0.5.14:581, 0.5.15:594: self.auto_create_handle_loop()
# srt/managers/tokenizer_manager.py 0.5.14:1799, 0.5.15:1822: def auto_create_handle_loop(self):
# srt/managers/tokenizer_manager.py 0.5.14:1817, 0.5.15:1840: signal.SIGQUIT, signal_handler.running_phase_sigquit_handler
# srt/managers/tokenizer_manager.py 0.5.14:3096, 0.5.15:3129: f"SIGQUIT received. {signum=}, {frame=}. It usually means on...
CHILD_FAILED_RUNNING_LINE: Final = 'It usually means one child failed.'

# -- SIGTERM ---------------------------------------------------------------------------------------------

# srt/managers/tokenizer_manager.py 0.5.14:1814, 0.5.15:1837: loop.add_signal_handler(signal.SIGTERM, signal_handler.sigte...
# srt/managers/tokenizer_manager.py 0.5.14:3090, 0.5.15:3123: f"SIGTERM received. {signum=} {frame=}. Draining requests an...
# srt/managers/tokenizer_manager.py 0.5.14:3092, 0.5.15:3125: self.tokenizer_manager.gracefully_exit = True
SIGTERM_LINE: Final = 'Draining requests and shutting down...'

# srt/managers/tokenizer_manager.py 0.5.14:2639, 0.5.15:2672: Gracefully exiting... Remaining number of requests {remain_n...
# srt/managers/tokenizer_manager.py 0.5.14:2618, 0.5.15:2651: remain_num_req = len(self.rid_to_state)
SIGTERM_DRAIN_LINE: Final = 'Gracefully exiting... Remaining number of requests'

# srt/managers/tokenizer_manager.py 0.5.14:2630, 0.5.15:2663: elif get_bool_env_var("SGL_FORCE_SHUTDOWN"):
SIGTERM_FORCE_ENV: Final = 'SGL_FORCE_SHUTDOWN'

# srt/managers/tokenizer_manager.py 0.5.14:2651, 0.5.15:absent: self.send_to_scheduler.send_pyobj(ShutdownReq())
# srt/managers/tokenizer_manager.py 0.5.14:absent, 0.5.15:2684: self._dispatch_to_scheduler(ShutdownReq())
# srt/managers/tokenizer_manager.py 0.5.14:2652, 0.5.15:2685: deadline = time.monotonic() + 15
SIGTERM_SCHEDULER_WAIT_S: Final = 15.0

# The launcher's wait status after the drain, which changed at 0.5.19 (the reference server follows --sim-rules,
# harness.sim.release_rules). Up to 0.5.18 the watchdog kills its tree with itself in it:
# srt/managers/tokenizer_manager.py 0.5.14:2655, 0.5.15:2688, 0.5.18:3157: kill_process_tree(os.getpid(), include_parent=True)
# srt/utils/common.py 0.5.14:1289, 0.5.15:2001, 0.5.18:2260: itself.kill()
SIGTERM_SELF_KILL: Final = -9
# From 0.5.19 it kills only its children, then exits 0 (0.5.19) or stops uvicorn through its hook (0.5.20 on):
# srt/managers/tokenizer_manager.py 0.5.19:3177, 0.5.21:3352: kill_process_tree(os.getpid(), include_parent=False, wait_ti...
# srt/managers/tokenizer_manager.py 0.5.19:3178: sys.exit(0); 0.5.21:3362: self._server_stop_hook()
SIGTERM_CLEAN_EXIT: Final = 0
SIGTERM_CLEAN_EXIT_SINCE: Final = '0.5.19'

# -- Frozen-KV MTP's defaults ----------------------------------------------------------------------------

# srt/arg_groups/speculative_hook.py 0.5.14:245, 0.5.15:299: def _handle_frozen_kv_mtp(server_args: ServerArgs) -> None:
# srt/arg_groups/speculative_hook.py 0.5.14:247, 0.5.15:301: server_args.max_running_requests = 48
# srt/model_executor/runner/base_cuda_graph_runner.py 0.5.14:91, 0.5.15:91: capture_bs = [bs for bs in capture_bs if bs <=...
# srt/speculative/frozen_kv_mtp_cuda_graph_runner.py 0.5.14:117, 0.5.15:121: self.max_num_token = self.max_bs * self.num_t...
FROZEN_KV_MTP_MAX_RUNNING_DEFAULT: Final = 48

# srt/server_args.py 0.5.14:2801, 0.5.15:3037: self.speculative_draft_model_quantization = self.quantization
# srt/server_args.py 0.5.14:2802, 0.5.15:3047: self.speculative_draft_model_quantization == "unquant"
DRAFT_QUANTIZATION_UNQUANT: Final = 'unquant'
