"""Issue 49: an SQLite store on a read-only mount is read by the commands that only read (dashboard, store alerts,
store export); it could not be opened at all (SQLite's WAL wants a ``-shm`` file beside it, which the folder refuses).

The folder is made read-only as the machine allows: a read-only bind mount (root, with mount rights: what a
read-only volume is), else ``chattr +i`` on the folder (root on ext4 and the like: no new file in it), else mode
0555 (not root: root passes mode bits). Which one was used is in the test's id-free output (``-rs`` shows a skip
when none could be had)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from harness.store import migrations
from harness.store.store import new_batch, open_store
from harness.store.url import store_url as parse_store_url
from tests.helpers import make_record
from tests.hostile._probe import cli


def _try(*argv: str) -> bool:
    return shutil.which(argv[0]) is not None and subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _can_create(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[Callable[[Path], object]], Path]]:
    """``read_only(fill)``: a folder filled by ``fill(folder)``, then made read-only: its files cannot be written and
    no file can be created in it. Skipped where the machine allows none of the three ways."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    undo: list[list[str]] = []

    def make(fill: Callable[[Path], object]) -> Path:
        fill(src)
        folder = src
        if os.geteuid() == 0 and _try("mount", "--bind", str(src), str(ro)):
            undo.append(["umount", str(ro)])
            if _try("mount", "-o", "remount,ro,bind", str(ro)):
                folder = ro
            else:
                subprocess.run(undo.pop(), check=False)
        if folder is src:
            if os.geteuid() == 0 and _try("chattr", "+i", str(src)):
                undo.append(["chattr", "-i", str(src)])
            elif os.geteuid() != 0:
                src.chmod(0o555)
        if _can_create(folder):
            pytest.skip("no way to make a folder read-only here (no mount, no chattr, root passes mode bits)")
        return folder

    try:
        yield make
    finally:
        for argv in reversed(undo):
            if subprocess.run(argv, check=False).returncode != 0 and argv[0] == "umount":
                subprocess.run(["umount", "-l", *argv[1:]], check=False)  # never a mount left behind
        src.chmod(0o755)


def _filled(version: int | None = None) -> Callable[[Path], Path]:
    """A store written before its folder turns read-only (its -wal and -shm gone on close): one nightly run, or
    empty at an older ``version``."""
    def fill(folder: Path) -> Path:
        db = folder / "results.db"
        if version is not None:
            engine = create_engine(parse_store_url(str(db)))
            migrations.migrate(engine, target=version)
            engine.dispose()
        else:
            with open_store(str(db)) as store:
                store.record(make_record(run_id="r1", spec="sim:post-fix"), new_batch("nightly", "n1"))
        return db
    return fill


@pytest.mark.parametrize("action", [["store", "alerts", "--all"], ["store", "export", "--format", "csv", "-o", "{out}"],
                                    ["dashboard", "-o", "{out}"]])
def test_a_read_only_store_is_read(tmp_path: Path, read_only: Callable[[Callable[[Path], object]], Path],
                                   capsys: pytest.CaptureFixture[str], action: list[str]) -> None:
    folder = read_only(_filled())
    db = folder / "results.db"
    before = db.read_bytes()
    out = tmp_path / "out"
    target = out / "x.csv" if "export" in action else out
    ran = cli([*(a.replace("{out}", str(target)) for a in action), "--store", db], capsys)
    assert ran.code == 0, ran.err  # was exit 3: "cannot open: unable to open database file"
    assert "read-only" in ran.err and "-shm" in ran.err, ran.err  # it says how it read the store
    assert db.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["results.db"]
    if "export" in action:
        assert "r1" in target.read_text()
    if "dashboard" in action:
        assert (out / "index.html").is_file()


def test_a_read_only_store_of_an_older_version_is_refused_in_one_line(
        read_only: Callable[[Callable[[Path], object]], Path], capsys: pytest.CaptureFixture[str]) -> None:
    """It cannot be upgraded where it lies; read as it is, the newer columns would be missing."""
    folder = read_only(_filled(version=8))
    ran = cli(["store", "alerts", "--store", folder / "results.db"], capsys)
    assert ran.code == 3 and "at version 8" in ran.err and "Traceback" not in ran.err, ran.err


def test_a_writable_store_is_opened_as_before_by_a_reading_command(tmp_path: Path) -> None:
    """Read-only is for what cannot be written: a writable store read by the dashboard still upgrades and caches."""
    db = _filled(version=8)(tmp_path)
    with open_store(str(db), read_only=True) as store:
        assert not store.read_only
    engine = create_engine(parse_store_url(str(db)))
    with engine.connect() as conn:
        assert migrations.current_version(conn) == migrations.latest_version()
    engine.dispose()
