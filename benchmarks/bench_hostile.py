"""The hostile probe of issue 37 as a benchmark: how many of its tries does a checkout's CLI survive?

Each try is one real ``python -m harness ...`` subprocess (the CLI is the stable interface, so the same tries run
against any checkout: ``--checkout PATH`` puts that checkout first on ``PYTHONPATH``) with a class of hostile
input: links under output folders and stores, dangling links, fixtures outside their roots, FIFOs, huge sparse
files, random bytes, deep YAML and JSON, billion laughs, NUL, lone surrogates, secrets in argv, env and URLs,
hostile shell values in ci-matrix, a closed stdout, a full disk (a tmpfs) and a store on a read-only bind mount
(both root only, else the class is skipped with its reason), catastrophic regular expressions, unbounded arguments,
interrupts, hung database clients.

A try is judged by the README's promise: the right exit code; on an error, one line on stderr; no traceback;
nothing written outside (a link's target, the folder it points to, a victim file); no secret kept (stdout,
stderr, every file the command wrote); no process left (every child carries the try's mark in its
environment); within its bound (a try past its bound, or past 3 GB of memory, is killed and failed).

    .venv/bin/python benchmarks/bench_hostile.py --out reports/benchmarks/hostile.json
    git worktree add --detach /tmp/old 6a5666f
    .venv/bin/python benchmarks/bench_hostile.py --checkout /tmp/old --out reports/benchmarks/hostile-old.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as `python benchmarks/bench_hostile.py`: the records are built with this one
    sys.path.insert(0, str(REPO))
MARK = "SGLANG_REPRO_BENCH_HOSTILE_TRY"
MEMORY_CAP = 3 << 30  # a try past this (its process tree's RSS) is killed: `schema --indent 999999999` took 10 GB
SEED_REL = "scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml"
CASE = "tokens=276,path=eager"
SECRET = "hf_benchhostilesecret0123456789"
KEY = "sk-benchhostilekey0123456789"
PW = "s3cr3tpwbench"
BEARER = "tokvaluebench987654321"  # no shape of its own (not sk-..., hf_...): found only as a bearer's value
IMPORT_SKIPS = (1, 2)  # `store import` skips a folder it cannot read, says so, and exits 1 when none was imported


@dataclass
class Spec:
    """One try: the argv after ``python -m harness``, what it must do, and how it is driven."""

    argv: list[str]
    codes: tuple[int, ...]
    bound_s: float = 10.0  # a quick command's: interpreter, imports and refusal on 2 busy cores (idle: ~1-2 s)
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    one_line: bool = True  # on exit 2 (bad input) or 3 (infra): exactly one line on stderr
    outside: list[Path] = field(default_factory=list)  # must end absent, or an empty folder
    unchanged: list[Path] = field(default_factory=list)  # files whose bytes must not change
    secrets: list[str] = field(default_factory=list)  # in no output and no file under `scan`
    scan: list[Path] = field(default_factory=list)
    close_stdout: bool = False  # `... | head` that has had enough before the first byte
    signal_after: tuple[str, int, int] | None = None  # (marker on stdout or stderr, its count, SIGINTs to send)
    signal_at_s: float | None = None  # one SIGINT this long after the start
    check: Callable[[Ran], list[str]] | None = None  # the try's own checks: problems, or []


@dataclass
class Ran:
    code: int | None
    out: str
    err: str
    took_s: float
    killed: str | None  # why the runner killed it (bound, memory), or None


@dataclass
class Work:
    checkout: Path
    root: Path  # this try's folder
    cache: Path  # shared by the tries: the builds' environments
    _exits: list[Any] = field(default_factory=list)  # what the try entered (a tmpfs, a listener), closed after it

    def enter(self, cm: Any) -> Any:
        value = cm.__enter__()
        self._exits.append(cm)
        return value

    def close(self) -> None:
        for cm in reversed(self._exits):
            cm.__exit__(None, None, None)

    @property
    def seed(self) -> Path:
        return self.checkout / SEED_REL

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path


TRIES: list[tuple[str, str, Callable[[Work], Spec]]] = []


def trial(klass: str) -> Callable[[Callable[[Work], Spec]], Callable[[Work], Spec]]:
    def register(fn: Callable[[Work], Spec]) -> Callable[[Work], Spec]:
        TRIES.append((klass, fn.__name__.removeprefix("t_"), fn))
        return fn
    return register


# --- inputs ---------------------------------------------------------------------------------------------------


def _scenario(w: Work, name: str = "s.yaml", **changes: Any) -> Path:
    data = yaml.safe_load(w.seed.read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = w.folder("sc") / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _fixture_scenario(w: Work, fixture: str) -> Path:
    return _scenario(w, workload__prompt={"source": "fixture", "fixture": fixture, "tokens": 8})


def _record_folder(w: Work, run_id: str, **fields: Any) -> Path:
    """A run folder as another machine (or a hand) wrote it: result.json only."""
    from harness.records.outcome import Outcome
    from harness.records.run_record import BuildRef, CaseRef, HostInfo, RunRecord, ScenarioRef, ServerInfo, record_to_dict

    record = RunRecord(
        run_id=run_id, scenario=ScenarioRef("bench-hostile", "scenarios/bench-hostile.yaml"),
        case=CaseRef("tokens=276", {"tokens": 276}),
        build=BuildRef(kind="sim", spec="sim:post-fix", version="sim-0.1", commit=None, role="after",
                       reference_server=True),
        trial=0, outcome=Outcome.PASS, signature=None, reason=fields.pop("reason", "all checks held"),
        metrics={"accept_length": 1.8, "output_throughput_tok_s": 200.0},
        server=ServerInfo(argv=("python", "-m", "harness.sim.server", "--port", "30000")),
        host=HostInfo(hostname="ci-1", cpu="test-cpu", platform="linux"),
        started_at="2026-11-01T00:00:00+00:00", duration_s=1.5, harness_version="0.1.0",
        artifacts=fields.pop("artifacts", ""), phase=None, experiment="abc123",
    )
    data = record_to_dict(record)
    if "argv" in fields:
        data["server"]["argv"] = fields.pop("argv")
    if "env" in fields:
        data["server"]["env"] = fields.pop("env")
    folder = w.folder("records") / run_id
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))
    return folder.parent


def _store_with_a_record(w: Work) -> Path:
    """A store the checkout itself filled (its own schema), with one imported record."""
    store = w.root / "filled.db"
    subprocess.run([sys.executable, "-m", "harness", "store", "import", str(_record_folder(w, "r1")), "--store",
                    str(store)], env=_env(w, "setup"), cwd=w.root, capture_output=True, timeout=120, check=True)
    return store


def _fifo(w: Work, name: str = "fifo") -> Path:
    path = w.root / name
    os.mkfifo(path)
    return path


def _sparse(path: Path, size: int = 50 << 30) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)  # no disk used
    return path


def _rows(db: Path) -> list[str]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return [o for (o,) in conn.execute("SELECT outcome FROM runs")]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


# --- links: nothing written through one -----------------------------------------------------------------------


def _linked_out(w: Work, inside: str) -> tuple[Path, Path]:
    elsewhere, out = w.folder("elsewhere"), w.folder("o")
    (out / inside).symlink_to(elsewhere)
    return out, elsewhere


@trial("links")
def t_run_out_runs_is_a_link(w: Work) -> Spec:
    out, elsewhere = _linked_out(w, "runs")
    return Spec(["run", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--trials", "1", "--out", str(out),
                 "--store", str(w.root / "s.db")], (2,), bound_s=60, outside=[elsewhere])


@trial("links")
def t_compare_out_compare_is_a_link(w: Work) -> Spec:
    out, elsewhere = _linked_out(w, "compare")
    return Spec(["compare", str(w.seed), "--case", CASE, "--before", "sim:pre-fix", "--after", "sim:post-fix",
                 "--trials", "1", "--out", str(out), "--store", str(w.root / "s.db")], (2,), bound_s=60,
                outside=[elsewhere])


@trial("links")
def t_run_out_is_a_link(w: Work) -> Spec:
    real = w.folder("real")
    (w.root / "link").symlink_to(real)
    return Spec(["run", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--out", str(w.root / "link"),
                 "--no-store"], (2,), bound_s=60, outside=[real])


@trial("links")
def t_store_is_a_dangling_link(w: Work) -> Spec:
    (w.root / "s.db").symlink_to(w.root / "target.db")
    return Spec(["store", "alerts", "--store", str(w.root / "s.db")], (2,), outside=[w.root / "target.db"])


@trial("links")
def t_store_is_a_link_to_a_store(w: Work) -> Spec:
    target = w.root / "target.db"
    sqlite3.connect(target).close()
    (w.root / "s.db").symlink_to(target)
    return Spec(["store", "alerts", "--store", str(w.root / "s.db")], (2,), unchanged=[target])


@trial("links")
def t_run_default_store_is_a_dangling_link(w: Work) -> Spec:
    out = w.folder("o")
    (out / "results.db").symlink_to(w.root / "target.db")
    return Spec(["run", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--out", str(out)], (2,),
                bound_s=60, outside=[w.root / "target.db"])


@trial("links")
def t_store_import_into_a_dangling_link(w: Work) -> Spec:
    records = _record_folder(w, "r1")
    (w.root / "s.db").symlink_to(w.root / "target.db")
    return Spec(["store", "import", str(records), "--store", str(w.root / "s.db")], (2,),
                outside=[w.root / "target.db"])


@trial("links")
def t_dashboard_index_is_a_link(w: Work) -> Spec:
    store = _store_with_a_record(w)
    site = w.folder("site")
    victim = w.root / "victim"
    victim.write_text("keep")
    (site / "index.html").symlink_to(victim)

    def only_the_link(_: Ran) -> list[str]:
        names = sorted(p.name for p in site.iterdir())
        return [] if names == ["index.html"] else [f"pages written before the refusal: {names}"]
    return Spec(["dashboard", "--store", str(store), "-o", str(site)], (2,), bound_s=60, unchanged=[victim],
                check=only_the_link)


@trial("links")
def t_prepare_cache_dir_is_a_dangling_link(w: Work) -> Spec:
    (w.root / "cache").symlink_to(w.root / "missing")
    return Spec(["prepare", "sim:post-fix", "--cache-dir", str(w.root / "cache")], (2,),
                outside=[w.root / "missing"])


@trial("links")
def t_prepare_cache_env_is_a_dangling_link(w: Work) -> Spec:
    (w.root / "cache").symlink_to(w.root / "missing")
    return Spec(["prepare", "sim:post-fix"], (2,), env={"SGLANG_REPRO_CACHE": str(w.root / "cache")},
                outside=[w.root / "missing"])


# --- fixtures outside their roots -----------------------------------------------------------------------------


def _fixture_try(w: Work, fixture: str) -> Spec:
    return Spec(["validate", str(_fixture_scenario(w, fixture))], (2,), secrets=[SECRET],
                env={"HF_TOKEN": SECRET})


@trial("fixture-outside")
def t_fixture_etc_passwd(w: Work) -> Spec:
    return _fixture_try(w, "/etc/passwd")


@trial("fixture-outside")
def t_fixture_dotdot_etc_passwd(w: Work) -> Spec:
    return _fixture_try(w, "../../../../../../../../etc/passwd")


@trial("fixture-outside")
def t_fixture_proc_self_environ(w: Work) -> Spec:
    return _fixture_try(w, "/proc/self/environ")


@trial("fixture-outside")
def t_fixture_link_out_of_the_folder(w: Work) -> Spec:
    (w.root / "secret.txt").write_text(f"HF_TOKEN={SECRET}")
    (w.folder("sc") / "prompt.txt").symlink_to(w.root / "secret.txt")
    return _fixture_try(w, "prompt.txt")


@trial("fixture-outside")
def t_run_with_fixture_proc_self_environ(w: Work) -> Spec:
    spec = _fixture_try(w, "/proc/self/environ")
    out = w.root / "o"
    spec.argv = ["run", spec.argv[1], "--case", CASE, "--build", "sim:post-fix", "--out", str(out), "--no-store"]
    spec.bound_s, spec.scan = 60, [out]
    return spec


# --- FIFOs ----------------------------------------------------------------------------------------------------


@trial("fifo")
def t_validate_a_fifo(w: Work) -> Spec:
    return Spec(["validate", str(_fifo(w, "s.yaml"))], (2,))


@trial("fifo")
def t_triage_a_fifo(w: Work) -> Spec:
    return Spec(["triage", str(_fifo(w, "server.log"))], (2,))


@trial("fifo")
def t_prepare_cache_dir_a_fifo(w: Work) -> Spec:
    return Spec(["prepare", "sim:post-fix", "--cache-dir", str(_fifo(w))], (2,))


@trial("fifo")
def t_bisect_cleanup_repo_a_fifo(w: Work) -> Spec:
    return Spec(["bisect", "--cleanup", "--repo", str(_fifo(w))], (2,))


@trial("fifo")
def t_metrics_result_json_a_fifo(w: Work) -> Spec:
    run = w.folder("run")
    os.mkfifo(run / "result.json")
    return Spec(["metrics", str(run)], (2,))


@trial("fifo")
def t_libpq_passfile_a_fifo_in_the_url(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", f"postgresql://u@127.0.0.1:1/db?passfile={_fifo(w)}"], (2,))


@trial("fifo")
def t_libpq_pgpassfile_a_fifo(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", "postgresql://u@127.0.0.1:1/db"], (2,),
                env={"PGPASSFILE": str(_fifo(w))})


@trial("fifo")
def t_libpq_pgservicefile_a_fifo(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", "postgresql://u@127.0.0.1:1/db?service=x"], (2,),
                env={"PGSERVICEFILE": str(_fifo(w))})


# --- huge and sparse ------------------------------------------------------------------------------------------


@trial("huge")
def t_validate_a_sparse_50gb_scenario(w: Work) -> Spec:
    return Spec(["validate", str(_sparse(w.root / "s.yaml"))], (2,))


@trial("huge")
def t_validate_a_sparse_50gb_fixture(w: Work) -> Spec:
    _sparse(w.folder("sc") / "big.txt")
    return Spec(["validate", str(_fixture_scenario(w, "big.txt"))], (2,))


@trial("huge")
def t_triage_a_sparse_50gb_log(w: Work) -> Spec:
    return Spec(["triage", str(_sparse(w.root / "server.log"))], (2,))


@trial("huge")
def t_store_import_a_sparse_result_json(w: Work) -> Spec:
    folder = w.folder("records/r1")
    _sparse(folder / "result.json")
    return Spec(["store", "import", str(folder.parent), "--store", str(w.root / "s.db")], IMPORT_SKIPS)


# --- random bytes, deep YAML and JSON, billion laughs, NUL, lone surrogates -----------------------------------


def _bytes_file(w: Work, name: str, data: bytes) -> Path:
    path = w.root / name
    path.write_bytes(data)
    return path


@trial("random-bytes")
def t_validate_random_bytes(w: Work) -> Spec:
    return Spec(["validate", str(_bytes_file(w, "s.yaml", random.Random(37).randbytes(65536)))], (2,))


@trial("random-bytes")
def t_metrics_random_result_json(w: Work) -> Spec:
    run = w.folder("run")
    (run / "result.json").write_bytes(random.Random(38).randbytes(65536))
    return Spec(["metrics", str(run)], (2,))


@trial("random-bytes")
def t_store_import_random_result_json(w: Work) -> Spec:
    folder = w.folder("records/r1")
    (folder / "result.json").write_bytes(random.Random(39).randbytes(65536))
    return Spec(["store", "import", str(folder.parent), "--store", str(w.root / "s.db")], IMPORT_SKIPS)


@trial("deep")
def t_validate_100k_deep_yaml(w: Work) -> Spec:
    return Spec(["validate", str(_bytes_file(w, "s.yaml", b"[" * 100_000 + b"]" * 100_000))], (2,))


@trial("deep")
def t_validate_100k_deep_yaml_mapping(w: Work) -> Spec:
    return Spec(["validate", str(_bytes_file(w, "s.yaml", b"{a: " * 100_000 + b"1" + b"}" * 100_000))], (2,))


@trial("deep")
def t_metrics_100k_deep_json(w: Work) -> Spec:
    run = w.folder("run")
    (run / "result.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    return Spec(["metrics", str(run)], (2,))


@trial("deep")
def t_store_import_100k_deep_json(w: Work) -> Spec:
    folder = w.folder("records/r1")
    (folder / "result.json").write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    return Spec(["store", "import", str(folder.parent), "--store", str(w.root / "s.db")], IMPORT_SKIPS)


BILLION_LAUGHS = "\n".join(
    ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    + ["version: *i"]) + "\n"


@trial("billion-laughs")
def t_validate_billion_laughs(w: Work) -> Spec:
    return Spec(["validate", str(_bytes_file(w, "s.yaml", BILLION_LAUGHS.encode()))], (2,))


@trial("billion-laughs")
def t_list_billion_laughs(w: Work) -> Spec:
    return Spec(["list", str(_bytes_file(w, "s.yaml", BILLION_LAUGHS.encode()))], (2,))


@trial("nul")
def t_validate_a_nul_in_the_scenario(w: Work) -> Spec:
    text = w.seed.read_bytes().replace(b"description:", b"description: a\x00b\ndescription_:", 1)
    return Spec(["validate", str(_bytes_file(w, "s.yaml", text))], (2,))


@trial("nul")
def t_triage_a_log_of_nuls(w: Work) -> Spec:
    return Spec(["triage", str(_bytes_file(w, "server.log", b"\x00" * 100_000))], (0, 2))


@trial("lone-surrogate")
def t_validate_a_lone_surrogate_in_the_file(w: Work) -> Spec:
    text = w.seed.read_bytes().replace(b"description:", b"description: \xed\xa0\x80 #", 1)
    return Spec(["validate", str(_bytes_file(w, "s.yaml", text))], (2,))


@trial("lone-surrogate")
def t_validate_a_lone_surrogate_in_argv(w: Work) -> Spec:
    name = os.fsdecode(str(w.root).encode() + b"/\xed\xa0\x80.yaml")
    return Spec(["validate", name], (2,))


@trial("lone-surrogate")
def t_run_case_with_a_lone_surrogate(w: Work) -> Spec:
    return Spec(["run", str(w.seed), "--case", os.fsdecode(b"tokens=\xed\xa0\x80"), "--build", "sim:post-fix",
                 "--no-store", "--out", str(w.root / "o")], (2,))


@trial("control-chars")
def t_validate_a_name_that_forges_a_line(w: Work) -> Spec:
    forged = w.root / "x\nFORGED.yaml:1:1: all good\x1b[2J"
    os.mkfifo(forged)

    def no_escape(ran: Ran) -> list[str]:
        return ["an escape sequence printed raw"] if "\x1b" in ran.err else []
    return Spec(["validate", str(forged)], (2,), check=no_escape)


# --- secrets --------------------------------------------------------------------------------------------------


@trial("secrets")
def t_store_import_keeps_no_api_key_from_argv(w: Work) -> Spec:
    records = _record_folder(w, "r1", argv=["python", "-m", "sglang.launch_server", "--api-key", KEY, "--port",
                                            "30000"], env={"HF_TOKEN": "<redacted>"})
    store = w.root / "s.db"
    return Spec(["store", "import", str(records), "--store", str(store)], (0,), secrets=[KEY], scan=[store])


@trial("secrets")
def t_store_import_redacts_a_repeated_bearer(w: Work) -> Spec:
    records = _record_folder(w, "r1", reason=f"HTTP 401 with Authorization: Bearer {BEARER}; retried {BEARER}")
    store = w.root / "s.db"
    return Spec(["store", "import", str(records), "--store", str(store)], (0,), secrets=[BEARER], scan=[store])


@trial("secrets")
def t_ci_matrix_job_store_with_a_password(w: Work) -> Spec:
    return Spec(["ci-matrix", str(w.seed), "--format", "github", "--job-store",
                 f"postgresql+psycopg://u:{PW}@db/x"], (2,), secrets=[PW])


@trial("secrets")
def t_ci_matrix_job_store_with_a_password_parameter(w: Work) -> Spec:
    return Spec(["ci-matrix", str(w.seed), "--format", "gitlab", "--job-store",
                 f"postgresql://u@db/x?password={PW}"], (2,), secrets=[PW])


@trial("secrets")
def t_store_url_with_an_at_in_the_password(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", f"postgresql://u:hun@{PW}@127.0.0.1:1/db"], (2, 3), secrets=[PW])


@trial("secrets")
def t_store_url_with_the_password_repeated(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", f"postgresql://u:{PW}@127.0.0.1:1/db?options=-c%20password%3D{PW}"],
                (3,), secrets=[PW])


@trial("secrets")
def t_store_libpq_keyword_string(w: Work) -> Spec:
    return Spec(["store", "alerts", "--store", f"host=127.0.0.1 password={PW} dbname=x"], (2,), secrets=[PW],
                scan=[w.root], cwd=w.root)


@trial("secrets")
def t_run_with_secrets_in_env_and_argv(w: Work) -> Spec:
    scenario = _scenario(w, server__args={**yaml.safe_load(w.seed.read_text())["server"].get("args", {}),
                                          "api-key": KEY})
    out = w.root / "o"
    return Spec(["run", str(scenario), "--case", CASE, "--build", "sim:post-fix", "--out", str(out), "--store",
                 str(out / "s.db"), "--no-progress"], (0, 1), bound_s=120, one_line=False,
                env={"HF_TOKEN": SECRET, "GITHUB_TOKEN": SECRET + "gh"}, secrets=[SECRET, KEY], scan=[out])


# --- hostile shell values in ci-matrix ------------------------------------------------------------------------


def _ci_try(w: Work, value: str, fmt: str) -> Spec:
    shell = w.folder("shell")

    def nothing_evaluated(ran: Ran) -> list[str]:
        if ran.code != 0:
            return []
        try:
            if fmt == "github":
                commands = [job["command"] for job in json.loads(ran.out)["include"]]
            else:
                commands = [m["COMMAND"] for m in yaml.safe_load(ran.out)["sglang-repro-nightly"]["parallel"]["matrix"]]
        except (ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
            return [f"unreadable matrix: {exc!r}"[:200]]
        prelude = 'sglang-repro() { printf "%s\\0" "$@" > words; }\n'
        problems = []
        for command in commands:
            script = prelude + (command if fmt == "github" else 'eval "$COMMAND"')
            subprocess.run(["bash", "-c", script], cwd=shell, env={**os.environ, "COMMAND": command},
                           capture_output=True, timeout=30, check=False)
            if (shell / "PWNED").exists():
                problems.append(f"the emitted command evaluated {value!r}")
                break
            words = (shell / "words").read_text().split("\0") if (shell / "words").exists() else []
            if "--build" not in words or words[words.index("--build") + 1] != value:
                problems.append(f"--build reached the job as {words[words.index('--build') + 1:][:1]!r}"
                                if "--build" in words else "no --build in the job's words")
                break
        return problems
    return Spec(["ci-matrix", str(w.seed), "--format", fmt, "--build", value], (0,), check=nothing_evaluated)


@trial("shell-values")
def t_ci_build_command_substitution(w: Work) -> Spec:
    return _ci_try(w, "$(touch PWNED)", "github")


@trial("shell-values")
def t_ci_build_backticks(w: Work) -> Spec:
    return _ci_try(w, "`touch PWNED`", "github")


@trial("shell-values")
def t_ci_build_semicolon(w: Work) -> Spec:
    return _ci_try(w, "x; touch PWNED", "github")


@trial("shell-values")
def t_ci_build_default_expansion_gitlab(w: Work) -> Spec:
    return _ci_try(w, "${X:-$(touch PWNED)}", "gitlab")


@trial("shell-values")
def t_ci_build_newline_gitlab(w: Work) -> Spec:
    return _ci_try(w, "a\ntouch PWNED", "gitlab")


# --- a closed stdout ------------------------------------------------------------------------------------------


@trial("broken-pipe")
def t_list_json_into_a_closed_pipe(w: Work) -> Spec:
    return Spec(["list", str(w.seed), "--format", "json"], (0,), close_stdout=True)


@trial("broken-pipe")
def t_ci_matrix_into_a_closed_pipe(w: Work) -> Spec:
    return Spec(["ci-matrix", str(w.seed), "--format", "github"], (0,), close_stdout=True)


@trial("broken-pipe")
def t_schema_into_a_closed_pipe(w: Work) -> Spec:
    return Spec(["schema"], (0,), close_stdout=True)


@trial("broken-pipe")
def t_validate_into_a_closed_pipe(w: Work) -> Spec:
    return Spec(["validate", str(w.seed)], (0,), close_stdout=True)


# --- a full disk ----------------------------------------------------------------------------------------------


@contextmanager
def _mounted(w: Work, fill: bool) -> Iterator[Path]:
    mount = w.folder("full")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], capture_output=True,
                   text=True, check=True)
    try:
        (mount / "filler").write_bytes(b"\0" * 170_000)
        if fill:
            with open(mount / "more", "wb", buffering=0) as fh:
                try:
                    while True:
                        fh.write(b"\0" * 4096)
                except OSError:
                    pass
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def full_disk_skip() -> str | None:
    """Why the full-disk class cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root: no tmpfs can be mounted"
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", tmp], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            return f"cannot mount a tmpfs: {done.stderr.strip()[:120]}"
        subprocess.run(["umount", "-l", tmp], check=False)
    return None


