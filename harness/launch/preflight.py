"""Pre-flight: cheap checks before a server is started (flags parse, model present).

Flags are parsed by the build's own parser, in the build's own interpreter, at argparse level:
``ServerArgs.add_cli_args(parser); parser.parse_args(argv)``. ``prepare_server_args`` would go
further and look for an accelerator, which fails on any machine without one. Nothing here
starts a server.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.build import Build
from harness.build.cache import cached_flag_checks
from harness.util.errors import InfraError
from harness.util.proc import run_bounded
from harness.util.text import last_line

__all__ = ["ARGPARSE_ERROR", "FlagCheck", "check_flag_sets", "check_flags", "model_gap"]

_LOADED = "SGLANG_REPRO_PARSER_LOADED"
_RESULTS = "SGLANG_REPRO_PARSE_RESULTS "

# Runs in the build's interpreter; its one argument is a JSON list of flag lists. Parsing several
# sets in one process pays sglang's import (seconds) once.
_PARSE = f"""
import argparse, contextlib, io, json, sys
from sglang.srt.server_args import ServerArgs
print({_LOADED!r}, flush=True)
results = []
for argv in json.loads(sys.argv[1]):
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    results.append([code, err.getvalue()])
print("{_RESULTS}" + json.dumps(results), flush=True)
"""

# A checkout of sglang-repro (a simsrc: build) is parsed by its own reference server's parser, in its environment.
_PARSE_SIM = _PARSE.replace(
    "from sglang.srt.server_args import ServerArgs", "from harness.sim.cli_args import build_parser"
).replace(
    'parser = argparse.ArgumentParser(prog="sglang.launch_server")\n    ServerArgs.add_cli_args(parser)',
    "parser = build_parser()",
)
ARGPARSE_ERROR = re.compile(r"^.*?: error: (.*)$", re.M)


@dataclass(frozen=True)
class FlagCheck:
    """Whether the build's parser accepts the flags; ``message`` is argparse's own words when not."""

    ok: bool
    message: str


def _flags(build: Build, server_argv: Sequence[str]) -> list[str]:
    # The launcher may carry flags of its own after "-m module" (the reference server's --sim-*).
    return list(build.launcher[3:]) + list(server_argv)


def check_flags(build: Build, server_argv: Sequence[str], *, timeout_s: float = 60) -> FlagCheck:
    """Parse ``server_argv`` with the build's own parser.

    Returns ok=False with argparse's message (e.g. "unrecognized arguments: --bogus") when the
    parser rejects the flags. Raises InfraError when the parser cannot even be loaded.
    """
    return check_flag_sets(build, [server_argv], timeout_s=timeout_s)[0]


def check_flag_sets(build: Build, argvs: Sequence[Sequence[str]], *, timeout_s: float = 120) -> list[FlagCheck]:
    """:func:`check_flags` for several flag lists, in one process of the build's interpreter."""
    sets = [_flags(build, argv) for argv in argvs]
    # Each verdict is kept per build (harness.build.cache): the parser starts only for unknown sets.
    return cached_flag_checks(build, sets, lambda todo: _parse(build, todo, timeout_s), FlagCheck, method=_PARSE)


def _parse(build: Build, sets: list[list[str]], timeout_s: float) -> list[FlagCheck]:
    script = _PARSE_SIM if build.kind == "simsrc" else _PARSE
    done = run_bounded([build.python, "-c", script, json.dumps(sets)], timeout=timeout_s, env=build.env)
    if _LOADED not in done.stdout:
        raise InfraError(
            f"cannot load sglang's flag parser with {build.python} ({build.spec}): {last_line(done.stderr)}"
        )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(_RESULTS)), None)
    if done.returncode != 0 or line is None:
        raise InfraError(f"sglang's flag parser in {build.python} exited {done.returncode}: "
                         f"{last_line(done.stderr)}")
    checks = []
    for code, err in json.loads(line[len(_RESULTS):]):
        found = ARGPARSE_ERROR.findall(err)
        if code == 0:
            checks.append(FlagCheck(True, f"flags accepted by sglang {build.version or '?'} ({build.spec})"))
        elif code == 2 and found:
            checks.append(FlagCheck(False, found[-1].strip()))
        else:
            raise InfraError(f"sglang's flag parser in {build.python} exited {code}: {last_line(err)}")
    return checks


def _hub_cache_dir() -> str | None:
    # Read at call time: huggingface_hub fixes its own constant when first imported.
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return os.environ["HUGGINGFACE_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


def model_gap(model: str, *, load_format: str | None) -> str | None:
    """None when the server could find ``model``'s files; else one line saying what is missing.

    A local directory needs ``config.json``; a hub id needs ``config.json`` in the Hugging Face
    cache (servers here cannot download). ``--load-format dummy`` skips weights but still reads
    the config and the tokenizer.
    """
    why = " (--load-format dummy still needs config and tokenizer)" if load_format == "dummy" else ""
    path = Path(model).expanduser()
    if path.exists() or model.startswith(("/", ".", "~")):
        if not path.is_dir():
            return f"model path {model} is not a directory{why}"
        if not (path / "config.json").is_file():
            return f"model directory {model} has no config.json{why}"
        return None
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    cache = _hub_cache_dir()
    try:
        found = try_to_load_from_cache(model, "config.json", cache_dir=cache)
    except HFValidationError:
        return f"model {model!r} is neither a local directory nor a Hugging Face repo id{why}"
    if isinstance(found, str):
        return None
    where = cache or "the default Hugging Face cache"
    return f"model {model} is not in {where} (no config.json); download it first, e.g. `hf download {model}`{why}"
