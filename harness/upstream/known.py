"""Before a report is written: is this a known bug? Triage (:mod:`harness.triage`) judges the run's server log
against the crash-signature catalogue with the build's release, as syzbot matches a crash against known bugs
before it reports one, so a known bug gets a pointer instead of a duplicate.

What stops the report (``blocks``; ``--force`` writes it anyway):

- a confirmed match of a bug whose fix the catalogue records, on a build that lacks it: upgrade instead;
- a confirmed match of a known bug with no fix recorded: add to that issue instead;
- a confirmed match of an infrastructure signature: the machine or the setup, not SGLang.

A match on a build that has the fix is a regression (the report is written, pointing at the old issue), and so
is a match whose release is not known. The reference server is no release: the release it stands for is the
real build its scenario maps its revision to (``builds: {before: {spec: pip:sglang==0.5.14, sim: pre-fix}}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from harness.records.run_record import RunRecord
from harness.signatures.catalogue import Catalogue, Signature
from harness.util.bounded_read import ReadRefused, read_tail

__all__ = ["KnownCheck", "Release", "check_known", "release_of", "upstream_ref"]

Verdict = Literal["known-fixed", "known-open", "infra", "regression", "release-unknown", "possible", "none"]
_PIP_VERSION = re.compile(r"sglang==([0-9][\w.+-]*)")
_LOG_WINDOW = 8 << 20  # a crash's traceback is at the end of its log; a 1 GB log is judged by its last 8 MB


@dataclass(frozen=True)
class Release:
    """The sglang release a run's build is (or stands for), and how that is known."""

    version: str | None
    how: str


@dataclass(frozen=True)
class KnownCheck:
    verdict: Verdict
    blocks: bool
    message: str  # one sentence: the terminal's line and the report's first line
    signature: Signature | None
    release: Release


def upstream_ref(sig: Signature) -> str:
    """``sglang#28264`` for the entry's first upstream issue, else its first link, else its id."""
    for url in sig.upstream:
        m = re.search(r"github\.com/sgl-project/sglang/issues/(\d+)", url)
        if m:
            return f"sglang#{m.group(1)}"
    return sig.upstream[0] if sig.upstream else sig.id


def _pr(url: str) -> str:
    m = re.search(r"/pull/(\d+)", url)
    return f"PR #{m.group(1)}" if m else url


def _sim_revision(record: RunRecord) -> str | None:
    from harness.build import SIM_REVISIONS

    word = (record.build.version or "").split(" ", 1)[0]
    if word in SIM_REVISIONS:
        return word
    spec = record.build.spec.partition(":")[2].split(",", 1)[0]
    return spec if spec in SIM_REVISIONS else None


def release_of(record: RunRecord, scenario_file: Path | None) -> Release:
    """The release the run's build is; for the reference server, the one its scenario maps its revision to."""
    if not record.build.reference_server:
        version = record.build.version
        return Release(version, f"the build {record.build.spec}" if version else f"{record.build.spec} names no version")
    revision = _sim_revision(record)
    if scenario_file is None or revision is None:
        return Release(None, "the reference server, and no scenario that maps it to a release")
    from harness.scenario import ScenarioError, load_file

    try:
        builds = load_file(scenario_file).scenario.builds
    except (ScenarioError, ValueError, OSError):
        return Release(None, f"the reference server; its scenario {scenario_file} does not load")
    roles = [name for name, b in builds.items()
             if (record.build.role is None or name == record.build.role)
             and b.sim is not None and b.sim.removeprefix("sim:").split(",", 1)[0] == revision]
    versions = {m.group(1) for name in roles if (m := _PIP_VERSION.search(builds[name].spec))}
    if len(versions) != 1:
        return Release(None, f"the reference server's {revision} revision maps to no one release in its scenario")
    (version,) = versions
    return Release(version, f"the reference server's {revision} revision, standing for sglang {version} "
                            f"(role {roles[0]} of the scenario)")


def _log_text(record: RunRecord, run_dir: Path | None) -> str:
    if run_dir is not None:
        try:
            return read_tail(run_dir / "server.log", "log", _LOG_WINDOW).decode("utf-8", errors="replace")
        except (ReadRefused, OSError):
            pass
    return record.excerpt


def check_known(record: RunRecord, run_dir: Path | None, release: Release, catalogue: Catalogue) -> KnownCheck:
    from harness.triage import triage_text

    text = _log_text(record, run_dir)
    verdict = triage_text(Path("server.log"), text, catalogue, version=release.version, releases=False) if text else None
    best = verdict.best if verdict is not None else None
    sig = best.finding.signature if best is not None else None
    if best is None or sig is None:
        return KnownCheck("none", False, "no known crash signature in the log", None, release)
    ref = upstream_ref(sig)
    if best.finding.level != "confirmed":
        return KnownCheck("possible", False, f"the log looks like {ref} ({sig.title}) at level {best.finding.level} "
                          "only: read it before filing", sig, release)
    if sig.kind == "infra":
        return KnownCheck("infra", True, f"this is an infrastructure problem ({sig.title}), not an SGLang bug: fix the "
                          "machine or the setup instead of filing", sig, release)
    if sig.fixed is None:
        return KnownCheck("known-open", True, f"this is {ref} ({sig.title}), known and without a recorded fix: add "
                          "this evidence there instead of filing a duplicate", sig, release)
    fixed = f"fixed in {sig.fixed.version} by {_pr(sig.fixed.pr)}"
    try:
        lacks = release.version is not None and Version(release.version) < Version(sig.fixed.version)
    except InvalidVersion:
        return KnownCheck("release-unknown", False, f"this matches {ref}, {fixed}; the build's release "
                          f"{release.version!r} is not a version: check whether it has the fix", sig, release)
    if release.version is None:
        return KnownCheck("release-unknown", False, f"this matches {ref}, {fixed}; the build's release is not known "
                          f"({release.how}): check whether it has the fix", sig, release)
    who = f"{release.how}," if record.build.reference_server else f"your build {release.version}"
    if lacks:
        return KnownCheck("known-fixed", True, f"this is {ref}, {fixed}; {who} lacks the fix: upgrade instead of filing",
                          sig, release)
    return KnownCheck("regression", False, f"this matches {ref}, {fixed}; {who} has the fix: a regression or a new "
                      f"bug (the report points at {ref})", sig, release)