@trial("full-disk")
def t_run_out_on_a_full_disk(w: Work) -> Spec:
    healthy = w.folder("healthy")
    mount = w.enter(_mounted(w, fill=False))

    def reached_the_store(_: Ran) -> list[str]:
        rows = _rows(healthy / "s.db")
        return [] if rows == ["pass"] else [f"the healthy store holds {rows}, not the pass"]
    return Spec(["run", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--out", str(mount / "o"),
                 "--store", str(healthy / "s.db"), "--no-progress"], (3,), bound_s=120, check=reached_the_store)


def _full_export(w: Work, argv: list[str]) -> Spec:
    store = _store_with_a_record(w)
    mount = w.enter(_mounted(w, fill=True))
    return Spec([a.replace("FULL", str(mount)).replace("STORE", str(store)) for a in argv], (3,), bound_s=60)


@trial("full-disk")
def t_export_csv_onto_a_full_disk(w: Work) -> Spec:
    return _full_export(w, ["store", "export", "--store", "STORE", "--format", "csv", "-o", "FULL/x.csv"])


@trial("full-disk")
def t_export_parquet_onto_a_full_disk(w: Work) -> Spec:
    return _full_export(w, ["store", "export", "--store", "STORE", "--format", "parquet", "-o", "FULL/x.pq"])


