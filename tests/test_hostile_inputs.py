"""Hostile inputs end in one located line and exit 2, quickly, with nothing started or created.

Each case here once crashed, hung or exhausted the loader (issue 10, items 3, 4, 5 and 7): special
files, control characters, bad tagged scalars, alias bombs, huge matrices, values that validated
and then broke the run, unusable output folders, an empty ``--case``, secrets printed by ``list``.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.records.artifacts import write_repro
from harness.scenario import load_file
from harness.util.net import url_for

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
LINE = re.compile(r"^\S.*:\d+:\d+: ")

VALID = textwrap.dedent(
    """\
    name: tiny
    description: a tiny valid scenario
    server:
      model: google/gemma-4-E4B-it
      args:
        speculative-algorithm: NEXTN
    workload:
      requests: 2
      prompt: {tokens: 8}
      max_new_tokens: 4
    builds:
      before: {spec: "pip:sglang==0.5.14", sim: pre-fix}
      after: {spec: "pip:sglang==0.5.15", sim: post-fix}
    """
)

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([prev] * 9)}]\n"
    for name, prev in zip("bcdefghij", ["*a"] + [f"*{c}" for c in "bcdefghi"], strict=True)
)
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + LAUGHS


def _limit_child() -> None:  # runs in the child before exec: 2 GiB of address space, 30 s of CPU
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (30, 30))


def cli(*args: str, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """``sglang-repro ARGS`` in a bounded child: (exit code, stderr, seconds)."""
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, preexec_fn=_limit_child,
    )
    return proc.returncode, proc.stderr, time.monotonic() - began


def validate_lines(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``validate PATH`` in-process: the error lines, after checking the exit code and their form."""
    began = time.process_time()
    rc = main(["validate", str(path)])
    spent = time.process_time() - began
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines
    assert "Traceback" not in err
    assert all(len(line) < 1000 for line in lines), max(map(len, lines))
    assert spent < 5, f"{spent:.1f} s of CPU"
    return lines


# --- item 3: the loader is bounded ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "folder", "dev-zero"])
def test_special_files_are_one_line_never_read(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        target = tmp_path / "s.yaml"
        os.mkfifo(target)
    elif kind == "folder":
        target = tmp_path / "s.yaml"
        target.mkdir()
    else:
        target = Path("/dev/zero")
    # `run` loads exactly the file named (validate would search a folder); a FIFO used to hang here.
    rc, err, _ = cli("run", str(target), "--build", "sim:post-fix", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert rc == 2, err
    (line,) = err.splitlines()
    assert line.startswith(f"{target}:1:1: ") and "not a regular file" in line and "a scenario is a regular" in line, line
    assert not (tmp_path / "r").exists()


def test_size_is_checked_before_reading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:  # sparse: 4 GiB that are never read
        f.truncate(4 << 30)
    (line,) = validate_lines(big, capsys)
    assert f"{4 << 30} bytes, over the {1 << 20}-byte cap for a scenario file" in line


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("name: tiny\x01\n", "1:11", "U+0001"),
        (VALID.replace("requests: 2", "requests: !!float abc"), "8:13", "!!float"),
        (VALID.replace("requests: 2", "requests: !!int ''"), "8:13", "!!int"),
        (VALID.replace("requests: 2", "requests: !!timestamp nope"), "8:13", "!!timestamp"),
        (VALID.replace("requests: 2", "requests: !!bool maybe"), "8:13", "!!bool"),
        (VALID.replace("requests: 2", "requests: 0x" + "f" * 5000), "8:13", "out of range"),
        (VALID.replace("requests: 2", "requests: !!python/object:os.system x"), "8:13", "only plain YAML"),
        (VALID.replace("requests: 2", "requests: !!set {a, b}"), "8:13", "only plain YAML"),
        (VALID.replace("model: google/gemma-4-E4B-it", 'model: "\\0google/gemma-4-E4B-it"'), "4:10", "NUL"),
        (VALID + "a: &a [*a]\n", "", "nested more than"),
        ("x: " + "[" * 300_000 + "]" * 300_000 + "\n", "1:35", "nested more than 32 levels"),
        ("x: [" + ", ".join(["1"] * 300_000) + "]\n", "", "more than 20000 keys and values"),
    ],
)
def test_bad_yaml_is_one_located_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                      where: str, words: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    (line,) = validate_lines(p, capsys)
    assert words in line, line
    assert f"s.yaml:{where}:" in line if where else True


