"""The release line as data: per sglang release, its build profile and where the contract stands.

Each release is read from its wheel (fetched ``--no-deps`` once, unzipped in memory, never installed,
:mod:`harness.contract.wheels`): the contract located in it (:mod:`harness.contract.check`) and its profile
(:mod:`harness.contract.profile`). The answer is cached per release under ``<cache>/releases/``, keyed by the
contract and by the code that computes it, so a release not seen before is checked on first use and a warm line
costs a file read per release; nothing per release is ever committed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.contract import check, derived, guards, locate, profile
from harness.contract.check import check_sources, contract_counts, fact_statuses, reference_sources
from harness.contract.facts import FACTS, NEEDS, NEVER_GATES
from harness.contract.locate import STATUSES, Located
from harness.contract.profile import BuildProfile, ProfileUnavailable, compute_profile
from harness.contract.wheels import WheelSources, index_versions
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_bytes, read_json
from harness.util.paths import default_cache_dir

__all__ = ["FIRST_RELEASE", "ReleaseRow", "markdown", "release_line", "release_row"]

# The oldest release the line starts at: the first with a Frozen-KV MTP draft worker.
FIRST_RELEASE = "0.5.12"
_READ_THROUGH = frozenset(k for k in {*NEEDS.values(), "every run"} if k not in NEVER_GATES)


def _digest() -> str:
    """What a cached row depends on besides the wheel: the facts and the code that reads them."""
    h = hashlib.sha256(repr(FACTS).encode())
    for module in (check, derived, guards, locate, profile):
        h.update(read_bytes(Path(str(module.__file__)), "source"))
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class ReleaseRow:
    """One release: its profile (or why there is none), its located citations, and how long reading it took."""

    version: str
    profile: BuildProfile | None
    unavailable: str | None
    located: tuple[Located, ...]
    seconds: float
    cached: bool = False

    def contract(self) -> dict[str, int]:
        """Facts per status: all of them."""
        return contract_counts(self.located)

    def read_through(self) -> dict[str, int]:
        """Facts per status among those the harness reads through (the ones pre-flight can gate on)."""
        return contract_counts(self.located, _READ_THROUGH)

    def to_json(self) -> dict[str, object]:
        p = self.profile
        return {"version": self.version, "fix_present": p.fix_present if p else None,
                "eager_rule": p.eager_rule if p else None, "contract": self.contract(),
                "read_through": self.read_through(), "profile": p.to_json() if p else None,
                "unavailable": self.unavailable, "facts": fact_statuses(self.located)}


def _cache_file(version: str, cache_dir: Path | None) -> Path:
    return (cache_dir or default_cache_dir()) / "releases" / f"{version}-{_digest()}.json"


def _sealed(payload: dict[str, object]) -> str:
    """A digest of a cached row's content: a row edited by hand (a forged ``gone``) or cut short no longer matches
    it and is computed again, as an unreadable one is."""
    body = {k: v for k, v in payload.items() if k != "sealed"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _load(path: Path, version: str) -> ReleaseRow | None:
    try:
        data = read_json(path, "state")
        if not isinstance(data, dict) or data.get("sealed") != _sealed(data):
            return None
        located = tuple(Located(**{**d, "found": tuple(d["found"])}) for d in data["located"])
        if any(loc.status not in STATUSES for loc in located):
            return None  # a status this code does not know: counting it was a tuple.index traceback
        if not data.get("profile") and not data.get("unavailable"):
            return None  # neither a profile nor why there is none: the writer never leaves that
        prof = BuildProfile.from_json(data["profile"]) if data.get("profile") else None
        return ReleaseRow(version, prof, data.get("unavailable"), located, float(data["seconds"]), cached=True)
    except (OSError, ReadRefused, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or unreadable: computed again


def release_row(version: str, cache_dir: Path | None = None) -> ReleaseRow:
    """Release ``version``'s row, from the cache or computed from its wheel (fetched on first use); InfraError
    when its wheel cannot be had."""
    path = _cache_file(version, cache_dir)
    hit = _load(path, version)
    if hit is not None:
        return hit
    start = time.monotonic()
    sources = WheelSources.of(version, cache_dir)
    located = tuple(check_sources(sources, version, reference_sources(version, fetch=True)))
    try:
        prof, why = compute_profile(sources, version), None
    except ProfileUnavailable as exc:
        prof, why = None, str(exc)
    row = ReleaseRow(version, prof, why, located, time.monotonic() - start)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload: dict[str, object] = {"located": [asdict(loc) for loc in located],
                                  "profile": prof.to_json() if prof else None, "unavailable": why, "seconds": row.seconds}
    payload["sealed"] = _sealed(json.loads(json.dumps(payload)))  # sealed as it reads back (tuples become lists)
    write_atomic(path, json.dumps(payload))
    return row


def release_line(versions: Sequence[str] | None = None, cache_dir: Path | None = None) -> list[ReleaseRow]:
    """Every release from :data:`FIRST_RELEASE` to the newest on the package index (or ``versions``), oldest first."""
    return [release_row(v, cache_dir) for v in (versions or index_versions(FIRST_RELEASE))]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "-"


def markdown(rows: Sequence[ReleaseRow]) -> str:
    """The release line as markdown: a profile row per release, then the fact x release table."""
    out = ["| release | fix #29616 | eager when | topk > 1 backends | trtllm_mha graph SWA refill | "
           "`--disable-cuda-graph` | contract (all facts) | read-through facts |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        p = row.profile
        if p is None:
            out.append(f"| {row.version} | ? | profile unavailable: {row.unavailable} | | | | "
                       f"{_counts(row.contract())} | {_counts(row.read_through())} |")
            continue
        dep = p.replacement("--disable-cuda-graph")
        flag = f"deprecated: `{dep.replacement}`" if dep else "current"
        out.append(f"| {row.version} | {'present' if p.fix_present else 'absent'} | {p.eager_rule} | "
                   f"{', '.join(p.topk_backends)} | {p.swa_refill} | {flag} | {_counts(row.contract())} | "
                   f"{_counts(row.read_through())} |")
    out += ["", check.contract_table({row.version: row.located for row in rows})]
    return "\n".join(out)


