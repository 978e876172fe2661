"""A quick command imports only what it needs: checked on the set of imported modules, in a fresh
interpreter per command (the start-up time itself is measured in benchmarks/bench_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main, make_parser
from harness.commands import COMMANDS

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CLEAN_LOG = REPO / "fixtures" / "logs" / "clean.log"

# Runs the CLI in-process in a fresh interpreter, then reports what got imported (argparse's
# SystemExit for --help included).
_PROBE = """
import contextlib, io, json, sys
from harness.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

# Each of these costs a tenth of a second or more to import; none is needed to read a scenario or a log.
HEAVY = ("scipy", "numpy", "aiohttp", "torch", "pandas", "pyarrow", "plotly", "psutil", "huggingface_hub",
         "sqlalchemy", "filelock", "rich")


def _imported(argv: list[str]) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)], check=False, capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return record["code"], set(record["modules"])


@pytest.mark.parametrize(("argv", "command"), [
    (["validate", str(SCENARIO)], "validate"),
    (["list", str(SCENARIO)], "list"),
    (["triage", str(CLEAN_LOG)], "triage"),
    (["--help"], None),
    (["validate", "--help"], "validate"),
])  # fmt: skip
def test_a_quick_command_imports_no_heavy_library_and_no_other_command(argv: list[str], command: str | None) -> None:
    code, modules = _imported(argv)
    assert code == 0
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], f"{argv[0]} imported {heavy[:5]}"
    commands = {m.rpartition(".")[2] for m in modules if m.startswith("harness.commands.")}
    assert commands <= {command, "_common"}
    # Nothing of the run path: no server, workload, statistics or report code, no part of the reference
    # server but its package's names.
    assert not {"harness.pipeline", "harness.compare.verdicts", "harness.compare.runner", "harness.measure.statistics",
                "harness.workload.driver", "harness.server.process", "harness.report", "harness.launch.launcher"} & modules
    assert not [m for m in modules if m.startswith("harness.sim.")]


def test_bare_help_imports_no_command_at_all() -> None:
    _, modules = _imported(["--help"])
    assert not any(m.startswith("harness.commands.") for m in modules)
    assert "harness.scenario" not in modules


def test_the_registry_names_every_command_module_and_each_loads() -> None:
    modules = sorted(p.stem for p in (REPO / "harness" / "commands").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(cmd.module for cmd in COMMANDS) == modules
    for cmd in COMMANDS:
        mod = cmd.load()
        assert callable(mod.add_arguments) and callable(mod.main)


def test_full_parser_and_per_command_parser_read_a_command_the_same_way() -> None:
    argv = ["compare", str(SCENARIO), "--before", "sim:pre-fix", "--trials", "2"]
    full = make_parser().parse_args(argv)
    lazy = make_parser(argv).parse_args(argv)
    assert vars(full) == vars(lazy)
    assert full.trials == 2 and full.before == "sim:pre-fix"


def test_help_of_one_command_shows_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    assert "--build SPEC" in capsys.readouterr().out


def test_unknown_command_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["valdate", str(SCENARIO)])
    assert exc.value.code == 2
    assert "invalid choice: 'valdate'" in capsys.readouterr().err
