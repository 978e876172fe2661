"""Issue 37, hangs and unbounded work: libpq's deadline and the files it reads, a catalogue regex's complexity,
`schema --indent`, matrix expansion: each ends in one line and its exit code, within its bound."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
import yaml

from harness.signatures.catalogue import Catalogue
from harness.store.store import open_store
from harness.util.errors import InfraError, UserError
from tests.hostile._probe import SEED, cli, refused


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_as_libpq_passfile_in_the_url_is_refused_not_waited_on(
        fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["store", "alerts", "--store", f"postgresql://u@127.0.0.1:1/db?passfile={fifo}"], capsys)
    assert "passfile" in line and "a FIFO" in line, line


@pytest.mark.parametrize("variable", ["PGPASSFILE", "PGSERVICEFILE"])
def test_a_fifo_as_libpq_file_from_the_environment_is_refused(
        fifo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, str(fifo))
    url = "postgresql://u@127.0.0.1:1/db" + ("?service=x" if variable == "PGSERVICEFILE" else "")
    line = refused(["store", "alerts", "--store", url], capsys)
    assert f"${variable}" in line and "a FIFO" in line, line


def test_a_listener_that_never_answers_ends_within_the_connect_deadline_whatever_the_url_asks() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # accepted by the kernel, never answered
        port = listener.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(InfraError, match="cannot open"):
            open_store(f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=100")
        assert time.monotonic() - began < 12  # 5 s per attempt, however long the URL asked for


def _evil_catalogue(tmp_path: Path) -> Path:
    path = tmp_path / "signatures.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "signatures": [{
        "id": "evil", "title": "nested repeats", "kind": "bug", "upstream": ["https://example.org/x"],
        "message": "(a+)+$"}]}))
    return path


def test_a_catalogue_regex_with_nested_unbounded_repeats_is_refused_at_load(tmp_path: Path) -> None:
    began = time.monotonic()
    with pytest.raises(UserError, match="exponential"):
        Catalogue.load(_evil_catalogue(tmp_path))
    assert time.monotonic() - began < 2


def test_the_project_catalogue_has_no_pattern_the_bound_refuses() -> None:
    assert Catalogue.load().signatures  # every shipped pattern passes the complexity bound


def test_triage_with_an_evil_catalogue_ends_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    log.write_text("a" * 40 + "!\n")
    line = refused(["triage", log, "--catalogue", _evil_catalogue(tmp_path)], capsys)
    assert "exponential" in line, line


def test_schema_indent_is_bounded_before_any_work(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["schema", "--indent", "999999999"], capsys, within_s=3)
    assert "0 to 16" in line, line
    ran = cli(["schema", "--indent", "4"], capsys)
    assert ran.code == 0 and ran.out.startswith("{\n    ")


def test_a_matrix_of_heavy_cases_is_refused_before_expansion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(SEED.read_text())
    data["description"] = "x" * 600_000  # 600k characters x 256 cases = 150M characters of text to validate
    data["matrix"] = {"a": {str(i): {"workload.requests": i + 1} for i in range(16)},
                      "b": {str(i): {"workload.concurrency": 1} for i in range(16)}}
    path = tmp_path / "heavy.yaml"
    path.write_text(yaml.safe_dump(data))
    for command in ("validate", "list"):
        ran = cli([command, path], capsys)
        assert ran.code == 2 and "fewer cases, or a smaller file" in ran.err, ran.err
        assert ran.took_s < 20
