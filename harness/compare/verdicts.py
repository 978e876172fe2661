"""The data model of a before/after comparison, and the rules that turn numbers into verdicts.

``compare`` runs each case of a scenario under two or more build roles (``before``, ``after``)
for several trials, fills one ``RoleResult`` per role, and calls ``compare_case``; the report
renderers read the resulting ``ComparisonReport`` and nothing else.

MetricVerdict of one metric (``compare_metric``), in this order:

1. ``not enough data`` when either side has fewer than ``min_samples`` usable values (only
   trials that passed count: a crashed trial has no meaningful throughput), when the rank
   test cannot reach ``alpha`` with these sample sizes even if every trial of one build beat
   every trial of the other (see ``statistics.min_p_value``: 5 trials per side for 0.01), or
   when the ``before`` statistic is 0 so a relative delta does not exist;
2. ``better`` / ``worse`` when all three hold: the Mann-Whitney p-value is below ``alpha``,
   the bootstrap confidence interval of the relative delta excludes 0, and the relative delta
   is at least ``min_effect`` in size. The direction comes from ``higher_is_better``;
3. ``same`` otherwise: no difference this test can tell apart from noise, or one too small
   to matter.

MetricVerdict of a case: ``worse`` if any metric is worse (a regression outweighs an improvement),
else ``better`` if any is better, else ``same`` if any is same, else ``not enough data``.

Expectations are judged by :mod:`harness.expectations.judge` (one judge); this module only holds the result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.baselines.role import RoleBaselines
from harness.build.labels import CPU_BUILD_LABEL
from harness.build.reference_server import REFERENCE_SERVER_LABEL
from harness.expectations.judge import ExpectationCheck
from harness.measure import statistics as st
from harness.records.metric_definitions import COMPARED, Metric
from harness.records.outcome import MEASURED, Outcome, most_telling, parse_outcome
from harness.util.clock import now_iso
from harness.util.str_enum import StrEnum
from harness.version import harness_version as _harness_version

__all__ = [
    "SCHEMA_VERSION",
    "VERDICTS",
    "MetricVerdict",
    "MetricSpec",
    "spec_of",
    "DEFAULT_METRICS",
    "MetricComparison",
    "RoleResult",
    "CaseComparison",
    "ComparisonReport",
    "compare_metric",
    "compare_case",
    "build_report",
    "combine_verdicts",
]

SCHEMA_VERSION = 1


class MetricVerdict(StrEnum):
    """What the numbers say of one metric, a case or a whole comparison (the module docstring's rule). The
    value is the word reports, ``comparison.json`` and the command's summary print, as before the enum."""

    BETTER = "better"
    SAME = "same"
    WORSE = "worse"
    NOT_ENOUGH_DATA = "not enough data"


VERDICTS = tuple(v.value for v in MetricVerdict)


@dataclass(frozen=True)
class MetricSpec:
    """A metric the comparison looks at: its key in ``result.json`` metrics and how to read it."""

    name: str
    label: str
    unit: str = ""
    higher_is_better: bool = True
    min_effect: float = 0.02


def spec_of(metric: Metric, min_effect: float | None = None) -> MetricSpec:
    """How the comparison reads a metric of the registry (``min_effect``: a scenario's own tolerance)."""
    return MetricSpec(metric.name, metric.label, metric.unit, metric.higher_is_better,
                      min_effect or metric.min_effect or 0.02)


DEFAULT_METRICS: tuple[MetricSpec, ...] = tuple(spec_of(m) for m in COMPARED)


def _nan_to_none(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _none_to_nan(value: Any) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class MetricComparison:
    """One metric of one case: the samples, the statistics and the verdict."""

    metric: str
    higher_is_better: bool
    before: tuple[float, ...]
    after: tuple[float, ...]
    delta_rel: float
    ci_low: float
    ci_high: float
    p_value: float
    min_effect: float
    verdict: MetricVerdict
    alpha: float = 0.01
    confidence: float = 0.95
    before_role: str = "before"
    after_role: str = "after"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "before_role": self.before_role,
            "after_role": self.after_role,
            "before": [_nan_to_none(v) for v in self.before],
            "after": [_nan_to_none(v) for v in self.after],
            "before_stats": _stats_dict(self.before),
            "after_stats": _stats_dict(self.after),
            "delta_rel": _nan_to_none(self.delta_rel),
            "ci_low": _nan_to_none(self.ci_low),
            "ci_high": _nan_to_none(self.ci_high),
            "confidence": self.confidence,
            "p_value": _nan_to_none(self.p_value),
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "verdict": self.verdict.value,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricComparison:
        return cls(
            metric=data["metric"],
            higher_is_better=bool(data["higher_is_better"]),
            before=tuple(_none_to_nan(v) for v in data["before"]),
            after=tuple(_none_to_nan(v) for v in data["after"]),
            delta_rel=_none_to_nan(data["delta_rel"]),
            ci_low=_none_to_nan(data["ci_low"]),
            ci_high=_none_to_nan(data["ci_high"]),
            p_value=_none_to_nan(data["p_value"]),
            min_effect=float(data["min_effect"]),
            verdict=MetricVerdict(data["verdict"]),
            alpha=float(data.get("alpha", 0.01)),
            confidence=float(data.get("confidence", 0.95)),
            before_role=data.get("before_role", "before"),
            after_role=data.get("after_role", "after"),
            note=data.get("note", ""),
        )


def _stats_dict(samples: Sequence[float]) -> dict[str, Any] | None:
    finite = [v for v in samples if math.isfinite(v)]
    if not finite:
        return None
    s = st.summarize(finite)
    return {"n": s.n, "mean": s.mean, "median": s.median, "stdev": s.stdev, "min": s.min, "max": s.max}


def _trials_needed(alpha: float) -> int:
    n = 1
    while st.min_p_value(n, n) >= alpha and n < 1000:
        n += 1
    return n


def compare_metric(
    name: str,
    before: Iterable[float | None],
    after: Iterable[float | None],
    *,
    higher_is_better: bool = True,
    min_effect: float = 0.02,
    alpha: float = 0.01,
    min_samples: int = 3,
    confidence: float = 0.95,
    stat: st.StatName = "mean",
    n_resamples: int = 2000,
    seed: int = 0,
    before_role: str = "before",
    after_role: str = "after",
) -> MetricComparison:
    """Compare one metric's per-trial values; see the module docstring for the verdict rule.

    Missing values (``None``, NaN) are dropped before anything is computed.
    """
    b = tuple(float(v) for v in before if v is not None and math.isfinite(v))
    a = tuple(float(v) for v in after if v is not None and math.isfinite(v))
    delta = ci_low = ci_high = p = math.nan
    if b and a:
        delta = st.relative_delta(b, a, stat=stat)
        ci_low, ci_high = st.bootstrap_ci(
            b, a, stat=stat, confidence=confidence, n_resamples=n_resamples, seed=seed
        )
        p = st.mann_whitney(b, a)

    verdict, note = _verdict(b, a, delta, ci_low, ci_high, p, higher_is_better=higher_is_better,
                             min_effect=min_effect, alpha=alpha, min_samples=min_samples, stat=stat,
                             before_role=before_role, after_role=after_role)
    return MetricComparison(
        metric=name,
        higher_is_better=higher_is_better,
        before=b,
        after=a,
        delta_rel=delta,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p,
        min_effect=min_effect,
        verdict=verdict,
        alpha=alpha,
        confidence=confidence,
        before_role=before_role,
        after_role=after_role,
        note=note,
    )


def _verdict(b: tuple[float, ...], a: tuple[float, ...], delta: float, ci_low: float, ci_high: float, p: float, *,
             higher_is_better: bool, min_effect: float, alpha: float, min_samples: int, stat: st.StatName,
             before_role: str, after_role: str) -> tuple[MetricVerdict, str]:
    """The verdict rule of the module docstring on computed figures, and a note saying why when it matters."""
    if len(b) < min_samples or len(a) < min_samples:
        return MetricVerdict.NOT_ENOUGH_DATA, (f"{before_role}: {len(b)}, {after_role}: {len(a)} passing trials with a value; "
                                   f"need {min_samples} on each side")
    if st.min_p_value(len(b), len(a)) >= alpha:
        return MetricVerdict.NOT_ENOUGH_DATA, (f"{len(b)} vs {len(a)} trials cannot reach p < {alpha:g} even with complete "
                                   f"separation; run {_trials_needed(alpha)} trials per side")
    if math.isnan(delta):
        return MetricVerdict.NOT_ENOUGH_DATA, f"{before_role} {stat} is 0: no relative delta"
    significant = p < alpha
    ci_excludes_zero = ci_low > 0.0 or ci_high < 0.0
    if significant and ci_excludes_zero and abs(delta) >= min_effect:
        improved = (delta > 0) == higher_is_better
        return (MetricVerdict.BETTER if improved else MetricVerdict.WORSE), ""
    if significant and ci_excludes_zero:
        return MetricVerdict.SAME, f"difference below the minimum effect of {min_effect:.0%}"
    return MetricVerdict.SAME, ""


@dataclass(frozen=True)
class RoleResult:
    """All trials of one case under one build role.

    Per-trial tuples (``outcomes``, ``signatures``, ``reasons``, ``artifact_dirs`` and each
    ``metrics`` value) are aligned by trial index; ``signatures``, ``reasons`` and
    ``artifact_dirs`` may be empty. ``artifact_dirs`` are paths relative to the report's
    folder. ``excerpt`` is a log excerpt of the first crash, shown escaped in the reports.
    """

    role: str
    build: str
    build_kind: str
    version: str
    outcomes: tuple[Outcome, ...]
    signatures: tuple[str | None, ...] = ()
    reasons: tuple[str, ...] = ()
    metrics: dict[str, tuple[float, ...]] = field(default_factory=dict)
    artifact_dirs: tuple[str, ...] = ()
    excerpt: str = ""
    reference_server: bool = False  # the build is the CPU reference server (sim: or simsrc:), not SGLang
    # The attention backend the server resolved (decode side, then the draft's when it differs), e.g.
    # "triton" or "triton, draft trtllm_mha"; "" when no trial's server said (RunRecord.server).
    attention_backend: str = ""
    # What the build is, in words (harness.contract.profile.describe_profile): "" when no record said.
    profile: str = ""
    # What the build is when it is not SGLang on the scenario's hardware (harness.build.labels); "" when it is.
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcomes", tuple(parse_outcome(o) for o in self.outcomes))
        n = len(self.outcomes)
        for label, values in (
            ("signatures", self.signatures),
            ("reasons", self.reasons),
            ("artifact_dirs", self.artifact_dirs),
            *((f"metrics[{k!r}]", v) for k, v in self.metrics.items()),
        ):
            if values and len(values) != n:
                raise ValueError(f"role {self.role!r}: {label} has {len(values)} entries for {n} trials")

    @property
    def trials(self) -> int:
        return len(self.outcomes)

    @property
    def outcome(self) -> Outcome:
        """The outcome that summarises the trials (``outcome.TELLING_ORDER``), ``infra`` for none."""
        return most_telling(self.outcomes) if self.outcomes else Outcome.INFRA

    @property
    def outcome_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.value] = counts.get(outcome.value, 0) + 1
        return counts

    @property
    def signature(self) -> str | None:
        """The first signature any trial matched."""
        return next((s for s in self.signatures if s), None)

    @property
    def reason(self) -> str:
        """The reason of the first trial with the role's outcome."""
        if not self.reasons:
            return ""
        for outcome, reason in zip(self.outcomes, self.reasons):
            if outcome == self.outcome and reason:
                return reason
        return next((r for r in self.reasons if r), "")

    @property
    def is_reference_server(self) -> bool:
        return self.reference_server

    @property
    def what(self) -> str:
        """What the build is when it is not SGLang on its hardware (the reference server, the CPU build); else ""."""
        if self.label:
            return self.label
        return REFERENCE_SERVER_LABEL if self.is_reference_server else ""

    @property
    def runs_on_cpu(self) -> bool:
        """The real-SGLang CPU build: SGLang's own code, plain-torch kernels, never a GPU figure."""
        return self.what == CPU_BUILD_LABEL

    @property
    def build_label(self) -> str:
        """The build spec, labelled as the CPU model or the real-SGLang CPU build when it is one."""
        return f"{self.build} — {self.what}" if self.what else self.build

    def passing_values(self, metric: str) -> tuple[float, ...]:
        """Values of ``metric`` from the trials that ran their workload to a verdict on its checks (pass, or a
        check that did not hold: a stateful scenario's before role fails on exactly the figure compared); missing
        values dropped."""
        values = self.metrics.get(metric, ())
        return tuple(
            v for v, outcome in zip(values, self.outcomes)
            if outcome in MEASURED and math.isfinite(v)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "build": self.build,
            "build_kind": self.build_kind,
            "build_label": self.build_label,
            "version": self.version,
            "outcome": self.outcome.value,
            "signature": self.signature,
            "reason": self.reason,
            "outcomes": [o.value for o in self.outcomes],
            "signatures": list(self.signatures),
            "reasons": list(self.reasons),
            "metrics": {k: [_nan_to_none(v) for v in vs] for k, vs in self.metrics.items()},
            "artifact_dirs": list(self.artifact_dirs),
            "excerpt": self.excerpt,
            "reference_server": self.reference_server,
            "attention_backend": self.attention_backend,
            "label": self.what,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoleResult:
        return cls(
            role=data["role"],
            build=data["build"],
            build_kind=data["build_kind"],
            version=data.get("version", ""),
            outcomes=tuple(data["outcomes"]),
            signatures=tuple(data.get("signatures", ())),
            reasons=tuple(data.get("reasons", ())),
            metrics={k: tuple(_none_to_nan(v) for v in vs) for k, vs in data.get("metrics", {}).items()},
            artifact_dirs=tuple(data.get("artifact_dirs", ())),
            excerpt=data.get("excerpt", ""),
            reference_server=bool(data.get("reference_server", False)),
            attention_backend=str(data.get("attention_backend") or ""),
            profile=str(data.get("profile") or ""),
            label=str(data.get("label") or ""),
        )


def combine_verdicts(verdicts: Iterable[MetricVerdict | str]) -> MetricVerdict:
    """One verdict from many: worse > better > same > not enough data."""
    seen = {MetricVerdict(v) for v in verdicts}
    order = (MetricVerdict.WORSE, MetricVerdict.BETTER, MetricVerdict.SAME)
    return next((verdict for verdict in order if verdict in seen), MetricVerdict.NOT_ENOUGH_DATA)


@dataclass(frozen=True)
class CaseComparison:
    """One case of the scenario (one point of its matrix) under every role."""

    case: str
    values: dict[str, Any]
    roles: tuple[RoleResult, ...]
    expectations: tuple[ExpectationCheck, ...]
    metrics: tuple[MetricComparison, ...]
    verdict: MetricVerdict
    # Each role's baseline checks (harness.baselines.role), for a scenario that has any: shown in the reports
    # (pytest -m gpu is what fails on them; a comparison's exit code stays its expectations' and metrics').
    baselines: tuple[RoleBaselines, ...] = ()

    @property
    def expectations_held(self) -> bool:
        """No confirmed expectation that was tried failed (hypotheses and roles that could not run aside)."""
        return not any(check.failed for check in self.expectations)

    @property
    def not_run(self) -> tuple[ExpectationCheck, ...]:
        """Expectations of roles that could not even try (each says why)."""
        return tuple(c for c in self.expectations if c.not_run)

    def role(self, name: str) -> RoleResult:
        for result in self.roles:
            if result.role == name:
                return result
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "values": dict(self.values),
            "verdict": self.verdict.value,
            "expectations_held": self.expectations_held,
            "roles": [r.to_dict() for r in self.roles],
            "expectations": [e.to_dict() for e in self.expectations],
            "metrics": [m.to_dict() for m in self.metrics],
            "baselines": [r.to_dict() for r in self.baselines],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseComparison:
        return cls(
            case=data["case"],
            values=dict(data.get("values", {})),
            roles=tuple(RoleResult.from_dict(r) for r in data["roles"]),
            expectations=tuple(ExpectationCheck.from_dict(e) for e in data.get("expectations", ())),
            metrics=tuple(MetricComparison.from_dict(m) for m in data.get("metrics", ())),
            verdict=MetricVerdict(data["verdict"]),
            baselines=tuple(RoleBaselines.from_dict(r) for r in data.get("baselines", ())),
        )


def compare_case(
    case: str,
    values: Mapping[str, Any],
    roles: Sequence[RoleResult],
    expectations: Sequence[ExpectationCheck] = (),
    *,
    metrics: Sequence[MetricSpec] = DEFAULT_METRICS,
    alpha: float = 0.01,
    min_samples: int = 3,
    confidence: float = 0.95,
    seed: int = 0,
) -> CaseComparison:
    """Compare the metrics of one case; ``expectations`` were judged by :mod:`harness.expectations.judge`.

    ``roles[0]`` is the baseline; every later role is compared with it.
    """
    if not roles:
        raise ValueError(f"case {case!r}: no role results")
    baseline = roles[0]
    comparisons = [
        compare_metric(
            spec.name,
            baseline.passing_values(spec.name),
            other.passing_values(spec.name),
            higher_is_better=spec.higher_is_better,
            min_effect=spec.min_effect,
            alpha=alpha,
            min_samples=min_samples,
            confidence=confidence,
            seed=seed,
            before_role=baseline.role,
            after_role=other.role,
        )
        for other in roles[1:]
        for spec in metrics
    ]
    return CaseComparison(
        case=case,
        values=dict(values),
        roles=tuple(roles),
        expectations=tuple(expectations),
        metrics=tuple(comparisons),
        verdict=combine_verdicts(c.verdict for c in comparisons),
    )


@dataclass(frozen=True)
class ComparisonReport:
    """Everything one ``compare`` invocation found; the only input of the report renderers."""

    id: str
    scenario: str
    file: str
    created_at: str
    cases: tuple[CaseComparison, ...]
    all_expectations_held: bool
    harness_version: str = field(default_factory=_harness_version)
    notes: tuple[str, ...] = ()
    partial: str = ""  # why the comparison stopped early (interrupted); empty when it ran to the end

    @property
    def any_not_run(self) -> bool:
        return any(c.not_run for c in self.cases)

    @property
    def verdict(self) -> MetricVerdict:
        return combine_verdicts(c.verdict for c in self.cases)

    @property
    def uses_reference_server(self) -> bool:
        return any(r.is_reference_server for c in self.cases for r in c.roles)

    @property
    def uses_cpu_build(self) -> bool:
        """Whether a role ran the real-SGLang CPU build (every page then says what its figures are)."""
        return any(r.runs_on_cpu for c in self.cases for r in c.roles)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "scenario": {"name": self.scenario, "file": self.file},
            "created_at": self.created_at,
            "harness_version": self.harness_version,
            "verdict": self.verdict.value,
            "all_expectations_held": self.all_expectations_held,
            "partial": self.partial,
            "notes": list(self.notes),
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComparisonReport:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version {version!r} is not supported (this harness reads {SCHEMA_VERSION})")
        return cls(
            id=data["id"],
            scenario=data["scenario"]["name"],
            file=data["scenario"]["file"],
            created_at=data["created_at"],
            cases=tuple(CaseComparison.from_dict(c) for c in data["cases"]),
            all_expectations_held=bool(data["all_expectations_held"]),
            harness_version=data.get("harness_version", ""),
            notes=tuple(data.get("notes", ())),
            partial=str(data.get("partial", "")),
        )


def build_report(
    id: str,
    scenario: str,
    file: str,
    cases: Sequence[CaseComparison],
    *,
    notes: Sequence[str] = (),
    created_at: str | None = None,
    harness_version: str | None = None,
    partial: str = "",
) -> ComparisonReport:
    """Assemble the report; expectations hold overall when they hold in every case."""
    return ComparisonReport(
        id=id,
        scenario=scenario,
        file=file,
        created_at=created_at or now_iso(),
        cases=tuple(cases),
        all_expectations_held=all(c.expectations_held for c in cases),
        harness_version=harness_version or _harness_version(),
        notes=tuple(notes),
        partial=partial,
    )
