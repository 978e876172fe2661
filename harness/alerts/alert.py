"""Alerts: confirmed changes in a series (step, drift) and events (a new signature, pass -> crash/fail).

An alert has a fingerprint (what changed, where, from which first bad build, and the name it was
raised under, which a rename keeps) and a state (open / resolved / transient) in the store, so it
fires once. It names the last good and the
first bad build and the ``sglang-repro bisect`` command that would find the culprit.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.records.outcome import MISBEHAVED, Outcome
from harness.series.detections import SeriesFindings, case_findings
from harness.series.points import CasePoints, Point
from harness.series.steps import LARGE_CHANGE
from harness.util.clock import now_iso

__all__ = ["STEP_KINDS", "Alert", "bisect_command", "case_alerts", "fingerprint", "names_json", "new_alerts"]

# A metric's change; a level change is renamed step or drift; a large change is raised on its second night.
STEP_KINDS = ("step", "drift", "level-change", LARGE_CHANGE)


@dataclass(frozen=True)
class Alert:
    fingerprint: str
    kind: str  # step | drift | new-signature | pass-to-crash | pass-to-fail
    scenario: str
    case: str
    hardware: str
    metric: str | None
    signature: str | None
    last_good: Point | None
    first_bad: Point
    effect: float | None
    detail: str
    bisect: str
    scenario_file: str = ""
    threshold: float | None = None  # a metric alert: the value between the levels before and after
    # Every name it had, oldest first: (night's batch label, name, evidence); empty when it never had another.
    names: tuple[tuple[str, str, str], ...] = ()

    def row(self, batch_id: str, incident: str | None = None) -> dict[str, Any]:
        """The store's row; ``incident`` is the fingerprint of the incident it belongs to (its own by default)."""
        now = now_iso()
        return {"fingerprint": self.fingerprint, "kind": self.kind, "scenario": self.scenario,
                "case_name": self.case, "metric": self.metric, "hardware_key": self.hardware,
                "signature": self.signature, "last_good": self.last_good.build_label if self.last_good else None,
                "first_bad": self.first_bad.build_label, "effect": self.effect, "detail": self.detail,
                "bisect": self.bisect, "state": "open", "batch_id": batch_id, "created_at": now, "updated_at": now,
                "incident": incident or self.fingerprint, "names": names_json(self.names)}

    def describe(self) -> str:
        good = self.last_good.build_label if self.last_good else "none recorded"
        return (f"{self.kind.upper()} {self.scenario} [{self.case}] on {self.hardware}: {self.detail}\n"
                f"    last good: {good}\n    first bad: {self.first_bad.build_label}\n    bisect: {self.bisect}")


def names_json(names: Sequence[tuple[str, str, str]]) -> str | None:
    """The store's ``alerts.names``: the history of an alert's names as JSON (None: it had one name)."""
    return json.dumps([{"night": n, "name": k, "evidence": e} for n, k, e in names]) if names else None


def fingerprint(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:20]


def _history_between(good: Point, bad: Point) -> str | None:
    """'releases' or 'commits' when a bisect between the two builds can run, else None."""
    if (good.build_spec.startswith("pip:") and bad.build_spec.startswith("pip:") and good.build_version
            and bad.build_version and good.build_version != bad.build_version):
        return "releases"
    if good.build_commit and bad.build_commit and good.build_commit != bad.build_commit:
        return "commits"
    return None


def _checkout(spec: str) -> str:
    """The checkout a ``src:CHECKOUT[@REV][,base=PATH]`` (or ``simsrc:``) build came from; ``CHECKOUT``
    when the spec does not say (the one placeholder left: a path on the reader's machine)."""
    kind, _, rest = spec.partition(":")
    if kind in ("src", "simsrc") and rest:
        return rest.split(",")[0].split("@")[0]
    return "CHECKOUT"


def bisect_command(cp: CasePoints, good: Point | None, bad: Point, *, signature: str | None = None,
                   metric: str | None = None, threshold: float | None = None) -> str:
    """The next step, runnable as printed for what the two builds are.

    ``sglang-repro bisect ... --releases A..B`` for two releases; ``--repo CHECKOUT --good C1 --bad C2``
    when both carry commits; for builds with no history between them (two reference-server specs,
    two ``python:`` environments) the ``sglang-repro compare`` that confirms the change; and when
    nothing passed before, the ``sglang-repro run`` that reproduces it.
    """
    if good is None:
        return shlex.join(["sglang-repro", "run", cp.scenario_file, "--case", cp.case, "--build", bad.build_spec]
                          ) + _set_words(bad)
    how = _history_between(good, bad)
    if how is None:
        return shlex.join(["sglang-repro", "compare", cp.scenario_file, "--case", cp.case,
                           "--before", good.build_spec, "--after", bad.build_spec]) + _set_words(bad)
    argv = ["sglang-repro", "bisect", cp.scenario_file, "--case", cp.case]
    if how == "releases":
        argv += ["--releases", f"{good.build_version}..{bad.build_version}"]
    else:
        argv += ["--repo", _checkout(bad.build_spec), "--good", str(good.build_commit), "--bad", str(bad.build_commit)]
    if signature:
        argv += ["--signature", signature]
    elif metric:
        argv += ["--metric", metric]
        if threshold is not None:
            argv += ["--threshold", f"{threshold:.6g}"]
    return shlex.join(argv) + _set_words(bad)


