"""Builds: where the server code comes from, resolved to an interpreter and a launcher.

Spec syntax (one string, ``KIND:VALUE[,key=value...]``):

- ``sim:pre-fix`` | ``sim:post-fix[,knob=value...]``: the CPU reference server (a model of
  SGLang's mechanism, not SGLang). Each knob ``k=v`` becomes ``--sim-k v``.
- ``python:PATH``: an interpreter whose environment already has sglang.
- ``pip:sglang==X[,deps=full|none][,python=PATH][,torch=V]``: a virtualenv per version, created
  once under ``<cache>/envs/`` (guarded by a file lock). ``deps=full`` (default) is a plain
  ``pip install sglang==X`` for GPU machines. ``deps=none`` installs sglang with ``--no-deps``
  plus the few small packages its flag parser imports (pinned as sglang's own metadata pins
  them), CPU ``torch==V`` (default 2.13.0) and the import-only stubs of ``triton`` and
  ``torchvision`` from ``fixtures/stubs`` copied into the venv's site-packages: enough to parse
  flags and print ``--help`` on a machine without a GPU, never enough to serve.
- ``simsrc:CHECKOUT[@REV][,knob=value...]``: the reference server of a checkout of sglang-repro
  itself (its own ``harness/sim/``, at that checkout's default revision and knobs; each ``k=v``
  becomes ``--sim-k v``). ``@REV`` works as for ``src:``. The checkout goes first on
  ``PYTHONPATH`` and ``PYTHONSAFEPATH`` keeps the current directory's ``harness`` from shadowing
  it. It does not install (InfraError) when a module of its ``harness/`` does not compile or its
  flag parser does not import.
  Bisecting this project's own history runs each step with it.
- ``src:CHECKOUT[@REV][,base=PATH]``: an sglang git checkout. With ``@REV`` that commit is
  checked out in a git worktree under ``<cache>/worktrees/``; without, the checkout's files are
  used as they are. Its ``python/`` goes first on ``PYTHONPATH`` of the base interpreter
  (default: the harness's own).

The cache root is ``$SGLANG_REPRO_CACHE``, else ``~/.cache/sglang-repro``.
Run ``python -m harness.build prepare SPEC`` to create a build's environment ahead of time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InfraError, UserError
from harness.sim import REVISIONS
from harness.text import first_line, last_line

__all__ = [
    "BuildSpec",
    "Build",
    "BuildFailure",
    "Builds",
    "parse_build_spec",
    "resolve_build",
    "describe_environment",
    "default_cache_dir",
    "ensure_pip_env",
    "BUILD_KINDS",
    "pip_env_ready",
    "SIM_REVISIONS",
    "NODEPS_PACKAGES",
]

log = logging.getLogger(__name__)

SIM_REVISIONS = REVISIONS
# The build kinds, as a spec starts: sim:, python:, pip:, src:.
BUILD_KINDS = ("sim", "python", "pip", "src")
# Knobs of the reference server (``--sim-<knob>``); the parser in harness.sim.cli_args is the authority.
_SIM_KNOBS_FALLBACK = ("draft-agreement", "step-cost-ms", "device", "seed")

# What ``sglang.srt.server_args`` imports on its way in (0.5.14, 0.5.15), found by trying.
NODEPS_PACKAGES = (
    "numpy", "orjson", "psutil", "pybase64", "requests", "packaging", "pillow", "fastapi", "msgspec",
    "pyzmq", "tqdm", "IPython", "aiohttp", "huggingface_hub", "transformers", "openai",
    "partial_json_parser", "dill", "sentencepiece",
)  # fmt: skip
_NODEPS_TORCH = "2.13.0"  # the CPU build pip finds on these machines; sglang pins 2.11.0, unused for parsing

_STUBS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "stubs"
_ENV_MARKER = "sglang-repro-env.json"
_PIP_TIMEOUT_S = {"full": 3600.0, "none": 1200.0}
_PROBE_TIMEOUT_S = 60.0
_GIT_TIMEOUT_S = 120.0

_VALID = (
    "valid build specs: sim:pre-fix|post-fix[,knob=value...], python:PATH, "
    "pip:sglang==X[,deps=full|none][,python=PATH][,torch=V], src:CHECKOUT[@REV][,base=PATH], "
    "simsrc:CHECKOUT[@REV][,knob=value...]"
)
_PIP_KEYS = ("deps", "python", "torch")
_SRC_KEYS = ("base",)
_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+!-]*$")


@dataclass(frozen=True)
class BuildSpec:
    """A parsed, validated build spec; ``fields`` hold the kind's values (see module docstring)."""

    kind: str
    spec: str
    fields: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", types.MappingProxyType(dict(self.fields)))


