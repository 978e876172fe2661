"""Where the real sglang 0.5.14 and 0.5.15 packages are, for tests that read or run them on CPU.

The authority is the harness's own cached environment (``pip:sglang==X,deps=none``: sglang installed
--no-deps with what its flag parser imports, prepared by ``make sglang-envs`` in CI). Resolving it
creates it when missing (pip, a few minutes), exactly as ``tests/test_seed_flags.py`` does.
"""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.build import resolve_build

__all__ = ["VERSIONS", "RealSGLang", "real_sglang"]

VERSIONS = ("0.5.14", "0.5.15")

_FIND = (
    "import importlib.util, json, sys; s = importlib.util.find_spec('sglang'); "
    "print(json.dumps({'pkg': list(s.submodule_search_locations)[0], 'exe': sys.executable}))"
)


@dataclass(frozen=True)
class RealSGLang:
    """One real release: its interpreter and the directory of its ``sglang`` package."""

    version: str
    python: str
    package: Path

    def source(self, relative: str) -> str:
        """The text of ``sglang/<relative>`` (e.g. ``srt/managers/scheduler.py``)."""
        return (self.package / relative).read_text(encoding="utf-8")

    def line_of(self, relative: str, needle: str) -> int:
        """The 1-based line of the first occurrence of ``needle`` in ``sglang/<relative>``; AssertionError if absent."""
        for number, line in enumerate(self.source(relative).splitlines(), start=1):
            if needle in line:
                return number
        raise AssertionError(f"sglang {self.version}: {needle!r} not found in {relative}")

    def run(self, code: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``python -c code`` in the release's environment."""
        return subprocess.run([self.python, "-c", code], capture_output=True, text=True, timeout=timeout, check=False)


@functools.cache
def real_sglang(version: str) -> RealSGLang:
    build = resolve_build(f"pip:sglang=={version},deps=none")
    assert build.version == version, f"expected sglang {version}, the environment has {build.version}"
    done = subprocess.run([build.python, "-c", _FIND], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    return RealSGLang(version=version, python=build.python, package=Path(found["pkg"]))