@trial("full-disk")
def t_export_hud_onto_a_full_disk(w: Work) -> Spec:
    return _full_export(w, ["store", "export", "--store", "STORE", "--format", "hud", "-o", "FULL/x.json"])


@trial("full-disk")
def t_dashboard_onto_a_full_disk(w: Work) -> Spec:
    return _full_export(w, ["dashboard", "--store", "STORE", "-o", "FULL/d"])


# --- a store on a read-only mount ---------------------------------------------------------------------------


@contextmanager
def _read_only(w: Work, folder: Path) -> Iterator[Path]:
    """``folder`` seen through a read-only bind mount, as a read-only volume is: SQLite can make no -shm there."""
    ro = w.folder("ro")
    subprocess.run(["mount", "--bind", str(folder), str(ro)], capture_output=True, text=True, check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True, text=True, check=True)
        yield ro
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


def _read_only_store(w: Work) -> Path:
    store = _store_with_a_record(w)
    return w.enter(_read_only(w, store.parent)) / store.name


@trial("read-only-store")
def t_export_from_a_read_only_store(w: Work) -> Spec:
    out = w.root / "x.csv"

    def exported(_: Ran) -> list[str]:
        return [] if out.is_file() and "r1" in out.read_text() else ["no export of the stored run"]
    return Spec(["store", "export", "--store", str(_read_only_store(w)), "--format", "csv", "-o", str(out)], (0,),
                bound_s=60, one_line=False, check=exported)