@dataclass(frozen=True)
class Build:
    """A build ready to launch: ``launcher + sglang_flags`` with ``env`` laid over the environment."""

    kind: str
    spec: str
    python: str
    launcher: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    version: str | None = None
    commit: str | None = None
    is_reference: bool = False
    location: str | None = None  # the sglang package directory the interpreter imports, when known

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", types.MappingProxyType(dict(self.env)))


@dataclass(frozen=True)
class BuildFailure:
    """A spec that parsed but could not be had (``reason``, one line): its runs record infra and start nothing."""

    kind: str
    spec: str
    reason: str

    @property
    def is_reference(self) -> bool:
        return self.kind in ("sim", "simsrc")


# --------------------------------------------------------------------------- parsing


def _bad(spec: str, why: str) -> UserError:
    return UserError(f"build spec {spec!r}: {why}; {_VALID}")


def _split_options(spec: str, text: str, allowed: Sequence[str] | None) -> tuple[str, dict[str, str]]:
    head, *rest = text.split(",")
    options: dict[str, str] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise _bad(spec, f"option {item!r} is not key=value")
        if allowed is not None and key not in allowed:
            raise _bad(spec, f"unknown option {key!r} (allowed: {', '.join(allowed)})")
        if key in options:
            raise _bad(spec, f"option {key!r} given twice")
        options[key] = value
    return head.strip(), options


def _sim_knobs() -> tuple[str, ...]:
    try:
        from harness.sim.cli_args import SIM_KNOBS
    except ImportError:  # the reference server's extra (torch) is not installed: its knobs are still known
        return _SIM_KNOBS_FALLBACK
    return tuple(SIM_KNOBS)


def parse_build_spec(spec: str) -> BuildSpec:
    """Parse ``spec`` (syntax in the module docstring); raise UserError naming what is valid."""
    if not isinstance(spec, str) or ":" not in spec:
        raise _bad(str(spec), "missing KIND:")
    kind, _, rest = spec.partition(":")
    kind = kind.strip()
    if not rest.strip():
        raise _bad(spec, f"nothing after {kind}:")
    if kind == "sim":
        revision, knobs = _split_options(spec, rest, _sim_knobs())
        if revision not in SIM_REVISIONS:
            raise _bad(spec, f"unknown revision {revision!r} (valid: {', '.join(SIM_REVISIONS)})")
        return BuildSpec("sim", spec, {"revision": revision, **knobs})
    if kind == "python":
        return BuildSpec("python", spec, {"path": rest.strip()})
    if kind == "pip":
        requirement, options = _split_options(spec, rest, _PIP_KEYS)
        name, sep, version = requirement.partition("==")
        if name.strip().lower() != "sglang" or not sep or not _VERSION_RE.match(version.strip()):
            raise _bad(spec, f"{requirement!r} is not sglang==VERSION")
        deps = options.setdefault("deps", "full")
        if deps not in _PIP_TIMEOUT_S:
            raise _bad(spec, f"deps={deps!r} (valid: full, none)")
        if "torch" in options and deps != "none":
            raise _bad(spec, "torch= applies only with deps=none")
        return BuildSpec("pip", spec, {"version": version.strip(), **options})
    if kind == "src":
        location, options = _split_options(spec, rest, _SRC_KEYS)
        checkout, at, rev = location.partition("@")
        if not checkout or (at and not rev):
            raise _bad(spec, "expected src:CHECKOUT[@REV]")
        values = {"checkout": checkout, **options}
        if rev:
            values["rev"] = rev
        return BuildSpec("src", spec, values)
    if kind == "simsrc":
        # The checkout's own parser is the authority on its knobs: any k=v is passed on.
        location, knobs = _split_options(spec, rest, None)
        checkout, at, rev = location.partition("@")
        if not checkout or (at and not rev):
            raise _bad(spec, "expected simsrc:CHECKOUT[@REV]")
        values = {"checkout": checkout, **{f"knob.{k}": v for k, v in knobs.items()}}
        if rev:
            values["rev"] = rev
        return BuildSpec("simsrc", spec, values)
    raise _bad(spec, f"unknown kind {kind!r}")


# --------------------------------------------------------------------------- subprocesses


