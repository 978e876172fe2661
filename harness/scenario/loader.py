"""Loading scenario files into validated cases, or one error line per problem."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.scenario.comment_hazard import CommentHazard
from harness.scenario.errors import ScenarioError, excerpt, format_line, validation_lines
from harness.scenario.matrix import (
    DEFAULT_CASE,
    MatrixError,
    Override,
    apply_overrides,
    check_size,
    check_weight,
    cpu_overrides,
    parse_matrix,
    product,
    reference_overrides,
)
from harness.scenario.model import Scenario
from harness.scenario.overrides import SetOverride, recorded_set
from harness.scenario.set_conflicts import warn_overridden
from harness.scenario.source import Source, SourceError, read_source
from harness.util.collector import collector_paused
from harness.util.paths import fixture_roots, resolve_fixture

__all__ = ["Case", "LoadedScenario", "find_scenario_files", "load_file", "load_paths", "select_cases"]

SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Case:
    """One expanded case: a complete scenario (no matrix) and its place in the matrix."""

    file: Path
    name: str
    values: dict[str, str]
    scenario: Scenario
    reference_scenario: Scenario | None = None  # with the file's `reference` overrides applied
    # With the file's `cpu.overrides` applied: how the real-SGLang CPU build runs the case (None: no `cpu:` section).
    cpu_scenario: Scenario | None = None
    # The --set overrides it was loaded with, as a run records them (secrets as ${VAR}: overrides.recorded_set)
    sets: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"

    def for_reference(self) -> Case:
        """This case as the CPU reference server runs it (the `reference` overrides applied)."""
        if self.reference_scenario is None:
            return self
        return replace(self, scenario=self.reference_scenario, reference_scenario=None)

    @property
    def cpu_unsupported(self) -> str | None:
        """Why this case does not run on the real-SGLang CPU build (the scenario's ``cpu.unsupported``), or None."""
        return self.scenario.cpu.unsupported if self.scenario.cpu is not None else None

    def for_cpu(self) -> Case:
        """This case as the real-SGLang CPU build runs it (the `cpu.overrides` applied; as it is without them)."""
        if self.cpu_scenario is None:
            return self
        return replace(self, scenario=self.cpu_scenario, reference_scenario=None, cpu_scenario=None)


@dataclass(frozen=True)
class LoadedScenario:
    file: Path
    scenario: Scenario
    cases: tuple[Case, ...] = field(default=())
    hazards: tuple[CommentHazard, ...] = ()  # text the file's YAML drops as a comment (validate warns)


def _position_for(source: Source, overrides: tuple[Override, ...]) -> Callable[[tuple[Any, ...]], tuple[int, int]]:
    def position(loc: tuple[Any, ...]) -> tuple[int, int]:
        for ov in reversed(overrides):  # the last override of a path is the one that counts
            if tuple(loc[: len(ov.path)]) == ov.path:
                return source.position(ov.loc)
        return source.position(loc)

    return position


def _signature_lines(source: Source, scenario: Scenario, known: set[str] | None) -> list[str]:
    if known is None:
        return []
    lines = []
    watched = scenario.checks.crash_signatures
    if watched != "all":
        for i, sig in enumerate(watched):
            if sig not in known:
                lines.append(format_line(source.path, source.position(("checks", "crash_signatures", i)),
                                         f"checks.crash_signatures[{i}]",
                                         f"unknown signature {excerpt(sig)} (catalogue: {', '.join(sorted(known))})"))
    for role, exp in scenario.expect.items():
        for sig in exp.signatures:
            if sig != "unknown" and sig not in known:
                lines.append(format_line(source.path, source.position(("expect", role, "signature")),
                                         f"expect.{role}.signature",
                                         f"unknown signature {excerpt(sig)} "
                                         f"(catalogue: {', '.join(sorted(known))}, unknown)"))
    return lines


# Fixture lookups already made by the files of one load_paths, by (name, the file's folder): 100 of 600 files
# naming the same fixture resolved it (its folders' links) 100 times.
_FixtureLookups = dict[tuple[str, Path], "Path | None"]


def _fixture_lines(source: Source, scenario: Scenario, lookups: _FixtureLookups | None = None) -> list[str]:
    prompt = scenario.workload.prompt
    if not prompt.fixture:
        return []
    key = (prompt.fixture, source.path.parent)
    if lookups is not None and key in lookups:
        found = lookups[key]
    else:
        try:
            found = resolve_fixture(prompt.fixture, relative_to=source.path.parent)
        except (OSError, ValueError):  # e.g. a name longer than the file system allows
            found = None
        if lookups is not None:
            lookups[key] = found
    if found is None:
        roots = ", ".join(map(str, fixture_roots()))
        return [format_line(source.path, source.position(("workload", "prompt", "fixture")),
                            "workload.prompt.fixture",
                            f"no fixture file {excerpt(prompt.fixture)} under {roots} or the scenario's folder "
                            "(a fixture is read only from there)")]
    from harness.util.bounded_read import CAPS

    size = found.stat().st_size
    if size > CAPS["fixture"]:
        return [format_line(source.path, source.position(("workload", "prompt", "fixture")), "workload.prompt.fixture",
                            f"{excerpt(prompt.fixture)}: {size} bytes, over the {CAPS['fixture']}-byte cap for a "
                            "fixture text")]
    return []


def _known_signatures() -> set[str] | None:
    try:
        from harness.signatures.catalogue import Catalogue
    except ImportError:  # the catalogue module is optional for pure format checks
        return None
    return set(Catalogue.load().ids)


def load_file(path: Path | str, *, known_signatures: set[str] | None = None,
              overrides: Sequence[SetOverride] = (), fixture_lookups: _FixtureLookups | None = None) -> LoadedScenario:
    """Validate one file and expand its matrix; raise ScenarioError with every problem found.

    ``overrides`` (``--set``) change the file's data before anything is validated; a problem under one of them
    is named by the override, not by a line of the file. ``fixture_lookups``: the fixture lookups of the other
    files loaded with this one (load_paths), kept and reused."""
    path = Path(path)
    try:
        return _load_file(path, known_signatures, tuple(overrides), fixture_lookups)
    except ScenarioError as exc:
        if not overrides:
            raise
        raise ScenarioError(_name_overrides(exc.lines, path, tuple(overrides))) from None


def _load_file(path: Path, known_signatures: set[str] | None, sets: tuple[SetOverride, ...],
               fixture_lookups: _FixtureLookups | None = None) -> LoadedScenario:
    source, base = _read_base(path, sets)
    if known_signatures is None:
        known_signatures = _known_signatures()
    problems = _Problems(_signature_lines(source, base, known_signatures) + _fixture_lines(source, base, fixture_lookups))
    expanded, reference, cpu = _expansions(path, source, base)
    warn_overridden(str(path), sets, expanded)  # a --set the matrix beats is said, not silently lost
    # `cpu` stays in each case's data: a matrix variant may say `cpu.unsupported` (why it does not run on CPU).
    plain = {k: v for k, v in source.data.items() if k not in ("matrix", "reference")}
    cases = []
    for name, values, overrides in expanded:
        case = _case(path, source, plain, (reference, cpu), known_signatures, (name, values, overrides), problems)
        if case is not None:
            cases.append(case)
    lines = problems.lines + [f"{line} [{where}{_which_cases(names)}]"
                              for (line, where), names in problems.in_cases.items()]
    if lines:
        raise ScenarioError(list(dict.fromkeys(lines)))
    if sets:  # the night's overrides go with each run it records, so the next step can give them again
        recorded = tuple(recorded_set(s) for s in sets)
        cases = [replace(c, sets=recorded) for c in cases]
    return LoadedScenario(file=path, scenario=base, cases=tuple(cases), hazards=tuple(dict.fromkeys(source.hazards)))


@dataclass
class _Problems:
    """What is wrong with a file: lines as they are, and lines found in cases, named once with those cases
    (the same problem in many cases is one line naming them, not one line per case)."""

    lines: list[str]
    in_cases: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def in_case(self, line: str, where: str, name: str) -> None:
        self.in_cases.setdefault((line, where), []).append(name)


@dataclass(frozen=True)
class _OverriddenSource(Source):
    """The file's source with ``--set`` overrides applied: a location under an override has no line in the
    file, so it is given the override's marker position (line -k for the k-th override), named afterwards."""

    sets: tuple[SetOverride, ...] = ()

    def position(self, loc: tuple[Any, ...]) -> tuple[int, int]:
        for i in range(len(self.sets) - 1, -1, -1):  # the last override of a path is the one that counts
            path = self.sets[i].path
            under = tuple(loc[: len(path)]) == path
            # a misspelt key the override made (`--set hardwar.gpus=8`) is reported at that key
            made = bool(loc) and path[: len(loc)] == tuple(loc) and tuple(loc) not in self.positions
            if under or made or tuple(loc) == ("--set", i):
                return (-(i + 1), 0)
        return super().position(loc)


def _with_overrides(source: Source, sets: tuple[SetOverride, ...]) -> Source:
    if not sets:
        return source
    data = apply_overrides(source.data, tuple(Override(s.path, s.value, ("--set", i)) for i, s in enumerate(sets)))
    return _OverriddenSource(path=source.path, data=data, positions=source.positions, hazards=source.hazards, sets=sets)


def _name_overrides(lines: list[str], path: Path, sets: tuple[SetOverride, ...]) -> list[str]:
    """Lines at an override's marker position name the override (``FILE: --set F=V: field: problem``)."""
    where = format_line(path, (0, 0), "", "").removesuffix(":0:0: ")
    out = []
    for line in lines:
        for i, s in enumerate(sets):
            marker = f"{where}:{-(i + 1)}:0:"
            if line.startswith(marker):
                line = f"{where}: {s.label}:{line[len(marker):]}"
                break
        out.append(line)
    return out


def _read_base(path: Path, sets: tuple[SetOverride, ...] = ()) -> tuple[Source, Scenario]:
    """The file read (with its ``--set`` overrides) and validated, its matrix not yet expanded."""
    try:
        source = _with_overrides(read_source(path), sets)
    except SourceError as exc:
        raise ScenarioError([format_line(path, (exc.line, exc.column), exc.field, exc.message)]) from None
    except OSError as exc:
        raise ScenarioError([format_line(path, (1, 1), "", f"cannot read: {exc.strerror or exc}")]) from None
    except MatrixError as exc:  # only an override can raise it here: `--set hardware.gpus.x=1` into a number
        i = int(exc.loc[1])
        raise ScenarioError([format_line(path, (-(i + 1), 0), ".".join(sets[i].path), exc.message)]) from None
    try:
        return source, Scenario.model_validate(source.data)
    except ValidationError as exc:
        raise ScenarioError(validation_lines(exc, model=Scenario, data=source.data, file=path,
                                             position=source.position)) from None


def _expansions(path: Path, source: Source, base: Scenario
                ) -> tuple[list[tuple[str, dict[str, str], tuple[Override, ...]]], tuple[Override, ...],
                           tuple[Override, ...]]:
    """The matrix's cases (name, values, overrides), the reference server's overrides and the CPU build's."""
    expanded: list[tuple[str, dict[str, str], tuple[Override, ...]]] = [(DEFAULT_CASE, {}, ())]
    reference: tuple[Override, ...] = ()
    cpu: tuple[Override, ...] = ()
    try:
        if base.matrix is not None:
            axes = parse_matrix(source.data["matrix"])
            check_weight(source.data, check_size(axes))  # bounded before a single case is built
            expanded = product(axes)
        if base.reference is not None:
            reference = reference_overrides(source.data["reference"])
        if base.cpu is not None:
            cpu = cpu_overrides(source.data["cpu"].get("overrides"))
    except MatrixError as exc:
        raise ScenarioError([format_line(path, source.position(exc.loc), ".".join(map(str, exc.loc)),
                                         exc.message)]) from None
    return expanded, reference, cpu


def _case(path: Path, source: Source, plain: dict[str, Any], special: tuple[tuple[Override, ...], tuple[Override, ...]],
          known_signatures: set[str] | None, expansion: tuple[str, dict[str, str], tuple[Override, ...]],
          problems: _Problems) -> Case | None:
    """One case of the matrix validated (with its reference and CPU-build scenarios), or None with its problems
    noted. ``special``: the reference server's overrides and the CPU build's."""
    reference, cpu = special
    name, values, overrides = expansion
    try:
        merged = apply_overrides(plain, overrides)
        scenario = Scenario.model_validate(merged)
    except MatrixError as exc:
        problems.lines.append(format_line(path, source.position(exc.loc), ".".join(map(str, exc.loc)),
                                          exc.message))
        return None
    except ValidationError as exc:
        for line in validation_lines(exc, model=Scenario, data=merged, file=path,
                                     position=_position_for(source, overrides)):
            if name == DEFAULT_CASE:
                problems.lines.append(line)
            else:
                problems.in_case(line, "", name)
        return None
    for line in _signature_lines(source, scenario, known_signatures):
        if name != DEFAULT_CASE:
            problems.in_case(line, "", name)
    ref_scenario = None
    if reference:
        ref_data = apply_overrides(merged, reference)
        try:
            ref_scenario = Scenario.model_validate(ref_data)
        except ValidationError as exc:
            for line in validation_lines(exc, model=Scenario, data=ref_data, file=path,
                                         position=_position_for(source, reference)):
                problems.in_case(line, "reference, ", name)
            return None
    cpu_scenario = None
    if scenario.cpu is not None:
        cpu_data = apply_overrides(merged, cpu)  # keeps `cpu`: the launcher reads cpu.unsupported from the case
        try:
            cpu_scenario = Scenario.model_validate(cpu_data)
        except ValidationError as exc:
            for line in validation_lines(exc, model=Scenario, data=cpu_data, file=path,
                                         position=_position_for(source, cpu)):
                problems.in_case(line, "cpu, ", name)
            return None
    return Case(file=path, name=name, values=values, scenario=scenario, reference_scenario=ref_scenario,
                cpu_scenario=cpu_scenario)


def _which_cases(names: list[str], shown: int = 3) -> str:
    if len(names) == 1:
        return f"case {names[0]}"
    listed = "; ".join(names[:shown])
    return f"cases {listed}" if len(names) <= shown else f"{len(names)} cases: {listed}; ..."


# Entries one folder argument may hold: the scenarios/ tree has about a hundred; a home folder has millions.
SCENARIO_WALK_ENTRIES = 20_000


def find_scenario_files(paths: Iterable[Path | str]) -> list[Path]:
    """Files as given, folders searched recursively for *.yaml / *.yml, in a stable order.

    The walk is bounded (:data:`SCENARIO_WALK_ENTRIES` entries, links to folders not followed): ``validate /``
    is one line saying the folder is too big, not a walk of the whole file system.
    """
    from harness.util.bounded_read import ReadRefused, walk_files

    files: list[Path] = []
    for p in map(Path, paths):
        try:
            if p.is_dir():
                try:
                    found = walk_files(p, suffixes=tuple(SUFFIXES), max_entries=SCENARIO_WALK_ENTRIES)
                    files.extend(sorted(f for f in found if f.is_file()))
                except ReadRefused as exc:
                    raise ScenarioError([format_line(p, (1, 1), "", str(exc).removeprefix(f"{p}: "))]) from None
            elif p.exists():
                files.append(p)  # read_source refuses anything but a regular file, with one line
            else:
                raise ScenarioError([format_line(p, (1, 1), "", "no such file or folder")])
        except OSError as exc:
            raise ScenarioError([format_line(p, (1, 1), "", f"cannot read: {exc.strerror or exc}")]) from None
    return files


def load_paths(paths: Sequence[Path | str], *, overrides: Sequence[SetOverride] = ()) -> list[LoadedScenario]:
    """Load every scenario under ``paths`` (each with the ``--set`` overrides); collect all files' errors
    before raising."""
    files = find_scenario_files(paths)
    if not files:
        raise ScenarioError([f"{', '.join(map(str, paths))}: no scenario files (*.yaml, *.yml)"])
    known = _known_signatures()
    lookups: _FixtureLookups = {}
    loaded, lines = [], []
    with collector_paused():  # every file's tree, data and models kept: the collector's passes would walk them all
        for f in files:
            try:
                loaded.append(load_file(f, known_signatures=known, overrides=overrides, fixture_lookups=lookups))
            except ScenarioError as exc:
                lines.extend(exc.lines)
    names: dict[str, Path] = {}
    for item in loaded:
        other = names.setdefault(item.scenario.name, item.file)
        if other != item.file:
            lines.append(f"{item.file}:1:1: name: scenario name {excerpt(item.scenario.name)} is also used by {other}")
    if lines:
        raise ScenarioError(lines)
    return loaded


def _case_names(loaded: LoadedScenario, shown: int = 12) -> str:
    names = [c.name for c in loaded.cases]
    if len(names) <= shown:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f", ... ({len(names) - shown} more; `sglang-repro list {loaded.file}` shows all)"


def select_cases(loaded: LoadedScenario, pattern: str | None) -> list[Case]:
    """The cases whose name equals ``pattern`` or contains all its ``axis=label`` parts; every case for None.

    An empty pattern is an error, not "every case": ``--case "$CASE"`` with CASE unset should not run them all.
    """
    if pattern is None:
        return list(loaded.cases)
    if not pattern.strip() or any(not part.strip() for part in pattern.split(",")):
        raise ScenarioError([(
            f"{loaded.file}: case {excerpt(pattern)} is empty or has an empty part; "
            f"give a case name or axis=label (cases: {_case_names(loaded)})"
        )])
    wanted = set(pattern.split(","))
    picked = [c for c in loaded.cases if c.name == pattern or wanted <= set(c.name.split(","))]
    if not picked:
        raise ScenarioError([f"{loaded.file}: no case matches {excerpt(pattern)} (cases: {_case_names(loaded)})"])
    return picked
