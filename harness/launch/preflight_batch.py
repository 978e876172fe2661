"""Pre-flight for a whole batch of runs at once: each build's parser reads every case's flags in one process.

A ``compare`` (or ``run`` over several cases) asks each build's parser about one flag set per case.
Parsed one run at a time, a real sglang parser is loaded once per case (seconds each); parsed here,
up front, it is loaded once per build, and each run then finds its verdict in the build cache
(``harness.build.cache``). Nothing here decides anything: a build that cannot be had or a parser
that cannot load is left for the run itself to report, as its own pre-flight verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from harness.build import Build, BuildFailure, Builds
from harness.launch.launcher import launcher_for
from harness.scenario import Case, server_flags
from harness.util.errors import HarnessError

__all__ = ["check_flags_up_front"]

log = logging.getLogger(__name__)


def check_flags_up_front(cases: Sequence[Case], specs: Iterable[str | Build], builds: Builds | None = None) -> int:
    """Parse every case's server flags with each build's parser (one process per build); returns how
    many builds were checked. Failures are logged and left to the runs.

    Only builds that resolve without installing anything are checked: whether a run may create an
    environment (a full GPU stack) is the run's decision, made with the case's hardware. A spec is
    resolved through ``builds`` (the command's, so its runs reuse the resolution)."""
    builds = builds or Builds()
    checked = 0
    for spec in dict.fromkeys(specs):
        try:
            build = builds.prepared(spec) if isinstance(spec, str) else spec
            if isinstance(build, BuildFailure):
                log.info("pre-flight up front skipped for %s: %s", build.spec, build.reason)
            if not isinstance(build, Build):  # not made yet, or cannot be had: the runs will say
                continue
            launcher = launcher_for(build)
            if launcher.is_reference:  # its parser runs in this process: nothing to save
                continue
            # The flags each run will ask about (its port aside: the build cache leaves it out).
            launcher.check_flags([server_flags(launcher.case_for(case).scenario) for case in cases])
            checked += 1
        except HarnessError as exc:
            log.info("pre-flight up front skipped for %s: %s", getattr(spec, "spec", spec), exc)
    return checked
