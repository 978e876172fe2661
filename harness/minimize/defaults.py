"""The build's own flag defaults, read from its parser as pre-flight reads flags.

The reference server's parser is :func:`harness.sim.cli_args.build_parser`; a real build's is
``ServerArgs.add_cli_args`` run in the build's own interpreter (one subprocess per session). A flag
set to its default is the same configuration as the flag left out, so the canonical form of a
candidate drops it: the two then share one digest and never run twice.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.build import Build
from harness.util.errors import InfraError
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["FlagInfo", "ParserDefaults", "read_defaults"]

_RESULT = "SGLANG_REPRO_PARSER_DEFAULTS "
# Runs in the build's interpreter; the same walk as _describe below.
_DESCRIBE = f"""
import argparse, json
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser(prog="sglang.launch_server")
ServerArgs.add_cli_args(parser)
out = {{}}
for action in parser._actions:
    default = action.default
    if not isinstance(default, (bool, int, float, str, type(None))):
        default = repr(default)
    for option in action.option_strings:
        if option.startswith("--"):
            out[option[2:]] = [action.dest, default, action.nargs == 0]
print("{_RESULT}" + json.dumps(out), flush=True)
"""


@dataclass(frozen=True)
class FlagInfo:
    dest: str
    default: Any
    switch: bool  # takes no value (store_true and the like)


@dataclass(frozen=True)
class ParserDefaults:
    """Flags by name (without dashes); aliases share a ``dest``."""

    flags: Mapping[str, FlagInfo]

    def info(self, name: str) -> FlagInfo | None:
        return self.flags.get(name)

    def is_default(self, name: str, value: Any) -> bool:
        """Whether ``--name value`` means what leaving the flag out means."""
        info = self.flags.get(name)
        if value is None or value is False:
            return True
        if info is None:
            return False
        if info.switch:
            return value is not True and not value
        return _same(value, info.default)

    def canonical(self, name: str, value: Any) -> tuple[str, Any] | None:
        """(dest, normalised value), or None when the flag is at its default."""
        if self.is_default(name, value):
            return None
        info = self.flags.get(name)
        return (info.dest if info else name, _normal(value))

    def numeric_default(self, name: str) -> float | None:
        info = self.flags.get(name)
        if info is None or info.switch or isinstance(info.default, bool):
            return None
        return float(info.default) if isinstance(info.default, (int, float)) else None


def _normal(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    return _normal(number) if math.isfinite(number) else text


def _same(value: Any, default: Any) -> bool:
    if default is None:
        return False
    return bool(_normal(value) == _normal(default))


def _describe(parser: argparse.ArgumentParser) -> dict[str, FlagInfo]:
    out = {}
    for action in parser._actions:
        for option in action.option_strings:
            if option.startswith("--"):
                out[option[2:]] = FlagInfo(action.dest, action.default, action.nargs == 0)
    return out


def read_defaults(build: Build, *, timeout_s: float = 120) -> ParserDefaults:
    """The build's flag table; InfraError when its parser cannot be loaded."""
    if build.is_reference:
        from harness.build.reference_server import flag_parser

        return ParserDefaults(_describe(flag_parser()))
    done = run_bounded([build.python, "-c", _DESCRIBE], timeout=timeout_s, env=build.env)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(_RESULT)), None)
    if done.returncode != 0 or line is None:
        raise InfraError(f"cannot read sglang's flag defaults with {build.python} ({build.spec}): "
                         f"{last_line(done.stderr)}")
    raw = json.loads(line[len(_RESULT):])
    return ParserDefaults({name: FlagInfo(str(dest), default, bool(switch))
                           for name, (dest, default, switch) in raw.items()})