@trial("read-only-store")
def t_dashboard_from_a_read_only_store(w: Work) -> Spec:
    site = w.root / "site"

    def built(_: Ran) -> list[str]:
        return [] if (site / "index.html").is_file() else ["no dashboard written"]
    return Spec(["dashboard", "--store", str(_read_only_store(w)), "-o", str(site)], (0,), bound_s=60, one_line=False,
                check=built)


# --- catastrophic regular expressions and unbounded arguments ------------------------------------------------


@trial("regex")
def t_triage_with_a_nested_repeat_catalogue(w: Work) -> Spec:
    catalogue = w.root / "signatures.yaml"
    catalogue.write_text(yaml.safe_dump({"version": 1, "signatures": [{
        "id": "evil", "title": "nested repeats", "kind": "bug", "upstream": ["https://example.org/x"],
        "message": "(a+)+$"}]}))
    log = w.root / "server.log"
    log.write_text("a" * 40 + "!\n")
    return Spec(["triage", str(log), "--catalogue", str(catalogue)], (2,), bound_s=10)


@trial("unbounded")
def t_schema_indent_999999999(w: Work) -> Spec:
    return Spec(["schema", "--indent", "999999999"], (2,))


def _heavy_matrix(w: Work) -> Path:
    data = yaml.safe_load(w.seed.read_text())
    data["description"] = "x" * 600_000
    data["matrix"] = {"a": {str(i): {"workload.requests": i + 1} for i in range(16)},
                      "b": {str(i): {"workload.concurrency": 1} for i in range(16)}}
    path = w.root / "heavy.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@trial("unbounded")
