"""Issue 37, secrets: redacted at every entrance (store import, ci-matrix output, store URLs in any form), and
emitted shell commands quoted so that no value is ever evaluated (the emitted command is run here)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.records.artifacts import write_repro
from harness.records.run_record import record_to_dict
from harness.store.url import redact_url
from tests.helpers import make_record
from tests.hostile._probe import SEED, cli, refused

API_KEY = "sk-importedsecret0123"
BEARER = "tokvalue987654321"


def _dump(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return "\n".join(str(row) for table, in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                         for row in conn.execute(f'SELECT * FROM "{table}"'))
    finally:
        conn.close()


def test_store_import_redacts_argv_flags_and_every_repeat_of_a_value_found_by_shape(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = make_record(run_id="imported-1", reason=f"HTTP 401 with Authorization: Bearer {BEARER}; retried {BEARER}")
    data = record_to_dict(record)
    data["server"]["argv"] = ["python", "-m", "sglang.launch_server", "--api-key", API_KEY, "--port", "30000"]
    data["server"]["env"] = {"HF_TOKEN": "<redacted>"}
    folder = tmp_path / "elsewhere" / "imported-1"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))  # as another machine (or a hand) wrote it
    store = tmp_path / "s.db"
    ran = cli(["store", "import", tmp_path / "elsewhere", "--store", store], capsys)
    assert ran.code == 0, ran.err
    dump = _dump(store)
    assert "imported-1" in dump
    assert API_KEY not in dump and BEARER not in dump


def _matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str, fmt: str = "github") -> list[str]:
    ran = cli(["ci-matrix", SEED, "--format", fmt, *flags], capsys)
    assert ran.code == 0, ran.err
    if fmt == "github":
        return [job["command"] for job in json.loads(ran.out)["include"]]
    import yaml

    return [m["COMMAND"] for m in yaml.safe_load(ran.out)["sglang-repro-nightly"]["parallel"]["matrix"]]


HOSTILE = ["$(touch PWNED)", "`touch PWNED`", "x; touch PWNED", "${X:-$(touch PWNED)}", "a\ntouch PWNED", "'\"$"]


@pytest.mark.parametrize("value", HOSTILE)
def test_the_emitted_ci_command_run_by_a_shell_evaluates_no_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    work = tmp_path / "ci"
    work.mkdir()
    # The job's shell: `sglang-repro` is a function that writes the words it was given, one per line (NUL-separated).
    prelude = 'sglang-repro() { printf "%s\\0" "$@" > words; }\n'
    for fmt in ("github", "gitlab"):
        for command in _matrix(tmp_path, capsys, "--build", value, "--job-store", value, fmt=fmt):
            # github runs the command line; gitlab's job runs `eval "$COMMAND"` (render's script)
            script = prelude + (command if fmt == "github" else 'eval "$COMMAND"')
            done = subprocess.run(["bash", "-c", script], cwd=work, env={**os.environ, "COMMAND": command},
                                  capture_output=True, text=True, timeout=30, check=False)
            assert done.returncode == 0, done.stderr
            assert not (work / "PWNED").exists(), (fmt, command)
            words = (work / "words").read_text().split("\0")
            assert words[words.index("--build") + 1] == value and words[words.index("--store") + 1] == value


def test_the_default_ci_variables_are_still_expanded_by_the_job_shell_and_nothing_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [command] = _matrix(tmp_path, capsys)
    assert '"$BUILD"' in command and '"$SGLANG_REPRO_STORE"' in command
    work = tmp_path / "ci"
    work.mkdir()
    env = {**os.environ, "BUILD": "$(touch PWNED)", "SGLANG_REPRO_STORE": "postgresql://u@db/x"}
    subprocess.run(["bash", "-c", 'sglang-repro() { printf "%s\\0" "$@" > words; }\n' + command], cwd=work, env=env,
                   check=True, timeout=30)
    words = (work / "words").read_text().split("\0")
    assert words[words.index("--build") + 1] == "$(touch PWNED)" and not (work / "PWNED").exists()
    assert words[words.index("--store") + 1] == "postgresql://u@db/x"


@pytest.mark.parametrize("store", ["postgresql+psycopg://u:pw1234@db/x", "postgresql://u@db/x?password=pw1234",
                                   "postgresql://u@db/x?sslpassword=pw1234"])
def test_a_job_store_with_a_password_is_refused_and_the_password_not_printed(
        capsys: pytest.CaptureFixture[str], store: str) -> None:
    line = refused(["ci-matrix", SEED, "--format", "github", "--job-store", store], capsys)
    assert "pw1234" not in line and "PGPASSWORD" in line, line


@pytest.mark.parametrize(("url", "secret"), [
    ("postgresql://u:hun@ter2pw@host/db", "hun@ter2pw"),
    ("postgresql://u:hun@ter2pw@host/db", "ter2pw"),
    ("postgresql://u:s3cr3tpw@host/db?options=-c%20password%3Ds3cr3tpw", "s3cr3tpw"),
    ("postgresql://u@host/db?password=s3cr3tpw&application_name=s3cr3tpw", "s3cr3tpw"),
    ("postgresql://u:s3cr3tpw@host/db?application_name=s3cr3tpw", "s3cr3tpw"),
    ("postgresql://u@host/db?options=-c password=s3cr3tpw", "s3cr3tpw"),
    ("host=127.0.0.1 password=s3cr3tpw dbname=x", "s3cr3tpw"),
    ("postgresql://u:pa/ss@[::1/db", "pa/ss"),  # not parseable
])
def test_redact_url_masks_the_password_in_every_form_and_wherever_it_reappears(url: str, secret: str) -> None:
    shown = redact_url(url)
    assert secret not in shown, shown
    assert "***" in shown


def test_a_libpq_keyword_string_is_not_taken_for_an_sqlite_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = refused(["store", "alerts", "--store", "host=127.0.0.1 password=s3cr3tpw dbname=x"], capsys)
    assert "s3cr3tpw" not in line and "libpq keyword" in line, line
    assert list(tmp_path.iterdir()) == []


_SERVER = textwrap.dedent('''
    import http.server, sys
    port, key = int(sys.argv[sys.argv.index("--port") + 1]), sys.argv[sys.argv.index("--api-key") + 1]
    class H(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            ok = self.path == "/health" or self.headers.get("Authorization") == f"Bearer {key}"
            body = b'{"text": "authorized"}' if ok else b'{"error": "Unauthorized"}'
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        do_GET = do_POST = _answer
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


def test_repro_sh_sends_the_api_key_from_the_environment_and_ends_on_its_own(tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(_SERVER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "sk-reprokey-0123456789abcdef"
    script = write_repro(tmp_path, argv=[sys.executable, str(server), "--port", str(port), "--api-key", key],
                         env={}, host="127.0.0.1", port=port, request={"text": "hi"}, note="probe")
    text = script.read_text()
    assert key not in text
    began = time.monotonic()
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "SGLANG_REPRO_SECRET_API_KEY": key, "STARTUP_TIMEOUT": "20"})
    assert done.returncode == 0, done.stderr
    assert "authorized" in done.stdout and "Unauthorized" not in done.stdout, done.stdout
    assert time.monotonic() - began < 30  # no `wait` on a server that never exits


def test_repro_sh_gives_up_on_a_server_that_never_gets_healthy(tmp_path: Path) -> None:
    script = write_repro(tmp_path, argv=["sleep", "600"], env={}, host="127.0.0.1", port=1, request=None, note="x")
    began = time.monotonic()
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "STARTUP_TIMEOUT": "3"})
    assert done.returncode == 1 and "not healthy after 3s" in done.stderr, done.stderr
    assert time.monotonic() - began < 20


@pytest.mark.parametrize("url", ["postgresql://u:hun@s3cr3tpw@127.0.0.1:1/db", "postgresql://u@x:s3cr3tpw@127.0.0.1:1/db"])
def test_a_url_with_two_ats_before_the_host_is_refused_not_sent_to_dns(url: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Found by benchmarks/bench_hostile.py: SQLAlchemy splits at the first "@", so the rest of the password became
    # the host, and the driver's "failed to resolve host 's3cr3tpw@127.0.0.1'" printed it past redact_url.
    line = refused(["store", "alerts", "--store", url], capsys)
    assert "s3cr3tpw" not in line and "%40" in line, line