_REFERENCE = re.compile(r"^[A-Za-z0-9_.+-]+=\$\{[A-Za-z0-9_]+\}\Z")


def _set_words(bad: Point) -> str:
    """The first bad night's ``--set`` overrides as words of the command (without them it runs another case: the
    night's failure passes). A secret is recorded as ``FIELD=${VAR}`` (``overrides.recorded_set``): double-quoted,
    so the shell that runs the line puts the user's own value in; every other value single-quoted, as typed."""
    words = [f'"{s}"' if _REFERENCE.match(s) else shlex.quote(s) for s in bad.sets]
    return "".join(f" --set {w}" for w in words)


def _event_alerts(cp: CasePoints) -> list[Alert]:
    alerts: list[Alert] = []
    seen: set[str] = set()
    last_decided: Point | None = None
    last_pass: Point | None = None
    for p in cp.points:
        if p.outcome is None:
            continue
        fresh = [s for s in p.signatures if s not in seen]
        if p.outcome == Outcome.CRASH and fresh:
            sig = fresh[0]
            alerts.append(Alert(fingerprint("new-signature", cp.scenario, cp.case, cp.hardware, sig),
                                "new-signature", cp.scenario, cp.case, cp.hardware, None, sig, last_pass, p, None,
                                f"signature {sig} never seen before on this case",
                                bisect_command(cp, last_pass, p, signature=sig), cp.scenario_file))
        elif (last_decided is not None and last_decided.outcome == Outcome.PASS
              and p.outcome in MISBEHAVED):
            kind = "pass-to-crash" if p.outcome == Outcome.CRASH else "pass-to-fail"
            crash_sig = p.signatures[0] if p.signatures else None
            alerts.append(Alert(fingerprint(kind, cp.scenario, cp.case, cp.hardware, p.batch_id, p.build_key),
                                kind, cp.scenario, cp.case, cp.hardware, None, crash_sig, last_decided, p, None,
                                f"{last_decided.outcome.value} -> {p.outcome.value}"
                                + (f" ({crash_sig})" if crash_sig else ""),
                                bisect_command(cp, last_decided, p, signature=crash_sig), cp.scenario_file))
        seen |= set(p.signatures)
        last_decided = p
        if p.outcome == Outcome.PASS:
            last_pass = p
    return alerts


def case_alerts(cp: CasePoints, tolerances: Mapping[str, float] | None = None, *,
                findings: Sequence[SeriesFindings] | None = None) -> list[Alert]:
    """Every alert the case's history supports now: regressions (steps, drift) and events.
    ``findings``: the case's ``case_findings`` when the caller has them already (from the store's cache)."""
    alerts = _event_alerts(cp)
    for sf in case_findings(cp, tolerances) if findings is None else findings:
        for f in sf.findings:
            if f.kind not in STEP_KINDS or not f.regression:
                continue
            bad = cp.point(sf.indices[f.index])
            good = cp.point(sf.indices[f.index - 1]) if f.index > 0 else None
            detail = (f"{sf.metric} {f.effect:+.1%} ({f.before:.4g} -> {f.after:.4g})"
                      + (f", z={f.z:+.1f}" if f.z else "")
                      + (" over the last builds" if f.kind == "drift" else "")
                      + (f", large change, {_nights(f.index)} of history" if f.kind == LARGE_CHANGE else ""))
            # The fingerprint keeps the name it was raised under: a rename is the same alert.
            names = tuple((cp.point(sf.indices[min(i, len(sf.indices) - 1)]).batch_label, k, e) for i, k, e in f.names)
            alerts.append(Alert(fingerprint(f.first_name, cp.scenario, cp.case, cp.hardware, sf.metric,
                                             bad.batch_id, bad.build_key),
                                f.kind, cp.scenario, cp.case, cp.hardware, sf.metric, None, good, bad, f.effect,
                                detail, bisect_command(cp, good, bad, metric=sf.metric,
                                                       threshold=(f.before + f.after) / 2),
                                cp.scenario_file, (f.before + f.after) / 2, names))
    return alerts


def _nights(n: int) -> str:
    return f"{n} night" + ("" if n == 1 else "s")


def new_alerts(candidates: Sequence[Alert], known: Sequence[Mapping[str, Any]],
               points_of: Mapping[tuple[str, str, str], Sequence[Point]]) -> list[Alert]:
    """The candidates that are not already known: same fingerprint, or (steps and drift) the same
    series and kind with a first bad build within 2 points of a known one (a change point the
    search moved by a night is the same change)."""
    known_fps = {k["fingerprint"] for k in known}
    fresh = []
    for a in candidates:
        if a.fingerprint in known_fps:
            continue
        if a.kind in STEP_KINDS:
            labels = [p.build_label for p in points_of.get((a.scenario, a.case, a.hardware), ())]
            here = labels.index(a.first_bad.build_label) if a.first_bad.build_label in labels else -1
            same = [k for k in known if k["kind"] in STEP_KINDS and k["scenario"] == a.scenario
                    and k["case_name"] == a.case and k["hardware_key"] == a.hardware and k["metric"] == a.metric
                    and k["first_bad"] in labels and abs(labels.index(k["first_bad"]) - here) <= 2]
            if same:
                continue
        fresh.append(a)
    return fresh
