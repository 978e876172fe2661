"""What a minimization takes away or shrinks: atoms (server flags, environment variables) and the workload's shape.

A :class:`Candidate` is one configuration to try: the atoms it keeps and its workload shape. It turns
back into a scenario mapping (:func:`to_mapping`), which the real loader validates before anything runs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from harness.scenario.model import Scenario
from harness.util.paths import resolve_fixture

__all__ = ["Atom", "Candidate", "Shape", "atom_class", "base_mapping", "initial_candidate", "to_mapping"]

AtomKind = Literal["flag", "env"]


@dataclass(frozen=True)
class Atom:
    """One server flag (``server.args``) or one environment variable (``server.env``) and its value."""

    kind: AtomKind
    name: str
    value: Any

    @property
    def label(self) -> str:
        if self.kind == "env":
            return f"{self.name}={self.value}"
        if self.value is True:
            return f"--{self.name}"
        return f"--{self.name} {self.value}"


@dataclass(frozen=True)
class Shape:
    """The workload fields a minimization shrinks; ``tokens`` None keeps the scenario's prompt lengths."""

    requests: int
    concurrency: int
    max_new_tokens: int
    warmup: int
    tokens: int | None = None

    def describe(self, before: Shape | None = None) -> str:
        parts = []
        for name in ("requests", "concurrency", "max_new_tokens", "warmup", "tokens"):
            now, then = getattr(self, name), getattr(before, name) if before is not None else None
            if before is None or then != now:
                was = "" if before is None else f"{'as given' if then is None else then}->"
                parts.append(f"{name} {was}{'as given' if now is None else now}")
        return ", ".join(parts) or "workload unchanged"


@dataclass(frozen=True)
class Candidate:
    """A configuration: the atoms kept (in the scenario's order) and the workload shape."""

    atoms: tuple[Atom, ...]
    shape: Shape
    notes: tuple[str, ...] = field(default=(), compare=False)

    def keeping(self, atoms: Iterable[Atom]) -> Candidate:
        kept = set(atoms)
        return replace(self, atoms=tuple(a for a in self.atoms if a in kept))

    def without(self, atoms: Iterable[Atom]) -> Candidate:
        gone = set(atoms)
        return replace(self, atoms=tuple(a for a in self.atoms if a not in gone))

    def with_value(self, atom: Atom, value: Any) -> Candidate:
        return replace(self, atoms=tuple(replace(a, value=value) if a == atom else a for a in self.atoms))

    def with_shape(self, **changes: Any) -> Candidate:
        return replace(self, shape=replace(self.shape, **changes))

    def flags(self) -> dict[str, Any]:
        return {a.name: a.value for a in self.atoms if a.kind == "flag"}

    def env(self) -> dict[str, str]:
        return {a.name: str(a.value) for a in self.atoms if a.kind == "env"}


# Cheap, likely eliminations come first: knobs of logging, parallelism, memory sizing and caching
# rarely decide whether a code path crashes (sglang#28264 reproduced without HiCache and TP 4,
# sglang PR #28817). A prior, not a rule: a knob that matters is kept by the search.
_LIKELY_IRRELEVANT_PREFIXES = (
    "log-", "enable-metrics", "enable-cache-report", "show-time-cost", "decode-log-interval", "enable-trace",
    "tp-size", "tp", "tensor-parallel-size", "dp-size", "pp-size", "ep-size", "nnodes", "node-rank", "dist-",
    "base-gpu-id", "mem-fraction-static", "max-total-tokens", "max-running-requests", "max-queued-requests",
    "max-prefill-tokens", "chunked-prefill-size", "context-length", "enable-hierarchical-cache", "hicache-",
    "swa-full-tokens-ratio", "disable-hybrid-swa-memory", "watchdog-timeout", "random-seed", "served-model-name",
    "trust-remote-code", "download-dir", "stream-interval", "schedule-conservativeness",
)


def atom_class(atom: Atom) -> str:
    """``likely`` (probably irrelevant: try removing it early and in bulk) or ``behaviour``."""
    if atom.kind == "env":
        return "likely"
    name = atom.name
    for prefix in _LIKELY_IRRELEVANT_PREFIXES:
        if name == prefix or (prefix.endswith("-") and name.startswith(prefix)):
            return "likely"
    return "behaviour"


def base_mapping(scenario: Scenario, file: Path) -> dict[str, Any]:
    """The case as a plain mapping without ``matrix`` and ``reference`` (already applied to it), fixtures made
    findable from anywhere."""
    data: dict[str, Any] = scenario.model_dump(mode="json", exclude_unset=True)
    data.pop("matrix", None)
    data.pop("reference", None)
    prompt = data.get("workload", {}).get("prompt", {})
    fixture = prompt.get("fixture")
    if fixture and resolve_fixture(fixture) is None:  # not found from anywhere by its name alone
        found = resolve_fixture(fixture, relative_to=file.parent)
        if found is not None:
            prompt["fixture"] = str(found)
    return data


def initial_candidate(scenario: Scenario) -> Candidate:
    srv, wl = scenario.server, scenario.workload
    atoms = [Atom("flag", name, value) for name, value in srv.args.items() if value is not None and value is not False]
    atoms += [Atom("env", name, value) for name, value in srv.env.items()]
    shape = Shape(requests=wl.requests, concurrency=wl.concurrency, max_new_tokens=wl.max_new_tokens,
                  warmup=wl.warmup)
    return Candidate(atoms=tuple(atoms), shape=shape)


def to_mapping(base: Mapping[str, Any], cand: Candidate) -> dict[str, Any]:
    """``base`` with the candidate's flags, environment and workload shape (a new mapping)."""
    data = copy.deepcopy(dict(base))
    server = data.setdefault("server", {})
    server["args"] = cand.flags()
    server["env"] = cand.env()
    if not server["env"]:
        del server["env"]
    wl = data.setdefault("workload", {})
    shape = cand.shape
    wl.update(requests=shape.requests, concurrency=shape.concurrency, max_new_tokens=shape.max_new_tokens,
              warmup=shape.warmup, trials=1)
    if shape.tokens is not None:
        wl.setdefault("prompt", {})["tokens"] = shape.tokens
    return data
