"""Rules of shape the harness keeps (issue 19): no function longer than 60 lines, and one run record only;
and one owner per concept (issue 31, docs/owners.md): each test below fails when a second owner appears.

The rules are read off the real source with ``ast``; each is first shown to catch a planted offender, so
a walker that silently finds nothing cannot pass.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "harness"
MAX_FUNCTION_LINES = 60
# The run record is ``harness.records.run_record.RunRecord``; the legacy shape of that name must not come back.
GONE_NAMES = ("RunResult",)


def long_functions(source: str, where: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``where:line name (N lines)`` for each function (nested ones too) longer than ``limit`` lines,
    counted from its ``def`` line to its last line."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                out.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return out


def gone_names(source: str, where: str) -> list[str]:
    """``where:line name`` for each identifier, attribute, definition or import of a name in ``GONE_NAMES``,
    and each line of text (docstring, comment) that mentions one."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name for a in node.names]
        line = getattr(node, "lineno", 0)
        out += [f"{where}:{line} {n}" for n in names if n.split(".")[-1] in GONE_NAMES]
    for number, line in enumerate(source.splitlines(), 1):
        out += [f"{where}:{number} {n} (text)" for n in GONE_NAMES if n in line]
    return sorted(set(out))


# Code that runs in a real SGLang release's own interpreter, where the harness is not installed: the import
# stand-ins and kernel ports on a CPU server's PYTHONPATH, and the tiny Gemma-4 maker (transformers' classes).
# They cannot call the harness's owners; tests/sglang_cpu holds them to references instead.
_OTHER_INTERPRETER = ("harness/build/sglang_cpu/standins/", "harness/build/sglang_cpu/tiny_gemma4.py")


def _harness_sources() -> list[tuple[str, str]]:
    files = [p for p in sorted(HARNESS.rglob("*.py"))
             if not str(p.relative_to(HARNESS.parent)).startswith(_OTHER_INTERPRETER)]
    assert len(files) > 50, f"only {len(files)} files under {HARNESS}"
    return [(str(p.relative_to(HARNESS.parent)), p.read_text(encoding="utf-8")) for p in files]


def test_the_walker_finds_a_planted_long_function_and_a_legacy_name() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def line + 60 = 61 lines
    planted = f"class K:\n    def short(self):\n        return 1\n\n    async def long(self):\n{textwrap.indent(body, '    ')}\n"
    assert long_functions(planted, "p.py") == ["p.py:5 long (61 lines)"]
    assert long_functions(planted.replace("        x0 = 0\n", ""), "p.py") == []
    legacy = "from harness.x import RunResult\n\ndef f(r: 'RunResult') -> None:\n    return r.RunResult\n"
    assert [hit.split()[0] for hit in gone_names(legacy, "l.py")] == ["l.py:1", "l.py:1", "l.py:3", "l.py:4",
                                                                       "l.py:4"]
    assert gone_names("def f(record):\n    return record.run_id\n", "ok.py") == []


def test_no_function_in_harness_is_longer_than_60_lines() -> None:
    found = [hit for where, text in _harness_sources() for hit in long_functions(text, where)]
    assert not found, "split these into phases or helpers:\n" + "\n".join(found)


def test_no_legacy_run_result_in_harness() -> None:
    found = [hit for where, text in _harness_sources() for hit in gone_names(text, where)]
    assert not found, "the run record is harness.records.run_record.RunRecord:\n" + "\n".join(found)


# -- the owners' table (docs/owners.md is rendered from it: python -m tests.test_code_shape) --------------------


@dataclass(frozen=True)
class Owner:
    """One concept with one owning module: what it owns, what every other module does instead, which tests hold it.
    ``paths`` are the only files its walker does not read (the owner itself)."""

    concept: str
    owner: str
    others: str
    tests: tuple[str, ...]
    paths: tuple[str, ...] = ()