def test_billion_laughs_stops_at_the_node_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "laughs.yaml"
    p.write_text(LAUGHS)
    assert p.stat().st_size < 500
    (line,) = validate_lines(p, capsys)
    assert "values once aliases (*name) are expanded" in line


def test_alias_bomb_inside_prompt_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    anchors = "x-a: &a [1, 2, 3, 4, 5, 6, 7, 8]\n" + "".join(
        f"x-{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    text = anchors + VALID.replace("prompt: {tokens: 8}", "prompt: {tokens: *h}")
    p = tmp_path / "bomb.yaml"
    p.write_text(text)
    assert p.stat().st_size < 3000
    (line,) = validate_lines(p, capsys)
    assert "values once aliases" in line and "x-" in line


def test_huge_matrix_names_its_size_the_limit_and_how_to_raise_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    axes = "".join(f"  a{i}:\n    field: workload.seed_{i}\n    values: [{', '.join(map(str, range(10)))}]\n"
                   for i in range(7))
    p = tmp_path / "m.yaml"
    p.write_text(VALID + "matrix:\n" + axes)
    (line,) = validate_lines(p, capsys)
    assert "10000000 cases" in line and "limit of 256" in line and "SGLANG_REPRO_MAX_CASES=10000000" in line
    assert line.startswith(f"{p}:") and ": matrix: " in line

    small = tmp_path / "small.yaml"
    small.write_text(VALID + "matrix:\n  t:\n    field: workload.prompt.tokens\n    values: [1, 2, 3, 4]\n")
    monkeypatch.setenv("SGLANG_REPRO_MAX_CASES", "3")
    assert "limit of 3" in validate_lines(small, capsys)[0]
    monkeypatch.setenv("SGLANG_REPRO_MAX_CASES", "4")
    assert len(load_file(small).cases) == 4


def test_long_bad_values_show_a_short_excerpt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(VALID.replace("sim: pre-fix", "sim: " + "x" * 200_000)
                 + "matrix:\n  m:\n    " + "k" * 100_000 + ": 1\n")
    lines = validate_lines(p, capsys)
    assert all(len(line) < 400 for line in lines), [len(line) for line in lines]


# --- item 4: values that validated and then crashed the run ----------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("speculative-algorithm: NEXTN", 'speculative-algorithm: "NE\\0XTN"', "NUL"),
        ("speculative-algorithm: NEXTN", 'speculative-algorithm: ["a", "\\ud800"]', "surrogate U+D800"),
        ("args:", 'env: {HF_HOME: "/x\\0y"}\n  args:', "NUL"),
        ("args:", 'env: {HF_HOME: "\\udcff"}\n  args:', "surrogate U+DCFF"),
        ("args:", "host: $(touch x)\n  args:", "is not a host"),
        ("args:", "host: '[::1]'\n  args:", "without brackets"),
        ("args:", "host: 1.2.3\n  args:", "is not a host"),
        ("args:", "host: a b\n  args:", "is not a host"),
        ("args:", 'host: "localhost\\n"\n  args:', "is not a host"),
        ("speculative-algorithm: NEXTN", '"tp-size\\n": 4', "is not a flag name"),
        ("args:", 'env: {"HF_HOME\\n": x}\n  args:', "is not valid"),
        ("speculative-algorithm: NEXTN", "speculative-algorithm: " + "N" * 200_000, "holds at most 131071"),
    ],
)
def test_values_no_process_can_take_are_validation_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, words: str
) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(VALID.replace(old, new, 1))
    (line,) = validate_lines(p, capsys)
    assert words in line, line
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "fe80::1%lo", "localhost", "my-host.example.org"])
def test_hosts_that_are_hosts_validate(tmp_path: Path, host: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(VALID.replace("args:", f"host: '{host}'\n  args:", 1))
    (case,) = load_file(p).cases
    assert case.scenario.server.host == host


def test_urls_bracket_ipv6_hosts() -> None:
    assert url_for("127.0.0.1", 30000, "/health") == "http://127.0.0.1:30000/health"
    assert url_for("::1", 30000, "/generate") == "http://[::1]:30000/generate"
    assert url_for("::1", 30000) == "http://[::1]:30000"
    assert url_for("localhost", "$PORT", "health") == "http://localhost:$PORT/health"


def test_repro_script_quotes_every_value(tmp_path: Path) -> None:
    """Run the written script: hostile values must stay data. The server "exits" at once (``true``),
    so the script stops at its health loop without any network."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    hostile = "$(touch pwned-{n}); `touch pwned-{n}b`; touch pwned-{n}c"
    path = write_repro(
        run_dir,
        argv=["true", hostile.format(n=1), "--host", "::1", "--port", "31234"],
        env={"SAFE": hostile.format(n=2), "BAD NAME": "x", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"},
        host="$(touch pwned-3)",  # not a valid host: write_repro must not trust validation alone
        port=31234,
        request={"text": hostile.format(n=4)},
        note="a note\ntouch pwned-5\r\ntouch pwned-6",
    )
    text = path.read_text()
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in text
    # The secret is asked for from the environment (issue 24): without it the script stops at once ...
    proc = subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert proc.returncode != 0 and "HF_TOKEN is a secret" in proc.stderr, proc.stderr
    # ... and with it, runs to the health loop.
    proc = subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HF_TOKEN": "hf_x"})
    assert proc.returncode == 1 and "server exited" in proc.stderr, proc.stderr
    assert not list(tmp_path.rglob("pwned*")), sorted(p.name for p in tmp_path.rglob("pwned*"))

    six = write_repro(run_dir, argv=["true", "--port", "31234"], env={}, host="::1", port=31234,
                      request=None, note="ipv6")
    assert "HOST='[::1]'" in six.read_text() and 'http://$HOST:$PORT/health' in six.read_text()


# --- item 5: the output folder is checked before anything starts -----------------------------------


@pytest.mark.parametrize("kind", ["file", "under-file", "proc", "long-name"])
def test_unusable_out_is_one_line_before_anything_starts(tmp_path: Path, kind: str,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    out = {"file": a_file, "under-file": a_file / "reports", "proc": Path("/proc/sys/sglang-repro-reports"),
           "long-name": tmp_path / ("x" * 300)}[kind]
    monkeypatch.setenv("SGLANG_REPRO_REPORTS", str(tmp_path / "default-reports"))
    before = sorted(tmp_path.rglob("*"))
    for command in ("run", "compare"):
        extra = ["--build", "sim:post-fix"] if command == "run" else ["--reference"]
        began = time.monotonic()
        rc = main([command, str(SEED), *extra, "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2, err
        (line,) = err.splitlines()
        assert f"--out {out}" in line, line
        assert time.monotonic() - began < 10  # nothing was started: no server start-up in there
    assert sorted(tmp_path.rglob("*")) == before
    assert a_file.read_text() == "keep me\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a folder without write permission")
def test_out_without_permission_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    rc, err, _ = cli("run", str(SEED), "--build", "sim:post-fix", "--out", str(locked / "r"), cwd=tmp_path)
    assert rc == 2 and "no permission" in err and len(err.splitlines()) == 1, err


# --- item 7: small ones -----------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["", " ", ",", "path=eager,"])
def test_empty_case_is_an_error_naming_the_cases(tmp_path: Path, pattern: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", str(SEED), "--case", pattern, "--build", "sim:post-fix", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2, err
    (line,) = err.splitlines()
    assert "tokens=276,path=eager" in line and "empty" in line, line
    assert not (tmp_path / "r").exists()


def test_list_never_prints_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, token = "sk-live-0123456789abcdefghijkl", "s3cret-value-42"
    p = tmp_path / "s.yaml"
    p.write_text(VALID.replace("args:", f"env: {{MY_API_KEY: {token}, OTHER: plain}}\n  args:\n"
                                        f"    api-key: {key}", 1))
    for fmt in ("text", "json"):
        assert main(["list", str(p), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert key not in out and token not in out, out
        assert "--api-key" in out and "<redacted>" in out
    assert main(["list", str(p), "--format", "json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described[0]["env"] == {"MY_API_KEY": "<redacted>", "OTHER": "plain"}


def test_one_problem_in_every_case_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = ("matrix:\n  a:\n    field: workload.prompt.seed\n    values: [1, 2, 3, 4]\n"
              "  b:\n    field: workload.max_new_tokens\n    values: [1, 2, 3, 4]\n  c:\n    x: {x.y: 1}\n")
    p = tmp_path / "s.yaml"
    p.write_text(VALID + matrix)
    (line,) = validate_lines(p, capsys)
    assert line.endswith("[16 cases: a=1,b=1,c=x; a=1,b=2,c=x; a=1,b=3,c=x; ...]"), line
