"""One file triaged: its findings (:mod:`harness.triage.levels`), grouped, each with what the version says.

For a finding whose entry records its fix (``fixed``), the release comes from ``--version``, else from the text
(:mod:`harness.triage.stated_version`), else from the traceback's sglang frames fitted to the real releases
(:mod:`harness.triage.release_frames`, which may fetch wheels once; ``releases=False`` keeps it offline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.signatures.catalogue import Catalogue, Signature
from harness.triage.levels import Finding, Level, judge_text, rank
from harness.triage.release_frames import Frame, ReleaseFit, sglang_frames
from harness.triage.stated_version import StatedVersion, fix_verdict, stated_version

__all__ = ["FileVerdict", "Group", "Judged", "triage_text"]


@dataclass(frozen=True)
class Judged:
    """A finding and what the version says of its entry's fix (None: the entry records no fix)."""

    finding: Finding
    fit: ReleaseFit | None
    fixed: str | None


@dataclass(frozen=True)
class Group:
    """The findings of one file that agree (same entry, same level), in line order."""

    signature: Signature | None
    level: Level
    members: tuple[Judged, ...]


@dataclass(frozen=True)
class FileVerdict:
    path: Path
    judged: tuple[Judged, ...]
    version: StatedVersion

    @property
    def best(self) -> Judged | None:
        """The first finding (line order) at the highest level above none."""
        ranked = [j for j in self.judged if j.finding.level != "none"]
        return max(ranked, key=lambda j: rank(j.finding.level), default=None)

    def groups(self) -> list[Group]:
        """Agreeing findings together, highest level first, then by first line; ``none`` findings left out."""
        keyed: dict[tuple[str, Level], list[Judged]] = {}
        for j in self.judged:
            sig = j.finding.signature
            if sig is not None:
                keyed.setdefault((sig.id, j.finding.level), []).append(j)
        groups = [Group(m[0].finding.signature, level, tuple(m)) for (_, level), m in keyed.items()]
        return sorted(groups, key=lambda g: (-rank(g.level), g.members[0].finding.line_no))


def triage_text(path: Path, text: str, catalogue: Catalogue, *, title: str | None = None,
                version: str | None = None, releases: bool = True, cache_dir: Path | None = None) -> FileVerdict:
    stated = stated_version(text, version)
    findings = judge_text(text, catalogue, title)
    # What the version says is per entry and file: any finding of the entry that shows sglang frames tells the
    # release for all of them (an issue quotes the message in prose and the traceback further down).
    said: dict[str, tuple[ReleaseFit | None, str]] = {}
    for finding in findings:
        sig = finding.signature
        if sig is None or sig.fixed is None or sig.id in said:
            continue
        frames = next((fr for f in findings if f.signature == sig and (fr := sglang_frames(f.block))), ())
        said[sig.id] = _fix_of(sig, frames, stated, releases, cache_dir)
    judged = []
    for finding in findings:
        fit, fixed = said.get(finding.signature.id, (None, None)) if finding.signature is not None else (None, None)
        judged.append(Judged(finding, fit, fixed))
    return FileVerdict(path, tuple(judged), stated)


def _fix_of(sig: Signature, frames: tuple[Frame, ...], stated: StatedVersion, releases: bool,
            cache_dir: Path | None) -> tuple[ReleaseFit | None, str]:
    assert sig.fixed is not None
    if stated.version is not None:
        return None, fix_verdict(sig.fixed, (stated.version,), stated.where)
    if not frames:
        return None, fix_verdict(sig.fixed, (), "no version line and no sglang frames")
    if not releases:
        return None, fix_verdict(sig.fixed, (), "no version line; fitting frames to releases is off")
    from harness.triage.release_frames import fit_releases

    fit = fit_releases(frames, cache_dir)
    return fit, fix_verdict(sig.fixed, fit.fits, _how(fit))


def _how(fit: ReleaseFit) -> str:
    n = len(fit.frames)
    if fit.error is not None:
        return f"its {n} sglang frames could not be fitted to releases: {fit.error}"
    if len(fit.fits) == 1:
        return f"its {n} sglang frames fit only {fit.fits[0]}, line for line"
    if fit.fits:
        return f"its {n} sglang frames fit {', '.join(fit.fits)} line for line, no other release"
    near = ", ".join(f"{v} ({k} of {n})" for v, k in fit.best) or "none"
    return (f"no release from {fit.releases[0] if fit.releases else '?'} on fits all {n} sglang frames "
            f"(a source checkout between releases?); closest: {near}")


def frames_label(frames: Sequence[Frame]) -> str:
    return ", ".join(f.label() for f in frames)
