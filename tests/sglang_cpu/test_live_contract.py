"""The contract held to a live real SGLang server on the CPU, fact by fact and release by release.

``harness/contract/facts.py`` backs each fact with a source line; here each fact a running server shows is
observed on the real thing (one server per release, :mod:`tests.sglang_cpu.observe`) and compared with the
contract's value. A mismatch fails the test ``test_fact_holds_live[<release>-<FACT>]`` with the fact and the
release in its message. Every fact is either checked here (:data:`CHECKS`) or says why a plain running server
cannot show it (:data:`NOT_SHOWN`); a new fact fails :func:`test_every_fact_is_checked_or_says_why_not` until
it is sorted. A fact the contract states but the live server contradicts in a release, with the source line
that explains it, is in :data:`KNOWN_DRIFT`: strict xfail, so fixing the contract turns it into a failure that
asks to drop the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime

import pytest
from packaging.version import Version

from harness.contract import facts as contract
from tests.sglang_cpu.observe import CrashObservations, Observations, stream_events

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]

Check = Callable[[Observations, CrashObservations], list[str]]


def _before_ready(log: str) -> str:
    return log.split(contract.READY_LINE, 1)[0]


def _requests_received(log: str) -> list[str]:
    """The ``Receive: obj=GenerateReqInput(...)`` records of ``--log-requests``, in order."""
    return [line for line in log.splitlines() if "Receive: obj=GenerateReqInput(" in line]


def _health_checks(log: str) -> list[str]:
    return [r for r in _requests_received(log) if f"rid='{contract.HEALTH_CHECK_RID_PREFIX}" in r]


def _warmup_request(log: str) -> str | None:
    received = [r for r in _requests_received(_before_ready(log)) if r not in _health_checks(log)]
    return received[0] if received else None


def _log_seconds(line: str) -> datetime:
    return datetime.strptime(line[1:20], contract.LOG_DATE_FORMAT)


def _missing(what: str, needles: tuple[str, ...] | list[str], haystack: object) -> list[str]:
    return [f"{what} lacks {needle!r}" for needle in needles if needle not in haystack]  # type: ignore[operator]


def _ready(o: Observations, _: CrashObservations) -> list[str]:
    return [] if contract.READY_LINE in o.log else [f"no line {contract.READY_LINE!r} in the log"]


def _ok(*paths: str) -> Check:
    def check(o: Observations, _: CrashObservations) -> list[str]:
        return [f"GET {p}: HTTP {o.get[p][0]}" for p in paths if o.get[p][0] != 200]

    return check


def _health_starting(o: Observations, _: CrashObservations) -> list[str]:
    if not o.health_before_ready:
        return ["no /health answer was caught between the port opening and the ready line"]
    other = sorted(set(o.health_before_ready) - {contract.HEALTH_STARTING_STATUS})
    return [f"/health answered {other} before the ready line"] if other else []


def _health_generates(o: Observations, _: CrashObservations) -> list[str]:
    # The variable is unset here: with HEALTH_GENERATION_DEFAULT, /health runs a generation (logged by --log-requests).
    generates = bool(_health_checks(o.log))
    return [] if generates == contract.HEALTH_GENERATION_DEFAULT else [f"/health generated: {generates}"]


def _health_poll(o: Observations, _: CrashObservations) -> list[str]:
    seconds = o.get[contract.HEALTH_PATH][2]
    return [] if seconds >= contract.HEALTH_CHECK_POLL_S else [f"/health answered in {seconds:.2f} s"]


def _health_ids(o: Observations, _: CrashObservations) -> list[str]:
    found = {m.group(1) for r in _health_checks(o.log) if (m := re.search(r"input_ids=(\[[^\]]*\])", r))}
    expected = json.dumps(list(contract.HEALTH_CHECK_INPUT_IDS)).replace(" ", "")
    return [] if found == {expected} else [f"health checks' input_ids: {sorted(found)}"]


def _health_rid(o: Observations, _: CrashObservations) -> list[str]:
    return [] if _health_checks(o.log) else [f"no request with rid '{contract.HEALTH_CHECK_RID_PREFIX}...' logged"]


def _warmup_model_info(o: Observations, _: CrashObservations) -> list[str]:
    needle = f'"GET {contract.WARMUP_MODEL_INFO_PATH} HTTP/1.1" 200'
    return [] if needle in _before_ready(o.log) else [f"no {needle} before the ready line"]


def _warmup_tokens(o: Observations, _: CrashObservations) -> list[str]:
    warmup = _warmup_request(o.log)
    if warmup is None:
        return ["no request logged before the ready line"]
    found = re.search(r"'max_new_tokens': (\d+)", warmup)
    value = int(found.group(1)) if found else None
    return [] if value == contract.WARMUP_MAX_NEW_TOKENS else [f"warm-up max_new_tokens {value}"]


def _warmup_text(o: Observations, _: CrashObservations) -> list[str]:
    warmup = _warmup_request(o.log)
    if warmup is None:
        return ["no request logged before the ready line"]
    return [] if f"text={contract.WARMUP_TEXT!r}" in warmup else [f"warm-up request: {warmup[70:200]}"]


def _server_info(o: Observations) -> dict[str, object]:
    return o.json_of(contract.SERVER_INFO_PATHS[0])


def _skip_warmup(o: Observations, _: CrashObservations) -> list[str]:
    info = _server_info(o)
    return [] if info.get("skip_server_warmup") is False else [f"skip_server_warmup: {info.get('skip_server_warmup')!r}"]


def _generate(o: Observations, _: CrashObservations) -> list[str]:
    return [] if isinstance(o.generated.get("output_ids"), list) else [f"POST {contract.GENERATE_PATH}: {o.generated}"]


def _stream_prefix(o: Observations, _: CrashObservations) -> list[str]:
    bad = [e[:40] for e in stream_events(o.stream_raw) if not e.startswith(contract.STREAM_DATA_PREFIX)]
    return [f"events not starting {contract.STREAM_DATA_PREFIX!r}: {bad}"] if bad else []


def _stream_done(o: Observations, _: CrashObservations) -> list[str]:
    last = stream_events(o.stream_raw)[-1].strip()
    return [] if last == contract.STREAM_DONE else [f"last event {last[:60]!r}"]


def _json_paths(*paths: str) -> Check:
    def check(o: Observations, _: CrashObservations) -> list[str]:
        problems = []
        for path in paths:
            status, body, _seconds = o.get[path]
            if status != 200 or not isinstance(json.loads(body or b"null"), dict):
                problems.append(f"GET {path}: HTTP {status}, {body[:80]!r}")
        return problems

    return check


def _auth_exempt(o: Observations, _: CrashObservations) -> list[str]:
    asked = {contract.HEALTH_PATH: "/health", contract.METRICS_PATH: "/metrics"}
    problems = [f"{path} without the key: HTTP {o.unauthenticated[path]}" for path in asked if o.unauthenticated[path] != 200]
    covered = [prefix for prefix in contract.AUTH_EXEMPT_PREFIXES if not any(p.startswith(prefix) for p in asked)]
    return problems + [f"exempt prefix {p!r} not asked" for p in covered]


def _unauthorized(o: Observations, _: CrashObservations) -> list[str]:
    status = o.unauthenticated[contract.GENERATE_PATH]
    body = json.loads(o.unauthorized_body or b"{}")
    if status != 401 or body.get("error") != contract.UNAUTHORIZED_ERROR:
        return [f"/generate without the key: HTTP {status} {body}"]
    return []


def _flush(o: Observations, _: CrashObservations) -> list[str]:
    return [] if o.flush_status == 200 else [f"{contract.FLUSH_CACHE_PATH}: HTTP {o.flush_status}"]


def _meta_keys(o: Observations, _: CrashObservations) -> list[str]:
    meta = o.generated.get("meta_info")
    return _missing("meta_info", contract.META_INFO_KEYS, meta if isinstance(meta, dict) else {})


def _cached_details(o: Observations, _: CrashObservations) -> list[str]:
    details = o.cached_second.get("cached_tokens_details")
    if not isinstance(details, dict):
        return [f"a cached prefix's cached_tokens_details: {details!r}"]
    return _missing("cached_tokens_details", contract.CACHED_TOKENS_DETAILS_KEYS, details)


def _flush_resets(o: Observations, _: CrashObservations) -> list[str]:
    before, after = o.cached_second.get("cached_tokens"), o.after_flush.get("cached_tokens")
    return [] if isinstance(before, int) and before > 0 and after == 0 else [f"cached_tokens {before} then {after}"]


def _abort(o: Observations, _: CrashObservations) -> list[str]:
    meta = o.abort_last.get("meta_info")
    reason = meta.get("finish_reason") if isinstance(meta, dict) else None
    if not isinstance(reason, dict):
        return [f"aborted stream's last finish_reason: {reason!r}"]
    problems = [] if reason.get("type") == contract.ABORT_TYPE else [f"finish_reason.type {reason.get('type')!r}"]
    return problems + ([] if tuple(reason) == contract.ABORT_KEYS else [f"finish_reason keys {tuple(reason)}"])


def _metrics(o: Observations, _: CrashObservations) -> list[str]:
    text = o.get[contract.METRICS_PATH][1].decode()
    # The speculative names appear only on a speculative server (tests/sglang_cpu/test_speculative.py).
    names = [n for n in contract.METRIC_NAMES if "spec_" not in n]
    return [f"/metrics lacks {n}" for n in names if not re.search(rf"^{re.escape(n)}[{{ ]", text, re.M)]


def _rank_tags(o: Observations, _: CrashObservations) -> list[str]:
    tags = "|".join(contract.LOG_RANK_TAGS)
    tagged = [line[:60] for line in o.log.splitlines() if re.match(rf"^\[[^\]]* (?:{tags})\d+[^\]]*\]", line)]
    return [f"rank tags with dp/tp/pp of 1: {tagged[:2]}"] if tagged else []


def _date_format(o: Observations, _: CrashObservations) -> list[str]:
    stamped = [line for line in o.log.splitlines() if line.startswith("[") and contract.READY_LINE in line]
    try:
        _log_seconds(stamped[0])
    except (IndexError, ValueError) as exc:
        return [f"ready line's time stamp: {exc}"]
    return []


def _sigterm_line(o: Observations, _: CrashObservations) -> list[str]:
    return [] if contract.SIGTERM_LINE in o.log else [f"no {contract.SIGTERM_LINE!r} after SIGTERM"]


def _drain_line(o: Observations, _: CrashObservations) -> list[str]:
    return [] if contract.SIGTERM_DRAIN_LINE in o.log else [f"no {contract.SIGTERM_DRAIN_LINE!r} with a request in flight"]


def _drain_poll(o: Observations, _: CrashObservations) -> list[str]:
    stamps = [_log_seconds(line) for line in o.log.splitlines() if contract.SIGTERM_DRAIN_LINE in line]
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
    # Whole-second stamps: a 5 s wait reads 4-6 s (more under load: the loop also runs the decode).
    bad = [g for g in gaps[:-1] if not contract.SIGTERM_POLL_S - 1 <= g <= contract.SIGTERM_POLL_S + 2]
    if len(stamps) < 2:
        return [f"{len(stamps)} drain line(s): cannot see the poll interval"]
    return [f"drain looks {gaps} s apart"] if bad else []


def _sigterm_exit(o: Observations, _: CrashObservations) -> list[str]:
    # Per release: -9 up to 0.5.18 (the launcher SIGKILLs itself), 0 from 0.5.19 (it kills only its children).
    code = o.stopped.returncode if o.stopped else None
    expected = contract.sigterm_exit_status(o.version)
    problems = [] if code == expected else [f"launcher's wait status after SIGTERM: {code}, contract {expected} "
                                            f"for {o.version}"]
    return problems + ([f"left behind: {o.stopped.survivors}"] if o.stopped and o.stopped.survivors else [])


def _child_crashed(_: Observations, c: CrashObservations) -> list[str]:
    return [] if contract.CHILD_CRASHED_LINE in c.log else [f"no {contract.CHILD_CRASHED_LINE!r} after {c.killed} died"]


def _child_running(_: Observations, c: CrashObservations) -> list[str]:
    return [] if contract.CHILD_FAILED_RUNNING_LINE in c.log else [f"no {contract.CHILD_FAILED_RUNNING_LINE!r}"]


def _child_self_kill(_: Observations, c: CrashObservations) -> list[str]:
    problems = [] if c.stopped.returncode == contract.CHILD_FAILED_SELF_KILL else [
        f"launcher's wait status after its scheduler died: {c.stopped.returncode}"]
    return problems + ([f"left behind: {c.stopped.survivors}"] if c.stopped.survivors else [])


def _defaults(o: Observations, _: CrashObservations) -> list[str]:
    info = _server_info(o)
    given = {"host", "port", "enable_metrics"}  # set on the command line: only their presence is a fact here
    problems = [f"/server_info lacks {k}" for k in contract.DEFAULTS if k not in info]
    return problems + [f"{k} = {info[k]!r}, contract {v!r}" for k, v in contract.DEFAULTS.items()
                       if k in info and k not in given and info[k] != v]


def _resolved_keys(o: Observations, _: CrashObservations) -> list[str]:
    return _missing("/server_info", contract.RESOLVED_ATTENTION_KEYS, _server_info(o))


CHECKS: dict[str, Check] = {
    "READY_LINE": _ready,
    "HEALTH_PATH": _ok(contract.HEALTH_PATH),
    "HEALTH_GENERATE_PATH": _ok(contract.HEALTH_GENERATE_PATH),
    "HEALTH_STARTING_STATUS": _health_starting,
    "HEALTH_GENERATION_ENV": _health_generates,
    "HEALTH_CHECK_POLL_S": _health_poll,
    "HEALTH_CHECK_INPUT_IDS": _health_ids,
    "HEALTH_CHECK_RID_PREFIX": _health_rid,
    "WARMUP_MODEL_INFO_PATH": _warmup_model_info,
    "WARMUP_MAX_NEW_TOKENS": _warmup_tokens,
    "WARMUP_TEXT": _warmup_text,
    "SKIP_SERVER_WARMUP_FLAG": _skip_warmup,
    "GENERATE_PATH": _generate,
    "STREAM_DATA_PREFIX": _stream_prefix,
    "STREAM_DONE": _stream_done,
    "SERVER_INFO_PATHS": _json_paths(*contract.SERVER_INFO_PATHS),
    "MODEL_INFO_PATHS": _json_paths(*contract.MODEL_INFO_PATHS),
    "AUTH_EXEMPT_PREFIXES": _auth_exempt,
    "UNAUTHORIZED_ERROR": _unauthorized,
    "FLUSH_CACHE_PATH": _flush,
    "MODELS_PATH": _json_paths(contract.MODELS_PATH),
    "META_INFO_KEYS": _meta_keys,
    "CACHED_TOKENS_DETAILS_KEYS": _cached_details,
    "FLUSH_RESETS_TREE": _flush_resets,
    "ABORT_KEYS": _abort,
    "METRIC_NAMES": _metrics,
    "LOG_RANK_TAGS": _rank_tags,
    "LOG_DATE_FORMAT": _date_format,
    "SIGTERM_LINE": _sigterm_line,
    "SIGTERM_POLL_S": _drain_poll,
    "SIGTERM_DRAIN_LINE": _drain_line,
    "SIGTERM_SELF_KILL": _sigterm_exit,
    "SIGTERM_CLEAN_EXIT": _sigterm_exit,
    "CHILD_FAILED_RUNNING_LINE": _child_running,
    "CHILD_CRASHED_LINE": _child_crashed,
    "CHILD_FAILED_SELF_KILL": _child_self_kill,
    "DEFAULTS": _defaults,
    "RESOLVED_ATTENTION_KEYS": _resolved_keys,
}

_SPEC = "a speculative server's (tests/sglang_cpu/test_speculative.py)"
_SOURCE = ("a fact of the source (a Frozen-KV MTP draft path or a build profile), checked in the wheels by "
           "tests/test_contract.py")
NOT_SHOWN: dict[str, str] = {
    "ENV_TRUE": "how SGLang parses a boolean variable: no server output shows it",
    "HEALTH_CHECK_TIMEOUT_S": "needs a scheduler that stops answering for 20 s",
    "WARMUP_CHAT_PATH": "warm-up of a model with image understanding (vision_config); the tiny Llama has none",
    "WARMUP_IMAGE_PROMPT": "warm-up of a model with image understanding; the tiny Llama has none",
    "WARMUP_FAILED_LINE": "needs a warm-up request that fails",
    "SPEC_META_INFO_KEYS": _SPEC,
    "SPEC_HISTOGRAM_KEYS": _SPEC,
    "AVG_ACCEPT_LENGTH_KEY": _SPEC,
    "DRAFT_QUANTIZATION_UNQUANT": _SPEC + " flag resolution, with a quantized target",
    "HICACHE_HOST_SIZE": "HiCache's host pool size: no endpoint reports it",
    "LOG_OTHER_TAGS": "the encode server's loggers (disaggregated multimodal encoding)",
    "SCHEDULER_EXCEPTION": "needs a request that raises in the scheduler (the seed's crash: issue 51)",
    "CHILD_FAILED_LINE": "needs a child to die before the first request (a race with the warm-up)",
    "SIGTERM_FORCE_ENV": "a variable that skips the drain; the drain itself is checked",
    "SIGTERM_SCHEDULER_WAIT_S": "needs a scheduler that does not exit on ShutdownReq",
    "CHILD_POLL_S": "the watchdog's 1 s period: log stamps are whole seconds",
    "NO_ACCELERATOR": "logged only where no device is found; the CPU build runs on --device cpu",
    "FIX_MARKER": _SOURCE,
    "FROZEN_KV_MTP_MAX_RUNNING_DEFAULT": _SOURCE,
    "DRAFT_TOPK_BACKEND": _SOURCE,
    "DRAFT_EAGER_CHOICE": _SOURCE,
    "DRAFT_GRAPH_PATH": _SOURCE,
    "STALE_ONLY_IN_A_FRESH_RUNNING_BATCH": _SOURCE,
    "EXTEND_TOKENS_ONLY": _SOURCE,
    "CHUNKED_PREFILL": _SOURCE,
    "GEMMA4_DEFAULT_ATTENTION_BACKEND": _SOURCE,
    "DRAFT_GRAPH_SWA_REFILL": _SOURCE,
    "DRAFT_GRAPH_FUSED_SWA_LOC": _SOURCE,
}

# fact -> (the first release where the live server contradicts the contract, the source lines that explain it).
# The contract should record these; until it does, each is a strict expected failure from that release on.
KNOWN_DRIFT: dict[str, tuple[str, str]] = {}


def _drift(fact: str, version: str) -> str | None:
    entry = KNOWN_DRIFT.get(fact)
    return entry[1] if entry is not None and Version(version) >= Version(entry[0]) else None


def test_every_fact_is_checked_or_says_why_not() -> None:
    names = {fact.name for fact in contract.FACTS}
    unsorted = sorted(names - set(CHECKS) - set(NOT_SHOWN))
    stale = sorted((set(CHECKS) | set(NOT_SHOWN)) - names)
    assert not unsorted, f"contract facts neither checked live nor said why not: {unsorted}"
    assert not stale, f"checks of facts the contract no longer has: {stale}"
    assert not set(CHECKS) & set(NOT_SHOWN)


@pytest.mark.parametrize("fact", sorted(CHECKS))
def test_fact_holds_live(fact: str, plain_server: Observations, crashed_server: CrashObservations) -> None:
    assert plain_server.version == crashed_server.version
    version = plain_server.version
    drift = _drift(fact, version)
    problems = CHECKS[fact](plain_server, crashed_server)
    if drift is not None:
        assert problems, f"contract fact {fact} now holds live on real sglang {version}: drop its KNOWN_DRIFT entry"
        pytest.xfail(f"contract fact {fact} on real sglang {version}: {'; '.join(problems)} ({drift})")
    assert not problems, (f"contract fact {fact} does not hold on real sglang {version} (CPU build): "
                          + "; ".join(problems))


def test_known_drifts_name_checked_facts() -> None:
    assert set(KNOWN_DRIFT) <= set(CHECKS)
