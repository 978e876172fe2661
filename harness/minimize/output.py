"""What a minimization hands over: the minimal scenario YAML, the one-line launch, the curl, the table.

The launch line and the curl come from the first confirming run (its redacted argv and its first
failing request), with the leased port put back to SGLang's default 30000.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness.build import Build
from harness.build.tiny_model_cache import tiny_name_of
from harness.contract.profile import BuildProfile
from harness.contract.render import in_build_words
from harness.launch.build_profile import build_profile
from harness.minimize.atoms import Candidate, to_mapping
from harness.minimize.observation import Observation, Target
from harness.scenario import Case, sglang_argv
from harness.scenario.argv import DEFAULT_PORT
from harness.scenario.overrides import SetOverride, is_secret_set, split_secrets
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, read_json
from harness.util.redact import redact_everywhere, redact_text

if TYPE_CHECKING:
    from harness.minimize.search import MinimizeResult

__all__ = ["curl_line", "launch_line", "minimal_mapping", "render_report", "write_minimal"]

_PARALLEL = ("tp-size", "tp", "tensor-parallel-size", "pp-size", "pipeline-parallel-size")


def _matches_build(role_spec: str, role_sim: str, build: Build) -> bool:
    return build.spec in (role_spec, role_sim, f"sim:{role_sim}")


def minimal_mapping(base: dict[str, Any], cand: Candidate, *, case: Case, build: Build, target: Target,
                    runs: int) -> dict[str, Any]:
    """The scenario mapping of ``cand``: one case, its own name, what it reproduces as the expectation of
    the role that maps to ``build`` (other roles' expectations kept as hypotheses: not run on it)."""
    data = _portable_models(to_mapping(base, cand))
    data["name"] = f"{case.scenario.name}-minimal"[:100]
    data["description"] = (
        f"Minimized by sglang-repro minimize from {case.file} (case {case.name}) on {build.spec}: "
        f"{target.describe()}, reproduced {runs} of {runs} times."
    )
    # In the words of the build it ran on: a flag the build deprecates is written as its replacement, and the
    # description says which draft path rule the build follows (a one-step draft is eager up to 0.5.22 only).
    profile = build_profile(build)
    if not build.is_reference and "unavailable" not in profile:
        data["server"]["args"] = dict(in_build_words(data["server"]["args"], BuildProfile.from_json(profile)).args)
        data["description"] += (f" On sglang {profile['version']} the draft runs eagerly when "
                                f"{BuildProfile.from_json(profile).eager_rule}.")
    elif build.is_reference:
        data["description"] += (f" The reference server followed sglang {profile['rules']}'s rules: eager at "
                                f"--speculative-num-steps <= {profile['eager_max_steps']} or with CUDA graphs off.")
    args = data["server"]["args"]
    gpus_needed = 1
    for name in _PARALLEL:
        if isinstance(args.get(name), int) and not isinstance(args.get(name), bool):
            gpus_needed *= int(args[name])
    hardware = data.get("hardware")
    if isinstance(hardware, dict) and int(hardware.get("gpus", 1)) > gpus_needed:
        hardware["gpus"] = gpus_needed  # no tensor/pipeline parallelism left: one server needs fewer GPUs
    expect: dict[str, Any] = {}
    for role, spec in (data.get("builds") or {}).items():
        old = (data.get("expect") or {}).get(role)
        if _matches_build(spec.get("spec", ""), spec.get("sim", ""), build):
            exp: dict[str, Any] = {"outcome": target.outcome.value, "status": "confirmed",
                                   "evidence": f"sglang-repro minimize on {build.spec}: {runs} of {runs} runs"}
            if target.signature:
                exp["signature"] = target.signature
            if target.phase:
                exp["phase"] = target.phase.value
            expect[role] = exp
        elif old is not None:
            expect[role] = {**old, "status": "hypothesis"}
    data["expect"] = expect
    data = _markers_of_what_is_left(data, base)
    return data


def _portable_models(data: dict[str, Any]) -> dict[str, Any]:
    """The tiny models by their ``tiny:NAME`` again: the CPU launcher put this machine's cache folders in their place
    (``CpuLauncher.case_for``), and a minimal scenario is handed to others; their runs make the model themselves."""
    server = data.get("server") or {}
    for key in ("model", "draft_model"):
        name = tiny_name_of(server.get(key))
        if name is not None:
            server[key] = name
    args = server.get("args") or {}
    for flag, value in args.items():
        name = tiny_name_of(value) if isinstance(value, str) else None
        if name is not None:
            args[flag] = name
    return data


def _markers_of_what_is_left(data: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The scenario's markers less those naming a feature whose flags the minimization dropped: a ``hicache`` marker
    named ``--hicache-ratio``; kept on a case without it, ``pytest -m hicache`` selected a case that runs no HiCache."""
    markers = data.get("markers")
    if not isinstance(markers, list):
        return data

    def names(mapping: dict[str, Any]) -> list[str]:
        args = (mapping.get("server") or {}).get("args") or {}
        return [str(k).replace("_", "-").lower() for k in args]

    before, now = names(base), names(data)
    kept = [m for m in markers
            if not (any(str(m).replace("_", "-").lower() in a for a in before)
                    and not any(str(m).replace("_", "-").lower() in a for a in now))]
    if kept != markers:
        data = {**data, "markers": kept}
    return data


def write_minimal(path: Path, mapping: dict[str, Any], *, case: Case, build: Build,
                  target: Target) -> tuple[SetOverride, ...]:
    """Write the minimal scenario without its secrets (named in its header: give each with ``--set`` to run it);
    returns the overrides that put them back, for the confirming runs."""
    mapping, secrets = split_secrets(mapping)
    header = [
        "# Written by `sglang-repro minimize`: the smallest configuration found that still fails the same way",
        f"# ({target.describe()}) on {build.spec}. Minimized from {case.file}, case {case.name}.",
    ]
    if secrets:
        header.append("# Secrets kept out of this file (give each with --set to run it): "
                      + ", ".join(".".join(s.path) for s in secrets))
    write_atomic(path, "\n".join(header) + "\n" + yaml.safe_dump(mapping, sort_keys=False))
    return secrets


def launch_line(argv: Sequence[str]) -> str:
    """The run's server command on one line, port back to SGLang's default."""
    out = list(argv)
    for i, item in enumerate(out[:-1]):
        if item == "--port":
            out[i + 1] = str(DEFAULT_PORT)
    return shlex.join(out)


def curl_line(request: Any, host: str = "127.0.0.1") -> str:
    body = json.dumps(request, separators=(",", ":"))
    return (f"curl -sS -N http://{host}:{DEFAULT_PORT}/generate -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)}")


def first_request(obs: Observation) -> Any:
    path = Path(obs.artifacts) / "first_failing_request.json"
    try:
        return read_json(path, "record")
    except (OSError, ValueError, ReadRefused):
        return None


def _cell(text: str) -> str:
    return redact_text(text).replace("|", "\\|").replace("\n", " ")


def render_report(res: MinimizeResult) -> str:
    """The Markdown report: outcome, repro commands, the table of tries, what was left untried."""
    lines = [f"# sglang-repro minimize: {res.status}", "", res.message, ""]
    if res.target is not None:
        lines += [f"- failure: `{res.target.describe()}`", f"- frames: `{' > '.join(res.target.frames) or '-'}`"]
    lines += [f"- repetition rule: {res.rule}", f"- server runs: {res.fresh_runs}; wall time: {res.wall_s:.1f} s", ""]
    if res.minimal is not None and res.original is not None:
        kept = " ".join(a.label for a in res.minimal.atoms) or "(none)"
        lines += ["## Minimal case", "", f"- kept: `{kept}`",
                  f"- workload: {res.minimal.shape.describe(res.original.shape)}", ""]
    if res.confirmations:
        first = res.confirmations[0]
        lines += ["## Launch (this build)", "", "```sh", launch_line(first.argv), "```", ""]
        if res.minimal_mapping is not None:
            from harness.scenario import Scenario

            sc = Scenario.model_validate(res.minimal_mapping)
            lines += ["## Launch (SGLang)", "", "```sh", shlex.join(sglang_argv(sc)), "```", ""]
        request = first_request(first)
        if request is not None:
            lines += ["## The request that triggers it", "", "```sh", curl_line(request), "```", ""]
    lines += ["## Tries", "", "| # | step | change | result | runs | s |", "|---|---|---|---|---|---|"]
    for a in res.attempts:
        result = f"{a.verdict}: {a.detail}" if a.verdict != "interesting" else f"interesting ({a.detail})"
        if a.reused_from is not None:
            result += f" [cache, as #{a.reused_from}]"
        lines.append(f"| {a.index} | {a.step} | {_cell(a.change)} | {_cell(result)} | {a.runs} | {a.seconds:.1f} |")
    lines += ["", "## Left untried", ""]
    lines += [f"- {u}" for u in res.untried] or ["- nothing: every step ran to its end"]
    # a secret atom (a --set HF_TOKEN or --api-key) is named, its value never shown: in kept, launch lines, tries
    atoms = res.original.atoms if res.original is not None else ()
    known = {str(a.value) for a in atoms if is_secret_set(SetOverride(("server", "env" if a.kind == "env" else "args",
                                                                        a.name), a.value, ""))}
    return redact_everywhere("\n".join(lines) + "\n", known)
