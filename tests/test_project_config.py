"""The project configuration (issue 45): found as pytest finds its rootdir, each value with its source, bad input one
line (exit 2); the project's signature files merged with the built-in catalogue; ``init`` never overwrites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.signatures.catalogue import Catalogue
from harness.util.errors import UserError
from harness.util.paths import resolve_fixture
from harness.util.project_config import find_config_file, project

SIGNATURE = """\
version: 1
signatures:
  - id: {id}
    title: ours
    kind: bug
    upstream: [https://example.org/1]
    message: "ours went wrong"
"""


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SGLANG_REPRO_REPORTS", "SGLANG_REPRO_STORE", "SGLANG_REPRO_BASELINES"):
        monkeypatch.delenv(name, raising=False)


def test_found_walking_up_a_pyproject_without_the_table_is_skipped_and_the_own_file_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.sglang-repro]\nreports = "out"\n')
    inner = tmp_path / "pkg"
    (inner / "deep").mkdir(parents=True)
    (inner / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")  # someone else's table only
    assert find_config_file(inner / "deep") == tmp_path / "pyproject.toml"
    config = project(inner / "deep")
    assert config.root == tmp_path and config.reports == tmp_path / "out"
    assert config.sources["reports"] == f"{tmp_path / 'pyproject.toml'}:2" and config.sources["store"] == "default"
    (tmp_path / "sglang-repro.toml").write_text('reports = "mine"\n')
    assert project(inner).reports == tmp_path / "mine"  # the own file first, as pytest.ini before pyproject.toml
    assert project(Path("/")).file is None or project(Path("/")).root == Path("/")


def test_the_environment_overrides_the_file_relative_to_the_working_directory(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sglang-repro.toml").write_text('reports = "out"\nbaselines = "refs"\nfixtures = ["fx"]\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.setenv("SGLANG_REPRO_REPORTS", "elsewhere")
    config = project()
    assert config.reports == tmp_path / "sub" / "elsewhere" and config.sources["reports"] == "$SGLANG_REPRO_REPORTS"
    assert config.baselines == tmp_path / "refs" and config.fixtures == (tmp_path / "fx",)
    assert config.store is None and not config.scenarios_set


@pytest.mark.parametrize(("text", "says"), [
    ('reprots = "x"\n', "reprots: unknown key; valid keys: scenarios, reports, store, baselines, fixtures, signatures"),
    ('scenarios = "cases"\n', "scenarios: 'cases' is not a list of folders (strings)"),
    ('store = "postgresql://me:hunter2pw@db/x"\n', "store: holds a password; a secret comes only from the environment"),
    ('store = "postgresql://me@db/x?password=hunter2pw"\n', "store: holds a password"),
    ("reports = [\n", "not valid TOML"),
])
def test_a_bad_key_or_value_is_one_line_naming_file_line_and_what_is_valid(tmp_path: Path, text: str, says: str,
                                                                          run_cli) -> None:
    (tmp_path / "sglang-repro.toml").write_text(f"# ours\n{text}")
    with pytest.raises(UserError, match="^" + str(tmp_path / "sglang-repro.toml")) as caught:
        project(tmp_path)
    assert says in str(caught.value) and "hunter2pw" not in str(caught.value)
    done = run_cli("config", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr and not done.stdout


def test_config_prints_each_value_and_its_source(tmp_path: Path, run_cli) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.sglang-repro]\nbaselines = "refs"\n')
    done = run_cli("config", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if not line.startswith("#")}
    assert lines["baselines"].endswith(f'"{tmp_path / "refs"}"  # {tmp_path / "pyproject.toml"}:5')
    assert lines["reports"].endswith(f'"{tmp_path / "reports"}"  # default')
    assert f"{tmp_path / 'reports' / 'results.db'}" in lines["store"]


def test_the_projects_signatures_merge_with_the_built_in_ones_and_a_clash_names_both_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = Catalogue.load(None)
    (tmp_path / "ours.yaml").write_text(SIGNATURE.format(id="ours-went-wrong"))
    (tmp_path / "sglang-repro.toml").write_text('signatures = ["ours.yaml"]\n')
    monkeypatch.chdir(tmp_path)
    merged = Catalogue.load()
    assert merged.ids == (*builtin.ids, "ours-went-wrong") and merged.sources[-1] == tmp_path / "ours.yaml"
    assert merged.match_text("x\nours went wrong\n") is not None
    taken = builtin.ids[0]
    (tmp_path / "ours.yaml").write_text(SIGNATURE.format(id=taken))
    with pytest.raises(UserError) as caught:
        Catalogue.load()
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'ours.yaml'}:3: signature '{taken}': id already in ")
    assert str(builtin.source) in message and "\n" not in message


def test_a_fixture_is_the_projects_first_then_the_built_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shipped = resolve_fixture("prompts/word_problems.txt")
    assert shipped is not None and shipped.parent.parent.name == "fixtures" and "harness" in shipped.parts
    (tmp_path / "fx" / "prompts").mkdir(parents=True)
    (tmp_path / "fx" / "prompts" / "word_problems.txt").write_text("ours\n")
    (tmp_path / "sglang-repro.toml").write_text('fixtures = ["fx"]\n')
    assert resolve_fixture("prompts/word_problems.txt") == tmp_path / "fx" / "prompts" / "word_problems.txt"
    assert resolve_fixture("../../etc/passwd") is None


def test_init_writes_what_it_says_never_overwrites_and_a_second_run_changes_nothing(tmp_path: Path, run_cli) -> None:
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / ".gitkeep").write_text("theirs\n")
    first = run_cli("init", str(tmp_path), "--gpu-name", "H100", "--gpus", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"kept  {tmp_path / 'baselines' / '.gitkeep'}" in first.stdout and "4 file(s) written, 1 kept" in first.stdout
    assert (tmp_path / "baselines" / ".gitkeep").read_text() == "theirs\n"
    scenario = (tmp_path / "scenarios" / "frozen_kv_mtp_28264.yaml").read_text()
    assert "gpus: 2\n" in scenario and 'gpu_name: "H100"' in scenario
    assert "gpu-h100-x2" in (tmp_path / ".github" / "workflows" / "sglang-repro.yml").read_text()
    listing = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    again = run_cli("init", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "0 file(s) written, 5 kept"
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == listing
    assert run_cli("validate", "scenarios", cwd=tmp_path).returncode == 0
    assert run_cli("init", str(tmp_path / "absent"), cwd=tmp_path).returncode == 2


def test_version_names_the_commit_of_a_checkout(run_cli) -> None:
    from harness import __version__

    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.startswith(f"sglang-repro {__version__}+g")
    assert os.path.isdir(Path(__file__).resolve().parent.parent / ".git")


def test_the_package_version_is_the_distributions() -> None:
    import tomllib

    from harness import __version__

    meta = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert meta["project"]["version"] == __version__