OWNERS: tuple[Owner, ...] = (
    Owner("Ending processes",
          "`harness/util/kill.py` (`signal_group`, `signal_process`, `end_group`, `end_child`, `release_watcher`, "
          "`dies_with_parent`: a child the kernel kills when its parent dies); a run's processes: "
          "`harness.server.reaper.kill_run`, built on it",
          "call it; no `os.kill`/`os.killpg`/`.terminate()`/`.kill()`/`.send_signal()` elsewhere (a process "
          "signalling itself is not ending another)",
          ("test_processes_are_ended_by_the_one_owner",), ("harness/util/kill.py",)),
    Owner("Child commands",
          "`harness/util/proc.py` (`run_bounded`: its own process group, the whole group killed on timeout; `git`, "
          "`commit_of`, `is_ancestor` built on it)",
          "run a command the harness waits for through it; no `subprocess.run`/`call`/`check_call`/`check_output`, "
          "`os.system`/`os.popen` elsewhere (their timeout kills the child alone and leaves pip's own children). "
          "Processes the harness starts and keeps (servers, fleet jobs, watchers) are `Popen`'d by their owners and "
          "ended through `harness/util/kill.py`",
          ("test_child_commands_run_through_the_bounded_runner",), ("harness/util/proc.py",)),
    Owner("Exit codes",
          "`harness/util/errors.py` (`EXIT_OK`, `EXIT_FAIL`, `EXIT_USAGE`, `EXIT_INFRA`, `EXIT_KNOWN_BUG`; `git bisect "
          "run`'s `EXIT_BISECT_SKIP`, `EXIT_BISECT_ABORT`; `EXIT_INTERRUPTED`; each error class's `exit_code`)",
          "return, exit with or pass on the named code; no non-zero literal elsewhere (0, success for every tool, may "
          "be written as is)",
          ("test_exit_codes_come_from_the_one_owner",), ("harness/util/errors.py",)),
    Owner("Reading a file",
          "`harness/util/bounded_read.py` (`read_text`, `read_bytes`, `read_json`, `iter_lines`, `read_head`, "
          "`read_from`, and the one tail reader `tail_lines`)",
          "every read of a user-given, server-written or kernel file (logs, `/proc`) goes through it: a regular file, "
          "capped, never a FIFO or a device; no `open()` for reading, `.read_text()`, `.read_bytes()`, `json.load` "
          "elsewhere",
          ("test_files_are_read_by_the_one_bounded_reader",), ("harness/util/bounded_read.py",)),
    Owner("Writing a file",
          "`harness/util/atomic.py` (`write_atomic`, `write_atomic_bytes`, `replace_with`; `move_into` for a file "
          "finished elsewhere, such as a downloaded wheel)",
          "records, reports, bisect `state.json`, build markers and caches, artifacts, minimize candidates: a "
          "temporary file and a rename, never through a link; no `.write_text()`, `.write_bytes()`, `os.replace`, "
          "`.rename` elsewhere (streams the harness appends to, such as a server log, are opened for writing, not "
          "replaced)",
          ("test_files_are_written_by_the_one_atomic_writer",), ("harness/util/atomic.py",)),
    Owner("Outcome sets and orders",
          "`harness/records/outcome.py` (`MEASURED`, `MISBEHAVED`, `BROKEN`, `UNDECIDED`, `NOT_TRIED`, `SIGNED`, "
          "`EXIT_ORDER`, `TELLING_ORDER`, `EXIT_CODE`)",
          "use the named set and the members; no literal tuple/set/list of two or more outcomes, no dict keyed by "
          "them, no outcome spelled as a string and compared (`== \"pass\"`) elsewhere",
          ("test_outcome_sets_are_named_by_the_one_owner",), ("harness/records/outcome.py",)),
    Owner("Test servers",
          "`tests/helpers.py` (`start_server`, `stop_server`, `refused_start`: the reference server on the harness's own "
          "`ServerProcess`, ended by its teardown)",
          "a test starts a reference server through it (its fixtures, `sim_server`, build on it); no test `Popen`s or "
          "`run`s `python -m harness.sim.server` itself; one that starts servers sends a signal only through "
          "`harness.util.kill` (`signal_process`, when the claim is how the server meets it)",
          ("test_tests_start_reference_servers_through_the_one_fixture",), ("tests/helpers.py",)),
    Owner("The teardown record",
          "`harness.records.run_record.TeardownInfo`: `ServerProcess.stop()` returns it, the run record keeps it as "
          "it is",
          "no second `Teardown*` class",
          ("test_there_is_one_teardown_record",), ("harness/records/run_record.py",)),
    Owner("Timestamps",
          "`harness/util/clock.py`: `folder_stamp()` (`20261203T114610Z`, UTC) for folder names; `now_iso()` "
          "(ISO 8601, UTC, seconds) for records; `now_iso_exact()` (microseconds) for the store's ordering within a "
          "second",
          "no `time.strftime`, `datetime.now`, `time.localtime` elsewhere",
          ("test_timestamps_come_from_the_one_clock", "test_the_one_clock_is_utc_in_one_format_each"),
          ("harness/util/clock.py",)),
    Owner("Metric names",
          "`harness/records/metric_definitions.py` (the registry; the run's own figures `READY_S`, `SERVER_TRIAL` in "
          "`RUN_FIGURES`; which figures are timed by the client, `client_timed`)",
          "read names from the registry; no string literal of a registered name elsewhere (the scenario model's "
          "field names and its `Literal` of cross-phase checks, which the registry's test holds equal, are types)",
          ("test_metric_names_are_spelled_by_the_registry_only",),
          ("harness/records/metric_definitions.py", "harness/scenario/model.py")),
    Owner("Signals during a command",
          "`harness/util/interrupts.py` (`Shield`, `sigterm_as_ctrl_c`, `command_signals`, `taken`)",
          "once a command has taken its first interrupt, later SIGINT/SIGTERM only count and hurry",
          ("tests/test_interrupt_ending.py",), ("harness/util/interrupts.py",)),
    Owner("A package's face",
          "each package's `__init__.py` with `__all__`; names imported on first use through `harness/util/face.py` "
          "(`lazy_face`); for scripts, `harness.load_scenario`, `harness.run_case`, `harness.open_store`",
          "import a name from its package's face or its own module; a face written with `lazy_face` imports none of "
          "its modules until a name is asked for, and none of its names is also a module's",
          ("tests/test_faces.py", "tests/test_public_api.py"), ("harness/util/face.py",)),
    Owner("Import direction",
          "the package graph (`harness.X` for each subpackage and top-level module)",
          "no package-level cycle, counting deferred imports inside functions",
          ("tests/test_import_layers.py",)),
)

