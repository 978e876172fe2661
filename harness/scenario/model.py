"""The scenario format: pydantic v2 models, strict (unknown keys are errors).

A scenario file is one YAML mapping validated by :class:`Scenario`. A ``matrix`` expands it
into cases (see :mod:`harness.scenario.matrix`); each case is validated again as a whole
scenario without a matrix, so a contradiction that only one case creates is still caught.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationInfo, field_validator, model_validator

from harness.build.reference_server import REVISIONS
from harness.build.spec import BUILD_KINDS
from harness.records.metric_definitions import ACCEPT_LENGTH_BY_SOURCE, CROSS_PHASE
from harness.records.outcome import SIGNED
from harness.scenario.errors import excerpt

__all__ = [
    "AcceptLengthBound",
    "Bound",
    "BuildRole",
    "Checks",
    "Expectation",
    "FlagValue",
    "Hardware",
    "PromptSpec",
    "ProfileExpectation",
    "BaselineCheck",
    "BaselineBound",
    "RelativeChecks",
    "Scenario",
    "Server",
    "Timeouts",
    "TokenRange",
    "Upstream",
    "Workload",
    "WorkloadPhase",
    "PhaseChecks",
    "CrossPhaseCheck",
]

# The outcomes and phases a scenario may expect: the values of harness.records.outcome.Outcome and Phase
# (a test keeps them equal; an interrupted run is never expected).
ExpectedOutcome = Literal["pass", "fail", "crash", "infra", "timeout"]
ExpectedPhase = Literal["pre-flight", "start-up", "warm-up", "workload", "teardown"]

_SLUG = r"^[a-z0-9][a-z0-9_.-]*$"
_FLAG = re.compile(r"^[a-z0-9][a-z0-9-]*\Z")
# Set by the harness for every launch; a scenario that sets them would fight the lease.
_RESERVED_FLAGS = {
    "model-path": "server.model",
    "model": "server.model",
    "speculative-draft-model-path": "server.draft_model",
    "speculative-draft-model": "server.draft_model",
    "host": "server.host",
    "port": "the harness (it leases a free port per run)",
}
_LINK = re.compile(r"^https?://\S+\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_ROLE = re.compile(r"^[a-z][a-z0-9_-]*\Z")
_MARKER = re.compile(r"^[a-z_][a-z0-9_]*\Z")
_KNOB = re.compile(r"^[a-z][a-z-]*=[^,\s]+\Z")
_HOSTNAME = re.compile(r"^(?=.{1,253}\.?\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?\Z")
# Bounds on numbers that size what a run allocates or waits for: a value past them is a typo, and
# would validate, then exhaust memory (a prompt list) or overflow a wait (a timeout) during the run.
_MAX_TOKENS = 10_000_000
_MAX_LENGTHS = 10_000
_MAX_WAIT_S = 7 * 24 * 3600.0
_MAX_ARG_BYTES = 128 * 1024 - 1  # MAX_ARG_STRLEN less the terminating NUL
_MAX_ARGV_BYTES = 1 << 20
_BUILD_KINDS = tuple(f"{kind}:" for kind in BUILD_KINDS)

FlagValue = bool | int | float | str | list[int | float | str] | None


class _Strict(BaseModel):
    # No inf/nan: a timeout of .inf validates and then overflows the first wait that uses it.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class Upstream(_Strict):
    """Where the bug and its fix live upstream."""

    issues: list[str] = Field(default_factory=list)
    fixes: list[str] = Field(default_factory=list)
    last_bad: str | None = None
    first_good: str | None = None

    @field_validator("issues", "fixes")
    @classmethod
    def _links(cls, v: list[str]) -> list[str]:
        for link in v:
            if not _LINK.match(link):
                raise ValueError(f"expected an http(s) link, got {excerpt(link)}")
        return v


class Hardware(_Strict):
    """What a real GPU run needs. The reference server ignores it."""

    gpus: StrictInt = Field(default=1, ge=0, le=64)  # strict: `--set hardware.gpus=true` is no count (it was one GPU)
    gpu_name: str | None = None
    min_memory_gib: float | None = Field(default=None, gt=0)
    min_compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")
    # What a fleet job asks its scheduler for besides GPUs (SLURM's --cpus-per-task and --mem); a local run
    # does not check them. None: the cluster's default.
    cpus: int | None = Field(default=None, ge=1, le=1024, description="CPU cores per job (--cpus-per-task)")
    host_memory_gib: float | None = Field(default=None, gt=0, le=65536,
                                          description="host memory per job in GiB (--mem)")

    @field_validator("gpu_name")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return v


class Server(_Strict):
    """How to start the server: SGLang flags without the leading dashes."""

    model: str = Field(min_length=1)
    draft_model: str | None = None
    args: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    share_between_trials: bool = Field(
        default=True,
        description="trials of a case on one build reuse one server (caches flushed between trials; a fresh "
        "server after any crash or failed check). On by default: the first trial always meets a fresh server, "
        "so a bug that needs one is still seen, and later trials measure the steady server rather than its "
        "start-up. Turn off when every trial must start the server itself.",
    )

    @field_validator("args")
    @classmethod
    def _flags(cls, v: dict[str, FlagValue]) -> dict[str, FlagValue]:
        for name in v:
            if name.startswith("-"):
                raise ValueError(f"flag {excerpt(name)}: write it without leading dashes, "
                                 f"e.g. {excerpt(name.lstrip('-'))}")
            if not _FLAG.match(name):
                raise ValueError(f"flag {excerpt(name)} is not a flag name (lowercase words joined by '-')")
            if name in _RESERVED_FLAGS:
                raise ValueError(f"flag {excerpt(name)} is set from {_RESERVED_FLAGS[name]}, not server.args")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _ENV_NAME.match(name):
                raise ValueError(f"environment variable name {excerpt(name)} is not valid")
        return v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        return check_host(v)

    @model_validator(mode="after")
    def _launchable(self) -> Server:
        # Linux refuses exec (E2BIG) for one argument or variable over 128 KiB, or all of them over
        # a quarter of the stack limit: say so now rather than fail the launch after the build.
        texts = [self.model, self.draft_model or ""]
        for value in self.args.values():
            texts += [str(x) for x in value] if isinstance(value, list) else [str(value)]
        texts += [f"{k}={val}" for k, val in self.env.items()]
        sizes = [len(t.encode("utf-8", "surrogatepass")) for t in texts]
        if max(sizes) > _MAX_ARG_BYTES:
            raise ValueError(f"a value of {max(sizes)} bytes; a command-line argument or environment "
                             f"variable holds at most {_MAX_ARG_BYTES}")
        if sum(sizes) > _MAX_ARGV_BYTES:
            raise ValueError(f"server model, args and env add up to {sum(sizes)} bytes; "
                             f"a command line holds at most {_MAX_ARGV_BYTES}")
        return self


def check_host(host: str) -> str:
    """``host`` if it is an IP literal (IPv4, or IPv6 without brackets) or a DNS host name; else ValueError."""
    if host.startswith("[") and host.endswith("]"):
        raise ValueError(f"write an IPv6 address without brackets, e.g. {excerpt(host[1:-1])}")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if _HOSTNAME.match(host) and not re.match(r"^[0-9.]+\Z", host):
        return host
    raise ValueError(f"{excerpt(host)} is not a host: give an IP address (127.0.0.1, ::1) or a host name (localhost)")


class TokenRange(_Strict):
    """Prompt lengths start, start+step, ... below stop (like Python's range)."""

    start: int = Field(ge=1, le=_MAX_TOKENS)
    stop: int = Field(ge=2, le=_MAX_TOKENS + 1)
    step: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _nonempty(self) -> TokenRange:
        if self.stop <= self.start:
            raise ValueError(f"empty range: stop ({self.stop}) must be greater than start ({self.start})")
        count = len(range(self.start, self.stop, self.step))
        if count > _MAX_LENGTHS:
            raise ValueError(f"the range gives {count} prompt lengths; at most {_MAX_LENGTHS} (use a larger step)")
        return self

    def lengths(self) -> list[int]:
        return list(range(self.start, self.stop, self.step))


class PromptSpec(_Strict):
    """Prompts of exact token counts: seeded random ids, or fixture text cut to length."""

    tokens: int | list[int] | TokenRange
    source: Literal["random-ids", "fixture"] = "random-ids"
    fixture: str | None = None
    seed: int = 0
    vocab: tuple[int, int] = (0, 32000)

    @field_validator("tokens", mode="before")
    @classmethod
    def _tokens(cls, v: Any) -> Any:
        # One clear message instead of pydantic's three union-member errors.
        if isinstance(v, bool):
            raise ValueError("expected a token count (int >= 1), a list of counts, or {start, stop, step}")
        if isinstance(v, int):
            if not 1 <= v <= _MAX_TOKENS:
                raise ValueError(f"a prompt has 1 to {_MAX_TOKENS} tokens, got {excerpt(v)}")
            return v
        if isinstance(v, list):
            if not v:
                raise ValueError("empty list of prompt lengths")
            if len(v) > _MAX_LENGTHS:
                raise ValueError(f"{len(v)} prompt lengths; at most {_MAX_LENGTHS}")
            # type() is not isinstance(): a bool is not a length. This runs once per matrix case: keep it cheap.
            if any(type(x) is not int for x in v) or not 1 <= min(v) <= max(v) <= _MAX_TOKENS:
                raise ValueError(f"every prompt length must be an int >= 1 and <= {_MAX_TOKENS}, got {excerpt(v)}")
            return v
        if isinstance(v, dict):
            return TokenRange.model_validate(v)
        if isinstance(v, TokenRange):
            return v
        raise ValueError("expected a token count (int >= 1), a list of counts, or {start, stop, step}; "
                         f"got {excerpt(v)}")

    @model_validator(mode="after")
    def _fixture(self) -> PromptSpec:
        if self.source == "fixture" and not self.fixture:
            raise ValueError("source 'fixture' needs a 'fixture' text file")
        if self.source == "random-ids" and self.fixture:
            raise ValueError("'fixture' is only used with source: fixture")
        lo, hi = self.vocab
        if not 0 <= lo < hi:
            raise ValueError(f"vocab must be [low, high) with 0 <= low < high, got {list(self.vocab)}")
        return self

    def lengths(self) -> list[int]:
        if isinstance(self.tokens, int):
            return [self.tokens]
        if isinstance(self.tokens, list):
            return list(self.tokens)
        return self.tokens.lengths()


class WorkloadPhase(_Strict):
    """One part of a stateful workload: run after the phases before it on the same server, with no flush.

    Unset fields take the workload's own values. ``replay`` sends an earlier phase's prompts again (the
    prefix cache holds them, on the device or, after pressure, on the host), instead of ``prompt``.
    ``joins`` names the phase just before: this phase starts once each of that phase's measured requests
    has streamed its first token (its prefill is done and it sits in the running batch, decoding), while
    it still runs, instead of after it ends; so its requests join a busy batch (sglang#28264: a prefill
    merged into a running batch carries no stale out_cache_loc).
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=40)
    description: str | None = None
    requests: int | None = Field(default=None, ge=1, le=1_000_000)
    concurrency: int | None = Field(default=None, ge=1, le=10_000)
    prompt: PromptSpec | None = None
    replay: str | None = None
    max_new_tokens: int | None = Field(default=None, ge=1, le=_MAX_TOKENS)
    ignore_eos: bool | None = None
    temperature: float | None = Field(default=None, ge=0)
    warmup: int = Field(default=0, ge=0, le=1_000_000)
    joins: str | None = None

    @model_validator(mode="after")
    def _source(self) -> WorkloadPhase:
        if self.replay is not None and (self.prompt is not None or self.requests is not None):
            raise ValueError("replay sends an earlier phase's prompts: give neither prompt nor requests with it")
        return self


class Workload(_Strict):
    requests: int = Field(ge=1, le=1_000_000)
    concurrency: int = Field(default=1, ge=1, le=10_000)
    request_rate: float | None = Field(default=None, gt=0, description="requests/s; null = all at once")
    prompt: PromptSpec
    max_new_tokens: int = Field(ge=1, le=_MAX_TOKENS)
    ignore_eos: bool = True
    temperature: float = Field(default=0.0, ge=0)
    stream: bool = True
    warmup: int = Field(default=0, ge=0, le=1_000_000)
    trials: int = Field(default=1, ge=1, le=10_000)
    phases: list[WorkloadPhase] | None = Field(
        default=None, description="a stateful workload: these phases in order against one server, no flush between "
        "them (each trial starts its own server); metrics are per phase, named metric@phase")

    @model_validator(mode="after")
    def _phases(self) -> Workload:
        if self.phases is None:
            return self
        if not self.phases:
            raise ValueError("phases is empty: remove it, or give at least one phase")
        seen: list[str] = []
        for i, phase in enumerate(self.phases):
            if phase.name in seen:
                raise ValueError(f"phases[{i}]: phase name {excerpt(phase.name)} is used twice")
            if phase.replay is not None and phase.replay not in seen:
                raise ValueError(f"phases[{i}] ({phase.name}): replay {excerpt(phase.replay)} names no earlier phase "
                                 f"(earlier: {', '.join(seen) or 'none'})")
            if phase.joins is not None:
                before = seen[-1] if seen else None
                if phase.joins != before:
                    raise ValueError(f"phases[{i}] ({phase.name}): joins {excerpt(phase.joins)} must name the phase "
                                     f"just before it ({before or 'none: it is the first'})")
                if not self.stream:
                    raise ValueError(f"phases[{i}] ({phase.name}): joins waits for the first streamed token of "
                                     f"{phase.joins}'s requests: it needs workload.stream true")
            seen.append(phase.name)
        return self

    @property
    def phase_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases or ())


class Bound(_Strict):
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _order(self) -> Bound:
        if self.min is None and self.max is None:
            raise ValueError("a bound needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def violation(self, value: float | None, what: str) -> str | None:
        if value is None:
            return f"{what} was not measured"
        if self.min is not None and value < self.min:
            return f"{what} {value:.3g} < min {self.min:g}"
        if self.max is not None and value > self.max:
            return f"{what} {value:.3g} > max {self.max:g}"
        return None


class BaselineCheck(_Strict):
    """Judged against the recorded baseline of this case, hardware and build line (docs/baselines.md):
    a one-sided test at ``false_failure_rate`` per check, on the item's trials (harness.baselines)."""

    baseline: bool = Field(default=False, description="judge against fixtures/baselines/<scenario>.yaml")
    false_failure_rate: float | None = Field(
        default=None, gt=0, lt=0.5, description="the rate at which an unchanged build fails this check "
        "(default 0.01, or pytest --baseline-false-failure-rate)")

    @model_validator(mode="after")
    def _needs_baseline(self) -> BaselineCheck:
        if self.false_failure_rate is not None and not self.baseline:
            raise ValueError("false_failure_rate applies to a baseline check: add baseline: true")
        return self


class BaselineBound(Bound, BaselineCheck):
    """A bound (min/max on each run) and/or a baseline check (on the item's trials together)."""

    @model_validator(mode="after")
    def _order(self) -> BaselineBound:  # replaces Bound's: a baseline alone is a whole check
        if self.min is None and self.max is None and not self.baseline:
            raise ValueError("a bound needs min, max or both, or baseline: true")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    @property
    def bounded(self) -> bool:
        return self.min is not None or self.max is not None


# SGLang reports three acceptance lengths that differ (harness.measure.client_side explains each); a check names one.
ACCEPT_LENGTH_METRICS = {source.value: m.name for source, m in ACCEPT_LENGTH_BY_SOURCE.items()}


class AcceptLengthBound(BaselineBound):
    source: Literal["requests", "server", "gauge"] = Field(
        default="requests",
        description="which figure is bounded: requests = the measured requests' own spec_accept_length "
                    "(token weighted); server = /server_info avg_spec_accept_length (every request since the "
                    "last /flush_cache, folded every 40 decode batches, absent before); gauge = the /metrics "
                    "sglang:spec_accept_length gauge (recent window)")

    @property
    def metric(self) -> str:
        return ACCEPT_LENGTH_METRICS[self.source]


class RelativeChecks(_Strict):
    """After vs a baseline role: a metric may not drop by more than the fraction given."""

    baseline: str
    accept_length_max_regression: float | None = Field(default=None, ge=0, le=1)
    output_throughput_max_regression: float | None = Field(default=None, ge=0, le=1)


class PhaseChecks(_Strict):
    """Bounds on one workload phase's own figures."""

    accept_length: Bound | None = Field(default=None, description="the phase's requests' own acceptance length")
    cache_hit_rate: Bound | None = Field(default=None, description="cached_tokens / prompt_tokens of its requests")
    output_throughput: Bound | None = None
    accept_rate_by_position: list[Bound | None] | None = Field(
        default=None, description="item k bounds the rate at which draft position k+1 is accepted (null: unbounded)")
    no_decline: float | None = Field(
        default=None, gt=0, lt=1, description="a trend test (the sglang#28771 shape): fail when acceptance length "
        "declines over the phase's time, Kendall's tau < 0 with one-sided p below this level")


# Figures a cross-phase check may compare (their per-phase metric names are NAME@PHASE): the registry's;
# CrossPhaseCheck.metric spells them again as a Literal (pydantic's schema and mypy need the words), and
# tests/test_metric_registry.py holds the two equal.
CROSS_PHASE_METRICS = tuple(m.name for m in CROSS_PHASE)


class CrossPhaseCheck(_Strict):
    """``metric`` of ``phase`` >= ``min_ratio`` x the same metric of ``baseline`` (both phases of one run)."""

    metric: Literal["accept_length", "cache_hit_rate", "output_throughput_tok_s", "accept_rate"] = "accept_length"
    phase: str
    baseline: str
    min_ratio: float = Field(gt=0, le=10)


class Checks(_Strict):
    crash_signatures: list[str] | Literal["all"] = "all"
    all_requests_succeed: bool = True
    accept_length: AcceptLengthBound | None = None
    output_throughput: BaselineBound | None = Field(default=None, description="output tokens/s")
    accept_by_position: BaselineCheck | None = Field(
        default=None, description="acceptance rate at each draft position against the recorded baseline")
    relative: RelativeChecks | None = None
    phases: dict[str, PhaseChecks] = Field(default_factory=dict, description="per workload phase, by phase name")
    across_phases: list[CrossPhaseCheck] = Field(default_factory=list)

    @field_validator("accept_length", "output_throughput", mode="before")
    @classmethod
    def _plain_bound(cls, value: Any, info: ValidationInfo) -> Any:
        # A plain Bound built in code bounds the default figure (the measured requests' own).
        wanted = AcceptLengthBound if info.field_name == "accept_length" else BaselineBound
        if isinstance(value, Bound) and not isinstance(value, wanted):
            return value.model_dump()
        return value

    @model_validator(mode="after")
    def _baseline_rate(self) -> Checks:
        if self.accept_by_position is not None and not self.accept_by_position.baseline:
            raise ValueError("checks.accept_by_position is judged against a recorded baseline: "
                             "write accept_by_position: {baseline: true}")
        return self

    def baseline_checks(self) -> dict[str, BaselineCheck]:
        """The checks judged against recorded baselines, by the figure they judge."""
        found: dict[str, BaselineCheck | None] = {"accept_length": self.accept_length,
                                                   "accept_by_position": self.accept_by_position,
                                                   "output_throughput": self.output_throughput}
        return {name: c for name, c in found.items() if c is not None and c.baseline}


class BuildRole(_Strict):
    """A named role (before, after, ...): a real build spec and the reference server it maps to on CPU (none for a
    role the reference server cannot model, e.g. a scenario written for the real-SGLang CPU build's tiny models)."""

    spec: str
    sim: str | None = None
    description: str | None = None

    @field_validator("spec")
    @classmethod
    def _spec(cls, v: str) -> str:
        if not v.startswith(_BUILD_KINDS):
            raise ValueError(f"build spec {excerpt(v)} must start with one of {', '.join(_BUILD_KINDS)}")
        return v

    @field_validator("sim")
    @classmethod
    def _sim(cls, v: str | None) -> str | None:
        if v is None:
            return v
        revision, _, knobs = v.partition(",")
        if revision not in REVISIONS:
            raise ValueError(f"reference-server revision {excerpt(revision)} is not one of {', '.join(REVISIONS)}")
        for knob in filter(None, knobs.split(",")):
            if not _KNOB.match(knob):
                raise ValueError(f"reference-server knob {excerpt(knob)} must look like name=value")
        # device=cuda is checked against this host's GPUs when a run resolves it; a scenario file is valid anywhere
        portable = ",".join(k for k in v.split(",") if k.replace(" ", "") not in ("device=cuda", "device=cpu"))
        problem = _sim_spec_problem(portable)
        if problem is not None:
            raise ValueError(problem)
        return v

    @property
    def sim_spec(self) -> str:
        if self.sim is None:
            from harness.util.errors import UserError

            raise UserError("this scenario's role has no reference-server mapping (builds.<role>.sim); "
                            "run it on a real build (--cpu or a GPU) instead of --reference")
        return f"sim:{self.sim}"


@functools.lru_cache(maxsize=256)  # every case of every file names the same few (validate: 9,000 calls, 15 specs)
def _sim_spec_problem(portable: str) -> str | None:
    """What the build's own parser says is wrong with ``sim:portable`` (a name, its range), or None: validate
    passed what compare refused. A pure function of the text once ``device=`` (the host's GPUs) is left out."""
    from harness.build.spec import parse_build_spec
    from harness.util.errors import UserError

    try:
        parse_build_spec(f"sim:{portable}")
    except UserError as exc:
        return str(exc).split("; valid build specs:")[0]
    return None


class ProfileExpectation(_Strict):
    """What the role's build profile (:mod:`harness.contract.profile`, recorded as ``build.profile`` in every run)
    must say for the expectation to hold: the scenario's premise about the build, checked on the build it ran on
    (a "before" side that turns out to carry the fix, or to take another draft path, is reported, not silently
    counted). Only the keys given are judged; a key the build's profile does not state (a profile that could not
    be read, or the reference server's, which states its release rules but not a fix marker) does not hold."""

    fix_present: bool | None = Field(default=None, description="PR #29616's fix is in the build")
    eager_max_steps: int | None = Field(
        default=None, ge=0, description="the eager rule: a Frozen-KV MTP draft with at most this many steps runs eagerly")
    swa_refill: Literal["unguarded", "guarded", "none", "present-but-unreachable"] | None = Field(
        default=None, description="trtllm_mha's graph-path SWA refill of out_cache_loc (present-but-unreachable: its "
        "guards cannot hold for a Frozen-KV MTP draft)")
    topk_backends: list[str] | None = Field(default=None, description="the backends a topk > 1 draft may use")

    @model_validator(mode="after")
    def _states_something(self) -> ProfileExpectation:
        if not self.stated():
            raise ValueError("states nothing: give at least one of fix_present, eager_max_steps, swa_refill, "
                             "topk_backends")
        return self

    def stated(self) -> dict[str, Any]:
        """The keys the scenario gives, with their values (a list as given)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.stated().items())

    def mismatch(self, profile: Any) -> str | None:
        """None when ``profile`` (a run record's ``build.profile``) says what is stated; else one line why not."""
        if not isinstance(profile, dict):
            return "the run recorded no build profile"
        if "unavailable" in profile:
            return f"the build's profile could not be read: {profile['unavailable']}"
        for key, want in self.stated().items():
            if key not in profile:
                return f"the build's profile does not state {key}"
            got = profile[key]
            if (sorted(got) if isinstance(got, list) else got) != (sorted(want) if isinstance(want, list) else want):
                return f"the build's profile says {key}={got}, the scenario expects {want}"
        return None


class Expectation(_Strict):
    """What a role should end in: one outcome or a list of acceptable ones, optionally which
    signature(s) (``unknown`` for a crash that matches nothing in the catalogue) and in which phase(s),
    and how sure the scenario is (judged by :mod:`harness.expectations.judge`)."""

    outcome: ExpectedOutcome | list[ExpectedOutcome]
    signature: str | list[str] | None = None
    phase: ExpectedPhase | list[ExpectedPhase] | None = None
    status: Literal["confirmed", "hypothesis"] = Field(
        default="confirmed",
        description="confirmed: an upstream log or a run showed it; hypothesis: reported, never failed, until a "
        "run confirms it",
    )
    evidence: str | None = Field(default=None, description="where it was seen: an upstream log URL, a run id")
    profile: ProfileExpectation | None = Field(
        default=None, description="what the build's profile must say (fix_present, eager_max_steps, swa_refill, "
        "topk_backends): the premise this expectation rests on, judged on the build each run used")

    @field_validator("outcome", "signature", "phase")
    @classmethod
    def _nonempty(cls, v: Any) -> Any:
        if isinstance(v, list):
            if not v:
                raise ValueError("an empty list accepts nothing; give at least one value")
            if len(set(v)) != len(v):
                raise ValueError(f"duplicate values in {excerpt(v)}")
        return v

    @property
    def outcomes(self) -> tuple[str, ...]:
        return tuple(self.outcome) if isinstance(self.outcome, list) else (self.outcome,)

    @property
    def signatures(self) -> tuple[str, ...]:
        if self.signature is None:
            return ()
        return tuple(self.signature) if isinstance(self.signature, list) else (self.signature,)

    @property
    def phases(self) -> tuple[str, ...]:
        if self.phase is None:
            return ()
        return tuple(self.phase) if isinstance(self.phase, list) else (self.phase,)

    @model_validator(mode="after")
    def _consistent(self) -> Expectation:
        if self.signature is not None and not set(self.outcomes) & {o.value for o in SIGNED}:
            raise ValueError(
                f"a signature is only expected with outcome crash or infra, not {'/'.join(self.outcomes)}"
            )
        return self

    def describe(self) -> str:
        text = "|".join(self.outcomes)
        if self.signatures:
            text += f" {'|'.join(self.signatures)}"
        if self.phases:
            text += f" at {'|'.join(self.phases)}"
        if self.profile is not None:
            text += f" on a build whose profile says {self.profile.describe()}"
        return text + (" (hypothesis)" if self.status == "hypothesis" else "")


class Timeouts(_Strict):
    startup_s: float = Field(default=900, gt=0, le=_MAX_WAIT_S)
    request_s: float = Field(default=300, gt=0, le=_MAX_WAIT_S)
    scenario_s: float = Field(default=3600, gt=0, le=_MAX_WAIT_S)


class CpuRun(_Strict):
    """How the scenario runs on the real-SGLang CPU build (``pip:sglang==X,deps=cpu``): SGLang's own code with
    plain-torch kernels and a tiny model made at run time (``tiny:NAME``), never a GPU figure."""

    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="dotted-path overrides applied only on the CPU build (server.*, hardware.*, workload.*, "
        "timeouts.*, checks.*, expect.*), e.g. {server.model: tiny:gemma4, server.args.device: cpu}")
    unsupported: str | None = Field(
        default=None, min_length=1,
        description="why this case does not run on the CPU build (it stays on the reference server); a matrix "
        "variant sets it as cpu.unsupported")


class Scenario(_Strict):
    name: str = Field(pattern=_SLUG)
    description: str = Field(min_length=1)
    upstream: Upstream = Field(default_factory=Upstream)
    hardware: Hardware = Field(default_factory=Hardware)
    server: Server
    workload: Workload
    checks: Checks = Field(default_factory=Checks)
    builds: dict[str, BuildRole] = Field(min_length=1)
    expect: dict[str, Expectation] = Field(default_factory=dict)
    matrix: dict[str, Any] | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    markers: list[str] = Field(default_factory=list)
    reference: dict[str, Any] | None = Field(
        default=None,
        description="dotted-path overrides applied only on the CPU reference server, e.g. a smaller "
        "workload: {workload.requests: 8}",
    )
    cpu: CpuRun | None = Field(
        default=None,
        description="how the scenario runs on the real-SGLang CPU build (pip:sglang==X,deps=cpu): its overrides "
        "and, per case, why it does not",
    )

    @field_validator("builds")
    @classmethod
    def _roles(cls, v: dict[str, BuildRole]) -> dict[str, BuildRole]:
        for role in v:
            if not _ROLE.match(role):
                raise ValueError(f"role name {excerpt(role)} must be lowercase letters, digits, '_' or '-'")
        return v

    @field_validator("markers")
    @classmethod
    def _markers(cls, v: list[str]) -> list[str]:
        for m in v:
            if not _MARKER.match(m):
                raise ValueError(f"marker {excerpt(m)} must be a Python identifier in lowercase")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Scenario:
        for role, exp in self.expect.items():
            if role not in self.builds:
                raise ValueError(f"expect.{role}: no build role {excerpt(role)} (roles: {', '.join(self.builds)})")
            watched = self.checks.crash_signatures
            if watched != "all":
                missing = [s for s in exp.signatures if s != "unknown" and s not in watched]
                if missing:
                    raise ValueError(
                        f"expect.{role} expects signature {excerpt(missing[0])}, "
                        "which checks.crash_signatures does not watch"
                    )
        rel = self.checks.relative
        if rel is not None and rel.baseline not in self.builds:
            raise ValueError(f"checks.relative.baseline: no build role {excerpt(rel.baseline)}")
        if self.matrix is not None and not self.matrix:
            raise ValueError("matrix is empty: remove it, or give at least one axis")
        self._stateful()
        return self

    def _stateful(self) -> None:
        names = self.workload.phase_names
        for phase in self.checks.phases:
            if phase not in names:
                raise ValueError(f"checks.phases.{phase}: no workload phase {excerpt(phase)} "
                                 f"(phases: {', '.join(names) or 'none: add workload.phases'})")
        for i, cross in enumerate(self.checks.across_phases):
            for what in (cross.phase, cross.baseline):
                if what not in names:
                    raise ValueError(f"checks.across_phases[{i}]: no workload phase {excerpt(what)} "
                                     f"(phases: {', '.join(names) or 'none: add workload.phases'})")
        # A stateful trial meets a server no other trial touched and nothing flushes inside it.
        if names and self.server.share_between_trials and "share_between_trials" in self.server.model_fields_set:
            raise ValueError("server.share_between_trials: a stateful workload (workload.phases) never shares a "
                             "server between trials; remove the key or set it to false")

    @property
    def stateful(self) -> bool:
        """Workload phases run on one server: it is never shared with another trial nor flushed inside one."""
        return bool(self.workload.phases)
