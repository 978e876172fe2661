"""Issue 49: the scenario copies a command writes with its ``--set`` overrides applied (bisect's, for the steps of
``git bisect run``) keep no secret, and stay runnable: the secret overrides reach the search's processes through
the environment, never the file; a value with a line break is refused before anything is written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.scenario.overrides import SECRET_SETS_ENV
from tests.hostile._probe import CASE, SEED, cli, refused

TOKEN = "hf_setcopysecret0123456789abcdef"
KEY = "apikeyvalue4242"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
                    "-m", "one"], check=True)
    return repo


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_bisect_keeps_set_secrets_out_of_its_scenario_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    # --good and --bad one commit: refused (exit 2) once the copy is written, before any step runs
    ran = cli(["bisect", SEED, "--case", CASE, "--repo", _repo(tmp_path), "--good", "HEAD", "--bad", "HEAD", "--out", out,
               "--set", f"server.env.HF_TOKEN={TOKEN}", "--set", f"server.args.api-key={KEY}", "--set", "hardware.gpus=2"],
              capsys)
    assert ran.code == 2, ran.err
    (copy,) = out.glob("bisect/scenarios/*.yaml")
    for path in _files(out):
        data = path.read_bytes()
        assert TOKEN.encode() not in data and KEY.encode() not in data, path
    header = copy.read_text().splitlines()[0]
    assert "hardware.gpus=2" in header and "server.env.HF_TOKEN, server.args.api-key" in header, header
    assert TOKEN not in ran.out + ran.err and KEY not in ran.out + ran.err
    assert SECRET_SETS_ENV not in os.environ  # the search's own: not left for the next command of this process


def test_the_copy_and_the_environment_make_the_scenario_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a step loads (the copy, the secret overrides from the environment the search hands down) is the case the
    user asked for, secrets included."""
    import json

    from harness.bisect.probe import load_case
    from harness.scenario.loader import load_file, select_cases
    from harness.scenario.overrides import is_secret_set, parse_sets, write_overridden

    sets = parse_sets([f"server.env.HF_TOKEN={TOKEN}", f"server.args.api-key={KEY}", "hardware.gpus=2"])
    assert [is_secret_set(s) for s in sets] == [True, True, False]
    copy = write_overridden(SEED, sets, tmp_path)
    asked = select_cases(load_file(SEED, overrides=sets), CASE)[0].scenario
    monkeypatch.setenv(SECRET_SETS_ENV, json.dumps([s.text for s in sets if is_secret_set(s)]))
    got = load_case(copy, CASE).scenario
    assert got.server.env == asked.server.env and got.server.args == asked.server.args
    assert got.hardware.gpus == 2
    monkeypatch.delenv(SECRET_SETS_ENV)
    assert "HF_TOKEN" not in load_case(copy, CASE).scenario.server.env  # the file alone holds none


@pytest.mark.parametrize("command", ["bisect", "validate"])
def test_a_set_value_with_a_line_break_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    out = tmp_path / "o"
    argv: list[object] = [command, SEED, "--set", f"server.env.HF_TOKEN=two\nlines{TOKEN}"]
    if command == "bisect":
        argv += ["--case", CASE, "--repo", _repo(tmp_path), "--good", "HEAD", "--bad", "HEAD", "--out", out]
    line = refused(argv, capsys)
    assert "line break" in line and TOKEN not in line, line
    assert not out.exists()


def test_an_incidents_set_words_quote_values_and_leave_references_to_the_shell() -> None:
    import shlex

    from harness.alerts.alert import _set_words
    from harness.scenario.overrides import parse_set, recorded_set
    from harness.series.points import Point

    recorded = [recorded_set(parse_set(t)) for t in (f"server.env.HF_TOKEN={TOKEN}", f"server.args.api-key={KEY}",
                                                     "description=a b; rm -rf x")]
    assert recorded == ["server.env.HF_TOKEN=${HF_TOKEN}", "server.args.api-key=${API_KEY}", "description=a b; rm -rf x"]
    words = _set_words(Point("b", "n1", "2026-11-01", "k", "sim:pre-fix", None, None, None, (), {}, (), sets=tuple(recorded)))
    assert shlex.split(words) == ["--set", "server.env.HF_TOKEN=${HF_TOKEN}", "--set", "server.args.api-key=${API_KEY}",
                                  "--set", "description=a b; rm -rf x"]
    assert '"server.env.HF_TOKEN=${HF_TOKEN}"' in words and "'description=a b; rm -rf x'" in words


def test_minimize_saves_no_secret_in_its_candidates_and_loads_them_back(tmp_path: Path) -> None:
    """A candidate's file holds no secret; the case it loads as has each the candidate keeps, and not one it drops."""
    from harness.build import resolve_build
    from harness.minimize.atoms import base_mapping, initial_candidate
    from harness.minimize.defaults import read_defaults
    from harness.minimize.oracle import Oracle
    from harness.scenario.loader import load_file, select_cases
    from harness.scenario.overrides import parse_sets
    from harness.store.searches import SearchRuns
    from harness.store.store import new_batch

    (case,) = select_cases(load_file(SEED, overrides=parse_sets([f"server.env.HF_TOKEN={TOKEN}",
                                                                  f"server.args.api-key={KEY}"])), CASE)
    build = resolve_build("sim:pre-fix")
    oracle = Oracle(base=base_mapping(case.scenario, case.file), build=build, defaults=read_defaults(build),
                    runner=lambda c, t: None, runs=SearchRuns(None, new_batch("minimize")),  # type: ignore[arg-type,return-value]
                    use_cache=True, jobs=1, work_dir=tmp_path, deadline=None)
    cand = initial_candidate(case.scenario)
    got = oracle.materialize(cand)
    assert not isinstance(got, str), got
    assert got.scenario.server.env["HF_TOKEN"] == TOKEN and got.scenario.server.args["api-key"] == KEY
    without = oracle.materialize(cand.without([a for a in cand.atoms if a.name == "HF_TOKEN"]))
    assert not isinstance(without, str) and "HF_TOKEN" not in without.scenario.server.env
    files = _files(tmp_path)
    assert files and all(TOKEN.encode() not in p.read_bytes() and KEY.encode() not in p.read_bytes() for p in files)


def test_minimize_writes_its_minimal_scenario_without_secrets_and_says_which(tmp_path: Path) -> None:
    from harness.build import resolve_build
    from harness.minimize.observation import Target
    from harness.minimize.output import write_minimal
    from harness.records.outcome import Outcome
    from harness.scenario.loader import load_file, select_cases
    from harness.scenario.overrides import parse_sets

    sets = parse_sets([f"server.env.HF_TOKEN={TOKEN}"])
    (case,) = select_cases(load_file(SEED, overrides=sets), CASE)
    mapping = case.scenario.model_dump(mode="json", exclude_unset=True)
    path = tmp_path / "minimal.yaml"
    back = write_minimal(path, mapping, case=case, build=resolve_build("sim:pre-fix"),
                         target=Target(outcome=Outcome.CRASH, signature=None, phase=None, frames=()))
    text = path.read_text()
    assert TOKEN not in text and "Secrets kept out of this file" in text and "server.env.HF_TOKEN" in text
    assert load_file(path, overrides=back).cases[0].scenario.server.env["HF_TOKEN"] == TOKEN