_OWNERS_INTRO = """# One owner per concept

Each concept below has exactly one module that owns it; every other module asks that owner. Each owner has a
code-shape test (`tests/test_code_shape.py`, `tests/test_import_layers.py`) that reads the real source with
`ast` and fails when a second owner appears; every walker is first shown a planted offender, so a walker that
finds nothing cannot pass. The reference server (`harness/sim`) models SGLang's own code and is not held to
these owners.

This page is rendered from the table `OWNERS` in `tests/test_code_shape.py` (`python -m tests.test_code_shape`),
and a test holds the two equal.
"""

_OWNERS_OUTRO = """
No exemptions: each walker skips its owner alone (and the reference server).
"""


def owners_page(owners: tuple[Owner, ...] = OWNERS) -> str:
    """docs/owners.md: the intro, a row per owner, the closing line."""
    rows = ["| Concept | Owner | What others do | Test |", "|---|---|---|---|"]
    rows += [f"| {o.concept} | {o.owner} | {o.others} | {', '.join(f'`{t}`' for t in o.tests)} |" for o in owners]
    return _OWNERS_INTRO + "\n" + "\n".join(rows) + "\n" + _OWNERS_OUTRO


def _owned_by(concept: str) -> tuple[str, ...]:
    (owner,) = [o for o in OWNERS if o.concept == concept]
    return owner.paths


def test_docs_owners_is_rendered_from_the_table() -> None:
    page = ROOT / "docs" / "owners.md"
    assert page.read_text(encoding="utf-8") == owners_page(), "render it again: python -m tests.test_code_shape"
    assert owners_page().count("\n| ") == len(OWNERS) + 1  # the header and a row each: no "|" inside a cell
    here = {name for name, value in globals().items() if name.startswith("test_") and callable(value)}
    missing = [t for o in OWNERS for t in o.tests if t not in here and not (ROOT / t).is_file()]
    assert not missing, f"the table names tests that do not exist: {missing}"
    assert all((ROOT / p).exists() for o in OWNERS for p in o.paths), "the table names an owner that does not exist"


# Who may spell a registered metric's name: the registry itself, the CPU reference server (whose own stats
# model SGLang's, not the harness's metrics) and the scenario model (pydantic field names and a Literal the
# registry test holds equal to the registry's CROSS_PHASE).
_NAME_OWNERS = (*_owned_by("Metric names"), "harness/sim/")


