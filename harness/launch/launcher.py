"""The launcher seam: what differs between starting real SGLang and the CPU reference server.

``run`` asks the launcher of its build, never the build kind: how flags are checked (the build's own
parser), how prompt text becomes token counts (the model's tokenizer), which files and hardware a start
needs, which case it runs (the reference server applies the scenario's ``reference:`` overrides), and
what ground truth the server can tell about itself afterwards. :func:`launcher_for` chooses one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from harness.build import Build
from harness.build.labels import runs_on_cpu
from harness.build.reference_server import REFERENCE_SERVER_LABEL
from harness.launch.build_profile import case_in_build_words
from harness.launch.contract_gate import contract_gap
from harness.launch.preflight import ARGPARSE_ERROR, FlagCheck, check_flag_sets, model_gap
from harness.scenario import Case
from harness.scenario.model import TokenRange
from harness.server import hardware
from harness.server.http import get_json, post
from harness.util.bounded_read import read_text
from harness.util.errors import InfraError
from harness.util.paths import resolve_fixture
from harness.util.text import last_line
from harness.workload.prompts import Prompt, fit_token_ids, prompt_lengths, random_id_prompts, text_prompts

__all__ = ["Launcher", "ReferenceLauncher", "SGLangLauncher", "flush_cache", "launcher_for"]


class Launcher(Protocol):
    """One kind of server: everything ``run`` needs to know that depends on it."""

    @property
    def build(self) -> Build: ...

    @property
    def label(self) -> str: ...

    @property
    def is_reference(self) -> bool: ...

    def case_for(self, case: Case) -> Case:
        """The case as this server runs it."""

    def check_flags(self, flag_sets: Sequence[Sequence[str]]) -> list[FlagCheck]:
        """The server's own parser on each flag set (SGLang's flags, launcher flags included)."""

    def missing(self, case: Case) -> str | None:
        """What this host lacks to start ``case`` (model files, GPUs), as one line; None when nothing."""

    def gpus_needed(self, case: Case) -> int:
        """How many GPUs to lease for one start."""

    def prompts(self, case: Case, trial: int) -> list[Prompt]:
        """The seeded prompts of ``case`` (warm-up ones first), counted with this server's tokenizer."""

    def ground_truth(self, url: str) -> Mapping[str, Any] | None:
        """What the server measured of itself (only a model can tell), or None."""

    def begin_trial(self, url: str, headers: Mapping[str, str]) -> str | None:
        """Before a trial on a server that served an earlier one: empty its caches (and restart the model's
        own counters); why that failed, or None."""


def _lengths(case: Case) -> tuple[list[int], int]:
    wl = case.scenario.workload
    spec = wl.prompt
    tokens: Any = (range(spec.tokens.start, spec.tokens.stop, spec.tokens.step)
                   if isinstance(spec.tokens, TokenRange) else spec.tokens)
    return prompt_lengths(tokens, wl.warmup + wl.requests, spec.seed), spec.seed


def _fixture_text(case: Case) -> str:
    spec = case.scenario.workload.prompt
    fixture = resolve_fixture(spec.fixture or "", relative_to=case.file.parent)
    if fixture is None:
        raise InfraError(f"prompt fixture {spec.fixture!r} not found")
    return read_text(fixture, "fixture")  # bounded: a 50 GB sparse file is refused, not read into memory


@dataclass(frozen=True)
class SGLangLauncher:
    """Real SGLang from a build's environment."""

    build: Build
    label: str = "SGLang"
    is_reference: bool = False

    def case_for(self, case: Case) -> Case:
        # The build's own words: a flag it deprecates is written as its replacement, and pre-flight says so.
        return case_in_build_words(self.build, case)[0]

    def check_flags(self, flag_sets: Sequence[Sequence[str]]) -> list[FlagCheck]:
        return check_flag_sets(self.build, flag_sets)

    def missing(self, case: Case) -> str | None:
        # First the contract: a release whose facts drifted would report nothing, silently (cached per build).
        drift = contract_gap(self.build, case)
        if drift:
            return drift
        return _models_gap(case) or hardware_gap(case)

    def gpus_needed(self, case: Case) -> int:
        return case.scenario.hardware.gpus

    def prompts(self, case: Case, trial: int) -> list[Prompt]:
        # Same seeded prompts for every build and trial: trials then differ only by the machine's noise.
        lengths, seed = _lengths(case)
        spec = case.scenario.workload.prompt
        if spec.source == "random-ids":
            return random_id_prompts(lengths, seed=seed, vocab=spec.vocab)
        return text_prompts(lengths, text=_fixture_text(case), tokenizer_path=case.scenario.server.model, seed=seed)

    def ground_truth(self, url: str) -> Mapping[str, Any] | None:
        return None

    def begin_trial(self, url: str, headers: Mapping[str, str]) -> str | None:
        return flush_cache(url, headers)


