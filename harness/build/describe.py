"""What a build's interpreter has: its packages and key versions, as each run's ``env.json`` records them."""

from __future__ import annotations

from typing import Any

from harness.build.cache import cached_environment
from harness.build.probes import probe
from harness.build.resolve import Build

__all__ = ["describe_environment"]


def describe_environment(build: Build) -> dict[str, Any]:
    """Packages and key versions of the build's interpreter (bounded; read from metadata, no imports).

    Probed once per install of the build's interpreter (kept in the build cache), not once per run.
    """
    facts = cached_environment(build, lambda: probe(build.python, build.env, packages=True))
    return {
        "build": {"kind": build.kind, "spec": build.spec, "version": build.version, "commit": build.commit},
        "python": build.python,
        "python_version": facts["python_version"],
        "reference_model": build.is_reference,
        "sglang": None if build.is_reference else {"version": facts["sglang"], "location": facts["sglang_location"],
                                                   "commit": build.commit},
        "torch": facts["torch"],
        "packages": dict(facts["packages"]),
        "env_overlay": dict(build.env),
    }  # fmt: skip