def metric_name_literals(source: str, where: str, names: frozenset[str]) -> list[str]:
    """``where:line name`` for each string constant that is exactly one of ``names``."""
    return sorted({f"{where}:{node.lineno} {node.value}" for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names})


def _registered() -> frozenset[str]:
    from harness.records.metric_definitions import METRICS, PHASE_ONLY, RUN_FIGURES

    return frozenset(METRICS) | frozenset(PHASE_ONLY) | frozenset(RUN_FIGURES)


def test_the_walker_finds_a_planted_metric_name() -> None:
    planted = 'def f(m):\n    """accept_length in a docstring is prose."""\n    return m["accept_length"], m["x"]\n'
    assert metric_name_literals(planted, "p.py", _registered()) == ["p.py:3 accept_length"]
    assert metric_name_literals('k = {"ready_s", "server_trial"}\n', "p.py", _registered()) == [
        "p.py:1 ready_s", "p.py:1 server_trial"]
    assert metric_name_literals("from harness.records.metric_definitions import ACCEPT_LENGTH\nn = ACCEPT_LENGTH.name\n",
                                "ok.py", _registered()) == []


def test_metric_names_are_spelled_by_the_registry_only() -> None:
    names = _registered()
    found = [hit for where, text in _harness_sources() if not where.startswith(_NAME_OWNERS)
             for hit in metric_name_literals(text, where, names)]
    assert not found, "read these names from harness.records.metric_definitions:\n" + "\n".join(found)


# -- one owner per concept (issue 31) -----------------------------------------------------------------------
# Each rule: a walker over the real source, first shown a planted second owner, over every module but its owner's
# (``OWNERS`` above); the reference server (harness/sim) models SGLang's own code and is never held to them.

def _call_name(node: ast.Call) -> str:
    """``os.kill``, ``.write_text`` (a method on anything but a module-like name), or ``open``."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id in ("os", "time", "datetime", "json", "shutil", "subprocess"):
            return f"{func.value.id}.{func.attr}"
        if isinstance(func.value, ast.Attribute) and func.value.attr == "datetime" and func.attr in ("now", "utcnow"):
            return f"datetime.{func.attr}"
        return f".{func.attr}"
    return ""


def _owned_calls(source: str, where: str, names: frozenset[str], *, skip=lambda node: False) -> list[str]:
    return sorted({f"{where}:{node.lineno} {_call_name(node)}" for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Call) and _call_name(node) in names and not skip(node)},
                  key=lambda hit: (hit.split()[0].rsplit(":", 1)[0], int(hit.split()[0].rsplit(":", 1)[1])))


def _sources_but(exempt: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(where, text) for where, text in _harness_sources()
            if not where.startswith(("harness/sim/", *exempt))]


# Ending processes: harness/util/kill.py (signals, group TERM-then-KILL, a child's end, a watcher's release);
# a run's processes: harness.server.reaper.kill_run, built on it.
_KILL_CALLS = frozenset({"os.kill", "os.killpg", ".terminate", ".kill", ".send_signal"})


def _to_self(node: ast.Call) -> bool:
    """``os.kill(os.getpid(), ...)``: a process signalling itself ends no one else's process."""
    return bool(node.args) and isinstance(node.args[0], ast.Call) and _call_name(node.args[0]) == "os.getpid"


def test_the_walker_finds_a_planted_second_killer() -> None:
    planted = "import os\ndef f(p):\n    os.killpg(p.pid, 9)\n    p.kill()\n    os.kill(os.getpid(), 15)\n"
    assert _owned_calls(planted, "p.py", _KILL_CALLS, skip=_to_self) == ["p.py:3 os.killpg", "p.py:4 .kill"]


def test_processes_are_ended_by_the_one_owner() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Ending processes"))
             for hit in _owned_calls(text, where, _KILL_CALLS, skip=_to_self)]
    assert not found, "end processes through harness.util.kill (or harness.server.reaper.kill_run):\n" + "\n".join(found)


# Child commands the harness waits for: harness/util/proc.py (run_bounded: its own process group, the whole group
# killed on timeout; subprocess.run's timeout kills the child alone and leaves pip's own children running).
# Processes the harness starts and manages (servers, fleet jobs, watchers) are Popen'd by their owners and ended
# through harness.util.kill (above).
_COMMAND_CALLS = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
                            "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen"})