def t_validate_a_heavy_matrix(w: Work) -> Spec:
    return Spec(["validate", str(_heavy_matrix(w))], (2,), bound_s=20)


@trial("unbounded")
def t_list_a_heavy_matrix(w: Work) -> Spec:
    return Spec(["list", str(_heavy_matrix(w))], (2,), bound_s=20)


@trial("unbounded")
def t_store_ack_a_100kb_fingerprint(w: Work) -> Spec:
    store = _store_with_a_record(w)

    def short(ran: Ran) -> list[str]:
        return [] if len(ran.err) < 500 else [f"{len(ran.err)} characters on stderr: the argument echoed"]
    return Spec(["store", "ack", "f" * 100_000, "--store", str(store)], (2,), check=short)


# --- hung database clients ------------------------------------------------------------------------------------


@trial("hung-client")
def t_store_on_a_listener_that_never_answers(w: Work) -> Spec:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepted by the kernel, never answered
    w.enter(listener)
    port = listener.getsockname()[1]
    return Spec(["store", "alerts", "--store", f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=100"], (3,),
                bound_s=12)


# --- mistyped stores ------------------------------------------------------------------------------------------


def _typo(w: Work, action: list[str]) -> Spec:
    def nothing_created(_: Ran) -> list[str]:
        made = sorted(p.name for p in w.root.iterdir())
        return [] if made == [] else [f"created {made}"]
    return Spec(["store", *action, "--store", str(w.root / "typo.db")], (2,), check=nothing_created, cwd=w.root)


@trial("mistyped-store")
def t_store_alerts_on_a_mistyped_store(w: Work) -> Spec:
    return _typo(w, ["alerts"])


@trial("mistyped-store")
def t_store_ack_on_a_mistyped_store(w: Work) -> Spec:
    return _typo(w, ["ack", "abc"])


@trial("mistyped-store")
def t_store_export_on_a_mistyped_store(w: Work) -> Spec:
    return _typo(w, ["export", "--format", "csv", "-o", str(w.root.with_name(w.root.name + "-export") / "x.csv")])


@trial("mistyped-store")
def t_dashboard_on_a_mistyped_store(w: Work) -> Spec:
    site = w.root.with_name(w.root.name + "-site")

    def nothing_created(_: Ran) -> list[str]:
        made = sorted(p.name for p in w.root.iterdir())
        return [] if made == [] else [f"created {made}"]
    return Spec(["dashboard", "--store", str(w.root / "typo.db"), "-o", str(site)], (2,), check=nothing_created,
                cwd=w.root)


# --- issue 49 (round 4): pasted secrets, the wheel cache, text values, headers, error lines, triage's terminal ------

_MESSAGE = "RuntimeError: output with shape [1] doesn't match the broadcast shape [812]"


def _paste_with_secrets(w: Work, name: str = "pasted.txt") -> Path:
    path = w.root / name
    path.write_text("Traceback (most recent call last):\n"
                    f'  File "/x/sglang/srt/entrypoints/http_server.py", line 9, in launch  # --api-key {KEY}\n'
                    f"    launch(HF_TOKEN={SECRET}, headers={{'Authorization': 'Bearer {BEARER}'}})\n"
                    f"{_MESSAGE} --api-key {KEY} HF_TOKEN={SECRET} Authorization: Bearer {BEARER}\n")
    return path


@trial("pasted-secrets")
def t_triage_excerpt_of_a_paste_with_secrets(w: Work) -> Spec:
    return Spec(["triage", "--no-releases", "--excerpt", "--explain", str(_paste_with_secrets(w))], (0, 1),
                secrets=[KEY, SECRET, BEARER])


@trial("pasted-secrets")
def t_triage_json_of_a_paste_with_secrets(w: Work) -> Spec:
    return Spec(["triage", "--no-releases", "--format", "json", str(_paste_with_secrets(w))], (0, 1),
                secrets=[KEY, SECRET, BEARER])


@trial("pasted-secrets")
def t_triage_bless_of_a_paste_with_secrets(w: Work) -> Spec:
    fixtures = w.root / "fixtures"
    return Spec(["triage", "--no-releases", "--bless", str(_paste_with_secrets(w)), "--expect", "none", "--source",
                 "https://example.org/1", "--title", f"crash --api-key {KEY}", "--fixtures", str(fixtures)], (0, 1),
                secrets=[KEY, SECRET, BEARER], scan=[fixtures])


@trial("pasted-secrets")
def t_triage_excerpt_of_proc_self_environ(w: Work) -> Spec:
    return Spec(["triage", "--excerpt", "/proc/self/environ"], (2,), env={"HF_TOKEN": SECRET}, secrets=[SECRET])


def _real_wheel() -> Path | None:
    for root in (os.environ.get("SGLANG_REPRO_CACHE"), Path.home() / ".cache" / "sglang-repro"):
        if root:
            found = sorted(Path(root, "wheels").glob("sglang-0.5.14-*.whl"))
            if found:
                return found[0]
    return None


def _impostor_cache(w: Work, kind: str) -> dict[str, str]:
    """A cache whose wheels/ holds the real 0.5.14 wheel (a link to the one cached here) and, sorting first, an
    impostor under a 0.5.14 wheel's name: a FIFO, a link to /dev/zero, or a download cut short."""
    real = _real_wheel()
    if real is None:
        raise RuntimeError("no cached sglang 0.5.14 wheel here (python -m harness.contract.wheels 0.5.14 fetches it)")
    wheels = w.folder("cache/wheels")
    (wheels / real.name).symlink_to(real)
    impostor = wheels / "sglang-0.5.14-aa-none-any.whl"
    if kind == "fifo":
        os.mkfifo(impostor)
    elif kind == "dev-zero":
        impostor.symlink_to("/dev/zero")
    else:
        impostor.write_bytes(real.read_bytes()[:100_000])
    return {"SGLANG_REPRO_CACHE": str(w.root / "cache")}


@trial("wheel-cache")
def t_releases_beside_a_fifo_wheel(w: Work) -> Spec:
    return Spec(["releases", "0.5.14"], (0,), env=_impostor_cache(w, "fifo"), bound_s=60)


@trial("wheel-cache")
def t_releases_beside_a_dev_zero_wheel(w: Work) -> Spec:
    return Spec(["releases", "0.5.14"], (0,), env=_impostor_cache(w, "dev-zero"), bound_s=60)


@trial("wheel-cache")
def t_contract_beside_a_truncated_wheel(w: Work) -> Spec:
    return Spec(["contract", "0.5.14"], (0, 1), env=_impostor_cache(w, "truncated"), bound_s=60)


@trial("non-utf8-text")
def t_nightly_label_not_utf8(w: Work) -> Spec:
    store = w.root / "s.db"

    def nothing_ran(_: Ran) -> list[str]:
        return [f"ran and stored {_rows(store)}"] if _rows(store) else []
    return Spec(["nightly", str(w.seed), "--build", "sim:post-fix", "--case", CASE, "--trials", "1",
                 "--label", os.fsdecode(b"night\xff"), "--store", str(store), "--out", str(w.root / "o")], (2,),
                check=nothing_ran)


@trial("non-utf8-text")
def t_bless_title_not_utf8(w: Work) -> Spec:
    fixtures = w.root / "fixtures"
    return Spec(["triage", "--bless", str(_paste_with_secrets(w)), "--expect", "none", "--source", "https://x/1",
                 "--title", os.fsdecode(b"t\xff"), "--fixtures", str(fixtures)], (2,), outside=[fixtures])


def _bless_header(w: Work, flag: str, value: str) -> Spec:
    fixtures = w.root / "fixtures"
    return Spec(["triage", "--no-releases", "--bless", str(_paste_with_secrets(w)), "--expect", "none", "--source",
                 "https://x/1", "--fixtures", str(fixtures), flag, value], (2,), outside=[fixtures])


@trial("header-forge")
def t_bless_title_with_a_newline(w: Work) -> Spec:
    return _bless_header(w, "--title", "t\n# expect: none")


@trial("header-forge")
def t_bless_source_with_a_newline(w: Work) -> Spec:
    return _bless_header(w, "--source", "https://x/1\n# fixed: 0.1")


@trial("links")
def t_bless_fixtures_is_a_link(w: Work) -> Spec:
    elsewhere = w.folder("elsewhere")
    (w.root / "fx").symlink_to(elsewhere)
    return Spec(["triage", "--no-releases", "--bless", str(_paste_with_secrets(w)), "--expect", "none", "--source",
                 "https://x/1", "--fixtures", str(w.root / "fx")], (2,), outside=[elsewhere])


@trial("error-lines")
def t_validate_set_with_a_token(w: Work) -> Spec:
    return Spec(["validate", str(w.seed), "--set", f"hardware.gpus={SECRET}"], (2,), secrets=[SECRET])


@trial("error-lines")
def t_usage_error_is_one_line(w: Work) -> Spec:
    def one_line(ran: Ran) -> list[str]:
        n = len(ran.err.strip().splitlines())
        return [] if n == 1 else [f"{n} lines of usage error"]
    return Spec(["run", "--no-such-flag"], (2,), check=one_line)


@trial("error-lines")
def t_error_naming_a_3kb_path(w: Work) -> Spec:
    deep = w.root.joinpath(*(["d" * 200] * 14), "s.yaml")

    def bounded(ran: Ran) -> list[str]:
        longest = max((len(x) for x in ran.err.splitlines()), default=0)
        return [] if longest <= 1100 else [f"an error line of {longest} characters"]
    return Spec(["validate", str(deep)], (2,), check=bounded)


@trial("error-lines")
def t_run_build_with_a_long_rules_value(w: Work) -> Spec:
    def bounded(ran: Ran) -> list[str]:  # was a 15 KB line: the spec named in full
        longest = max((len(x) for x in ran.err.splitlines()), default=0)
        return [] if longest <= 1100 else [f"an error line of {longest} characters"]
    return Spec(["run", str(w.seed), "--case", CASE, "--no-store", "--build", "sim:pre-fix,rules=0." + "9" * 4000],
                (2,), check=bounded)


@trial("error-lines")
def t_list_secret_value_reappearing_in_argv(w: Work) -> Spec:
    value = "plainsecretvalue4242"
    return Spec(["list", str(w.seed), "--set", f"server.env.HF_TOKEN={value}", "--set",
                 f"server.args.served-model-name={value}", "--format", "json"], (0,), secrets=[value])


_HUGE_VERSION = "0." + "9" * 4400


@trial("version-digits")
def t_releases_huge_version(w: Work) -> Spec:
    return Spec(["releases", _HUGE_VERSION], (2,))


@trial("version-digits")
def t_contract_huge_version(w: Work) -> Spec:
    return Spec(["contract", _HUGE_VERSION], (2,))


@trial("version-digits")
def t_triage_version_1e999(w: Work) -> Spec:
    return Spec(["triage", "--version", "1e999", str(_paste_with_secrets(w))], (2,))


@trial("version-digits")
def t_bisect_huge_release(w: Work) -> Spec:
    out = w.root / "o"
    return Spec(["bisect", str(w.seed), "--case", CASE, "--releases", f"0.5.14..{_HUGE_VERSION}", "--out", str(out)],
                (2,), outside=[out])


def _triage_prints(w: Work, path: Path, *extra: str, check: Callable[[Ran], list[str]]) -> Spec:
    return Spec(["triage", "--no-releases", *extra, str(path)], (0, 1), check=check)


@trial("triage-terminal")
def t_triage_a_name_that_forges_a_verdict(w: Work) -> Spec:
    forged = w.root / "x\nFORGED: frozen-kv-mtp-stale-out-cache-loc (bug) [confirmed]\x1b[2J"
    forged.write_text("nothing\n")

    def one_verdict(ran: Ran) -> list[str]:
        return [] if len(ran.out.splitlines()) == 1 and "\x1b" not in ran.out else ["a forged line or an escape"]
    return _triage_prints(w, forged, check=one_verdict)


@trial("triage-terminal")
def t_triage_excerpt_with_nul_and_bidi(w: Work) -> Spec:
    paste = w.root / "p.txt"
    paste.write_text(f"{_MESSAGE} \x00\x1b[31m\u202eevil\n")

    def shown(ran: Ran) -> list[str]:
        raw = {"\x00", "\x1b", "\u202e"} & set(ran.out)
        return [f"printed raw: {sorted(map(repr, raw))}"] if raw else []
    return _triage_prints(w, paste, "--excerpt", check=shown)


def _probable(ran: Ran) -> list[str]:
    return [] if "[probable]" in ran.out else [f"not probable: {ran.out[:120]!r}"]


@trial("triage-terminal")
def t_triage_a_utf16_paste(w: Work) -> Spec:
    paste = w.root / "p.txt"
    paste.write_bytes(f"the server said:\n{_MESSAGE}\n".encode("utf-16"))
    return _triage_prints(w, paste, check=_probable)


@trial("triage-terminal")
def t_triage_a_cr_only_paste(w: Work) -> Spec:
    paste = w.root / "p.txt"
    paste.write_bytes(f"the server said:\r{_MESSAGE}\rthen stopped\r".encode())
    return _triage_prints(w, paste, check=_probable)


@trial("triage-evidence")
def t_triage_message_with_agreeing_frames(w: Work) -> Spec:
    frames = [("frozen_kv_mtp_worker_v2.py", 765, "draft", "self.draft_forward(forward_batch)"),
              ("frozen_kv_mtp_worker_v2.py", 455, "draft_forward", "self.draft_model_runner.forward(forward_batch)"),
              ("model_runner.py", 2939, "forward", "self._forward_raw(forward_batch)"),
              ("cuda_graph_buffer_registry.py", 461, "fill_from", "_grouped_foreach_copy_(dsts, srcs)"),
              ("cuda_graph_buffer_registry.py", 120, "_grouped_foreach_copy_", "torch._foreach_copy_(dsts, srcs)")]
    paste = w.root / "issue.txt"
    paste.write_text("\n".join(["Traceback (most recent call last):",
                                *(f'  File "/sgl/python/sglang/srt/x/{f}", line {n}, in {fn}\n    {code}'
                                  for f, n, fn, code in frames), _MESSAGE]) + "\n")

    def monotone(ran: Ran) -> list[str]:
        verdict = ran.out.splitlines()[0] if ran.out else ""
        problems = [] if "[probable]" in verdict else [f"frames lowered the message's level: {verdict[-60:]!r}"]
        return problems + ([] if " by its message and " in verdict else ["the verdict line says not what decided"])
    return _triage_prints(w, paste, check=monotone)


def _bisect_with_sets(w: Work, *sets: str) -> tuple[list[str], Path]:
    """A bisection that writes its scenario copy, then stops cheaply: --good and --bad are one commit."""
    repo = w.folder("repo")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "one"], check=True, timeout=30)
    out = w.root / "o"
    argv = ["bisect", str(w.seed), "--case", CASE, "--repo", str(repo), "--good", "HEAD", "--bad", "HEAD", "--out",
            str(out)]
    return argv + [x for s in sets for x in ("--set", s)], out


