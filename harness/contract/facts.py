"""What the harness assumes about SGLang, in one place, each with the line of SGLang that backs it.

Every constant below is something the harness (or its reference server, ``harness/sim/``) relies on:
an endpoint, a request or response field, the stream's shape, a ``meta_info`` key, a metric name, a
log line, a rank tag, a flag and its default, the warm-up and health behaviour. :data:`FACTS` lists
them with a :class:`Cite` per source line: the file inside the ``sglang`` package, its line in 0.5.14
and in 0.5.15, and the text that line holds. ``tests/test_contract.py`` checks every citation against
the real 0.5.14 and 0.5.15 packages, and also runs what runs on CPU (the flag parser's defaults, the
abort reason's ``to_json``, the health/warm-up code read from the source), so a release that moves
or changes one of these fails a test instead of silently misleading the harness. The reference
server is tested against the same constants where it models them.

A line of ``None`` means "absent in that release" (and the test checks that it is absent).

Two kinds of fact, kept apart by :data:`NEEDS`: what the harness *reads through* (a drift ends a run as
``infra`` at pre-flight) and what a build *is* (kind "profile": the evidence behind
:mod:`harness.contract.profile`, never a gate). Any other release is located against the nearer cited one by
anchor text and enclosing function (:mod:`harness.contract.locate`: holds / moved / changed / gone); the
per-release lines are computed from the wheels, never typed here (``sglang-repro releases``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "ABORT_KEYS",
    "ABORT_TYPE",
    "AVG_ACCEPT_LENGTH_KEY",
    "CHILD_CRASHED_LINE",
    "CHILD_FAILED_LINE",
    "CHILD_FAILED_RUNNING_LINE",
    "CHILD_FAILED_SELF_KILL",
    "CHILD_POLL_S",
    "DEFAULTS",
    "DRAFT_GRAPH_PATH",
    "DRAFT_GRAPH_SWA_REFILL",
    "DRAFT_GRAPH_FUSED_SWA_LOC",
    "DRAFT_TOPK_BACKEND",
    "DRAFT_QUANTIZATION_UNQUANT",
    "ENV_FALSE",
    "ENV_TRUE",
    "FACTS",
    "NEEDS",
    "NEVER_GATES",
    "needs",
    "cited_files",
    "FIX_MARKER",
    "FROZEN_KV_MTP_MAX_RUNNING_DEFAULT",
    "AUTH_EXEMPT_PREFIXES",
    "FLUSH_CACHE_PATH",
    "GENERATE_PATH",
    "HEALTH_CHECK_INPUT_IDS",
    "HEALTH_CHECK_POLL_S",
    "HEALTH_CHECK_RID_PREFIX",
    "HEALTH_CHECK_TIMEOUT_ENV",
    "HEALTH_CHECK_TIMEOUT_S",
    "HEALTH_GENERATE_PATH",
    "HEALTH_GENERATION_DEFAULT",
    "HEALTH_GENERATION_ENV",
    "HEALTH_PATH",
    "HEALTH_PROBE_TIMEOUT_S",
    "HEALTH_STARTING_STATUS",
    "LOG_DATE_FORMAT",
    "LOG_OTHER_TAGS",
    "LOG_RANK_TAGS",
    "META_INFO_KEYS",
    "METRICS_PATH",
    "METRIC_NAMES",
    "MODELS_PATH",
    "MODEL_INFO_PATHS",
    "NO_ACCELERATOR",
    "READY_LINE",
    "RESOLVED_ATTENTION_KEYS",
    "REQUEST_FIELDS",
    "SAMPLING_PARAMS",
    "SCHEDULER_EXCEPTION",
    "SERVER_INFO_PATHS",
    "SIGTERM_CLEAN_EXIT",
    "SIGTERM_CLEAN_EXIT_SINCE",
    "SIGTERM_DRAIN_LINE",
    "SIGTERM_FORCE_ENV",
    "SIGTERM_LINE",
    "SIGTERM_POLL_S",
    "SIGTERM_SCHEDULER_WAIT_S",
    "SIGTERM_SELF_KILL",
    "sigterm_exit_status",
    "SKIP_SERVER_WARMUP_FLAG",
    "SPEC_META_INFO_KEYS",
    "SPEC_HISTOGRAM_KEYS",
    "CACHED_TOKENS_DETAILS_KEYS",
    "HICACHE_HOST_SIZE",
    "FLUSH_RESETS_TREE",
    "STREAM_DATA_PREFIX",
    "STREAM_DONE",
    "UNAUTHORIZED_ERROR",
    "UVICORN_RUNNING",
    "VERSIONS",
    "WARMUP_CHAT_PATH",
    "WARMUP_FAILED_LINE",
    "WARMUP_IMAGE_PROMPT",
    "WARMUP_IMAGE_PX",
    "WARMUP_IMAGE_SOFT_TOKENS_GEMMA4",
    "WARMUP_MAX_NEW_TOKENS",
    "WARMUP_MODEL_INFO_PATH",
    "WARMUP_TEXT",
    "Cite",
    "Fact",
    "Later",
    "Earlier",
    "FILE_MOVES",
    "FileMove",
]

VERSIONS: Final = ("0.5.14", "0.5.15")


@dataclass(frozen=True)
class Later:
    """From release ``since`` on, the cited behaviour is written ``text`` (in ``file``, or the citation's own file).

    A release that rewrites a line without changing what it does (a renamed local variable, a moved helper)
    keeps the fact: its new wording is recorded here, read in that release's wheel, so the contract check
    holds there instead of stopping every run at pre-flight.
    """

    since: str
    text: str | None
    file: str | None = None


@dataclass(frozen=True)
class Earlier:
    """Up to release ``until`` (inclusive), the cited behaviour is written ``text`` (in ``file``, or the citation's
    own). The releases before 0.5.14 declare ServerArgs' fields without annotations and keep the Frozen-KV MTP
    draft in ``frozen_kv_mtp_worker.py``: the same flag and default, other words (read in that release's wheel).

    ``text`` None (for either kind): in those releases the cited line is absent and the harness does not depend on
    it (the reason beside the record); it is checked absent there, as a citation line of None is."""

    until: str
    text: str | None
    file: str | None = None


@dataclass(frozen=True)
class Cite:
    """``text`` is on line ``v0514`` of ``sglang/<file>`` in 0.5.14 and line ``v0515`` in 0.5.15 (None: absent).

    ``later``: the wording of the same line in later releases (ordered by ``since``); an uncited release
    takes the last one whose ``since`` it has reached, else ``text``.
    """

    file: str
    v0514: int | None
    v0515: int | None
    text: str
    later: tuple[Later, ...] = ()
    earlier: tuple[Earlier, ...] = ()

    def line(self, version: str) -> int | None:
        return {"0.5.14": self.v0514, "0.5.15": self.v0515}[version]

    def files(self) -> tuple[str, ...]:
        """Every file the citation is read in, in some release (its own, its later and earlier wordings', and
        the file its own file's code lived in before, :data:`FILE_MOVES`)."""
        others = [w.file for w in self.later if w.file] + [w.file for w in self.earlier if w.file]
        moved = [m.file for m in FILE_MOVES.get(self.file, ())]
        return tuple(dict.fromkeys([self.file, *others, *moved]))


@dataclass(frozen=True)
class FileMove:
    """Up to release ``until`` (inclusive), the code of a cited file lives in ``file``: every citation of it is
    looked for there, in its own words unless an :class:`Earlier` wording says otherwise."""

    until: str
    file: str


@dataclass(frozen=True)
class Fact:
    """One assumption: the constant's name, its value, the lines that back it, and what it means."""

    name: str
    value: object
    cites: tuple[Cite, ...]
    note: str = ""


_HTTP = "srt/entrypoints/http_server.py"
_TM = "srt/managers/tokenizer_manager.py"
_SCHED = "srt/managers/scheduler.py"
_ARGS = "srt/server_args.py"
_METRICS = "srt/observability/metrics_collector.py"
_MREP = "srt/managers/scheduler_components/metrics_reporter.py"
_FKV = "srt/speculative/frozen_kv_mtp_worker_v2.py"
_FKVG = "srt/speculative/frozen_kv_mtp_cuda_graph_runner.py"
# Up to 0.5.13.post1 the draft worker lives here (frozen_kv_mtp_worker_v2.py is a 42-line subclass of it).
_FKV_OLD = "srt/speculative/frozen_kv_mtp_worker.py"
# The last release before 0.5.14 whose wordings the contract records (Earlier).
_E13 = "0.5.13.post1"
# Up to 0.5.13.post1 every citation of the v2 worker is read in the older file (0.5.13.post1: `draft` :563,
# `_init_draft_attn_backend` :210-220, `init_cuda_graphs` :321-322, the replay metadata :304-319); located, not
# assumed: a text the older file lacks is still changed or gone there.
FILE_MOVES: Final[dict[str, tuple[FileMove, ...]]] = {_FKV: (FileMove(_E13, _FKV_OLD),)}
_TRT = "srt/layers/attention/trtllm_mha_backend.py"
_TRITON = "srt/layers/attention/triton_backend.py"
_WD = "srt/utils/watchdog.py"
# From 0.5.20 ServerArgs' fields are declared per namespace here (server_args.py assembles them into one flat
# struct, so the parser's dests and /server_info's keys are the same names).
_F_SERVING = "srt/arg_groups/fields/serving.py"
_F_OBS = "srt/arg_groups/fields/observability.py"
_F_SPEC = "srt/arg_groups/fields/spec.py"
_F_EXEC = "srt/arg_groups/fields/exec_.py"
# The releases before 0.5.13 (0.5.12, 0.5.12.post1) keep the decode statistics in the scheduler's metrics mixin.
_E12 = "0.5.12.post1"
_MIXIN12 = "srt/observability/scheduler_metrics_mixin.py"
_OUT12 = "srt/managers/scheduler_output_processor_mixin.py"
_POOL_HOST = "srt/mem_cache/pool_host/base.py"
_ISTATE = "srt/managers/scheduler_components/internal_state.py"
_SERVING_HOOK = "srt/arg_groups/serving_hook.py"
_SIGTERM_KILL_CHILDREN = "kill_process_tree(os.getpid(), include_parent=False, wait_timeout=60)"

# -- readiness and health --------------------------------------------------------------------------

READY_LINE: Final = "The server is fired up and ready to roll!"
# uvicorn's own start line, printed through SGLang's uvicorn log config: the HTTP port is open (and
# /health answers 503) while the warm-up request runs, before READY_LINE.
UVICORN_RUNNING: Final = "Uvicorn running on"
HEALTH_PATH: Final = "/health"
HEALTH_GENERATE_PATH: Final = "/health_generate"
HEALTH_STARTING_STATUS: Final = 503
HEALTH_GENERATION_ENV: Final = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
HEALTH_GENERATION_DEFAULT: Final = True
HEALTH_CHECK_TIMEOUT_ENV: Final = "SGLANG_HEALTH_CHECK_TIMEOUT"
HEALTH_CHECK_TIMEOUT_S: Final = 20
HEALTH_CHECK_POLL_S: Final = 1.0  # health_generate sleeps this long before it first looks for an answer
# A probe must outwait one health generation (>= 1 s, up to HEALTH_CHECK_TIMEOUT_S), or readiness rests
# on the ready log line alone, which --log-level warning hides.
HEALTH_PROBE_TIMEOUT_S: Final = HEALTH_CHECK_TIMEOUT_S + 5.0
HEALTH_CHECK_INPUT_IDS: Final = (0,)
HEALTH_CHECK_RID_PREFIX: Final = "HEALTH_CHECK"
ENV_TRUE: Final = ("true", "1", "yes", "y")  # EnvBool, case-insensitive
ENV_FALSE: Final = ("false", "0", "no", "n")

# -- SGLang's own warm-up request, before READY_LINE -----------------------------------------------

WARMUP_MODEL_INFO_PATH: Final = "/model_info"
WARMUP_MAX_NEW_TOKENS: Final = 8  # for a generation model: decodes, so the draft runs
WARMUP_TEXT: Final = "The capital city of France is"  # text models: /generate
WARMUP_CHAT_PATH: Final = "/v1/chat/completions"  # models with image understanding (vision_config)
WARMUP_IMAGE_PROMPT: Final = "Describe the image."
WARMUP_IMAGE_PX: Final = 32  # a black 32x32 PNG
# What Gemma-4's image processor (transformers, as pinned by sglang 0.5.14 and 0.5.15) makes of that PNG;
# not SGLang's code, so not in FACTS: tests/test_contract.py measures it in each release's environment.
# Gemma-4's warm-up prompt is these plus its chat template's tokens around "Describe the image.".
WARMUP_IMAGE_SOFT_TOKENS_GEMMA4: Final = 256
WARMUP_FAILED_LINE: Final = "Initialization failed. warmup error:"
SKIP_SERVER_WARMUP_FLAG: Final = "--skip-server-warmup"

# -- native HTTP API ---------------------------------------------------------------------------------

GENERATE_PATH: Final = "/generate"
SERVER_INFO_PATHS: Final = ("/server_info", "/get_server_info")  # the second is deprecated (a warning per call)
MODEL_INFO_PATHS: Final = ("/model_info", "/get_model_info")  # the second is deprecated
FLUSH_CACHE_PATH: Final = "/flush_cache"
# With --api-key every path but these prefixes wants "Authorization: Bearer <key>"; else 401 {"error": ...}.
AUTH_EXEMPT_PREFIXES: Final = ("/health", "/metrics")
UNAUTHORIZED_ERROR: Final = "Unauthorized"
MODELS_PATH: Final = "/v1/models"
METRICS_PATH: Final = "/metrics"  # prometheus, with --enable-metrics
REQUEST_FIELDS: Final = ("text", "input_ids", "sampling_params", "stream", "rid", "return_logprob")
SAMPLING_PARAMS: Final = ("max_new_tokens", "temperature", "ignore_eos", "stop")
STREAM_DATA_PREFIX: Final = "data: "
STREAM_DONE: Final = "data: [DONE]"
META_INFO_KEYS: Final = ("finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency")
# The three acceptance lengths, different quantities never compared with one another (README "metrics"):
# - per request (the harness's accept_length): meta_info spec_accept_length = completion_tokens / spec_verify_ct,
#   bonus token included, on the finished chunk; the harness sums tokens and verify steps over its requests;
# - the server's (accept_length_server): /server_info internal_states[0].avg_spec_accept_length, below;
# - the gauge (accept_length_gauge): /metrics sglang:spec_accept_length, the last decode log interval only.
SPEC_META_INFO_KEYS: Final = ("spec_accept_length", "spec_verify_ct")  # accept length = completion / verify
# Per finished request, only when non-empty; both names in 0.5.14 and 0.5.15 (the second an alias). Bucket j counts
# the verify steps that accepted exactly j drafts (bonus excluded); the list grows to the largest j seen.
SPEC_HISTOGRAM_KEYS: Final = ("spec_correct_drafts_histogram", "spec_accept_histogram")
# meta_info.cached_tokens_details, when any prefix token was cached: how many came from the device tier and how
# many HiCache loaded back from the host ("storage" too with an L3 backend).
CACHED_TOKENS_DETAILS_KEYS: Final = ("device", "host")
# HiCache's host pool without --hicache-size: the device pool's size times --hicache-ratio.
HICACHE_HOST_SIZE: Final = "device_pool.size * host_to_device_ratio"
# /flush_cache (when idle) resets the radix tree, device and host tiers: a stateful trial must never meet one.
FLUSH_RESETS_TREE: Final = "self.tree_cache.reset()"
ABORT_TYPE: Final = "abort"
ABORT_KEYS: Final = ("type", "message", "status_code", "err_type")  # FINISH_ABORT.to_json()
# server_info internal_states[i]: accepted tokens / forward count since the last /flush_cache, folded in only
# every decode_log_interval (40) decode batches; absent until the first fold; every request counts.
AVG_ACCEPT_LENGTH_KEY: Final = "avg_spec_accept_length"
METRIC_NAMES: Final = (
    "sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "sglang:gen_throughput", "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
    "sglang:num_requests_total",
)  # fmt: skip

# -- logs --------------------------------------------------------------------------------------------

# The scheduler's log prefix, in the order it is built: "[time DP0 PP1 ATTN_CP0 MOE_DP1 TP3 EP3] ..."
LOG_RANK_TAGS: Final = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")
LOG_OTHER_TAGS: Final = ("encode_dp_worker[{rank}]", "encode_server")
LOG_DATE_FORMAT: Final = "%Y-%m-%d %H:%M:%S"  # SGLANG_LOG_MS adds ".%(msecs)03d"
SCHEDULER_EXCEPTION: Final = "Scheduler hit an exception:"
CHILD_FAILED_LINE: Final = "Received sigquit from a child process. It usually means the child failed."
# The running-phase handler replaces the launch-phase one (CHILD_FAILED_LINE) when the tokenizer manager
# takes its first request (generate_request -> auto_create_handle_loop), i.e. SGLang's own warm-up request:
# a scheduler that dies after that logs this at ERROR ("SIGQUIT received. signum=None, frame=None. ...").
CHILD_FAILED_RUNNING_LINE: Final = "It usually means one child failed."
# A child that ends with a non-zero status is noticed by the launcher's SubprocessWatchdog, a thread that looks
# every CHILD_POLL_S from the end of start-up until the SIGTERM drain is over: it logs CHILD_CRASHED_LINE at
# ERROR and SIGQUITs its own process. Either SIGQUIT handler then calls ``kill_process_tree(os.getpid())``
# (include_parent defaults to True), so a child's failure also ends the launcher with wait status -SIGKILL
# (CHILD_FAILED_SELF_KILL), as a graceful stop does. SGLang's schedulers install no SIGTERM handler (the srt
# package's SIGTERM handlers are the tokenizer manager's, granian's stop and two storage connectors'), so the
# SIGTERM the harness sends to a server's whole process group ends them at once (-15): the watchdog (1 s) is
# then usually ahead of the drain (5 s), and a real server the harness stops logs these lines on its way out.
CHILD_CRASHED_LINE: Final = "Triggering SIGQUIT for cleanup..."
CHILD_POLL_S: Final = 1.0
CHILD_FAILED_SELF_KILL: Final = -9
NO_ACCELERATOR: Final = "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available."

# -- SIGTERM ---------------------------------------------------------------------------------------

# What SGLang's launcher does on SIGTERM once the tokenizer manager has taken its first request (the warm-up):
# its SignalHandler (loop.add_signal_handler, installed by auto_create_handle_loop, replacing uvicorn's)
# logs SIGTERM_LINE at WARNING and sets ``gracefully_exit``; ``sigterm_watchdog`` looks at that flag every
# SIGTERM_POLL_S, then drains: while requests remain (a client that went away is aborted by the request's
# own disconnect check) it logs SIGTERM_DRAIN_LINE and waits SIGTERM_POLL_S again, with no bound of its own
# (SIGTERM_FORCE_ENV skips the drain); then it sends ShutdownReq to the schedulers, waits up to
# SIGTERM_SCHEDULER_WAIT_S for them, and ends the tree. How it ends the tree, and so the launcher's wait status,
# changed at 0.5.19 (per release: :func:`sigterm_exit_status`):
# - up to 0.5.18, ``kill_process_tree(os.getpid(), include_parent=True)`` SIGKILLs the children and then itself
#   (common.py's ``if parent_pid == os.getpid(): itself.kill()``), so the ``sys.exit(0)`` after it never runs:
#   wait status -SIGKILL (SIGTERM_SELF_KILL). tokenizer_manager.py's kill, then common.py's pid check and
#   itself.kill(): 0.5.12.post1 :2410, :1184-1185; 0.5.13.post1 :2614, :1270-1271; 0.5.14 :2655, :1288-1289;
#   0.5.15 :2688, :2000-2001; 0.5.16 :2768, :2024-2025; 0.5.17 :3131, :2093-2094; 0.5.18 :3157, :2259-2260.
# - from 0.5.19, ``kill_process_tree(os.getpid(), include_parent=False, wait_timeout=60)`` kills and reaps only
#   the children; 0.5.19 then runs ``sys.exit(0)`` (:3177-3178: SystemExit(0) leaves uvicorn's loop, and
#   launch_server.py's ``finally`` kills no parent, 0.5.19 :78); from 0.5.20 it calls the server stop hook
#   (uvicorn's should_exit, http_server.py 0.5.21 :2763-2766) and returns, so uvicorn shuts down and the
#   launcher returns: 0.5.20 :3332, :3342; 0.5.21 :3352, :3362; 0.5.22 :3556, :3566; 0.5.23 :3559, :3569.
#   Wait status 0 (SIGTERM_CLEAN_EXIT), measured live on 0.5.19 and 0.5.21 (tests/sglang_cpu/test_live_contract.py).
#   0.5.19's SystemExit is logged by uvicorn on the way out ("ERROR:    Traceback ... SystemExit: 0"), after the
#   verdict (a server the harness is stopping is never judged by its log).
# Either way a record's ``exit_code`` says nothing of whether the harness had to kill it (``teardown.killed``
# does): -9 is SGLang's own graceful end up to 0.5.18, and 0 from 0.5.19.
SIGTERM_LINE: Final = "Draining requests and shutting down..."
SIGTERM_POLL_S: Final = 5.0
SIGTERM_DRAIN_LINE: Final = "Gracefully exiting... Remaining number of requests"
SIGTERM_FORCE_ENV: Final = "SGL_FORCE_SHUTDOWN"
SIGTERM_SCHEDULER_WAIT_S: Final = 15.0
SIGTERM_SELF_KILL: Final = -9  # up to 0.5.18
SIGTERM_CLEAN_EXIT: Final = 0  # from SIGTERM_CLEAN_EXIT_SINCE
SIGTERM_CLEAN_EXIT_SINCE: Final = "0.5.19"

# -- flags -------------------------------------------------------------------------------------------

# Parser defaults the harness relies on (argparse dest -> default), checked against the real parser.
DEFAULTS: Final = {
    "host": "127.0.0.1",
    "port": 30000,
    "skip_server_warmup": False,
    "log_level": "info",
    "enable_metrics": False,
    "speculative_draft_model_quantization": None,
}
# The draft inherits --quantization unless its own is given; "unquant" opts out (both releases).
DRAFT_QUANTIZATION_UNQUANT: Final = "unquant"
# PR #29616's change in the draft worker: present from 0.5.15 on.
FIX_MARKER: Final = "forward_batch.out_cache_loc = None"

# -- the two crash paths of 0.5.14's Frozen-KV MTP draft (the reference server models both) -----------

# Frozen-KV MTP's --max-running-requests when unset; the draft graph's capture sizes stop there, so the
# SWA refill buffer below holds max_bs x topk = 48 entries by default.
FROZEN_KV_MTP_MAX_RUNNING_DEFAULT: Final = 48
# topk 1: the draft uses its model runner's own attention backend (trtllm_mha when the server runs it);
# topk > 1: only triton.
DRAFT_TOPK_BACKEND: Final = "Frozen-KV MTP topk > 1 currently supports only the triton "
# The CUDA-graph draft path, outermost first: draft -> cuda_graph_runner.execute ->
# _init_frozen_kv_metadata_replay_cuda_graph (its fb_view keeps out_cache_loc) -> the backend's
# init_forward_metadata_out_graph, whose SWA refill trtllm_mha does not guard (0.5.14 only).
DRAFT_GRAPH_PATH: Final = ("execute", "_init_frozen_kv_metadata_replay_cuda_graph", "init_forward_metadata_out_graph")
DRAFT_GRAPH_SWA_REFILL: Final = "self.cuda_graph_swa_out_cache_loc[:n].copy_("
# From 0.5.15 the in-graph metadata kernel's out_cache_loc is the capture batch's (None): see DRAFT_GRAPH_FUSED_SWA_LOC.
DRAFT_GRAPH_FUSED_SWA_LOC: Final = "out_cache_loc=None,"
# The attention backends the server resolved, as /server_info reports them (its body is the settings after
# post-init, where Gemma-4's default is filled in): the decode side is decode_attention_backend, else
# attention_backend (ServerArgs.get_attention_backends); the Frozen-KV MTP draft's is
# speculative_draft_attention_backend, else the decode side (the worker's _resolve_draft_backend_type).
RESOLVED_ATTENTION_KEYS: Final = ("attention_backend", "decode_attention_backend", "speculative_draft_attention_backend")


FACTS: Final[tuple[Fact, ...]] = (
    Fact("READY_LINE", READY_LINE, (Cite(_HTTP, 2145, 2169, f'logger.info("{READY_LINE}")'),),
         "logged by _wait_and_warmup after the warm-up request (or at once with --skip-server-warmup)"),
    Fact("HEALTH_PATH", HEALTH_PATH, (Cite(_HTTP, 561, 578, '@app.get("/health")'),),
         "/health and /health_generate are one handler"),
    Fact("HEALTH_GENERATE_PATH", HEALTH_GENERATE_PATH, (Cite(_HTTP, 562, 579, '@app.get("/health_generate")'),)),
    Fact("HEALTH_STARTING_STATUS", HEALTH_STARTING_STATUS, (
        Cite(_HTTP, 575, 592, "server_status == ServerStatus.Starting:"),
        Cite(_HTTP, 576, 593, "return Response(status_code=503)"),
    ), "503 until the warm-up request succeeded (or was skipped)"),
    Fact("HEALTH_GENERATION_ENV", HEALTH_GENERATION_ENV, (
        Cite("srt/environ.py", 716, 765, "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(True)"),
        Cite(_HTTP, 579, 596, "not envs.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION.get()"),
    ), "on by default: /health runs a one-token generation; off: /health answers 200 at once"),
    Fact("ENV_TRUE", ENV_TRUE, (Cite("srt/environ.py", 122, 117, 'if value in ["true", "1", "yes", "y"]:'),)),
    Fact("HEALTH_CHECK_TIMEOUT_S", HEALTH_CHECK_TIMEOUT_S, (
        Cite(_HTTP, 182, 186, 'HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20))'),
    ), "no answer from the scheduler within this: 503 and the server marked UnHealthy"),
    Fact("HEALTH_CHECK_POLL_S", HEALTH_CHECK_POLL_S, (Cite(_HTTP, 616, 633, "await asyncio.sleep(1)"),),
         "the handler sleeps before each look, so even a healthy answer takes >= 1 s"),
    Fact("HEALTH_CHECK_INPUT_IDS", HEALTH_CHECK_INPUT_IDS, (
        Cite(_HTTP, 584, 601, 'sampling_params = {"max_new_tokens": 1, "temperature": 0.0}'),
        Cite(_HTTP, 592, 609, "input_ids=[0],"),
    ), "one greedy token from input_ids [0]: a prefill, never a decode"),
    Fact("HEALTH_CHECK_RID_PREFIX", HEALTH_CHECK_RID_PREFIX,
         (Cite("srt/constants.py", 12, 12, 'HEALTH_CHECK_RID_PREFIX = "HEALTH_CHECK"'),)),
    Fact("WARMUP_MODEL_INFO_PATH", WARMUP_MODEL_INFO_PATH, (Cite(_HTTP, 1982, 2006, 'url + "/model_info", timeout=5'),),
         "_execute_server_warmup first polls /model_info, once a second, up to 120 times"),
    Fact("WARMUP_MAX_NEW_TOKENS", WARMUP_MAX_NEW_TOKENS,
         (Cite(_HTTP, 2007, 2031, 'max_new_tokens = 8 if model_info["is_generation"] else 1'),)),
    Fact("WARMUP_TEXT", WARMUP_TEXT, (
        # 0.5.18 reads dp_size from get_parallel() (http_server.py 0.5.18 :2286)
        # 0.5.22 wraps the list over three lines and multiplies by get_parallel().num_dp_ranks (http_server.py
        # 0.5.22 :2381-2383, 0.5.23 :2454-2456, in _execute_server_warmup's text branch; the same text): the line
        # recorded is the text itself ("The capital city of France is Paris." at 0.5.23 :2484 is a /v1/systemone
        # warm-up of Qwen3.5 Clef/Kev checkpoints, which are not generation models).
        Cite(_HTTP, 2050, 2074, 'json_data["text"] = ["The capital city of France is"] * server_args.dp_size',
             (Later("0.5.18", 'json_data["text"] = ["The capital city of France is"] * get_parallel().dp_size'),
              Later("0.5.22", '"The capital city of France is"'))),
    ), "text-only models: POST /generate"),
    Fact("WARMUP_CHAT_PATH", WARMUP_CHAT_PATH, (
        # 0.5.16 splits the line (is_vlm = (bool(...) and not language_only and not is_mps()), http_server.py
        # 0.5.16 :2150-2154): a CUDA server of a full model still warms up with the chat request.
        Cite(_HTTP, 1999, 2023, 'is_vlm = bool(model_info.get("has_image_understanding", False))',
             (Later("0.5.16", 'bool(model_info.get("has_image_understanding", False))'),)),
        Cite(_HTTP, 2002, 2026, 'request_name = "/v1/chat/completions"'),
        Cite(_HTTP, 658, 675, '"has_image_understanding": model_config.is_image_understandable_model,'),
        # 0.5.18: (enable_multimodal and not is_lm_only and vision_config is not None), model_config.py 0.5.18 :467-471
        Cite("srt/configs/model_config.py", 400, 405,
             "self.is_image_understandable_model = enable_multimodal and hasattr(",
             (Later("0.5.18", "self.is_image_understandable_model = ("),)),
    ), "a model whose config has vision_config (Gemma-4) warms up with a chat request carrying one image"),
    Fact("WARMUP_IMAGE_PROMPT", WARMUP_IMAGE_PROMPT, (
        Cite(_HTTP, 2040, 2064, '"text": "Describe the image.",'),
        Cite(_HTTP, 1965, 1989, "MINIMUM_PNG_PICTURE_BASE64 = "),
    )),
    Fact("WARMUP_FAILED_LINE", WARMUP_FAILED_LINE, (
        Cite(_HTTP, 2120, 2144, 'logger.error(f"Initialization failed. warmup error: {last_traceback}")'),
    ), "then kill_process_tree: the server exits before READY_LINE"),
    Fact("SKIP_SERVER_WARMUP_FLAG", "skip_server_warmup", (
        # 0.5.16 adds an elastic-EP joiner that also skips it (http_server.py 0.5.16 :2286); 0.5.18 reads the
        # flag from get_serving() (0.5.18 :2393); 0.5.17 files the flag under the "serving" namespace.
        Cite(_HTTP, 2138, 2162, "if not server_args.skip_server_warmup:", (
            Later("0.5.16", "if not server_args.skip_server_warmup and not skip_elastic_joiner_warmup:"),
            Later("0.5.18", "if not get_serving().skip_server_warmup and not skip_elastic_joiner_warmup:"))),
        # 0.5.13.post1 :397, 0.5.12.post1 :391: a plain dataclass field
        # 0.5.20: declared in fields/serving.py (0.5.20 :111, 0.5.23 :116), same flag and default
        Cite(_ARGS, 532, 981, 'skip_server_warmup: A[bool, "If set, skip warmup."] = False',
             (Later("0.5.17", 'skip_server_warmup: A[bool, "If set, skip warmup.", NS("serving")] = False'),
              Later("0.5.20", 'skip_server_warmup: A[bool, "If set, skip warmup."] = False', _F_SERVING)),
             (Earlier(_E13, "skip_server_warmup: bool = False"),)),
    )),
    Fact("GENERATE_PATH", GENERATE_PATH, (Cite(_HTTP, 765, 786, '    "/generate",'),)),
    Fact("STREAM_DATA_PREFIX", STREAM_DATA_PREFIX,
         (Cite(_HTTP, 778, 801, 'yield b"data: " + dumps_json(out) + b"\\n\\n"'),)),
    Fact("STREAM_DONE", STREAM_DONE, (Cite(_HTTP, 797, 820, 'yield b"data: [DONE]\\n\\n"'),),
         "also after an aborted stream: the abort is in the last event's meta_info.finish_reason"),
    Fact("SERVER_INFO_PATHS", SERVER_INFO_PATHS, (
        Cite(_HTTP, 688, 705, '@app.get("/server_info")'),
        Cite(_HTTP, 678, 695, '@app.get("/get_server_info")'),
        Cite(_HTTP, 682, 699, "\"Endpoint '/get_server_info' is deprecated"),
    ), "deprecated in both 0.5.14 and 0.5.15 (a warning per call)"),
    Fact("MODEL_INFO_PATHS", MODEL_INFO_PATHS, (
        Cite(_HTTP, 648, 665, '@app.get("/model_info")'),
        Cite(_HTTP, 638, 655, '@app.get("/get_model_info")'),
    )),
    Fact("AUTH_EXEMPT_PREFIXES", AUTH_EXEMPT_PREFIXES, (
        # one condition over three lines from 0.5.20 (auth.py 0.5.23 :101-106), which also exempts /ready (never
        # asked by the harness): each exempt prefix is its own citation
        Cite("srt/utils/auth.py", 100, 100, 'path.startswith("/health")'),
        Cite("srt/utils/auth.py", 100, 100, 'path.startswith("/metrics")'),
        Cite("srt/utils/auth.py", 144, 144,
             "return AuthDecision(allowed=_check_bearer_token(authorization_header, api_key))"),
    ), "the harness sends the scenario's --api-key as a bearer token (harness.server.auth)"),
    Fact("UNAUTHORIZED_ERROR", UNAUTHORIZED_ERROR, (Cite("srt/utils/auth.py", 191, 191, '"Unauthorized"'),)),
    Fact("FLUSH_CACHE_PATH", FLUSH_CACHE_PATH,
         (Cite(_HTTP, 839, 862, '@app.api_route("/flush_cache", methods=["GET", "POST"])'),)),
    Fact("MODELS_PATH", MODELS_PATH,
         (Cite(_HTTP, 1713, 1735, '@app.get("/v1/models", response_class=ORJSONResponse)'),)),
    Fact("META_INFO_KEYS", META_INFO_KEYS, (
        Cite(_TM, 1863, 1891, '"finish_reason": recv_obj.finished_reasons[i],'),
        Cite(_TM, 1864, 1892, '"prompt_tokens": recv_obj.prompt_tokens[i],'),
        Cite(_TM, 1890, 1918, '"completion_tokens": recv_obj.completion_tokens[i],'),
        Cite(_TM, 1891, 1919, '"cached_tokens": recv_obj.cached_tokens[i],'),
        Cite(_TM, 2058, 2091, 'meta_info["e2e_latency"] = state.time_stats.get_e2e_latency()'),
    )),
    Fact("SPEC_META_INFO_KEYS", SPEC_META_INFO_KEYS, (
        Cite(_TM, 2301, 2334, "def _calculate_spec_decoding_metrics("),
        Cite(_TM, 2329, 2362, 'meta_info["spec_accept_length"] = ('),
        Cite(_TM, 2335, 2368, 'meta_info["spec_verify_ct"] = recv_obj.spec_verify_ct[i]'),
    ), "per request: completion_tokens / spec_verify_ct, bonus token included, on the finished chunk only"),
    Fact("SPEC_HISTOGRAM_KEYS", SPEC_HISTOGRAM_KEYS, (
        Cite(_TM, 2347, 2380, 'meta_info["spec_correct_drafts_histogram"] = ('),
        # the alias is dropped in 0.5.21 (tokenizer_manager.py 0.5.21 :3011, 0.5.23 :3199-3201 set only the first
        # key): harness.measure.acceptance reads spec_correct_drafts_histogram first and the alias only without it
        Cite(_TM, 2351, 2384, 'meta_info["spec_accept_histogram"] = (', (Later("0.5.21", None),)),
        Cite("srt/managers/schedule_batch.py", 1087, 1089,
             "self.spec_correct_drafts_histogram[num_correct_drafts] += 1"),
    ), "acceptance by draft position k = steps with >= k accepted / all steps (harness.measure.acceptance)"),
    Fact("CACHED_TOKENS_DETAILS_KEYS", CACHED_TOKENS_DETAILS_KEYS, (
        Cite(_TM, 1899, 1927, 'meta_info["cached_tokens_details"] = recv_obj.cached_tokens_details['),
        # 0.5.12.x: the same dict in the scheduler's output mixin (scheduler_output_processor_mixin.py 0.5.12.post1
        # :74-75)
        Cite("srt/managers/scheduler_components/output_streamer.py", 72, 74, '"device": req.cached_tokens_device,',
             (), (Earlier(_E12, '"device": req.cached_tokens_device,', _OUT12),)),
        Cite("srt/managers/scheduler_components/output_streamer.py", 73, 75, '"host": req.cached_tokens_host,',
             (), (Earlier(_E12, '"host": req.cached_tokens_host,', _OUT12),)),
        Cite("srt/managers/schedule_batch.py", 2105, 2117, "req.cached_tokens += new_cached"),
        # 0.5.18: (device, host, storage) = split_cached_prefix_by_tier(...) once per request (schedule_batch.py
        # 0.5.18 :2489, 0.5.23 :2981-2992): host is still the prefix HiCache loaded back from the host tier
        Cite("srt/managers/schedule_batch.py", 2127, 2139, "req.cached_tokens_host = host_portion",
             (Later("0.5.18", ") = split_cached_prefix_by_tier("),)),
    ), "the per-phase cache hit rate is cached_tokens / prompt_tokens; host > 0 means loaded back from HiCache"),
    Fact("HICACHE_HOST_SIZE", HICACHE_HOST_SIZE, (
        # 0.5.18 moves it to pool_host/base.py (0.5.18 :124); 0.5.21 and 0.5.22 rename the device size
        # (device_capacity, then device_capacity_tokens: 0.5.23 :226, then rounded to whole pages plus one
        # padding page, :228-229)
        Cite("srt/mem_cache/memory_pool_host.py", 1440, 1754,
             "self.size = int(device_pool.size * host_to_device_ratio)",
             (Later("0.5.18", "self.size = int(device_pool.size * host_to_device_ratio)", _POOL_HOST),
              Later("0.5.21", "self.size = int(device_capacity * host_to_device_ratio)", _POOL_HOST),
              Later("0.5.22", "self.size = int(device_capacity_tokens * host_to_device_ratio)", _POOL_HOST))),
    ), "the reference server sizes its host tier so (harness.sim.scheduler init_tree_cache)"),
    Fact("FLUSH_RESETS_TREE", FLUSH_RESETS_TREE, (Cite(_SCHED, 3645, 3733, FLUSH_RESETS_TREE),),
         "a flush empties the prefix cache: harness.workload.phases.refuse_flush keeps it out of a stateful trial"),
    Fact("ABORT_KEYS", ABORT_KEYS, (
        Cite("srt/managers/schedule_batch.py", 202, 202, "class FINISH_ABORT(BaseFinishReason):"),
        Cite("srt/managers/schedule_batch.py", 211, 211, '"type": "abort",'),
        Cite(_TM, 1381, 1402, "async def _handle_abort_finish_reason("),
    ), "a streamed abort is yielded as an event, then data: [DONE], HTTP 200"),
    Fact("AVG_ACCEPT_LENGTH_KEY", AVG_ACCEPT_LENGTH_KEY, (
        # 0.5.22: /server_info's internal_states come from SchedulerInternalState.get_internal_state, whose
        # _add_speculative sets the key (internal_state.py 0.5.23 :119-125, the same ratio, :243-253)
        Cite(_SCHED, 3687, 3775, 'ret["avg_spec_accept_length"] = (',
             (Later("0.5.22", 'state["avg_spec_accept_length"] = accept_length', _ISTATE),)),
        # 0.5.16 reads the interval from self.decode_log_interval (metrics_reporter.py 0.5.23 :934); 0.5.12.x keeps
        # all of it in the scheduler's metrics mixin (0.5.12.post1 :646, :691-692, :472, :478) and flush_cache
        # calls self.reset_metrics() (scheduler.py 0.5.12.post1 :3451)
        Cite(_MREP, 674, 696, "if self.forward_ct_decode % self.scheduler.server_args.decode_log_interval != 0:",
             (Later("0.5.16", "if self.forward_ct_decode % self.decode_log_interval != 0:"),),
             (Earlier(_E12, "if self.forward_ct_decode % self.server_args.decode_log_interval != 0:", _MIXIN12),)),
        Cite(_MREP, 723, 745, "self.spec_total_num_accept_tokens += self.spec_num_accept_tokens", (),
             (Earlier(_E12, "self.spec_total_num_accept_tokens += self.spec_num_accept_tokens", _MIXIN12),)),
        Cite(_MREP, 724, 746, "self.spec_total_num_forward_ct += self.spec_num_forward_ct", (),
             (Earlier(_E12, "self.spec_total_num_forward_ct += self.spec_num_forward_ct", _MIXIN12),)),
        Cite(_MREP, 487, 502, "def reset_metrics(self):", (),
             (Earlier(_E12, "def reset_metrics(self: Scheduler):", _MIXIN12),)),
        Cite(_MREP, 493, 508, "self.spec_total_num_forward_ct = 0", (),
             (Earlier(_E12, "self.spec_total_num_forward_ct = 0", _MIXIN12),)),
        Cite(_SCHED, 3649, 3737, "self.metrics_reporter.reset_metrics()", (),
             (Earlier(_E12, "self.reset_metrics()"),)),
        # 0.5.13.post1 :503; from 0.5.20 in fields/observability.py (0.5.23 :136-139)
        Cite(_ARGS, 1096, 1222, "] = 40", (Later("0.5.20", "] = 40", _F_OBS),),
             (Earlier(_E13, "decode_log_interval: int = 40"),)),
    ), "since the last /flush_cache (which resets it), folded every decode_log_interval (40) decode batches, "
       "absent until the first fold; warm-ups and every client's requests since the flush count"),
    Fact("METRIC_NAMES", METRIC_NAMES, (
        Cite(_METRICS, 415, 415, 'name="sglang:spec_accept_length",'),
        Cite(_METRICS, 421, 421, 'name="sglang:spec_accept_rate",'),
        Cite(_METRICS, 268, 268, 'name="sglang:num_running_reqs",'),
        Cite(_METRICS, 274, 274, 'name="sglang:num_queue_reqs",'),
        Cite(_METRICS, 286, 286, 'name="sglang:gen_throughput",'),
        Cite(_METRICS, 1429, 1430, 'name="sglang:prompt_tokens_total",'),
        Cite(_METRICS, 1434, 1435, 'name="sglang:generation_tokens_total",'),
        Cite(_METRICS, 1514, 1515, 'name="sglang:num_requests_total",'),
    ), "sglang:spec_accept_length is a gauge of the last decode log interval (per tp_rank), not a lifetime figure"),
    Fact("LOG_RANK_TAGS", LOG_RANK_TAGS, (
        # 0.5.16 prints a display rank when one is given (scheduler.py 0.5.16 :4533-4551, shown_dp / shown_tp /
        # shown_moe_ep, else the rank itself); 0.5.21 reads the ranks from get_parallel() (0.5.21 :6001-6011):
        # the same tags, in the same order, on the same conditions.
        Cite(_SCHED, 4135, 4237, 'prefix += f" DP{dp_rank}"', (Later("0.5.16", 'prefix += f" DP{shown_dp}"'),)),
        Cite(_SCHED, 4137, 4239, 'prefix += f" PP{pp_rank}"',
             (Later("0.5.21", 'prefix += f" PP{parallel.pp_rank}"'),)),
        Cite(_SCHED, 4139, 4241, 'prefix += f" ATTN_CP{attn_cp_rank}"',
             (Later("0.5.21", 'prefix += f" ATTN_CP{parallel.attn_cp_rank}"'),)),
        Cite(_SCHED, 4141, 4243, 'prefix += f" MOE_DP{moe_dp_rank}"',
             (Later("0.5.21", 'prefix += f" MOE_DP{parallel.moe_dp_rank}"'),)),
        Cite(_SCHED, 4143, 4245, 'prefix += f" TP{tp_rank}"', (Later("0.5.16", 'prefix += f" TP{shown_tp}"'),)),
        Cite(_SCHED, 4145, 4247, 'prefix += f" EP{moe_ep_rank}"', (Later("0.5.16", 'prefix += f" EP{shown_moe_ep}"'),)),
        Cite("srt/utils/common.py", 1369, 2081, 'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"'),
    ), "DP when a dp rank is set; the others only when that size is > 1"),
    Fact("LOG_OTHER_TAGS", LOG_OTHER_TAGS, (
        # 0.5.19 splits encode_server.py into disaggregation/encoder/ (runtime.py 0.5.23 :1724, http_server.py
        # 0.5.23 :211); 0.5.12.x's encode server configures no tagged logger (it logs untagged, which the
        # signature catalogue's tag pattern never needs: a tag that never appears cannot be misread)
        Cite("srt/disaggregation/encode_server.py", 3163, 3428,
             'configure_logger(server_args, prefix=f" encode_dp_worker[{dp_rank}]")',
             (Later("0.5.19", 'configure_logger(server_args, prefix=f" encode_dp_worker[{dp_rank}]")',
                    "srt/disaggregation/encoder/runtime.py"),), (Earlier(_E12, None),)),
        Cite("srt/disaggregation/encode_server.py", 3330, 3610,
             'configure_logger(server_args, prefix=" encode_server")',
             (Later("0.5.19", 'configure_logger(server_args, prefix=" encode_server")',
                    "srt/disaggregation/encoder/http_server.py"),), (Earlier(_E12, None),)),
    )),
    Fact("LOG_DATE_FORMAT", LOG_DATE_FORMAT, (
        Cite("srt/utils/common.py", 1373, 2085, 'datefmt="%Y-%m-%d %H:%M:%S",'),
        Cite("srt/utils/common.py", 1368, 2080, 'maybe_ms = ".%(msecs)03d" if envs.SGLANG_LOG_MS.get() else ""'),
    )),
    Fact("SCHEDULER_EXCEPTION", SCHEDULER_EXCEPTION,
         (Cite(_SCHED, 4231, 4333, 'logger.error(f"Scheduler hit an exception: {traceback}")'),),
         "one log record: only its first line carries the prefix"),
    Fact("CHILD_FAILED_LINE", CHILD_FAILED_LINE, (Cite("srt/entrypoints/engine.py", 1303, 1328, CHILD_FAILED_LINE),),
         "the launch-phase SIGQUIT handler: until the first request"),
    Fact("SIGTERM_LINE", SIGTERM_LINE, (
        Cite(_TM, 1814, 1837, "loop.add_signal_handler(signal.SIGTERM, signal_handler.sigterm_handler)"),
        Cite(_TM, 3090, 3123, 'f"SIGTERM received. {signum=} {frame=}. Draining requests and shutting down..."'),
        Cite(_TM, 3092, 3125, "self.tokenizer_manager.gracefully_exit = True"),
    ), "logged at WARNING by the running-phase handler (after the first request); before it uvicorn's own"),
    Fact("SIGTERM_POLL_S", SIGTERM_POLL_S, (
        Cite(_TM, 2613, 2646, "while not self.gracefully_exit:"),
        Cite(_TM, 2614, 2647, "await asyncio.sleep(5)"),
        Cite(_TM, 2642, 2675, "await asyncio.sleep(5)"),
    ), "the watchdog notices the flag up to 5 s late, and looks again every 5 s while requests remain"),
    Fact("SIGTERM_DRAIN_LINE", SIGTERM_DRAIN_LINE, (
        Cite(_TM, 2639, 2672, "Gracefully exiting... Remaining number of requests {remain_num_req}"),
        Cite(_TM, 2618, 2651, "remain_num_req = len(self.rid_to_state)"),
    ), "at INFO, once per look; the drain has no bound of its own"),
    Fact("SIGTERM_FORCE_ENV", SIGTERM_FORCE_ENV, (
        Cite(_TM, 2630, 2663, 'elif get_bool_env_var("SGL_FORCE_SHUTDOWN"):'),
    ), "set true: no drain, straight to the shutdown"),
    Fact("SIGTERM_SCHEDULER_WAIT_S", SIGTERM_SCHEDULER_WAIT_S, (
        # before 0.5.14 no ShutdownReq and no wait: after the drain sigterm_watchdog kills its tree at once
        # (tokenizer_manager.py 0.5.13.post1 :2614); from 0.5.20 the 15 s is _SCHEDULER_EXIT_TIMEOUT_SECS (0.5.23 :456,
        # read at :3548)
        Cite(_TM, 2651, None, "self.send_to_scheduler.send_pyobj(ShutdownReq())", (), (Earlier(_E13, None),)),
        Cite(_TM, None, 2684, "self._dispatch_to_scheduler(ShutdownReq())"),
        Cite(_TM, 2652, 2685, "deadline = time.monotonic() + 15", (Later("0.5.20", "_SCHEDULER_EXIT_TIMEOUT_SECS = 15"),),
             (Earlier(_E13, None),)),
    ), "the schedulers are asked to exit and waited for, up to 15 s"),
    # Up to 0.5.18 (lines per release beside SIGTERM_SELF_KILL above). From 0.5.19 the watchdog's kill spares the
    # launcher (SIGTERM_CLEAN_EXIT); the locator still reads this fact "moved" there, because the same text stays in
    # print_exception_wrapper (0.5.19 :3609, 0.5.21 :3818), which is not the SIGTERM path.
    Fact("SIGTERM_SELF_KILL", SIGTERM_SELF_KILL, (
        Cite(_TM, 2655, 2688, "kill_process_tree(os.getpid(), include_parent=True)"),
        Cite("srt/utils/common.py", 1288, 2000, "if parent_pid == os.getpid():"),
        Cite("srt/utils/common.py", 1289, 2001, "itself.kill()"),
    ), "up to 0.5.18: psutil's kill is SIGKILL, the launcher's graceful stop ends by killing itself, wait status -9"),
    # Absent from both cited releases, recorded present from the release that brought it (the locator holds it
    # there): the watchdog kills only the children (0.5.19 :3177 ... 0.5.23 :3559), then 0.5.19 exits 0 (:3178)
    # and 0.5.20 on stop uvicorn through the hook (0.5.20 :3342, 0.5.21 :3362, 0.5.23 :3569) and return.
    Fact("SIGTERM_CLEAN_EXIT", SIGTERM_CLEAN_EXIT, (
        Cite(_TM, None, None, _SIGTERM_KILL_CHILDREN, (Later(SIGTERM_CLEAN_EXIT_SINCE, _SIGTERM_KILL_CHILDREN),)),
        Cite(_TM, None, None, "self._server_stop_hook()", (Later("0.5.20", "self._server_stop_hook()"),)),
    ), "from 0.5.19: the launcher kills and reaps its children, not itself, and ends with wait status 0"),
    Fact("CHILD_FAILED_RUNNING_LINE", CHILD_FAILED_RUNNING_LINE, (
        Cite(_TM, 581, 594, "self.auto_create_handle_loop()"),
        Cite(_TM, 1799, 1822, "def auto_create_handle_loop(self):"),
        Cite(_TM, 1817, 1840, "signal.SIGQUIT, signal_handler.running_phase_sigquit_handler"),
        Cite(_TM, 3096, 3129, 'f"SIGQUIT received. {signum=}, {frame=}. It usually means one child failed."'),
    ), "logged at ERROR (so at every --log-level) by a server that had taken a request: before the ready "
       "line that request is SGLang's own warm-up"),
    Fact("CHILD_CRASHED_LINE", CHILD_CRASHED_LINE, (
        Cite("srt/entrypoints/engine.py", 885, 897, "subprocess_watchdog = SubprocessWatchdog("),
        Cite("srt/entrypoints/engine.py", 882, 894, 'names = [f"scheduler_{i}" for i in range(len(processes))]'),
        Cite(_HTTP, 2276, 2300, "tokenizer_manager._subprocess_watchdog = subprocess_watchdog"),
        Cite(_WD, 213, 213, "if proc.is_alive() or proc.exitcode == 0:"),
        Cite(_WD, 217, 217, 'f"Subprocess {name} (pid={proc.pid}) crashed "'),
        Cite(_WD, 219, 219, 'f"Triggering SIGQUIT for cleanup..."'),
        Cite(_WD, 221, 221, "os.kill(os.getpid(), signal.SIGQUIT)"),
    ), "at ERROR, for a scheduler or detokenizer that exits non-zero (a signal included) while the launcher runs"),
    Fact("CHILD_POLL_S", CHILD_POLL_S, (Cite(_WD, 181, 181, "interval: float = 1.0,"),),
         "the watchdog looks once a second: a dead child is noticed up to 1 s late"),
    Fact("CHILD_FAILED_SELF_KILL", CHILD_FAILED_SELF_KILL, (
        Cite(_TM, 3103, 3136, "kill_process_tree(os.getpid())"),
        Cite("srt/entrypoints/engine.py", 1305, 1330, "kill_process_tree(os.getpid())"),
        Cite("srt/utils/common.py", 1250, 1962, "include_parent: bool = True,"),
        Cite("srt/utils/common.py", 1289, 2001, "itself.kill()"),
    ), "both SIGQUIT handlers (running phase, launch phase) kill the tree with the launcher in it: wait status -9"),
    # 0.5.12.x words it without "or platform plugin" (common.py 0.5.12.post1 :1997, get_device); no harness code
    # matches this text (a server without an accelerator is never started: pre-flight stops before)
    Fact("NO_ACCELERATOR", NO_ACCELERATOR, (Cite("srt/utils/common.py", 2103, 900, NO_ACCELERATOR, (),
        (Earlier(_E12, "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available."),)),)),
    Fact("DEFAULTS", DEFAULTS, (
        # before 0.5.14, plain dataclass fields (0.5.13.post1 :393, :394, :479, :490, :618)
        # 0.5.20 declares ServerArgs' fields per namespace in arg_groups/fields/ (serving.py 0.5.23 :65-66,
        # observability.py :31, :70, spec.py :216-222), dropping the NS(...) tags: same names, same defaults
        Cite(_ARGS, 528, 977, 'host: A[str, "The host of the HTTP server."] = "127.0.0.1"',
             (Later("0.5.20", 'host: A[str, "The host of the HTTP server."] = "127.0.0.1"', _F_SERVING),),
             (Earlier(_E13, 'host: str = "127.0.0.1"'),)),
        # 0.5.17 tags each field with its namespace, same defaults (server_args.py 0.5.17 :1229, :1442, :1492-1494)
        Cite(_ARGS, 529, 978, 'port: A[int, "The port of the HTTP server."] = 30000',
             (Later("0.5.17", 'port: A[int, "The port of the HTTP server.", NS("serving")] = 30000'),
              Later("0.5.20", 'port: A[int, "The port of the HTTP server."] = 30000', _F_SERVING)),
             (Earlier(_E13, "port: int = 30000"),)),
        Cite(_ARGS, 989, 1115, 'log_level: A[str, "The logging level of all loggers."] = "info"',
             (Later("0.5.17", 'log_level: A[str, "The logging level of all loggers.", NS("observability")] = "info"'),
              Later("0.5.20", 'log_level: A[str, "The logging level of all loggers."] = "info"', _F_OBS)),
             (Earlier(_E13, 'log_level: str = "info"'),)),
        Cite(_ARGS, 1030, 1156, 'enable_metrics: A[bool, "Enable log prometheus metrics."] = False',
             (Later("0.5.17", 'enable_metrics: A[bool, "Enable log prometheus metrics.", NS("observability")] = ('),
              Later("0.5.20", 'enable_metrics: A[bool, "Enable log prometheus metrics."] = False', _F_OBS)),
             (Earlier(_E13, "enable_metrics: bool = False"),)),
        Cite(_ARGS, 1529, 1668, "    speculative_draft_model_quantization: A[",
             (Later("0.5.20", "    speculative_draft_model_quantization: A[", _F_SPEC),),
             (Earlier(_E13, "    speculative_draft_model_quantization: Optional[str] = None"),)),
    )),
    Fact("DRAFT_QUANTIZATION_UNQUANT", DRAFT_QUANTIZATION_UNQUANT, (
        # 0.5.19: the same resolution in arg_groups/serving_hook.py's _handle_missing_default_values, written as
        # declare_resolution(...) calls (0.5.23 :685-690: unset inherits cfg.quantization; :704-709: "unquant"
        # resolves to None)
        Cite(_ARGS, 2801, 3037, "self.speculative_draft_model_quantization = self.quantization",
             (Later("0.5.19", "speculative_draft_model_quantization=cfg.quantization,", _SERVING_HOOK),)),
        Cite(_ARGS, 2802, 3047, 'self.speculative_draft_model_quantization == "unquant"',
             (Later("0.5.19", 'if cfg.speculative_draft_model_quantization == "unquant":', _SERVING_HOOK),)),
    ), "unset: the draft inherits the target's quantization (a BF16 draft of an NVFP4 target must say unquant)"),
    Fact("FIX_MARKER", FIX_MARKER, (
        Cite("srt/speculative/frozen_kv_mtp_worker_v2.py", None, 439, FIX_MARKER),
        Cite(_SCHED, 862, None, "is_frozen_kv_mtp()"),
    ), "PR #29616: the draft drops the prefill's out_cache_loc; the scheduler's special case is gone"),
    Fact("FROZEN_KV_MTP_MAX_RUNNING_DEFAULT", FROZEN_KV_MTP_MAX_RUNNING_DEFAULT, (
        # 0.5.13.x quotes the annotation (speculative_hook.py 0.5.13.post1 :252-254); 0.5.12.x sets it in
        # ServerArgs._handle_speculative_decoding's FROZEN_KV_MTP branch (server_args.py 0.5.12.post1 :3716-3718)
        Cite("srt/arg_groups/speculative_hook.py", 245, 299, "def _handle_frozen_kv_mtp(server_args: ServerArgs) -> None:",
             (), (Earlier(_E13, 'def _handle_frozen_kv_mtp(server_args: "ServerArgs") -> None:'),
                  Earlier(_E12, 'if self.speculative_algorithm == "FROZEN_KV_MTP":', _ARGS))),
        Cite("srt/arg_groups/speculative_hook.py", 247, 301, "server_args.max_running_requests = 48", (),
             (Earlier(_E12, "self.max_running_requests = 48", _ARGS),)),
        # up to 0.5.13.post1 in model_executor/cuda_graph_runner.py (0.5.13.post1 :414, 0.5.12.post1 :540)
        Cite("srt/model_executor/runner/base_cuda_graph_runner.py", 91, 91,
             "capture_bs = [bs for bs in capture_bs if bs <= num_max_requests]", (),
             (Earlier(_E13, "capture_bs = [bs for bs in capture_bs if bs <= num_max_requests]",
                      "srt/model_executor/cuda_graph_runner.py"),)),
        Cite(_FKVG, 117, 121, "self.max_num_token = self.max_bs * self.num_tokens_per_bs"),
    ), "unset --max-running-requests: 48; the draft graph is captured for at most that many requests x topk"),
    Fact("DRAFT_TOPK_BACKEND", DRAFT_TOPK_BACKEND, (
        Cite(_FKV, 243, 236, "if self.topk == 1:"),
        Cite(_FKV, 244, 237, "return self.draft_model_runner.attn_backend"),
        Cite(_FKV, 249, 242, DRAFT_TOPK_BACKEND),
    ), "topk 1: the draft shares the model runner's backend (trtllm_mha included); topk > 1: triton only"),
    Fact("DRAFT_EAGER_CHOICE", "cuda_graph_fully_disabled", (
        # up to 0.5.13.post1 the rule reads --disable-cuda-graph itself (frozen_kv_mtp_worker.py 0.5.13.post1 :322,
        # 0.5.12.post1 :316, in init_cuda_graphs): no cuda_graph_fully_disabled(), no per-phase graph config
        Cite(_FKV, 354, 347, "if cuda_graph_fully_disabled() or self.speculative_num_steps <= 1:", (),
             (Earlier(_E13, "if self.server_args.disable_cuda_graph or self.speculative_num_steps <= 1:"),)),
        Cite("srt/model_executor/cuda_graph_config.py", 158, 179, "def cuda_graph_fully_disabled() -> bool:", (),
             (Earlier(_E13, None),)),
        Cite(_ARGS, 2942, 3214, "if self.disable_cuda_graph:", (), (Earlier(_E13, None),)),
    ), "no draft graph (the eager path) when decode and prefill graphs are both disabled, or num-steps <= 1"),
    Fact("DRAFT_GRAPH_PATH", DRAFT_GRAPH_PATH, (
        # up to 0.5.13.post1 the runner's replay (frozen_kv_mtp_worker.py 0.5.13.post1 :599, 0.5.12.post1 :608); 0.5.12.x
        # hands no out_cache_loc to the backend at all (init_forward_metadata_replay_cuda_graph, 0.5.12.post1 :294-311):
        # the three citations below are gone there, which is what that release does
        Cite(_FKV, 451, 447, "self.cuda_graph_runner.execute(forward_batch)", (),
             (Earlier(_E13, "parent_list, top_scores_index, draft_tokens = self.cuda_graph_runner.replay("),)),
        Cite(_FKVG, 398, 418, "self.frozen_kv_mtp_worker._init_frozen_kv_metadata_replay_cuda_graph("),
        Cite(_FKV, 347, 340, 'out_cache_loc=getattr(forward_batch, "out_cache_loc", None),'),
        Cite(_FKV, 351, 344, "self.draft_attn_backend.init_forward_metadata_out_graph(fb_view)"),
        Cite(_TRT, 607, 622, "def init_forward_metadata_out_graph("),
    ), "the graph path hands the forward batch's out_cache_loc to the attention backend before replay"),
    Fact("STALE_ONLY_IN_A_FRESH_RUNNING_BATCH", "self.running_batch = self.last_batch", (
        Cite(_SCHED, 2622, 2666, "self.running_batch = self.last_batch"),
        Cite("srt/managers/schedule_batch.py", 2761, 2772, "def merge_batch(self, other: ScheduleBatch):"),
        Cite("srt/managers/schedule_batch.py", 2779, 2790, "self.out_cache_loc = None"),
    ), "a finished prefill becomes the running batch as it is (keeping its out_cache_loc) only when none is "
       "running; merged into a running batch, out_cache_loc is None, and the stale value is gone"),
    Fact("EXTEND_TOKENS_ONLY", "max_prefix_len = input_len - 1", (
        Cite("srt/managers/schedule_batch.py", 1223, 1226, "def _compute_max_prefix_len(self, input_len: int) -> int:"),
        Cite("srt/managers/schedule_batch.py", 1225, 1228, "max_prefix_len = input_len - 1"),
        Cite("srt/managers/schedule_batch.py", 2044, 2056,
             "out_cache_loc, req_pool_indices_tensor, req_pool_indices_cpu = alloc_for_extend("),
        Cite("srt/managers/schedule_batch.py", 2208, 2220, "self.out_cache_loc = out_cache_loc"),
        Cite("srt/mem_cache/radix_cache.py", 358, 355, "def match_prefix(self, params: MatchPrefixParams) -> MatchResult:"),
        Cite("srt/mem_cache/radix_cache.py", 438, 437, "def cache_finished_req(self, req: Req, is_insert: bool = True):"),
        Cite("srt/mem_cache/hiradix_cache.py", 1141, 1237, "def load_back("),
        Cite("srt/managers/schedule_policy.py", 939, 1053, "req.prefix_indices = torch.cat([req.prefix_indices, new_indices])"),
    ), "a prefill allocates out_cache_loc for its extend tokens only: a radix or HiCache (loaded back) prefix hit "
       "shrinks the N of the crash message, and a fully cached prompt still extends one token (N = 1)"),
    Fact("CHUNKED_PREFILL", 4096, (
        Cite(_ARGS, 3207, 3554, "self.chunked_prefill_size = 4096"),
        Cite(_ARGS, 3171, 3518, "self.chunked_prefill_size = 4096"),
        Cite(_SCHED, 2576, 2619, "chunked_req_to_exclude.add(self.chunked_req)"),
        Cite(_SCHED, 2613, 2657, "self.last_batch.filter_batch("),
        Cite(_SCHED, 2798, 2837, "self.chunked_req = adder.add_chunked_req(self.chunked_req)"),
        Cite("srt/managers/schedule_batch.py", 2728, 2739, "self.out_cache_loc = None"),
    ), "--chunked-prefill-size unset: 4096 on a 35-60 GB GPU (L40S) or an unknown one; a chunked request leaves "
       "its batch until its last chunk (a real filter_batch, which drops out_cache_loc), so N is the last chunk"),
    Fact("GEMMA4_DEFAULT_ATTENTION_BACKEND", ("trtllm_mha", "triton"), (
        Cite(_ARGS, 4063, None, '"trtllm_mha" if is_sm100_supported() else "triton"'),
        Cite("srt/arg_groups/overrides.py", None, 611, '"trtllm_mha" if is_sm100_supported() else "triton"'),
        Cite(_ARGS, 4068, None, "as default attention backend for Gemma4"),
        Cite("srt/arg_groups/overrides.py", None, 614, "as default attention backend for Gemma4"),
        Cite(_ARGS, 6578, 6480, "def is_attention_backend_not_set(self):"),
        Cite("srt/utils/common.py", 282, 285, "is_sm100_supported = lru_cache(maxsize=1)("),
    ), "Gemma-4 with no attention backend flag: trtllm_mha on SM100 (B200/GB200, compute capability 10.x), triton "
       "elsewhere (L40S, H100, CPU); moved from server_args.py to arg_groups/overrides.py in 0.5.15"),
    Fact("DRAFT_GRAPH_SWA_REFILL", DRAFT_GRAPH_SWA_REFILL, (
        Cite(_TRT, 645, None, DRAFT_GRAPH_SWA_REFILL),
        Cite(_TRT, 325, 327, "torch.zeros(max_num_tokens, dtype=torch.int64, device=self.device)"),
        Cite(_TRITON, 571, 615, "or out_cache_loc.shape[0] > self.cuda_graph_swa_out_cache_loc.shape[0]"),
    ), "0.5.14's trtllm_mha copies an out_cache_loc longer than the max_num_tokens buffer (a stale prefill's) into "
       "[:n] (the only test, :642, is for None): torch raises 'The size of tensor a (48) must match the size of "
       "tensor b (N)'; triton skips it"),
    # What the graph path does with a stale draft out_cache_loc where no out-of-graph refill runs (0.5.15-0.5.18:
    # none; from 0.5.19 one behind is_translating, present-but-unreachable for Frozen-KV MTP, harness.contract.derived):
    # the fused metadata kernel writes swa_out_cache_loc inside the graph, and its launch is recorded at capture from
    # the capture batch, whose out_cache_loc is None (frozen_kv_mtp_cuda_graph_runner.py 0.5.23 :311, recorded in
    # run_once :334 -> trtllm_mha_backend.py init_forward_metadata_in_graph :1228-1236 -> _apply_cuda_graph_metadata
    # :1015-1029). None gives num_out_tokens 0 (trtllm_mha_graph_metadata.py 0.5.23 :183-187): every replay zero-fills
    # swa_out_cache_loc (the page-0 sink; the frozen draft writes no KV). execute() copies seq_lens, positions,
    # bonus_tokens, hidden_states and req_pool_indices into the graph's buffers, never out_cache_loc (:391-482), and
    # the kernel bounds any out_cache_loc by the buffer, min(swa_out_len, len) (:184). So from 0.5.15 a stale draft
    # out_cache_loc on trtllm_mha's graph path is never read: no crash there, with or without PR #29616's line.
    Fact("DRAFT_GRAPH_FUSED_SWA_LOC", DRAFT_GRAPH_FUSED_SWA_LOC, (
        Cite(_FKVG, 279, 283, "out_cache_loc=None,"),
        Cite(_FKVG, None, 305, "self.draft_attn_backend.init_forward_metadata_in_graph(forward_batch)"),
        Cite(_TRT, None, 655, "out_cache_loc=forward_batch.out_cache_loc,"),
        Cite(_TRT, None, 574, "swa_out_cache_loc=metadata.swa_out_cache_loc,",
             (Later("0.5.19", "swa_out_cache_loc=None if unified else metadata.swa_out_cache_loc,"),)),
        Cite("srt/layers/attention/triton_ops/trtllm_mha_graph_metadata.py", None, 160,
             "num_out_tokens = min(swa_out_len, out_cache_loc.shape[0])",
             (Later("0.5.16", "num_out_tokens = min(swa_out_len, out_cache_loc.shape[0])",
                    "kernels/ops/kvcache/trtllm_mha_graph_metadata.py"),
              Later("0.5.23", "num_out_tokens = min(swa_out_len, out_cache_loc.shape[0])",
                    "kernels/ops/attention/trtllm_mha_graph_metadata.py"))),
    ), "from 0.5.15 trtllm_mha's graph path fills swa_out_cache_loc in the graph from the capture batch's "
       "out_cache_loc (None) and bounds it by the buffer: a stale draft out_cache_loc is never read there"),
    Fact("RESOLVED_ATTENTION_KEYS", RESOLVED_ATTENTION_KEYS, (
        # /server_info's body: 0.5.12.x asdict(tokenizer_manager.server_args) (http_server.py 0.5.12.post1 :640);
        # 0.5.17 passes asdict through resolved_config_dict (:794-795); 0.5.19 server_args.resolved_dict() (:830);
        # 0.5.22 build_server_info (0.5.23 :885), whose first line is server_args.resolved_dict() (common.py
        # 0.5.23 :3589): every field, resolved, under its own flat name
        Cite(_HTTP, 700, 718, "**dataclasses.asdict(server_args),",
             (Later("0.5.17", "dataclasses.asdict(server_args)"), Later("0.5.19", "**server_args.resolved_dict(),"),
              Later("0.5.22", "**build_server_info(server_args, _global_state.scheduler_info),")),
             (Earlier(_E12, "**dataclasses.asdict(_global_state.tokenizer_manager.server_args),"),)),
        # 0.5.12.x sets Gemma-4's default to triton on every GPU (server_args.py 0.5.12.post1 :2224-2227): a build
        # fact (GEMMA4_DEFAULT_ATTENTION_BACKEND), not one the harness reads through
        Cite(_ARGS, 4066, None, "self.attention_backend = default_attention_backend", (),
             (Earlier(_E12, 'self.attention_backend = "triton"'),)),
        # 0.5.19: a per-model override module (model_overrides/gemma4.py 0.5.23 :39, :44)
        Cite("srt/arg_groups/overrides.py", None, 616, 'overrides["attention_backend"] = default_attention_backend',
             (Later("0.5.19", 'overrides["attention_backend"] = default_attention_backend',
                    "srt/arg_groups/model_overrides/gemma4.py"),)),
        # before 0.5.14: plain fields (0.5.13.post1 :579, :580, :614) and the draft in frozen_kv_mtp_worker.py
        # (0.5.13.post1 :203, :205)
        Cite(_ARGS, 1341, 1277, "    attention_backend: A[", (Later("0.5.20", "    attention_backend: A[", _F_EXEC),),
             (Earlier(_E13, "    attention_backend: Optional[str] = None"),)),
        Cite(_ARGS, 1348, 1285, "    decode_attention_backend: A[",
             (Later("0.5.20", "    decode_attention_backend: A[", _F_EXEC),),
             (Earlier(_E13, "    decode_attention_backend: Optional[str] = None"),)),
        Cite(_ARGS, 1507, 1644, "    speculative_draft_attention_backend: A[",
             (Later("0.5.20", "    speculative_draft_attention_backend: A[", _F_SPEC),),
             (Earlier(_E13, "    speculative_draft_attention_backend: Optional[str] = None"),)),
        # 0.5.19: runtime_context.attention_backends() (0.5.23 :2010), read by the draft worker below
        Cite(_ARGS, 6559, 6461, "def get_attention_backends(self):",
             (Later("0.5.19", "def attention_backends() -> tuple:", "srt/runtime_context.py"),)),
        Cite(_FKV, 235, 228, "def _resolve_draft_backend_type(self) -> str:", (),
             (Earlier(_E13, "def _resolve_draft_backend_type(self) -> str:", _FKV_OLD),)),
        # 0.5.18: the draft's own backend, else the decode side (frozen_kv_mtp_worker_v2.py 0.5.23 :257)
        Cite(_FKV, 237, 230, "self.server_args.speculative_draft_attention_backend",
             (Later("0.5.18", "return get_spec().speculative_draft_attention_backend or attention_backends()[1]"),),
             (Earlier(_E13, "self.server_args.speculative_draft_attention_backend", _FKV_OLD),)),
    ), "/server_info holds the settings after post-init (Gemma-4's default filled in): the run record keeps the "
       "decode and draft backends the server resolved (harness.measure.server_side.attention_backends)"),
)


# Which runs depend on a fact (pre-flight ends a run on a release where a fact it depends on drifted,
# harness.launch.contract_gate): every run (readiness, health, the stream, logs, crash markers, the
# warm-up phase) unless listed here; "speculative": a scenario with --speculative-algorithm (its
# acceptance figures, the draft's quantization, the resolved attention backends it records); "metrics":
# --enable-metrics or a check on the gauge; "auth": --api-key; "teardown": no run (reported by
# ``sglang-repro contract``, never a pre-flight verdict); "profile": what a build *is* (is PR #29616's fix in,
# which draft path a flag set takes, which backend, whether the SWA refill is guarded, the running-request
# default, where a prefill's out_cache_loc survives): the evidence of harness.contract.profile, computed per
# build and recorded, never a gate -- these are what the runs are meant to find out, so a release that differs
# here is a release to test, not one to refuse.
NEEDS: Final[dict[str, str]] = {
    "SPEC_META_INFO_KEYS": "speculative",
    "AVG_ACCEPT_LENGTH_KEY": "speculative",
    "DRAFT_QUANTIZATION_UNQUANT": "speculative",
    "RESOLVED_ATTENTION_KEYS": "speculative",
    "FIX_MARKER": "profile",
    "FROZEN_KV_MTP_MAX_RUNNING_DEFAULT": "profile",
    "DRAFT_TOPK_BACKEND": "profile",
    "DRAFT_EAGER_CHOICE": "profile",
    "DRAFT_GRAPH_PATH": "profile",
    "STALE_ONLY_IN_A_FRESH_RUNNING_BATCH": "profile",
    "DRAFT_GRAPH_SWA_REFILL": "profile",
    "DRAFT_GRAPH_FUSED_SWA_LOC": "profile",
    "EXTEND_TOKENS_ONLY": "profile",
    "CHUNKED_PREFILL": "profile",
    "GEMMA4_DEFAULT_ATTENTION_BACKEND": "profile",
    "METRIC_NAMES": "metrics",
    "AUTH_EXEMPT_PREFIXES": "auth",
    "UNAUTHORIZED_ERROR": "auth",
    # What SGLang does on SIGTERM is modelled by the reference server; no verdict rests on it (the harness's
    # teardown escalates to SIGKILL whatever the server does), so a drift is reported, never ends a run.
    "SIGTERM_LINE": "teardown",
    "SIGTERM_POLL_S": "teardown",
    "SIGTERM_DRAIN_LINE": "teardown",
    "SIGTERM_FORCE_ENV": "teardown",
    "SIGTERM_SCHEDULER_WAIT_S": "teardown",
    "SIGTERM_SELF_KILL": "teardown",
    "SIGTERM_CLEAN_EXIT": "teardown",
}
# The kinds no run depends on: reported, never a pre-flight verdict.
NEVER_GATES: Final = ("teardown", "profile")


def cited_files() -> tuple[str, ...]:
    """Every file of the ``sglang`` package some citation of :data:`FACTS` is read in, in some release, sorted."""
    return tuple(sorted({name for fact in FACTS for cite in fact.cites for name in cite.files()}))


def needs(fact: Fact) -> str:
    """Which runs depend on ``fact``: "every run", "speculative", "metrics", "auth", or none ("teardown",
    "profile": :data:`NEVER_GATES`)."""
    return NEEDS.get(fact.name, "every run")


def sigterm_exit_status(version: str | None) -> int:
    """The wait status of SGLang's launcher after a graceful SIGTERM stop in release ``version``:
    SIGTERM_SELF_KILL (-9) up to 0.5.18, SIGTERM_CLEAN_EXIT (0) from SIGTERM_CLEAN_EXIT_SINCE; None (no release
    known) or a version that is not a release number: the cited releases' -9."""
    from packaging.version import InvalidVersion, Version

    try:
        after = version is not None and Version(version) >= Version(SIGTERM_CLEAN_EXIT_SINCE)
    except InvalidVersion:
        after = False
    return SIGTERM_CLEAN_EXIT if after else SIGTERM_SELF_KILL