def waited_commands(source: str, where: str) -> list[str]:
    """``where:line name`` for each child command run and waited for outside the bounded runner: a call of
    ``_COMMAND_CALLS``, or one of their names imported from ``subprocess`` (``from subprocess import run``)."""
    tree = ast.parse(source)
    imported = [f"{where}:{node.lineno} subprocess.{a.name}" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "subprocess" for a in node.names
                if f"subprocess.{a.name}" in _COMMAND_CALLS]
    return _owned_calls(source, where, _COMMAND_CALLS) + imported


def test_the_walker_finds_a_planted_unbounded_command() -> None:
    planted = ("import os, subprocess\nfrom subprocess import check_output\ndef f(a):\n"
               "    subprocess.run(a, timeout=5)\n    os.system('ls')\n    p = subprocess.Popen(a)\n"
               "    return run_bounded(a, timeout=5)\n")
    assert waited_commands(planted, "p.py") == ["p.py:4 subprocess.run", "p.py:5 os.system",
                                                "p.py:2 subprocess.check_output"]


def test_child_commands_run_through_the_bounded_runner() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Child commands")) for hit in waited_commands(text, where)]
    assert not found, "run child commands through harness.util.proc.run_bounded (group killed on timeout):\n" + \
        "\n".join(found)


# Exit codes: harness/util/errors.py (EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INFRA, EXIT_KNOWN_BUG, git bisect run's
# EXIT_BISECT_SKIP and EXIT_BISECT_ABORT, EXIT_INTERRUPTED). 0 is success for every tool and may be written as is.
_EXIT_CALLS = frozenset({"sys.exit", "SystemExit", "os._exit", "exit"})
_CODE_NAMES = ("code", "exit_code", "returncode", "rc")


