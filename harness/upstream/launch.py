"""The server command of a report, ``python -m sglang.launch_server ...``, in the build's own words.

A real build's run record already holds its command as that build takes it (pre-flight wrote a flag the build
deprecates as its replacement: :mod:`harness.contract.render`); the interpreter's path becomes ``python`` and the
leased port SGLang's default. The reference server's command is its own (``harness.sim.server`` and ``--sim-*``
knobs): those go, and the flags are rendered for the release the run stands for when that release's wheel is in
the cache (its profile names the flags it deprecates); otherwise they stay as the scenario gives them, and a note
says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.records.run_record import RunRecord
from harness.scenario.argv import DEFAULT_PORT, SGLANG_LAUNCHER
from harness.upstream.known import Release

__all__ = ["Launch", "launch_command", "split_flags"]


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()


def split_flags(argv: Sequence[str]) -> list[str]:
    """The server flags of a run's argv: what follows the launcher (``-m MODULE``), the reference server's ``--sim-*``
    knobs left out, the port set back to SGLang's default."""
    items = list(argv)
    start = next((i + 2 for i, a in enumerate(items[:-1]) if a == "-m"), None)
    if start is None:
        start = next((i for i, a in enumerate(items) if a.startswith("--")), len(items))
    out: list[str] = []
    i = start
    while i < len(items):
        item = items[i]
        valued = i + 1 < len(items) and not items[i + 1].startswith("--")
        if item.startswith("--sim-"):
            i += 2 if valued else 1
            continue
        out.append(item)
        if item == "--port" and valued:
            out.append(str(DEFAULT_PORT))
            i += 2
            continue
        i += 1
    return out


def _as_args(flags: Sequence[str]) -> dict[str, object]:
    args: dict[str, object] = {}
    i = 0
    while i < len(flags):
        name = flags[i][2:]
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            args[name] = flags[i + 1]
            i += 2
        else:
            args[name] = True
            i += 1
    return args


def _as_flags(args: dict[str, object]) -> list[str]:
    out: list[str] = []
    for name, value in args.items():
        out.append(f"--{name}")
        if value is not True:
            out.append(str(value))
    return out


def _in_release_words(flags: list[str], version: str) -> tuple[list[str], tuple[str, ...]]:
    from harness.contract.profile import ProfileUnavailable, compute_profile
    from harness.contract.render import in_build_words
    from harness.contract.wheels import WheelSources, cached_wheel

    wheel = cached_wheel(version)
    if wheel is None:
        return flags, (f"the flags are the scenario's: sglang {version}'s wheel is not in the cache, so its deprecated "
                       "flags could not be rendered (`sglang-repro releases` fetches it)",)
    try:
        profile = compute_profile(WheelSources.from_wheel(wheel), version)
    except ProfileUnavailable as exc:
        return flags, (f"the flags are the scenario's: sglang {version}'s profile is unavailable ({exc})",)
    rendered = in_build_words(_as_args(flags), profile)
    return _as_flags(rendered.args), rendered.notes


def launch_command(record: RunRecord, release: Release) -> Launch:
    flags = split_flags(record.server.argv)
    if not record.build.reference_server:
        return Launch((*SGLANG_LAUNCHER, *flags))
    notes: tuple[str, ...] = ("the run was on the CPU reference server (a model of SGLang, not SGLang); this is the "
                              "command of the same case on SGLang",)
    if release.version is not None:
        flags, more = _in_release_words(flags, release.version)
        notes += more
    return Launch((*SGLANG_LAUNCHER, *flags), notes)