@trial("set-copies")
def t_bisect_set_secrets_into_its_scenario_copy(w: Work) -> Spec:
    argv, out = _bisect_with_sets(w, f"server.env.HF_TOKEN={SECRET}", f"server.args.api-key={KEY}", "hardware.gpus=1")

    def copied(_: Ran) -> list[str]:  # the copy is written (else the secrets' absence would prove nothing)
        return [] if list(out.glob("bisect/scenarios/*.yaml")) else ["no scenario copy written"]
    # its stderr says the report folder, then that --good and --bad are one commit
    return Spec(argv, (2,), secrets=[SECRET, KEY], scan=[out], one_line=False, check=copied)


@trial("set-copies")
def t_minimize_set_secrets_into_its_candidates(w: Work) -> Spec:
    out = w.root / "o"

    def copied(_: Ran) -> list[str]:  # the copies are written (else the secrets' absence would prove nothing)
        return [] if list(out.glob("minimize/*/candidates/*.yaml")) else ["no candidate written"]
    # a 5 s budget: the baseline, a candidate or two, the confirmation of what is left; the report goes to stdout
    return Spec(["minimize", str(w.seed), "--case", CASE, "--build", "sim:pre-fix", "--budget", "5", "--no-store",
                 "--no-progress", "--out", str(out), "--set", f"server.env.HF_TOKEN={SECRET}", "--set",
                 f"server.args.api-key={KEY}"], (0, 1, 3), bound_s=120, one_line=False, secrets=[SECRET, KEY], scan=[out],
                check=copied)