def _exit_literals(node: ast.AST | None) -> list[ast.Constant]:
    """The non-zero int literals an expression can give (through ``a if c else b`` and ``a or b``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value != 0:
        return [node]
    if isinstance(node, ast.IfExp):
        return _exit_literals(node.body) + _exit_literals(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [c for v in node.values for c in _exit_literals(v)]
    return []


def _names_an_exit(name: str) -> bool:
    return name in ("main", "entry", *_CODE_NAMES) or "exit" in name.lower()


def _assigned_codes(node: ast.Assign | ast.AnnAssign) -> list[ast.Constant]:
    """``EXIT_X = 3``, ``self.exit_code = 1``, ``status, code = "found", 1``: a code given a name."""
    pairs: list[tuple[ast.AST, ast.AST | None]] = []
    for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs += list(zip(target.elts, node.value.elts))
        else:
            pairs.append((target, node.value))
    return [c for target, value in pairs
            if _names_an_exit(str(getattr(target, "id", None) or getattr(target, "attr", "")))
            for c in _exit_literals(value)]


def exit_codes(source: str, where: str) -> list[str]:
    """``where:line N`` for each exit code written as a non-zero literal: returned by ``main``/``exit_code``/a
    function named for an exit, given to ``sys.exit``/``SystemExit``/``os._exit``, assigned to a name for one, or
    passed as an argument called ``code``/``exit_code`` (by keyword, or by position to a function of the module)."""
    tree = ast.parse(source)
    params = {n.name: [a.arg for a in n.args.args] for n in ast.walk(tree)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _names_an_exit(node.name):
            found += [c for n in ast.walk(node) if isinstance(n, ast.Return) for c in _exit_literals(n.value)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            found += _assigned_codes(node)
        elif isinstance(node, ast.Call):
            if ast.unparse(node.func) in _EXIT_CALLS and node.args:
                found += _exit_literals(node.args[0])
            found += [c for k in node.keywords if k.arg in _CODE_NAMES for c in _exit_literals(k.value)]
            named = params.get(node.func.id, []) if isinstance(node.func, ast.Name) else []
            found += [c for name, arg in zip(named, node.args) if name in _CODE_NAMES for c in _exit_literals(arg)]
    return sorted({f"{where}:{c.lineno} {c.value!r}" for c in found}, key=lambda hit: int(hit.split()[0].rsplit(":", 1)[1]))


def test_the_walker_finds_a_planted_exit_code() -> None:
    planted = ("import sys\nEXIT_SOME = 1\nclass E(Exception):\n    exit_code = 3\n"
               "def main(a):\n    if a:\n        return 2\n    return 1 if a else 0\n"
               "def result(status, code): ...\nr = result('x', 125)\nsys.exit(130)\n"
               "status, code = 'found', 4\nok = (main(0), result('y', EXIT_OK), len([1]), max(3, 1))\n")
    assert exit_codes(planted, "p.py") == ["p.py:2 1", "p.py:4 3", "p.py:7 2", "p.py:8 1", "p.py:10 125", "p.py:11 130",
                                           "p.py:12 4"]


def test_exit_codes_come_from_the_one_owner() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Exit codes")) for hit in exit_codes(text, where)]
    assert not found, "name the exit code in harness.util.errors and use it:\n" + "\n".join(found)


# Reading a file: harness/util/bounded_read.py (regular files only, capped, one tail reader).
_READ_CALLS = frozenset({".read_text", ".read_bytes", "open", ".open", "json.load", "os.open"})


def _writes_or_not_a_file(node: ast.Call) -> bool:
    """An ``open`` for writing or appending (a stream the harness writes), or a call that opens no file
    (``os.open`` of a lock, an URL opener, a zip member)."""
    if _call_name(node) == "os.open":  # a descriptor opened to read a file is a reader of its own (os.read follows)
        return "O_RDONLY" not in ast.unparse(node)
    modes = [a.value for a in [*node.args[1:], *[k.value for k in node.keywords if k.arg == "mode"]]
             if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if _call_name(node) == ".open":
        modes += [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        target = node.func.value if isinstance(node.func, ast.Attribute) else None
        if isinstance(target, ast.Name) and target.id.startswith("_"):  # _OPENER.open(request): a URL
            return True
    return any(set(m) & set("wax") for m in modes)


def test_the_walker_finds_a_planted_unbounded_read() -> None:
    planted = ("import json\ndef f(p, q):\n    a = p.read_text()\n    with open(q) as fh:\n        b = json.load(fh)\n"
               "    with q.open('a') as log:\n        log.write(a)\n    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
               "    lock = os.open(q, os.O_RDWR | os.O_CREAT)\n    return read_text(p, 'log')\n")
    assert _owned_calls(planted, "p.py", _READ_CALLS, skip=_writes_or_not_a_file) == [
        "p.py:3 .read_text", "p.py:4 open", "p.py:5 json.load", "p.py:8 os.open"]


def test_files_are_read_by_the_one_bounded_reader() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Reading a file"))
             for hit in _owned_calls(text, where, _READ_CALLS, skip=_writes_or_not_a_file)]
    assert not found, "read files through harness.util.bounded_read (read_text, read_json, iter_lines, " \
                      "tail_lines):\n" + "\n".join(found)


# Writing a file another process (or a resumed command) reads: harness/util/atomic.py (a temporary file and a
# rename, never through a link or device).
_WRITE_CALLS = frozenset({".write_text", ".write_bytes", "os.replace", "os.rename", ".rename", "shutil.move"})


def test_the_walker_finds_a_planted_torn_write() -> None:
    planted = "import os\ndef f(p, t):\n    p.write_text('x')\n    os.replace(t, p)\n    write_atomic(p, 'x')\n"
    assert _owned_calls(planted, "p.py", _WRITE_CALLS) == ["p.py:3 .write_text", "p.py:4 os.replace"]


def test_files_are_written_by_the_one_atomic_writer() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Writing a file"))
             for hit in _owned_calls(text, where, _WRITE_CALLS)]
    assert not found, "write through harness.util.atomic (write_atomic, write_atomic_bytes, replace_with):\n" + \
        "\n".join(found)


# Timestamps: harness/util/clock.py (UTC, one format for folder names, one for records).
_CLOCK_CALLS = frozenset({"time.strftime", "time.localtime", "time.gmtime", "time.ctime", "datetime.now",
                          "datetime.utcnow", "datetime.today"})


def test_the_walker_finds_a_planted_local_clock() -> None:
    planted = ("import time\nfrom datetime import datetime, timezone\n"
               "a = time.strftime('%Y')\nb = datetime.now(timezone.utc)\nc = folder_stamp()\n")
    assert _owned_calls(planted, "p.py", _CLOCK_CALLS) == ["p.py:3 time.strftime", "p.py:4 datetime.now"]


def test_timestamps_come_from_the_one_clock() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Timestamps")) for hit in _owned_calls(text, where, _CLOCK_CALLS)]
    assert not found, "take the time from harness.util.clock (folder_stamp, now_iso):\n" + "\n".join(found)


def test_the_one_clock_is_utc_in_one_format_each() -> None:
    import re

    from harness.util.clock import folder_stamp, now_iso, now_iso_exact

    assert re.fullmatch(r"\d{8}T\d{6}Z", folder_stamp())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", now_iso())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", now_iso_exact())


# Outcome sets: harness/records/outcome.py (MEASURED, MISBEHAVED, UNDECIDED, NOT_TRIED, SIGNED and the orders).


def _outcome_name(node: ast.AST) -> str | None:
    from harness.records.outcome import Outcome

    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value  # Outcome.PASS.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Outcome":
        return node.attr
    if isinstance(node, ast.Constant) and node.value in {o.value for o in Outcome}:
        return str(node.value)
    return None


def _spelled_outcome_compared(node: ast.Compare) -> bool:
    """``x == "pass"``, ``"crash" != y``: an outcome spelled as a string and compared, where the member says it
    (``x is Outcome.PASS``). A ``.kind`` compared is left alone: a signature's kind (``bug``, ``infra``) and an
    upstream finding's (``crash``, ``regression``, ...) are vocabularies of their own, each a typed Literal."""
    operands = [node.left, *node.comparators]
    if not any(isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) for op in node.ops):
        return False
    spelled = [o for o in operands if isinstance(o, ast.Constant) and _outcome_name(o)]
    return bool(spelled) and not any(isinstance(o, ast.Attribute) and o.attr == "kind" for o in operands)


