"""Issue 37, writes outside the target: no path the harness writes under resolves through a link, dangling or
not (docs/safety.md), and a prompt fixture is read only from the scenario's folder and fixtures/, bounded."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from harness.util.errors import UserError
from harness.util.output_path import make_folder, refuse_links
from harness.util.paths import resolve_fixture
from tests.hostile._probe import CASE, SEED, cli, refused

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin


def _nothing_in(folder: Path) -> None:
    assert list(folder.iterdir()) == [], list(folder.iterdir())


@pytest.mark.parametrize("inside", ["runs", "compare"])
def test_a_link_inside_the_output_folder_is_refused_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "o"
    out.mkdir()
    (out / inside).symlink_to(elsewhere)
    command = "run" if inside == "runs" else "compare"
    roles = ["--build", "sim:post-fix"] if command == "run" else ["--before", "sim:pre-fix", "--after", "sim:post-fix"]
    line = refused([command, SEED, "--case", CASE, *roles, "--trials", "1", "--out", out,
                    "--store", tmp_path / "s.db"], capsys, within_s=60)
    assert "symbolic link" in line and inside in line, line
    _nothing_in(elsewhere)


def test_the_output_folder_itself_and_folders_above_it_may_not_be_links(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    for out in (tmp_path / "link", tmp_path / "link" / "o"):
        line = refused(["run", SEED, "--case", CASE, "--build", "sim:post-fix", "--out", out, "--no-store"], capsys)
        assert f"lies under {tmp_path / 'link'}" in line or "is a symbolic link" in line, line
    _nothing_in(real)


@pytest.mark.parametrize("existing", [False, True], ids=["dangling", "to-a-store"])
def test_a_store_file_that_is_a_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                existing: bool) -> None:
    target = tmp_path / "target.db"
    if existing:
        sqlite3.connect(target).close()
    before = target.stat().st_size if existing else None
    for flags in (["--store", tmp_path / "s.db"], ["--out", tmp_path / "o"]):  # the explicit one, the default one
        link = tmp_path / "s.db" if flags[0] == "--store" else tmp_path / "o" / "results.db"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(target)
        line = refused(["store", "alerts", "--store", link] if flags[0] == "--out" else ["store", "alerts", *flags],
                       capsys)
        assert "symbolic link" in line, line
        line = refused(["run", SEED, "--case", CASE, "--build", "sim:post-fix", "--out", tmp_path / "o", *flags],
                       capsys)
        assert "symbolic link" in line, line
        link.unlink()
    assert (target.stat().st_size if existing else None) == before
    assert existing or not target.exists()


def test_make_folder_refuses_a_link_planted_on_the_way(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").symlink_to(tmp_path / "nowhere")  # dangling
    with pytest.raises(UserError, match="symbolic link"):
        make_folder(tmp_path / "a" / "b" / "c", "the run folder")
    assert not (tmp_path / "nowhere").exists()
    refuse_links(tmp_path / "a" / "new" / "deeper", "fine")  # absent parts: nothing to refuse
    assert make_folder(tmp_path / "a" / "x" / "y", "ok").is_dir()


def test_prepare_cache_that_is_a_fifo_a_dangling_link_or_read_only_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "missing")
    for cache in (fifo, dangling):
        refused(["prepare", "sim:post-fix", "--cache-dir", cache], capsys)
        monkeypatch.setenv("SGLANG_REPRO_CACHE", str(cache))
        line = refused(["prepare", "sim:post-fix"], capsys)
        assert "SGLANG_REPRO_CACHE" in line, line
        monkeypatch.delenv("SGLANG_REPRO_CACHE")
    assert not (tmp_path / "missing").exists()
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        refused(["prepare", "sim:post-fix", "--cache-dir", ro / "c"], capsys)


# --- fixtures: confined, bounded --------------------------------------------------------------------------------


def _scenario_with_fixture(folder: Path, fixture: str) -> Path:
    text = SEED.read_text()
    assert "fixture:" in text or "prompt:" in text
    path = folder / "s.yaml"
    import yaml

    data = yaml.safe_load(text)
    data["workload"]["prompt"] = {"source": "fixture", "fixture": fixture, "tokens": 8}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", ["/etc/passwd", "../../../../../../../../etc/passwd", "/proc/self/environ"])
def test_a_fixture_outside_the_scenario_folder_and_fixtures_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    folder = tmp_path / "sc"
    folder.mkdir()
    assert resolve_fixture(name, relative_to=folder) is None
    scenario = _scenario_with_fixture(folder, name)
    ran = cli(["validate", scenario], capsys)
    assert ran.code == 2 and "workload.prompt.fixture" in ran.err and "read only from there" in ran.err, ran.err
    assert "Traceback" not in ran.err


def test_a_link_out_of_the_scenario_folder_names_no_fixture(tmp_path: Path) -> None:
    folder = tmp_path / "sc"
    folder.mkdir()
    (tmp_path / "secret.txt").write_text("HF_TOKEN=hf_abc")
    (folder / "prompt.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "real.txt").write_text("a prompt")
    assert resolve_fixture("prompt.txt", relative_to=folder) is None
    assert resolve_fixture("real.txt", relative_to=folder) == (folder / "real.txt").resolve()


def test_a_sparse_50_gb_fixture_is_refused_by_size_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sc"
    folder.mkdir()
    big = folder / "big.txt"
    with open(big, "wb") as fh:
        fh.truncate(50 << 30)  # sparse: no disk used
    scenario = _scenario_with_fixture(folder, "big.txt")
    ran = cli(["validate", scenario], capsys)
    assert ran.code == 2 and "cap for a fixture text" in ran.err, ran.err
    assert ran.took_s < 5
