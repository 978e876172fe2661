"""Build specs: one string naming where the server code comes from, parsed and validated.

Spec syntax (one string, ``KIND:VALUE[,key=value...]``):

- ``sim:pre-fix`` | ``sim:post-fix[,knob=value...]``: the CPU reference server (a model of
  SGLang's mechanism, not SGLang). Each knob ``k=v`` becomes ``--sim-k v``; ``rules=VERSION``
  follows that sglang release's rules where releases differ (harness.sim.release_rules).
- ``python:PATH``: an interpreter whose environment already has sglang.
- ``pip:sglang==X[,deps=full|none|cpu][,python=PATH][,torch=V]``: a virtualenv per version, created
  once under ``<cache>/envs/`` (guarded by a file lock). ``deps=full`` (default) is a plain
  ``pip install sglang==X`` for GPU machines. ``deps=none`` installs sglang with ``--no-deps``
  plus the few small packages its flag parser imports (pinned as sglang's own metadata pins
  them), CPU ``torch==V`` (default 2.13.0) and the import-only stubs of ``triton`` and
  ``torchvision`` from ``harness/data/stubs`` copied into the venv's site-packages: enough to parse
  flags and print ``--help`` on a machine without a GPU, never enough to serve. ``deps=cpu`` is the
  real-SGLang CPU build ("real SGLang, plain-torch kernels on CPU", :mod:`harness.build.sglang_cpu`):
  CPU ``torch==2.13.0``, the real wheel ``--no-deps`` and its pure-Python dependencies at its own pins,
  with stand-ins for the GPU packages and plain-torch ports of the kernels its CPU path launches; it
  serves a model on the CPU (never a GPU performance figure). It takes no ``torch=`` or ``python=``.
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
Run ``sglang-repro prepare SPEC`` to create a build's environment ahead of time.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.build.reference_server import REVISIONS
from harness.util.errors import UserError

__all__ = ["BUILD_KINDS", "SIM_REVISIONS", "VALID_SPECS", "BuildSpec", "bad_spec", "parse_build_spec"]

SIM_REVISIONS = REVISIONS
# The build kinds, as a spec starts: sim:, python:, pip:, src:.
BUILD_KINDS = ("sim", "python", "pip", "src")

VALID_SPECS = (
    "valid build specs: sim:pre-fix|post-fix[,knob=value...], python:PATH, "
    "pip:sglang==X[,deps=full|none|cpu][,python=PATH][,torch=V], src:CHECKOUT[@REV][,base=PATH], "
    "simsrc:CHECKOUT[@REV][,knob=value...]"
)
_PIP_KEYS = ("deps", "python", "torch")
_PIP_DEPS = ("full", "none", "cpu")
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


def bad_spec(spec: str, why: str) -> UserError:
    """A spec the user got wrong: what is wrong, and what is valid."""
    return UserError(f"build spec {spec!r}: {why}; {VALID_SPECS}")


def _split_options(spec: str, text: str, allowed: Sequence[str] | None) -> tuple[str, dict[str, str]]:
    head, *rest = text.split(",")
    options: dict[str, str] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise bad_spec(spec, f"option {item!r} is not key=value")
        if allowed is not None and key not in allowed:
            raise bad_spec(spec, f"unknown option {key!r} (allowed: {', '.join(allowed)})")
        if key in options:
            raise bad_spec(spec, f"option {key!r} given twice")
        options[key] = value
    return head.strip(), options


def _sim_knobs() -> tuple[str, ...]:
    from harness.build.reference_server import knobs

    return knobs()


_SEED_BITS = 63  # torch.manual_seed takes 64 bits; a seed is a whole number, not "1e23"
_STEP_COST_MAX_MS = 60_000.0  # a minute per step: beyond it a run only meets its timeout


def _finite(spec: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise bad_spec(spec, f"{key}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise bad_spec(spec, f"{key}={text!r} is not a finite number")
    return value


def _check_sim_knobs(spec: str, knobs: dict[str, str]) -> None:
    """The reference server's knob values, checked here (bad input, one line) rather than by the server at
    start-up, where a refusal would look like a crash of the build."""
    if "draft-agreement" in knobs and not 0.0 <= _finite(spec, "draft-agreement", knobs["draft-agreement"]) <= 1.0:
        raise bad_spec(spec, f"draft-agreement={knobs['draft-agreement']} must be within [0, 1]")
    if "position-drop" in knobs:
        k, sep, f = knobs["position-drop"].partition(":")
        if not sep or not k.strip().isdigit() or int(k) < 1 or not 0.0 <= _finite(spec, "position-drop", f) <= 1.0:
            raise bad_spec(spec, f"position-drop={knobs['position-drop']} must be K:F, K >= 1 and F within [0, 1]")
    if "step-cost-ms" in knobs:
        cost = _finite(spec, "step-cost-ms", knobs["step-cost-ms"])
        if not 0.0 <= cost <= _STEP_COST_MAX_MS:
            raise bad_spec(spec, f"step-cost-ms={knobs['step-cost-ms']} must be within [0, {_STEP_COST_MAX_MS:g}]")
    if "seed" in knobs:
        text = knobs["seed"].strip()
        if not re.fullmatch(r"\d{1,19}", text) or int(text) >= 2**_SEED_BITS:
            raise bad_spec(spec, f"seed={knobs['seed']} must be a whole number in [0, 2**{_SEED_BITS})")
    if "rules" in knobs:
        from harness.build.reference_server import check_rules_version

        try:
            check_rules_version(knobs["rules"])
        except ValueError as exc:
            raise bad_spec(spec, f"rules={knobs['rules']}: {exc}") from None
    if "device" in knobs:
        device = knobs["device"].strip()
        if device not in ("cpu", "cuda"):
            raise bad_spec(spec, f"device={device!r} is not cpu or cuda")
        if device == "cuda":
            from harness.server.hardware import inventory

            if not inventory():
                raise bad_spec(spec, "device=cuda, but this machine shows no CUDA GPU (nvidia-smi/NVML see none)")


def parse_build_spec(spec: str) -> BuildSpec:
    """Parse ``spec`` (syntax in the module docstring); raise UserError naming what is valid."""
    if not isinstance(spec, str) or ":" not in spec:
        raise bad_spec(str(spec), "missing KIND:")
    kind, _, rest = spec.partition(":")
    kind = kind.strip()
    if not rest.strip():
        raise bad_spec(spec, f"nothing after {kind}:")
    if kind == "sim":
        revision, knobs = _split_options(spec, rest, _sim_knobs())
        if revision not in SIM_REVISIONS:
            raise bad_spec(spec, f"unknown revision {revision!r} (valid: {', '.join(SIM_REVISIONS)})")
        _check_sim_knobs(spec, knobs)
        return BuildSpec("sim", spec, {"revision": revision, **knobs})
    if kind == "python":
        return BuildSpec("python", spec, {"path": rest.strip()})
    if kind == "pip":
        requirement, options = _split_options(spec, rest, _PIP_KEYS)
        name, sep, version = requirement.partition("==")
        if name.strip().lower() != "sglang" or not sep or not _VERSION_RE.match(version.strip()):
            raise bad_spec(spec, f"{requirement!r} is not sglang==VERSION")
        deps = options.setdefault("deps", "full")
        if deps not in _PIP_DEPS:
            raise bad_spec(spec, f"deps={deps!r} (valid: full, none, cpu)")
        if "torch" in options and deps != "none":
            raise bad_spec(spec, "torch= applies only with deps=none")
        if "python" in options and deps == "cpu":
            raise bad_spec(spec, "python= does not apply with deps=cpu (its environment uses the harness's interpreter)")
        return BuildSpec("pip", spec, {"version": version.strip(), **options})
    if kind == "src":
        location, options = _split_options(spec, rest, _SRC_KEYS)
        checkout, at, rev = location.partition("@")
        if not checkout or (at and not rev):
            raise bad_spec(spec, "expected src:CHECKOUT[@REV]")
        values = {"checkout": checkout, **options}
        if rev:
            values["rev"] = rev
        return BuildSpec("src", spec, values)
    if kind == "simsrc":
        # The checkout's own parser is the authority on its knobs: any k=v is passed on.
        location, knobs = _split_options(spec, rest, None)
        checkout, at, rev = location.partition("@")
        if not checkout or (at and not rev):
            raise bad_spec(spec, "expected simsrc:CHECKOUT[@REV]")
        values = {"checkout": checkout, **{f"knob.{k}": v for k, v in knobs.items()}}
        if rev:
            values["rev"] = rev
        return BuildSpec("simsrc", spec, values)
    raise bad_spec(spec, f"unknown kind {kind!r}")
