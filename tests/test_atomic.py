"""The one writer of files that a reader must never see half-written (reports, a build's cache index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.util.atomic import write_atomic


def test_the_new_content_replaces_the_old_and_nothing_is_left_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text("old")
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]


def test_a_failed_write_keeps_the_old_content_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\udcff")  # a lone surrogate cannot be encoded: the write fails part-way
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]
