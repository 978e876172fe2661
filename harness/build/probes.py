"""The scripts the harness runs in a build's interpreter, and how it reads their answers.

They run in the build's environment, not the harness's, and must not import sglang (its import pulls
torch: seconds, and a GPU stack a flag check never needs); each prints one JSON line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.util.errors import InfraError
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["PINS", "PROBE_TIMEOUT_S", "SIM_PROBE", "probe", "read_answer"]

PROBE_TIMEOUT_S = 60.0

# Runs in the build's interpreter: finds sglang without importing it (its import pulls torch).
_FACTS = r"""
import importlib.metadata as md, importlib.util, json, pathlib, re, sys
out = {"python_version": sys.version.split()[0], "sglang": None, "sglang_location": None, "torch": None}
spec = importlib.util.find_spec("sglang")
if spec is not None and spec.submodule_search_locations:
    pkg = pathlib.Path(list(spec.submodule_search_locations)[0])
    out["sglang_location"] = str(pkg)
    pattern = re.compile(r"^__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", re.M)
    for name in ("_version.py", "version.py", "__init__.py"):
        path = pkg / name
        if path.is_file():
            found = pattern.search(path.read_text(errors="replace"))
            if found:
                out["sglang"] = found.group(1)
                break
    if out["sglang"] is None:
        try:
            dist = md.distribution("sglang")
            if pathlib.Path(dist.locate_file("sglang")).resolve() == pkg.resolve():
                out["sglang"] = dist.version
        except md.PackageNotFoundError:
            pass
    if out["sglang"] is None:
        pyproject = pkg.parent / "pyproject.toml"
        if pyproject.is_file():
            found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
            out["sglang"] = found.group(1) if found else None
try:
    out["torch"] = md.version("torch")
except md.PackageNotFoundError:
    pass
if "--packages" in sys.argv:
    out["path"] = [p for p in sys.path if p and pathlib.Path(p).is_dir()]
    out["packages"] = sorted(
        {(d.metadata["Name"] or "?"): d.version for d in md.distributions()}.items(), key=lambda kv: kv[0].lower()
    )
print(json.dumps(out))
"""


# Runs in the new venv: sglang's own pins for the packages its flag parser needs.
PINS = r"""
import importlib.metadata as md, json, re, sys
wanted = {re.sub(r"[-_.]+", "-", n).lower(): n for n in sys.argv[1:]}
pins = {}
for req in md.requires("sglang") or []:
    text, _, marker = req.partition(";")
    if "extra" in marker:
        continue
    name = re.match(r"[A-Za-z0-9_.-]+", text.strip()).group(0)
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in wanted and re.search(r"[=<>~!]", text):
        pins[key] = re.sub(r"\[.*?\]", "", text.strip()).replace(" ", "")
print(json.dumps([pins.get(k, n) for k, n in wanted.items()]))
"""


# Runs in the checkout's environment: "installs" means every module of its harness/ compiles (as an
# install byte-compiles it) and its flag parser imports, without paying torch's import; then its default revision.
SIM_PROBE = r"""
import json, pathlib, sys
root = pathlib.Path(sys.argv[1]) / "harness"
for path in sorted(root.rglob("*.py")):
    compile(path.read_bytes(), str(path), "exec")
import harness.sim.cli_args
from harness.sim import DEFAULT_REVISION
print(json.dumps({"revision": DEFAULT_REVISION}))
"""



def read_answer(stdout: str) -> Any:
    """The JSON line a probe script printed last (whatever the environment printed before it)."""
    return json.loads(stdout.strip().splitlines()[-1])


def probe(python: str, env: Mapping[str, str], *, packages: bool = False) -> dict[str, Any]:
    """What ``python`` (with ``env`` laid over) has: its version, sglang's version and location, torch's;
    with ``packages`` also its ``sys.path`` directories and every distribution installed."""
    argv = [python, "-c", _FACTS] + (["--packages"] if packages else [])
    done = run_bounded(argv, timeout=PROBE_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise InfraError(f"interpreter {python} failed to describe itself: {last_line(done.stderr)}")
    facts: dict[str, Any] = read_answer(done.stdout)
    return facts