def outcome_sets(source: str, where: str) -> list[str]:
    """``where:line`` for each tuple, set or list literal of two or more outcomes (members or names), outside a
    type's subscript (``Literal["pass", "fail"]`` is a type, not a set the harness asks about); each dict literal
    keyed by two or more outcomes (its keys are such a set); each outcome spelled as a string and compared."""
    tree = ast.parse(source)
    in_types = {id(n) for sub in ast.walk(tree) if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)}
    return sorted({f"{where}:{node.lineno}" for node in ast.walk(tree)
                   if (isinstance(node, (ast.Tuple, ast.Set, ast.List)) and id(node) not in in_types
                       and len(node.elts) >= 2 and all(_outcome_name(e) for e in node.elts))
                   or (isinstance(node, ast.Dict) and len(node.keys) >= 2
                       and all(k is not None and _outcome_name(k) for k in node.keys))
                   or (isinstance(node, ast.Compare) and _spelled_outcome_compared(node))},
                  key=lambda hit: int(hit.rsplit(":", 1)[1]))


def test_the_walker_finds_a_planted_outcome_set() -> None:
    planted = ("def f(r):\n    a = r.outcome in (Outcome.PASS, Outcome.FAIL)\n    b = {Outcome.CRASH.value, 'infra'}\n"
               "    c = Literal['pass', 'fail']\n    return r.outcome in MEASURED\n")
    assert outcome_sets(planted, "p.py") == ["p.py:2", "p.py:3"]
    keyed = ("NOUN = {'crash': 'crash', Outcome.FAIL: 'failure'}\nCODE = {Outcome.PASS: 0}\nok = {**NOUN, 'x': 1}\n"
             "a = r.outcome.value == 'pass'\nb = 'crash' != str(o)\nc = sig.kind == 'infra'\nd = r.outcome is Outcome.PASS\n"
             "e = r.detail != Outcome.PASS.value\nf = r.outcome in BROKEN\n")
    assert outcome_sets(keyed, "k.py") == ["k.py:1", "k.py:4", "k.py:5"]


def test_outcome_sets_are_named_by_the_one_owner() -> None:
    found = [hit for where, text in _sources_but(_owned_by("Outcome sets and orders")) for hit in outcome_sets(text, where)]
    assert not found, "name the set in harness.records.outcome and use it:\n" + "\n".join(found)


# The tests start a reference server one way: tests.helpers.start_server, built on the harness's own ServerProcess
# (its session, watchdog, redacted log and teardown through harness.server.reaper.kill_run), and end it with
# stop_server. A test that Popens `python -m harness.sim.server` itself has a lifecycle of its own beside the harness's.
_SERVER_MODULE = "harness.sim.server"
_SPAWNS = frozenset({"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
                     "subprocess.check_output", ".create_subprocess_exec", "Popen"})