@dataclass(frozen=True)
class ReferenceLauncher:
    """The CPU reference server (``harness/sim``): a model of SGLang's mechanism, not SGLang."""

    build: Build
    label: str = REFERENCE_SERVER_LABEL
    is_reference: bool = True

    def case_for(self, case: Case) -> Case:
        return case.for_reference()

    def check_flags(self, flag_sets: Sequence[Sequence[str]]) -> list[FlagCheck]:
        if self.build.kind == "simsrc":  # another checkout's reference server: its own parser, in its environment
            return check_flag_sets(self.build, flag_sets)
        from harness.build.reference_server import flag_parser

        checks = []
        for flags in flag_sets:
            argv = [*self.build.launcher[3:], *flags]  # after "python -m harness.sim.server": its --sim-* knobs
            code, said = _parse_quietly(flag_parser(), argv)
            if code in (0, None):
                checks.append(FlagCheck(True, "flags accepted by the CPU reference server's parser "
                                              "(a model of SGLang's)"))
                continue
            found = ARGPARSE_ERROR.findall(said)
            checks.append(FlagCheck(False, found[-1].strip() if found else last_line(said)))
        return checks

    def missing(self, case: Case) -> str | None:
        return None  # it builds its tiny model itself and runs on CPU

    def gpus_needed(self, case: Case) -> int:
        return 0

    def prompts(self, case: Case, trial: int) -> list[Prompt]:
        lengths, seed = _lengths(case)
        spec = case.scenario.workload.prompt
        if spec.source == "random-ids":
            return random_id_prompts(lengths, seed=seed, vocab=spec.vocab)
        # The reference server tokenizes bytes: exact counts without any download.
        from harness.build.reference_server import encode_prompt

        ids = encode_prompt(_fixture_text(case))
        return [Prompt(input_ids=fit_token_ids(ids, n, seed=seed, index=i), text=None, tokens=n)
                for i, n in enumerate(lengths)]

    def ground_truth(self, url: str) -> Mapping[str, Any] | None:
        return get_json(f"{url}/sim/stats", timeout_s=2.0)

    def begin_trial(self, url: str, headers: Mapping[str, str]) -> str | None:
        problem = flush_cache(url, headers)
        if problem:
            return problem
        try:
            reply = post(f"{url}/sim/reset_stats", timeout_s=5.0, headers=dict(headers))
        except OSError as exc:
            return f"POST /sim/reset_stats: {exc}"
        return None if reply.status == 200 else f"POST /sim/reset_stats answered {reply.status}"


def flush_cache(url: str, headers: Mapping[str, str]) -> str | None:
    # SGLang: `/flush_cache` (GET or POST) empties the radix cache, refused while requests are in flight
    # (srt/entrypoints/http_server.py flush_cache: 0.5.14 line 839, 0.5.15 line 862).
    try:
        reply = post(f"{url}/flush_cache", timeout_s=30.0, headers=dict(headers))
    except OSError as exc:
        return f"POST /flush_cache: {exc}"
    return None if reply.status == 200 else f"POST /flush_cache answered {reply.status}: {reply.body[:200]!r}"


def _parse_quietly(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[int | str | None, str]:
    """argparse's exit status (None: parsed) and what it would have printed.

    Never through ``contextlib.redirect_stdout``/``redirect_stderr``: those swap the process-wide streams,
    and runs on several threads at once (``minimize --jobs``) would restore each other's swaps and leave
    the harness's own output going into a StringIO. The parser's own print and exit are replaced instead.
    """
    said: list[str] = []

    def print_message(message: str | None, file: Any = None) -> None:
        if message:
            said.append(message)

    def exit_parser(status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            said.append(message)
        raise SystemExit(status)

    vars(parser).update(_print_message=print_message, exit=exit_parser)  # this parser instance only
    try:
        parser.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code, "".join(said)
    return None, "".join(said)


def cheap_gap(case: Case) -> str | None:
    """What this host lacks for ``case`` that is known in milliseconds (its GPUs, then its model files), or None:
    said before any environment is downloaded or built (a GPU-less host waited 155 s for a pip environment, then
    heard of the missing model, and of the missing GPUs last)."""
    return hardware_gap(case) or _models_gap(case)


def _models_gap(case: Case) -> str | None:
    """Why the files of the case's model or draft model are not here (:func:`model_gap`, with its load format), or None."""
    load_format = case.scenario.server.args.get("load-format")
    for model in filter(None, (case.scenario.server.model, case.scenario.server.draft_model)):
        gap = model_gap(model, load_format=str(load_format) if load_format else None)
        if gap:
            return gap
    return None


def hardware_gap(case: Case) -> str | None:
    """What the scenario's hardware requirement lacks on this host, or None."""
    hw = case.scenario.hardware
    gap = hardware.requirement_gap(hardware.inventory(), count=hw.gpus, name_pattern=hw.gpu_name,
                                   min_memory_gib=hw.min_memory_gib,
                                   min_compute_capability=hw.min_compute_capability)
    return f"hardware: {gap}" if gap else None


def launcher_for(build: Build) -> Launcher:
    if build.is_reference:
        return ReferenceLauncher(build)
    if runs_on_cpu(build.spec):  # real SGLang on the CPU: its scenario's `cpu:` section, no GPU leased
        from harness.launch.cpu_launcher import CpuLauncher

        return CpuLauncher(build)
    return SGLangLauncher(build)
