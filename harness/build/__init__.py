"""Builds: where the server code comes from, resolved to an interpreter and a launcher.

One module per concept:

- :mod:`~harness.build.spec`: the spec string (``sim:``, ``python:``, ``pip:``, ``src:``, ``simsrc:``; its
  syntax is documented there), parsed and validated;
- :mod:`~harness.build.resolve`: a spec resolved to a launchable :class:`Build` (once per command with
  :class:`Builds`), or the :class:`BuildFailure` its runs record;
- :mod:`~harness.build.environments`: the virtualenvs of ``pip:`` builds, created once under the cache;
- :mod:`~harness.build.checkouts`: the source tree of ``src:`` and ``simsrc:`` builds (a git worktree per commit);
- :mod:`~harness.build.probes`: the scripts run in a build's interpreter to learn what it has;
- :mod:`~harness.build.cache`: what is kept about a build between runs (flag verdicts, its environment);
- :mod:`~harness.build.describe`: the environment description each run records.

``sglang-repro prepare SPEC`` creates a build's environment ahead of time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used (a scenario's
    # validation needs only the spec's words, not the environments, probes and packaging behind a resolved build)
    from harness.build.describe import describe_environment
    from harness.build.environments import NODEPS_PACKAGES, default_cache_dir, ensure_pip_env, pip_env_ready
    from harness.build.resolve import Build, BuildFailure, Builds, resolve_build
    from harness.build.spec import BUILD_KINDS, SIM_REVISIONS, VALID_SPECS, BuildSpec, parse_build_spec

__all__ = [
    "BUILD_KINDS",
    "NODEPS_PACKAGES",
    "SIM_REVISIONS",
    "VALID_SPECS",
    "Build",
    "BuildFailure",
    "BuildSpec",
    "Builds",
    "default_cache_dir",
    "describe_environment",
    "ensure_pip_env",
    "parse_build_spec",
    "pip_env_ready",
    "resolve_build",
]
__getattr__ = lazy_face(__name__)