def _names_the_server(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == _SERVER_MODULE for n in ast.walk(node))


def server_starts(source: str, where: str) -> list[str]:
    """``where:line call`` for each child process started on an argv that names the reference server's module: in
    the call itself, or through a name the module assigns such a list or tuple to."""
    tree = ast.parse(source)
    argvs = {t.id for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
             and isinstance(node.value, (ast.List, ast.Tuple)) and _names_the_server(node.value)
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    return sorted({f"{where}:{node.lineno} {_call_name(node)}" for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and _call_name(node) in _SPAWNS
                   and any(_names_the_server(arg) or (isinstance(arg, ast.Name) and arg.id in argvs)
                           for arg in [*(a.value if isinstance(a, ast.Starred) else a for a in node.args),
                                       *(k.value for k in node.keywords)])},
                  key=lambda hit: int(hit.split()[0].rsplit(":", 1)[1]))


_STARTERS = frozenset({"start_server", "refused_start", "sim_server"})


def server_signals(source: str, where: str) -> list[str]:
    """In a module that starts reference servers through the fixture, each signal it sends other than through
    ``harness.util.kill`` (a test whose claim is how the server meets a signal sends it with ``signal_process``)."""
    tree = ast.parse(source)
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _STARTERS for n in ast.walk(tree)):
        return []
    return _owned_calls(source, where, _KILL_CALLS, skip=_to_self)


def test_the_walker_finds_a_planted_server_started_another_way() -> None:
    planted = ("import subprocess, sys\nargv = [sys.executable, '-m', 'harness.sim.server', '--port', '1']\n"
               "def f(log):\n    p = subprocess.Popen(argv, stdout=log)\n"
               "    q = subprocess.run([sys.executable, '-m', 'harness.sim.server'], timeout=9)\n"
               "    r = await asyncio.create_subprocess_exec(*argv)\n"
               "    s = start_server(['--sim-revision', 'post-fix'], log)\n"
               "    t = subprocess.Popen([sys.executable, '-m', 'harness', 'run'])\n"
               "    return 'harness.sim.server' in command_line(p)\n")
    assert server_starts(planted, "p.py") == ["p.py:4 subprocess.Popen", "p.py:5 subprocess.run",
                                              "p.py:6 .create_subprocess_exec"]
    signalled = "def t(sim_server):\n    s = sim_server([])\n    s.process.kill()\n    signal_process(s.pid, 9)\n"
    assert server_signals(signalled, "s.py") == ["s.py:3 .kill"]
    assert server_signals(signalled.replace("sim_server([])", "other([])"), "s.py") == []


def test_tests_start_reference_servers_through_the_one_fixture() -> None:
    fixture = ROOT / "tests" / "helpers.py"
    files = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p != fixture]
    assert len(files) > 100, f"only {len(files)} test files"
    found = [hit for p in files for walk in (server_starts, server_signals)
             for hit in walk(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert not found, "start reference servers with tests.helpers.start_server (the harness's ServerProcess), end " \
                      "them with stop_server, signal them through harness.util.kill:\n" + "\n".join(found)
    assert "ServerProcess(" in fixture.read_text(encoding="utf-8") and not server_starts(
        fixture.read_text(encoding="utf-8"), "tests/helpers.py"), "the fixture starts its server with ServerProcess"


# The teardown record: harness.records.run_record.TeardownInfo, returned by ServerProcess.stop and kept as is.
def teardown_records(source: str, where: str) -> list[str]:
    return sorted(f"{where}:{node.lineno} {node.name}" for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.ClassDef) and node.name.startswith("Teardown"))


def test_there_is_one_teardown_record() -> None:
    assert teardown_records("class TeardownReport:\n    pass\n", "p.py") == ["p.py:1 TeardownReport"]
    found = [hit for where, text in _harness_sources() for hit in teardown_records(text, where)]
    assert [hit.split()[1] for hit in found] == ["TeardownInfo"], found
    assert found[0].startswith(f"{_owned_by('The teardown record')[0]}:")


if __name__ == "__main__":  # docs/owners.md rendered from OWNERS
    (ROOT / "docs" / "owners.md").write_text(owners_page(), encoding="utf-8")
