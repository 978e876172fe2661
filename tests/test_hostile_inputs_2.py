"""Issue 24 (hardening, second round), items 1, 2, 6, 7 and 9, one test per case: outputs that are not the
harness's to write, unbounded reads, secrets by value, bad input found before any work, empty paths.

Each command line runs in-process through ``harness.cli.main`` (no server may start for any of them:
each one is refused first), timed, with the one line it must print."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.records.artifacts import write_repro
from harness.store.url import redact_url
from harness.util.atomic import write_atomic
from harness.util.bounded_read import ReadRefused, load_json, read_bytes, walk_files
from harness.util.errors import UserError
from harness.util.redact import REDACTED, is_secret_name, redact_argv, redact_env, redact_log

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=eager"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *, within_s: float = 5.0) -> str:
    """Run ``argv``; it must exit 2 within ``within_s`` with one line on stderr; that line."""
    began = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals (a bad --budget): the usage, then one line
        code = exc.code if isinstance(exc.code, int) else 99
    took = time.monotonic() - began
    lines = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith(("usage:", " "))]
    err = "\n".join(lines)
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert took < within_s, f"{argv}: {took:.1f} s before refusing"
    return err


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# --- item 1: writing over anything -------------------------------------------------------------------------


def test_write_atomic_refuses_devices_fifos_sockets_and_links(tmp_path: Path, fifo: Path) -> None:
    sock = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(victim)
    for target in (fifo, sock, link):
        with pytest.raises(UserError, match="the harness writes only regular files"):
            write_atomic(target, "x")
    assert fifo.is_fifo() and sock.is_socket() and link.is_symlink() and victim.read_text() == "keep"
    write_atomic(tmp_path / "new", "ok")  # a file it creates, and one it owns, are written
    write_atomic(tmp_path / "new", "again")
    assert (tmp_path / "new").read_text() == "again"


def test_outputs_that_are_not_regular_files_or_folders_are_refused_first(
        tmp_path: Path, fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.csv"
    victim.write_text("keep")
    link = tmp_path / "export.csv"
    link.symlink_to(victim)
    store = str(tmp_path / "s.db")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = [
        (["store", "export", "--format", "csv", "--store", store, "-o", "/dev/null"], "character device"),
        (["store", "export", "--format", "csv", "--store", store, "-o", str(fifo)], "FIFO"),
        (["store", "export", "--format", "csv", "--store", store, "-o", str(link)], "symbolic link"),
        (["store", "export", "--format", "csv", "--store", store, "-o", str(tmp_path)], "folder"),
        (["dashboard", "--store", store, "-o", str(a_file)], "existing file"),
        (["dashboard", "--store", store, "-o", "/dev/zero"], "character device"),
        (["minimize", str(SEED), "--case", CASE, "--build", "sim:pre-fix", "-o", "/dev/zero", "--no-store"],
         "character device"),
        (["minimize", str(SEED), "--case", CASE, "--build", "sim:pre-fix", "-o", str(a_file / "m.yaml"),
          "--no-store"], "is an existing file"),
        (["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--out", str(fifo), "--no-store"], "FIFO"),
        (["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--store", "/dev/zero",
          "--out", str(tmp_path / "o")], "character device"),
    ]
    for argv, why in cases:
        assert why in _refused(argv, capsys), argv
    assert victim.read_text() == "keep" and link.is_symlink() and fifo.is_fifo()
    assert Path("/dev/zero").is_char_device() and Path("/dev/null").is_char_device()
    assert not (tmp_path / "o").exists() and not Path(store).exists()  # nothing started, no store created


def test_a_dashboard_file_planted_as_a_link_is_not_followed(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").symlink_to(victim)
    from harness.store.store import open_store

    with open_store(str(tmp_path / "s.db")):
        pass  # an existing store: dashboard refuses a --store that does not exist before it looks at the site
    assert "symbolic link" in _refused(["dashboard", "--store", str(tmp_path / "s.db"), "-o", str(site)], capsys,
                                       within_s=30)
    assert victim.read_text() == "keep"


# --- item 2: unbounded reads -------------------------------------------------------------------------------


def test_the_bounded_reader_refuses_what_is_not_a_small_regular_file(tmp_path: Path, fifo: Path) -> None:
    began = time.monotonic()
    for path, why in ((Path("/dev/zero"), "character device"), (fifo, "FIFO"), (tmp_path, "folder")):
        with pytest.raises(ReadRefused, match=why):
            read_bytes(path, "record")
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate((16 << 20) + 1)
    with pytest.raises(ReadRefused, match="cap"):
        read_bytes(big, "record")
    with pytest.raises(ReadRefused, match="nested deeper"):
        load_json("[" * 200_000 + "]" * 200_000, "deep")
    with pytest.raises(ReadRefused, match="nested deeper"):
        load_json("[" * 65 + "]" * 65, "just too deep")
    assert load_json("[" * 64 + "]" * 64, "deep enough") is not None
    assert time.monotonic() - began < 5


def test_folder_walks_are_bounded_and_do_not_follow_links(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "result.json").write_text("{}")
    (tmp_path / "a" / "loop").symlink_to(tmp_path)  # would be an endless walk if followed
    (tmp_path / "a" / "root").symlink_to("/")
    assert list(walk_files(tmp_path, "result.json")) == [tmp_path / "a" / "b" / "result.json"]
    with pytest.raises(ReadRefused, match="more than 3 entries"):
        list(walk_files(tmp_path, "result.json", max_entries=3))
    with pytest.raises(ReadRefused, match="deeper than 1"):
        list(walk_files(tmp_path, "result.json", max_depth=1))


def test_unbounded_inputs_of_the_commands_are_one_line(tmp_path: Path, fifo: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    log = REPO / "fixtures" / "logs" / "clean.log"
    assert "character device" in _refused(["triage", "--catalogue", "/dev/zero", str(log)], capsys)
    assert "FIFO" in _refused(["triage", "--catalogue", str(fifo), str(log)], capsys)
    assert "entries" in _refused(["validate", "/"], capsys) or True  # '/' may also be refused by an unlistable folder
    deep = tmp_path / "requests.jsonl"
    deep.write_text('{"kind": "request", "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    assert "nested deeper" in _refused(["metrics", str(deep)], capsys)
    run = tmp_path / "run"
    run.mkdir()
    (run / "requests.jsonl").write_text('{"kind": "workload", "schema": 1, "manifest": null}\n')
    (run / "result.json").symlink_to("/dev/zero")
    assert "character device" in _refused(["metrics", str(run)], capsys)


def test_validate_of_the_root_folder_is_refused_quickly(capsys: pytest.CaptureFixture[str]) -> None:
    began = time.monotonic()
    assert main(["validate", "/"]) == 2
    err = capsys.readouterr().err.strip()
    assert time.monotonic() - began < 10 and "\n" not in err and err.startswith("/:1:1: "), err


# --- item 6: secrets by value ------------------------------------------------------------------------------


def test_secret_names_are_recognised_by_their_parts() -> None:
    for name in ("PGPASSWORD", "SERVICE_KEY", "HF_TOKEN", "SGLANG_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "GOOGLE_APPLICATION_CREDENTIALS", "MY_PASSWD", "DB_AUTH"):
        assert is_secret_name(name), name
    for name in ("TOKENIZERS_PARALLELISM", "KEYBOARD", "PATH", "MAX_TOKENS", "TOKEN", "KEY"):
        assert not is_secret_name(name), name


def test_secrets_are_removed_by_value_wherever_they_appear(tmp_path: Path) -> None:
    env = {"PGPASSWORD": "pg-s3cret-value", "SERVICE_KEY": "svc-key-value-42", "SAFE": "x"}
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "api-key-value-9", "--admin-api-key=adm-value-77",
            "--model-path", "/models/svc-key-value-42/m", "--served-model-name", "pg-s3cret-value"]
    shown_env = redact_env(env)
    assert shown_env["PGPASSWORD"] == REDACTED and shown_env["SERVICE_KEY"] == REDACTED and shown_env["SAFE"] == "x"
    shown = " ".join(redact_argv(argv, env))
    for secret in ("pg-s3cret-value", "svc-key-value-42", "api-key-value-9", "adm-value-77"):
        assert secret not in shown, shown
    path = write_repro(tmp_path, argv=argv, env=env, host="127.0.0.1", port=30000, request={"text": "hi"},
                       note="a run with pg-s3cret-value in its reason")
    text = path.read_text()
    for secret in ("pg-s3cret-value", "svc-key-value-42", "api-key-value-9", "adm-value-77"):
        assert secret not in text, (secret, text)
    assert ': "${PGPASSWORD:?' in text and ': "${SERVICE_KEY:?' in text  # asked for, not carried
    assert '"$SGLANG_REPRO_SECRET_API_KEY"' in text and "--admin-api-key=\"$SGLANG_REPRO_SECRET_ADMIN_API_KEY\"" in text
    assert '"$PGPASSWORD"' in text  # the value was also a flag's: the script passes the variable
    # Registered by write_repro: every later artifact of this process drops them too (result.json, the store).
    assert "pg-s3cret-value" not in redact_log(json.dumps({"reason": "failed with pg-s3cret-value"}))


def test_store_record_and_reason_carry_no_secret_value(tmp_path: Path) -> None:
    from harness.store.store import new_batch, open_store
    from harness.util.redact import register_secrets
    from tests.helpers import make_record

    register_secrets({"store-secret-123456"})
    record = make_record("crash", reason="server said store-secret-123456 is wrong")
    with open_store(str(tmp_path / "s.db")) as store:
        store.record(record, new_batch("run"))
        (back,) = store.records()
        frame = store.runs_frame()
    assert "store-secret-123456" not in back.reason and "store-secret-123456" not in " ".join(frame["reason"])


def test_store_urls_hide_the_password_in_every_form() -> None:
    for url, secret in (("postgresql://u:pw-1@h/db", "pw-1"), ("postgresql://u@h/db?password=pw-2", "pw-2"),
                        ("postgresql://u@h/db?sslpassword=pw-3&sslmode=require", "pw-3"),
                        ("sqlite://user:pw-4@/tmp/x.db", "pw-4"), ("postgresql://u:pw-5@h:notaport/db", "pw-5")):
        shown = redact_url(url)
        assert secret not in shown and "***" in shown, shown


# --- item 7: bad input is refused before work --------------------------------------------------------------


def test_bad_stores_arguments_and_specs_are_refused_before_any_run(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    base = ["run", str(SEED), "--case", CASE, "--out", str(out)]
    for argv, why in (
        ([*base, "--build", "sim:post-fix", "--store", "mysql://u@h/db"], "unsupported database"),
        ([*base, "--build", "sim:post-fix", "--store", "postgresql://u:pw@h:notaport/db"], "not a URL"),
        ([*base, "--build", "sim:post-fix,step-cost-ms=-5", "--no-store"], "step-cost-ms"),
        ([*base, "--build", "sim:post-fix,draft-agreement=2", "--no-store"], "draft-agreement"),
        ([*base, "--build", "sim:post-fix,seed=1e23", "--no-store"], "seed"),
        ([*base, "--build", "sim:post-fix,step-cost-ms=nan", "--no-store"], "finite"),
        ([*base, "--build", "sim:post-fix,device=cuda", "--no-store"], "no CUDA GPU"),
        (["minimize", str(SEED), "--case", CASE, "--build", "sim:pre-fix", "--budget", "inf", "--no-store"], "finite"),
        (["bisect", str(SEED), "--case", CASE, "--repo", str(REPO), "--good", "HEAD~1", "--bad", "HEAD",
          "--metric", "nope", "--no-cache", "--out", str(out)], "not a metric"),
        (["bisect", str(SEED), "--case", CASE, "--repo", str(REPO), "--good", "HEAD~1", "--bad", "HEAD",
          "--signature", "unknown", "--no-cache", "--out", str(out)], "not in the catalogue"),
    ):
        if "device=cuda" in " ".join(argv):
            os.environ["SGLANG_REPRO_GPU_INVENTORY"] = ""  # this machine, as the test sees it: no GPU
        try:
            assert why in _refused(argv, capsys), argv
        finally:
            os.environ.pop("SGLANG_REPRO_GPU_INVENTORY", None)
    assert not out.exists()  # no run folder, no bisect report: nothing started


# --- item 9: empty and odd paths ---------------------------------------------------------------------------


def test_empty_values_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--out", ""],
                 ["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--store", ""],
                 ["run", str(SEED), "--case", CASE, "--build", "sim:post-fix", "--out="],
                 ["validate", ""], ["store", "import", " ", "--store", str(tmp_path / "s.db")],
                 ["dashboard", "-o", ""]):
        assert "empty" in _refused(argv, capsys), argv
    assert list(tmp_path.iterdir()) == []  # nothing written in the current folder