@trial("set-copies")
def t_bisect_set_value_with_a_newline(w: Work) -> Spec:
    argv, out = _bisect_with_sets(w, "hardware.gpu_name=L40S\nforged")
    return Spec(argv, (2,), outside=[out])


# --- interrupts -----------------------------------------------------------------------------------------------


@trial("interrupt")
def t_compare_sigint_after_its_last_trial(w: Work) -> Spec:
    out = w.root / "o"

    def partial(ran: Ran) -> list[str]:
        problems = [] if "PARTIAL" in ran.out else ["no PARTIAL report said"]
        return problems + ([] if list(out.glob("compare/*/report.html")) else ["no report written"])
    return Spec(["compare", str(w.seed), "--case", CASE, "--before", "sim:pre-fix", "--after", "sim:post-fix",
                 "--trials", "1", "--out", str(out), "--store", str(w.root / "s.db")], (3,), bound_s=240,
                one_line=False, signal_after=("trial 0:", 2, 1), check=partial)


def _nightly_detecting(w: Work, times: int) -> Spec:
    def summary(ran: Ran) -> list[str]:
        problems = [] if "interrupted" in ran.out and "1 pass" in ran.out else ["no summary printed"]
        rows = _rows(w.root / "s.db")
        return problems + ([] if rows == ["pass"] else [f"store holds {rows}, not the pass"])
    return Spec(["nightly", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--trials", "1",
                 "--no-progress", "--out", str(w.root / "o"), "--store", str(w.root / "s.db")], (3,), bound_s=240,
                one_line=False, signal_after=("now: detecting", 1, times), check=summary)


@trial("interrupt")
def t_nightly_sigint_while_detecting(w: Work) -> Spec:
    return _nightly_detecting(w, 1)


@trial("interrupt")
def t_nightly_two_sigints_while_detecting(w: Work) -> Spec:
    return _nightly_detecting(w, 2)


@trial("interrupt")
def t_run_two_sigints_after_its_record(w: Work) -> Spec:
    def kept(_: Ran) -> list[str]:
        rows = _rows(w.root / "s.db")
        return [] if rows == ["pass"] else [f"store holds {rows}, not the pass"]
    return Spec(["run", str(w.seed), "--case", CASE, "--build", "sim:post-fix", "--trials", "1", "--no-progress",
                 "--out", str(w.root / "o"), "--store", str(w.root / "s.db")], (0, 3), bound_s=240, one_line=False,
                signal_after=("PASS", 1, 2), check=kept)


@trial("interrupt")
def t_baselines_record_sigint_after_a_trial(w: Work) -> Spec:
    refs = w.root / "refs"

    def said(ran: Ran) -> list[str]:
        problems = [] if "interrupted after 1 of 3 trial(s)" in ran.err else ["silent about the trials it kept"]
        return problems + ([f"wrote {sorted(p.name for p in refs.iterdir())}"] if refs.exists() and any(refs.iterdir())
                           else [])
    guard = w.checkout / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml"
    return Spec(["baselines", "record", str(guard), "--build", "after", "--reference", "--case", "draft=topk1",
                 "--trials", "3", "--out", str(w.root / "o")], (130,), bound_s=240, one_line=False,
                env={"SGLANG_REPRO_BASELINES": str(refs)}, signal_after=("trial 1/3", 1, 1), check=said)


@trial("interrupt")
def t_compare_sigint_while_importing(w: Work) -> Spec:
    return Spec(["compare", str(w.seed), "--case", CASE, "--before", "sim:pre-fix", "--after", "sim:post-fix",
                 "--out", str(w.root / "o"), "--no-store"], (3, 130), bound_s=120, one_line=False, signal_at_s=0.8)


# --- the runner -----------------------------------------------------------------------------------------------


def _env(w: Work, tag: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "SGLANG_REPRO_"))}
    env.update(PYTHONPATH=str(w.checkout), SGLANG_REPRO_CACHE=str(w.cache), PYTHONUNBUFFERED="1", **{MARK: tag})
    env.update(extra or {})
    return env


