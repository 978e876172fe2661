"""Resolving a build: from its spec to an interpreter, a launcher and an environment overlay.

:func:`resolve_build` resolves one spec (creating its environment if needed, and probing its interpreter
for sglang); :class:`Builds` resolves each spec of one command once, remembering failures too.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.build.checkouts import source_tree
from harness.build.environments import NODEPS_TORCH, default_cache_dir, ensure_pip_env, interpreter, pip_env_ready, venv_python
from harness.build.labels import build_label
from harness.build.probes import PROBE_TIMEOUT_S, SIM_PROBE, probe, read_answer
from harness.build.reference_server import REFERENCE_SERVER_LABEL, REVISION_RULES
from harness.build.sglang_cpu.environment import server_environment
from harness.build.spec import BuildSpec, bad_spec, parse_build_spec
from harness.util.errors import InfraError
from harness.util.proc import run_bounded
from harness.util.text import first_line, last_line

__all__ = ["Build", "BuildFailure", "Builds", "resolve_build"]


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
    # What the build is when it is not SGLang on the scenario's hardware (harness.build.labels): the reference
    # server, or the real-SGLang CPU build. Said in every record, report and CLI line.
    label: str | None = None

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
        if "rules" not in f:  # the release the revision stands for: its profile names the rules it followed
            sim_launcher += ["--sim-rules", REVISION_RULES[revision]]
        # PYTHONSAFEPATH: `-m harness.sim.server` must not put the working directory first on sys.path, where a
        # user's repository with a harness/ package of its own would shadow this one (docs/configuration.md).
        return Build("sim", parsed.spec, sys.executable, tuple(sim_launcher), {"PYTHONSAFEPATH": "1"},
                     _sim_version(revision), None, True,
                     label=REFERENCE_SERVER_LABEL)
    if parsed.kind == "simsrc":
        return _resolve_simsrc(parsed, cache)
    env: dict[str, str] = {}
    commit = None
    if parsed.kind == "python":
        python = interpreter(parsed.spec, f["path"])
    elif parsed.kind == "pip":
        base = interpreter(parsed.spec, f["python"]) if "python" in f else None
        venv = ensure_pip_env(
            f["version"], deps=f["deps"], cache_dir=cache, base_python=base, torch=f.get("torch", NODEPS_TORCH)
        )
        python = str(venv_python(venv))
        if f["deps"] == "cpu":  # real SGLang on the CPU: its stand-ins and CPU switches (harness.build.sglang_cpu)
            env.update(server_environment(venv))
    elif parsed.kind == "src":
        python = interpreter(parsed.spec, f["base"]) if "base" in f else sys.executable
        tree, commit = source_tree(parsed, cache)
        if not (tree / "python" / "sglang").is_dir():
            raise bad_spec(parsed.spec, f"{tree} has no python/sglang (not an sglang checkout)")
        env["PYTHONPATH"] = str(tree / "python")
    else:  # parse_build_spec admits no other kind
        raise bad_spec(parsed.spec, f"unknown kind {parsed.kind!r}")
    facts = probe(python, env)
    if facts["sglang"] is None and facts["sglang_location"] is None:
        raise InfraError(f"build {parsed.spec}: {python} cannot find sglang")
    launcher = (python, "-m", "sglang.launch_server")
    return Build(parsed.kind, parsed.spec, python, launcher, env, facts["sglang"], commit, False,
                 facts["sglang_location"], build_label(parsed.spec))


def _resolve_simsrc(parsed: BuildSpec, cache: Path) -> Build:
    tree, commit = source_tree(parsed, cache)
    if not (tree / "harness" / "sim").is_dir():
        raise bad_spec(parsed.spec, f"{tree} has no harness/sim (not a checkout of sglang-repro)")
    env = {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
    done = run_bounded([sys.executable, "-c", SIM_PROBE, str(tree)], timeout=PROBE_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise InfraError(f"build {parsed.spec} does not install at {commit[:12]}: {last_line(done.stderr)}")
    revision = str(read_answer(done.stdout)["revision"])
    launcher = [sys.executable, "-m", "harness.sim.server"]
    for key, value in parsed.fields.items():
        if key.startswith("knob."):
            launcher += [f"--sim-{key[len('knob.'):]}", value]
    return Build("simsrc", parsed.spec, sys.executable, tuple(launcher), env,
                 f"{_sim_version(revision)} at {commit[:12]}", commit, True, label=REFERENCE_SERVER_LABEL)


def _sim_version(revision: str) -> str:
    # Labelled everywhere as a model, never as an SGLang release.
    return f"{revision} (sglang-repro CPU reference model, not SGLang)"


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
        # deps=cpu runs on this CPU (its launcher checks its own needs); any other pip environment not made yet takes
        # minutes to make, so what is known in milliseconds is asked first
        deps = parsed.fields.get("deps") if parsed.kind == "pip" else None
        if install_gap is not None and deps is not None and deps != "cpu" and (
                deps == "full" or (spec not in self._known and not pip_env_ready(parsed, cache_dir=self._cache_dir))):
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