def run_bounded(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run argv in its own process group; on timeout kill the whole group and raise InfraError."""
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise InfraError(f"{' '.join(argv[:4])} ... took longer than {timeout:.0f} s") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


# Runs in the build's interpreter: finds sglang without importing it (its import pulls torch).
_PROBE = r"""
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


def _probe(python: str, env: Mapping[str, str], *, packages: bool = False) -> dict[str, Any]:
    argv = [python, "-c", _PROBE] + (["--packages"] if packages else [])
    done = run_bounded(argv, timeout=_PROBE_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise InfraError(f"interpreter {python} failed to describe itself: {last_line(done.stderr)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- environments


def default_cache_dir() -> Path:
    """``$SGLANG_REPRO_CACHE``, else ``~/.cache/sglang-repro``."""
    root = os.environ.get("SGLANG_REPRO_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "sglang-repro"


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _stubs_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(_STUBS_DIR.rglob("*.py")):
        digest.update(path.relative_to(_STUBS_DIR).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _install_stubs(python: Path) -> None:
    site = run_bounded([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=30)
    target = Path(site.stdout.strip())
    for entry in _STUBS_DIR.iterdir():
        if entry.name.startswith((".", "__pycache__")):
            continue
        destination = target / entry.name
        if entry.is_dir():
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(entry, destination, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(entry, destination)


# Runs in the new venv: sglang's own pins for the packages its flag parser needs.
_PINS = r"""
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


def _pip(python: Path, args: Sequence[str], *, timeout: float) -> None:
    done = run_bounded([str(python), "-m", "pip", "install", "--disable-pip-version-check", *args], timeout=timeout)
    if done.returncode != 0:
        raise InfraError(f"pip install {' '.join(args)} failed: {last_line(done.stderr)}")


def ensure_pip_env(
    version: str,
    *,
    deps: str = "full",
    cache_dir: Path | None = None,
    base_python: str | None = None,
    torch: str = _NODEPS_TORCH,
) -> Path:
    """Create (once) and return the virtualenv holding ``sglang==version``; safe across processes."""
    if deps not in _PIP_TIMEOUT_S:
        raise UserError(f"deps={deps!r}: valid values are full, none")
    base = base_python or sys.executable
    venv = _pip_env_dir(version, deps, cache_dir, base_python, torch)
    envs, name = venv.parent, venv.name
    envs.mkdir(parents=True, exist_ok=True)
    marker = venv / _ENV_MARKER
    import filelock  # here, not at the top: the scenario format imports this module, and `validate` needs no lock

    with filelock.FileLock(str(envs / f"{name}.lock"), timeout=_PIP_TIMEOUT_S[deps] + 600):
        if marker.is_file():
            if deps == "none" and json.loads(marker.read_text()).get("stubs") != _stubs_digest():
                _install_stubs(_venv_python(venv))
                _write_marker(marker, version, deps)
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a half-built env from a killed run
        started = time.monotonic()
        log.info("creating %s (sglang==%s, deps=%s)", venv, version, deps)
        done = run_bounded([base, "-m", "venv", str(venv)], timeout=300)
        if done.returncode != 0:
            raise InfraError(f"{base} -m venv {venv} failed: {last_line(done.stderr)}")
        python = _venv_python(venv)
        timeout = _PIP_TIMEOUT_S[deps]
        if deps == "full":
            _pip(python, [f"sglang=={version}"], timeout=timeout)
        else:
            _pip(python, ["--no-deps", f"sglang=={version}"], timeout=timeout)
            pins = run_bounded([str(python), "-c", _PINS, *NODEPS_PACKAGES], timeout=_PROBE_TIMEOUT_S)
            if pins.returncode != 0:
                raise InfraError(f"reading sglang {version}'s requirements failed: {last_line(pins.stderr)}")
            _pip(python, [f"torch=={torch}", *json.loads(pins.stdout)], timeout=timeout)
            _install_stubs(python)
        _write_marker(marker, version, deps)
        log.info("created %s in %.0f s", venv, time.monotonic() - started)
    return venv


def _pip_env_dir(version: str, deps: str, cache_dir: Path | None, base_python: str | None, torch: str) -> Path:
    tag = f"py{sys.version_info.major}{sys.version_info.minor}" if base_python is None else _short_hash(base_python)
    name = f"sglang-{version}-{'full' if deps == 'full' else f'nodeps-torch{torch}'}-{tag}"
    return (cache_dir or default_cache_dir()) / "envs" / name


def pip_env_ready(spec: BuildSpec, *, cache_dir: Path | None = None) -> bool:
    """Whether the environment of a ``pip:`` spec is already created (so resolving it installs nothing)."""
    f = spec.fields
    base = _interpreter(spec.spec, f["python"]) if "python" in f else None
    venv = _pip_env_dir(f["version"], f["deps"], cache_dir, base, f.get("torch", _NODEPS_TORCH))
    return (venv / _ENV_MARKER).is_file()


def _write_marker(marker: Path, version: str, deps: str) -> None:
    record = {"sglang": version, "deps": deps, "stubs": _stubs_digest() if deps == "none" else None}
    marker.write_text(json.dumps(record) + "\n")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# --------------------------------------------------------------------------- resolving


def _interpreter(spec: str, path: str) -> str:
    candidate = Path(path).expanduser()
    if not candidate.is_file() or not os.access(candidate, os.X_OK):
        raise _bad(spec, f"{path} is not an executable interpreter")
    return str(candidate.absolute())


def _git(checkout: Path, *args: str) -> str:
    done = run_bounded(["git", "-C", str(checkout), *args], timeout=_GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise InfraError(f"git {' '.join(args)} in {checkout} failed: {last_line(done.stderr)}")
    return done.stdout.strip()


def _src_tree(spec: BuildSpec, cache_dir: Path) -> tuple[Path, str]:
    checkout = Path(spec.fields["checkout"]).expanduser().absolute()
    if not checkout.is_dir():
        raise _bad(spec.spec, f"checkout {checkout} is not a directory")
    rev = spec.fields.get("rev")
    done = run_bounded(["git", "-C", str(checkout), "rev-parse", "--verify", f"{rev or 'HEAD'}^{{commit}}"], timeout=60)
    if done.returncode != 0:
        raise _bad(spec.spec, f"{rev or 'HEAD'} is not a commit of {checkout}")
    commit = done.stdout.strip()
    if rev is None:
        return checkout, commit
    worktrees = cache_dir / "worktrees"
    worktrees.mkdir(parents=True, exist_ok=True)
    tree = worktrees / f"{checkout.name}-{_short_hash(str(checkout))}-{commit[:12]}"
    import filelock

    with filelock.FileLock(str(tree) + ".lock", timeout=_GIT_TIMEOUT_S * 2):
        if not (tree / ".git").exists():
            shutil.rmtree(tree, ignore_errors=True)
            _git(checkout, "worktree", "prune")
            _git(checkout, "worktree", "add", "--detach", "--force", str(tree), commit)
    return tree, commit


def resolve_build(spec: str | BuildSpec, *, cache_dir: Path | None = None) -> Build:
    """Turn a spec into a launchable Build, creating its environment if needed."""
    parsed = parse_build_spec(spec) if isinstance(spec, str) else spec
    cache = cache_dir or default_cache_dir()
    f = parsed.fields
    if parsed.kind == "sim":
        revision = f["revision"]
        sim_launcher = [sys.executable, "-m", "harness.sim.server", "--sim-revision", revision]
        for knob, value in f.items():
            if knob != "revision":
                sim_launcher += [f"--sim-{knob}", value]
        return Build("sim", parsed.spec, sys.executable, tuple(sim_launcher), {}, _sim_version(revision), None, True)
    if parsed.kind == "simsrc":
        return _resolve_simsrc(parsed, cache)
    env: dict[str, str] = {}
    commit = None
    if parsed.kind == "python":
        python = _interpreter(parsed.spec, f["path"])
    elif parsed.kind == "pip":
        base = _interpreter(parsed.spec, f["python"]) if "python" in f else None
        venv = ensure_pip_env(
            f["version"], deps=f["deps"], cache_dir=cache, base_python=base, torch=f.get("torch", _NODEPS_TORCH)
        )
        python = str(_venv_python(venv))
    elif parsed.kind == "src":
        python = _interpreter(parsed.spec, f["base"]) if "base" in f else sys.executable
        tree, commit = _src_tree(parsed, cache)
        if not (tree / "python" / "sglang").is_dir():
            raise _bad(parsed.spec, f"{tree} has no python/sglang (not an sglang checkout)")
        env["PYTHONPATH"] = str(tree / "python")
    else:  # parse_build_spec admits no other kind
        raise _bad(parsed.spec, f"unknown kind {parsed.kind!r}")
    facts = _probe(python, env)
    if facts["sglang"] is None and facts["sglang_location"] is None:
        raise InfraError(f"build {parsed.spec}: {python} cannot find sglang")
    launcher = (python, "-m", "sglang.launch_server")
    return Build(parsed.kind, parsed.spec, python, launcher, env, facts["sglang"], commit, False,
                 facts["sglang_location"])


class Builds:
    """The builds of one command, each resolved at most once: resolving starts an interpreter probe (and may
    create an environment), which every trial of every case would otherwise pay again. A build that cannot
    be had is remembered too, so each of its runs records the same verdict without trying again."""

    def __init__(self, *, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._known: dict[str, Build | BuildFailure] = {}

    def get(self, spec: str, *, install_gap: Callable[[], str | None] | None = None) -> Build | BuildFailure:
        """The build of ``spec``; UserError for a bad spec. ``install_gap`` says why a full ``pip:``
        environment must not be created here (the GPU stack on a host that cannot run it); it is asked for
        every such request, and a refusal is not remembered: another case may need less hardware."""
        parsed = parse_build_spec(spec)
        if install_gap is not None and parsed.kind == "pip" and parsed.fields["deps"] == "full":
            gap = install_gap()
            if gap:
                return BuildFailure(parsed.kind, parsed.spec, f"{gap}; the environment of {spec} was not created")
        if spec not in self._known:
            try:
                self._known[spec] = resolve_build(parsed, cache_dir=self._cache_dir)
            except InfraError as exc:
                self._known[spec] = BuildFailure(parsed.kind, parsed.spec, first_line(exc))
        return self._known[spec]

    def prepared(self, spec: str) -> Build | BuildFailure | None:
        """The build of ``spec`` when resolving it creates nothing (a ``pip:`` environment not yet made: None)."""
        parsed = parse_build_spec(spec)
        if spec not in self._known and parsed.kind == "pip" and not pip_env_ready(parsed, cache_dir=self._cache_dir):
            return None
        return self.get(spec)


# Runs in the checkout's environment: "installs" means every module of its harness/ compiles (as an
# install byte-compiles it) and its flag parser imports, without paying torch's import; then its default revision.
_SIM_PROBE = r"""
import json, pathlib, sys
root = pathlib.Path(sys.argv[1]) / "harness"
for path in sorted(root.rglob("*.py")):
    compile(path.read_bytes(), str(path), "exec")
import harness.sim.cli_args
from harness.sim import DEFAULT_REVISION
print(json.dumps({"revision": DEFAULT_REVISION}))
"""


def _resolve_simsrc(parsed: BuildSpec, cache: Path) -> Build:
    tree, commit = _src_tree(parsed, cache)
    if not (tree / "harness" / "sim").is_dir():
        raise _bad(parsed.spec, f"{tree} has no harness/sim (not a checkout of sglang-repro)")
    env = {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
    done = run_bounded([sys.executable, "-c", _SIM_PROBE, str(tree)], timeout=_PROBE_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise InfraError(f"build {parsed.spec} does not install at {commit[:12]}: {last_line(done.stderr)}")
    revision = str(json.loads(done.stdout.strip().splitlines()[-1])["revision"])
    launcher = [sys.executable, "-m", "harness.sim.server"]
    for key, value in parsed.fields.items():
        if key.startswith("knob."):
            launcher += [f"--sim-{key[len('knob.'):]}", value]
    return Build("simsrc", parsed.spec, sys.executable, tuple(launcher), env,
                 f"{_sim_version(revision)} at {commit[:12]}", commit, True)


def _sim_version(revision: str) -> str:
    # Labelled everywhere as a model, never as an SGLang release.
    return f"{revision} (sglang-repro CPU reference model, not SGLang)"


def describe_environment(build: Build) -> dict[str, Any]:
    """Packages and key versions of the build's interpreter (bounded; read from metadata, no imports).

    Probed once per install of the build's interpreter (kept in the build cache), not once per run.
    """
    from harness.build_cache import cached_environment  # it builds on this module

    facts = cached_environment(build, lambda: _probe(build.python, build.env, packages=True))
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


# --------------------------------------------------------------------------- entry point


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.build", description="Prepare or show a build.")
    sub = parser.add_subparsers(dest="action", required=True)
    for action, text in (("prepare", "create the build's environment (cached) and print it"),
                         ("describe", "also list the packages of the build's interpreter")):  # fmt: skip
        p = sub.add_parser(action, help=text)
        p.add_argument("spec", help=_VALID)
        p.add_argument("--cache-dir", type=Path, default=None, help="default: $SGLANG_REPRO_CACHE or ~/.cache/sglang-repro")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        build = resolve_build(args.spec, cache_dir=args.cache_dir)
        if args.action == "prepare":
            record: dict[str, Any] = {"kind": build.kind, "spec": build.spec, "python": build.python,
                                      "launcher": list(build.launcher), "env": dict(build.env),
                                      "version": build.version, "commit": build.commit}  # fmt: skip
        else:
            record = describe_environment(build)
    except (UserError, InfraError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    sys.stdout.write(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