def _marked(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != os.getpid() and proc.environ().get(MARK) == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        for p in [proc, *proc.children(recursive=True)]:
            total += p.memory_info().rss
    except psutil.Error:
        pass
    return total


def _drive(spec: Spec, w: Work, tag: str) -> Ran:
    argv = [sys.executable, "-m", "harness", *spec.argv]
    began = time.monotonic()
    proc = subprocess.Popen(argv, cwd=spec.cwd or w.root, env=_env(w, tag, spec.env), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    streams: dict[str, list[bytes]] = {"out": [], "err": []}
    assert proc.stdout is not None and proc.stderr is not None
    if spec.close_stdout:
        proc.stdout.close()  # the reader is gone before the first byte

    fired = threading.Event()
    seen = [0]

    def pump(name: str, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            streams[name].append(line)
            if spec.signal_after is not None and not fired.is_set():  # signalled from here: no polling delay
                marker, count, times = spec.signal_after
                seen[0] += line.decode(errors="replace").count(marker)
                if seen[0] >= count:
                    fired.set()
                    for _ in range(times):
                        proc.send_signal(signal.SIGINT)
                        time.sleep(0.05)

    pumps = [threading.Thread(target=pump, args=("err", proc.stderr), daemon=True)]
    if not spec.close_stdout:
        pumps.append(threading.Thread(target=pump, args=("out", proc.stdout), daemon=True))
    for t in pumps:
        t.start()
    killed, sent = None, False
    limit = spec.bound_s * 1.5 + 5
    watched = psutil.Process(proc.pid)
    while proc.poll() is None:
        now = time.monotonic() - began
        if now > limit:
            killed = f"still running after {limit:.0f} s"
        elif _tree_rss(watched) > MEMORY_CAP:
            killed = f"over {MEMORY_CAP >> 30} GB of memory after {now:.1f} s"
        if killed:
            _kill(proc, tag)
            break
        if not sent and spec.signal_at_s is not None and now >= spec.signal_at_s:
            proc.send_signal(signal.SIGINT)
            sent = True
        time.sleep(0.02)
    proc.wait()
    for t in pumps:
        t.join(timeout=5)
    took = time.monotonic() - began
    out, err = (b"".join(streams[k]).decode(errors="replace") for k in ("out", "err"))
    if spec.signal_after is not None and not fired.is_set() and killed is None:
        killed = f"never printed {spec.signal_after[0]!r}: no signal sent"
    return Ran(proc.returncode, out, err, took, killed)


def _kill(proc: subprocess.Popen[bytes], tag: str) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in _marked(tag):
        with suppress(psutil.Error):
            p.kill()


def _files_under(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file() and not path.is_symlink():
            yield path
        elif path.is_dir() and not path.is_symlink():
            for p in path.rglob("*"):
                if p.is_file() and not p.is_symlink():
                    yield p


def judge(spec: Spec, ran: Ran, w: Work, tag: str, before: dict[Path, bytes]) -> list[str]:
    """What broke the README's promise; [] when nothing did."""
    problems: list[str] = []
    if ran.killed:
        problems.append(f"killed: {ran.killed}")
    elif ran.took_s > spec.bound_s:
        problems.append(f"took {ran.took_s:.1f} s, bound {spec.bound_s:g} s")
    if ran.code not in spec.codes and not ran.killed:
        problems.append(f"exit {ran.code}, not {'/'.join(map(str, spec.codes))}")
    if "Traceback" in ran.err or "Traceback" in ran.out:
        problems.append("a traceback")
    # argparse's own errors come after its usage line (and its wrapped continuation lines): not counted
    lines = [ln for ln in ran.err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
    if spec.one_line and ran.code in (2, 3) and not ran.killed and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, not one")
    for path in spec.outside:
        if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
            problems.append(f"wrote outside: {path.relative_to(w.root)}")
    for path, data in before.items():
        if not path.exists() or path.read_bytes() != data:
            problems.append(f"changed {path.relative_to(w.root)}")
    for secret in spec.secrets:
        kept = [p for p in _files_under(spec.scan) if secret.encode() in p.read_bytes()]
        if secret in ran.out or secret in ran.err:
            problems.append(f"printed a secret ({secret[:6]}...)")
        if kept:
            problems.append(f"kept a secret ({secret[:6]}...) in {len(kept)} files, e.g. {kept[0].name}")
    left = _marked(tag)
    if left:
        problems.append(f"{len(left)} processes left: {[p.name() for p in left][:3]}")
        for p in left:
            with suppress(psutil.Error):
                p.kill()
    if spec.check is not None:
        problems += spec.check(ran)
    return problems


def run_try(klass: str, name: str, make: Callable[[Work], Spec], checkout: Path, work: Path) -> dict[str, Any]:
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    w = Work(checkout, root, work / "cache")
    tag = f"{os.getpid()}-{name}"
    try:
        try:
            spec = make(w)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return {"class": klass, "try": name, "verdict": "setup-failed", "problems": [repr(exc)[:300]]}
        before = {p: p.read_bytes() for p in spec.unchanged}
        ran = _drive(spec, w, tag)
        problems = judge(spec, ran, w, tag, before)
    finally:
        w.close()
    return {"class": klass, "try": name, "verdict": "fail" if problems else "ok", "exit": ran.code,
            "took_s": round(ran.took_s, 2), "problems": problems,
            **({"stderr_tail": ran.err.strip().splitlines()[-1][:300]} if problems and ran.err.strip() else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout whose CLI is tried (default: this)")
    parser.add_argument("--only", default="", help="comma-separated classes or tries (default: all)")
    parser.add_argument("--work", type=Path, default=None, help="where the tries' folders go (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON summary here")
    parser.add_argument("--list", action="store_true", help="print the classes and tries, run nothing")
    args = parser.parse_args(argv)
    # A job started with `&` by a non-interactive shell ignores SIGINT, and its children inherit that: Python
    # then never installs its handler, and the interrupt tries would send signals nobody hears. A handler here
    # is reset to the default in every child at exec.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    wanted = {x for x in args.only.split(",") if x}
    chosen = [t for t in TRIES if not wanted or t[0] in wanted or t[1] in wanted]
    if args.list:
        for klass, name, _ in chosen:
            print(f"{klass}\t{name}")
        return 0
    checkout = args.checkout.resolve()
    if not (checkout / "harness" / "cli.py").is_file():
        parser.error(f"{checkout} is not a checkout of the project (no harness/cli.py)")
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    mounting = ("full-disk", "read-only-store")  # both need root's mount
    skip = full_disk_skip() if any(k in mounting for k, _, _ in chosen) else None
    load_before = os.getloadavg()
    began = time.monotonic()
    results: list[dict[str, Any]] = []
    for klass, name, make in chosen:
        if klass in mounting and skip:
            results.append({"class": klass, "try": name, "verdict": "skipped", "problems": [skip]})
        else:
            results.append(run_try(klass, name, make, checkout, work))
        r = results[-1]
        print(f"{r['verdict']:>5} {klass}/{name} {r.get('took_s', '')} {'; '.join(r['problems'])[:200]}",
              file=sys.stderr, flush=True)
    per_class: dict[str, dict[str, int]] = {}
    for r in results:
        c = per_class.setdefault(r["class"], {"tries": 0, "failures": 0, "skipped": 0})
        c["tries"] += r["verdict"] != "skipped"
        c["failures"] += r["verdict"] in ("fail", "setup-failed")
        c["skipped"] += r["verdict"] == "skipped"
    summary = {
        "benchmark": "bench_hostile", "checkout": str(checkout), "commit": _commit(checkout),
        "python": sys.executable, "tries": sum(c["tries"] for c in per_class.values()),
        "failures": sum(c["failures"] for c in per_class.values()),
        "skipped": sum(c["skipped"] for c in per_class.values()), "wall_s": round(time.monotonic() - began, 1),
        "load_avg": [round(x, 2) for x in os.getloadavg()], "per_class": per_class, "results": results,
    }
    text = json.dumps(summary, indent=2)
    print(text)
    from _results import record  # as every benchmark does: run as a script, its folder is on sys.path

    # a record per run under benchmarks/results/: this checkout's as bench_hostile, another's (--checkout, the commit
    # before a change) as bench_hostile-checkout, so the newest of each is what the docs may quote
    name = "bench_hostile" if checkout == REPO else "bench_hostile-checkout"
    if not wanted:  # a partial run (--only) is a check, not the figure
        record(name, summary, load_before=load_before)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _commit(checkout: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
