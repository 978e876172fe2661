"""Issue 49 (hardening, fourth round): each class of the probe as a test, run in-process through the CLI.

Classes: a pasted text's secrets (triage's one entrance redacts them; the kernel's files are no input), text
values that are not UTF-8 (refused at the CLI's entrance, before any work), header values that forge lines, the
wheel cache read as a regular file of a zip's shape."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.hostile._probe import cli, refused

if TYPE_CHECKING:
    from harness.records.run_record import RunRecord

KEY = "sk-roundfourkey0123456789ab"
HF = "hf_roundfourtoken0123456789"
BEARER = "tokvalueroundfour98765"
MESSAGE = "RuntimeError: output with shape [1] doesn't match the broadcast shape [812]"


def _pasted(tmp_path: Path) -> Path:
    path = tmp_path / "pasted.txt"
    path.write_text(
        "Traceback (most recent call last):\n"
        f'  File "/x/sglang/srt/entrypoints/http_server.py", line 9, in launch  # --api-key {KEY}\n'
        f"    launch(HF_TOKEN={HF}, headers={{'Authorization': 'Bearer {BEARER}'}})\n"
        f"{MESSAGE} --api-key {KEY} HF_TOKEN={HF} Authorization: Bearer {BEARER}\n"
    )
    return path


def _no_secret(text: str) -> None:
    for secret in (KEY, HF, BEARER):
        assert secret not in text, f"{secret} kept in: {text[:400]}"


@pytest.mark.parametrize("flags", [[], ["--excerpt"], ["--explain", "--excerpt"], ["--format", "json"]])
def test_triage_prints_no_secret_of_the_pasted_text(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     flags: list[str]) -> None:
    ran = cli(["triage", *flags, "--no-releases", _pasted(tmp_path)], capsys)
    assert ran.code in (0, 1), ran.err
    assert "frozen-kv-mtp-stale-out-cache-loc" in ran.out  # still judged: only the secrets are gone
    if flags:
        assert "shape [812]" in ran.out
    _no_secret(ran.out + ran.err)
    if flags == ["--format", "json"]:
        assert "<redacted>" in json.loads(ran.out)[0]["text"]


def test_triage_bless_writes_no_secret_into_the_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixtures = tmp_path / "fixtures"
    ran = cli(["triage", "--bless", _pasted(tmp_path), "--expect", "none", "--source", "https://example.org/1",
               "--title", f"crash with --api-key {KEY}", "--fixtures", fixtures, "--no-releases"], capsys)
    assert ran.code in (0, 1), ran.err
    written = (fixtures / "pasted.txt").read_text()
    assert "shape [812]" in written
    _no_secret(written + ran.out + ran.err)


@pytest.mark.parametrize("kernel_file", ["/proc/self/environ", "/proc/self/cmdline",
                                         "/sys/kernel/mm/transparent_hugepage/enabled"])
def test_a_kernel_file_is_no_pasted_text(kernel_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists(kernel_file):
        pytest.skip(f"{kernel_file} is absent here")
    line = refused(["triage", "--excerpt", kernel_file], capsys)
    assert "kernel" in line


def test_the_kernel_kind_still_reads_the_kernels_files() -> None:
    from harness.util.bounded_read import read_bytes

    assert read_bytes(Path("/proc/self/stat"), "kernel")


@pytest.mark.parametrize("argv", [
    ["triage", "--bless", "{log}", "--expect", "none", "--source", "https://x/1", "--title", "t\udcff",
     "--fixtures", "{out}"],
    ["nightly", "{seed}", "--build", "sim:post-fix", "--label", "night\udcff", "--store", "{out}/s.db", "--out", "{out}"],
    ["triage", "--title", "t\udcff", "{log}"],
])
def test_a_text_value_that_is_not_utf8_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   argv: list[str]) -> None:
    from tests.hostile._probe import SEED

    values = {"log": str(_pasted(tmp_path)), "out": str(tmp_path / "out"), "seed": str(SEED)}
    line = refused([a.format(**values) for a in argv], capsys)
    assert "not UTF-8" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("field", "value"), [("--title", "t\n# expect: none"), ("--source", "https://x/1\n# fixed: 0.1"),
                                             ("--version", "0.5.14\r# expect: none")])
def test_a_bless_header_value_cannot_forge_a_line_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     field: str, value: str) -> None:
    fixtures = tmp_path / "fixtures"
    argv = ["triage", "--bless", _pasted(tmp_path), "--expect", "none", "--source", "https://x/1",
            "--fixtures", fixtures, "--no-releases", field, value]
    refused(argv, capsys)  # a header value on two lines, or a --version that is no release
    assert not fixtures.exists() or not any(fixtures.iterdir())


# --- the wheel cache: a file under a wheel's name is read only as a regular file with a zip's end record -----------

_PROBE_CACHED = """
import sys
from pathlib import Path
from harness.contract.wheels import cached_wheel
hit = cached_wheel("9.9.9", Path(sys.argv[1]))
print(hit.name if hit else "none")
"""


def _wheel_cache(tmp_path: Path, bad: str) -> Path:
    import zipfile

    cache = tmp_path / "cache"
    wheels = cache / "wheels"
    wheels.mkdir(parents=True)
    good = wheels / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr("sglang/version.py", "__version__ = '9.9.9'\n")
    impostor = wheels / "sglang-9.9.9-aa-none-any.whl"  # sorts first: the one a reader meets
    if bad == "fifo":
        os.mkfifo(impostor)
    elif bad == "dev-zero":
        impostor.symlink_to("/dev/zero")
    elif bad == "truncated":
        impostor.write_bytes(good.read_bytes()[:40])
    elif bad == "folder":
        impostor.mkdir()
    return cache


@pytest.mark.parametrize("bad", ["fifo", "dev-zero", "truncated", "folder"])
def test_a_cached_wheel_that_is_no_wheel_is_not_a_hit(tmp_path: Path, bad: str) -> None:
    import subprocess
    import sys

    cache = _wheel_cache(tmp_path, bad)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _PROBE_CACHED, str(cache)], capture_output=True, text=True,
                          timeout=30, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sglang-9.9.9-py3-none-any.whl"


def test_a_wheel_that_is_no_zip_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    from harness.contract.wheels import WheelSources
    from harness.util.errors import InfraError

    cache = _wheel_cache(tmp_path, "truncated")
    with pytest.raises(InfraError, match="not a readable wheel"):
        WheelSources.from_wheel(cache / "wheels" / "sglang-9.9.9-aa-none-any.whl")


def _release_row_file(tmp_path: Path, **changes: object) -> Path:
    from dataclasses import asdict

    from harness.contract.locate import Located
    from harness.contract.release_line import _sealed

    loc = Located("fact-a", "srt/x.py", "text", "holds", "0.5.14", 3, (3,), None)
    payload: dict[str, object] = {"located": [asdict(loc)], "profile": None, "unavailable": "no draft worker",
                                  "seconds": 1.0}
    payload["sealed"] = _sealed(json.loads(json.dumps(payload)))
    reseal = bool(changes.pop("reseal", False))
    payload.update(changes)
    if "located_status" in changes:
        located = payload["located"]
        assert isinstance(located, list)
        located[0]["status"] = payload.pop("located_status")
    if reseal:
        payload["sealed"] = _sealed(payload)  # sealed as the writer would seal it, holding what it never writes
    path = tmp_path / "row.json"
    path.write_text(json.dumps(payload))
    return path


@pytest.mark.parametrize(("changes", "kept"), [
    ({}, True),
    ({"located_status": "broken", "reseal": True}, False),  # was a tuple.index traceback when counted
    ({"unavailable": "forged"}, False),  # edited by hand after it was sealed
    ({"profile": None, "unavailable": None, "reseal": True}, False),  # neither a profile nor why not: was printed as is
])
def test_a_release_row_cache_is_believed_only_as_written(tmp_path: Path, changes: dict[str, object], kept: bool) -> None:
    from harness.contract.release_line import _load

    row = _load(_release_row_file(tmp_path, **changes), "9.9.9")
    assert (row is not None) == kept


# --- baselines record: one writer from read to write, strict values, a bounded file, links refused --------------------

GUARD_NAME = "frozen-kv-mtp-accept-length-guard"


def _guard_run(case: str, minute: int, accept: float) -> RunRecord:
    from harness.records.run_record import record_from_dict
    from tests.hostile._probe import REPO

    draft = case.partition("=")[2]
    return record_from_dict(dict(
        run_id=f"run-{case}-{minute}", scenario={"name": GUARD_NAME,
                                                 "file": str(REPO / "scenarios/frozen_kv_mtp/accept_length_guard.yaml")},
        case={"name": case, "values": {"draft": draft}},
        build={"kind": "sim", "spec": "sim:post-fix", "role": "after", "reference_server": True},
        trial=0, outcome="pass", reason="all checks held", metrics={"accept_length": accept, "requests_ok": 8},
        server={"log": ""}, host={"cpu": "Test CPU 9000", "cpu_count": 4},
        started_at=f"2026-12-03T10:{minute:02d}:00+00:00", duration_s=1.0, harness_version="test", artifacts="",
    ))


def test_two_concurrent_recorders_of_one_scenario_keep_both_entries(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    import harness.baselines.record as record_module
    from harness.baselines.files import load
    from harness.cli import make_parser
    from harness.commands.baselines import main
    from harness.store.store import new_batch, open_store
    from tests.hostile._probe import REPO

    store = f"sqlite:///{tmp_path / 'results.db'}"
    with open_store(store) as opened:
        opened.record_many([_guard_run(c, m, 1.8 + 0.01 * m) for c in ("draft=topk1", "draft=topk3") for m in (1, 2, 3)],
                           new_batch("nightly"))
    monkeypatch.setenv("SGLANG_REPRO_BASELINES", str(tmp_path / "refs"))
    real_load = record_module.load

    def slow_load(path: Path) -> object:  # both recorders read the file before either writes: the lost update
        found = real_load(path)
        time.sleep(0.5)
        return found

    monkeypatch.setattr(record_module, "load", slow_load)
    errors: list[BaseException] = []

    def record(case: str) -> None:
        argv = ["baselines", "record", str(REPO / "scenarios/frozen_kv_mtp/accept_length_guard.yaml"), "--build",
                "after", "--reference", "--case", case, "--from-store", "--store", store]
        try:
            assert main(make_parser(argv).parse_args(argv)) == 0
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(c,)) for c in ("draft=topk1", "draft=topk3")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    refs = load(tmp_path / "refs" / f"{GUARD_NAME}.yaml")
    assert refs is not None and sorted(e.case for e in refs.baselines) == ["draft=topk1", "draft=topk3"]


def _baseline_text(trials: str = "3", mean: str = "1.9") -> str:
    return (f"version: 1\nscenario: s\nbaselines:\n- case: c\n  hardware: h\n  line: l\n  build: b\n"
            f"  recorded: '2026-12-01'\n  harness_version: t\n  trials: {trials}\n"
            f"  accept_length: {{mean: {mean}, sd: 0.1}}\n")


@pytest.mark.parametrize(("trials", "mean", "field"), [("'2'", "1.9", "trials"), ("3", "-1.5", "mean"),
                                                      ("true", "1.9", "trials")])
def test_a_baselines_file_with_a_value_of_the_wrong_kind_is_refused(tmp_path: Path, trials: str, mean: str,
                                                                    field: str) -> None:
    from harness.baselines.files import BaselineFileError, load

    path = tmp_path / "s.yaml"
    path.write_text(_baseline_text(trials, mean))
    with pytest.raises(BaselineFileError) as caught:
        load(path)
    assert field in str(caught.value)
    good = tmp_path / "good.yaml"
    good.write_text(_baseline_text())
    assert load(good) is not None


def test_re_recording_keeps_a_bounded_history(tmp_path: Path) -> None:
    from harness.baselines.model import Entry, Figure
    from harness.baselines.record import MAX_REPLACED, apply, plan

    path = tmp_path / "s.yaml"
    for n in range(MAX_REPLACED + 5):
        entry = Entry(case="c", hardware="h", line="l", build=f"b{n}", recorded="2026-12-01", harness_version="t",
                      trials=2, accept_length=Figure(mean=1.0 + n, sd=0.1))
        apply(plan(path, "s", [entry]))
    from harness.baselines.files import load

    refs = load(path)
    assert refs is not None and len(refs.baselines[0].replaced) == MAX_REPLACED
    assert refs.baselines[0].replaced[0].build == f"b{MAX_REPLACED + 3}"  # newest first


@pytest.mark.parametrize("where", ["baselines", "fixtures"])
def test_a_writer_never_writes_through_a_linked_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    link = tmp_path / "link"
    link.symlink_to(victim)
    if where == "baselines":
        from harness.baselines.model import Entry, Figure
        from harness.baselines.record import apply, plan
        from harness.util.errors import UserError

        entry = Entry(case="c", hardware="h", line="l", build="b", recorded="2026-12-01", harness_version="t",
                      trials=2, accept_length=Figure(mean=1.0, sd=0.1))
        with pytest.raises(UserError, match="symbolic link"):
            apply(plan(link / "s.yaml", "s", [entry]))
    else:
        refused(["triage", "--bless", _pasted(tmp_path), "--expect", "none", "--source", "https://x/1",
                 "--fixtures", link, "--no-releases"], capsys)
    assert list(victim.iterdir()) == []


def test_ten_infra_trials_say_why_and_do_not_ask_for_more_trials() -> None:
    from harness.baselines.record import entry_from_runs
    from harness.util.errors import UserError
    from tests.helpers import make_record

    runs = [make_record("infra", run_id=f"r{i}", reason="no GPU: nvidia-smi found none", metrics={}) for i in range(10)]
    with pytest.raises(UserError) as caught:
        entry_from_runs(runs, case="c", hardware="h", line="l")
    said = str(caught.value)
    assert "0 of 10" in said and "no GPU: nvidia-smi found none" in said and "--trials 2" not in said


# --- what the CLI prints on an error: one line, redacted, bounded ----------------------------------------------------

def test_an_error_line_keeps_no_secret_given_by_set(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.hostile._probe import SEED

    line = refused(["validate", SEED, "--set", f"hardware.gpus={HF}"], capsys)
    assert HF not in line and "hardware.gpus" in line


def test_list_redacts_a_secret_variables_value_where_it_reappears_in_argv(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.hostile._probe import SEED

    value = "plainsecretvalue4242"  # no shape of its own: known only as HF_TOKEN's value
    ran = cli(["list", SEED, "--set", f"server.env.HF_TOKEN={value}", "--set",
               f"server.args.served-model-name={value}", "--format", "json"], capsys)
    assert ran.code == 0, ran.err
    assert value not in ran.out and "<redacted>" in ran.out


def test_an_error_line_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path.joinpath(*(["d" * 200] * 14), "s.yaml")  # 3 kB of path: named in full, the line was as long
    line = refused(["validate", deep], capsys)
    assert len(line) < 1100 and "more characters" in line


def test_a_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    ran = cli(["run", "--no-such-flag"], capsys)
    assert ran.code == 2
    assert len(ran.err.strip().splitlines()) == 1 and "--help" in ran.err, ran.err


# --- triage is monotone in evidence -------------------------------------------------------------------------------

_EAGER_FRAMES = [
    ('  File "/sgl/python/sglang/srt/speculative/frozen_kv_mtp_worker_v2.py", line 765, in draft',
     "    self.draft_forward(forward_batch)"),
    ('  File "/sgl/python/sglang/srt/speculative/frozen_kv_mtp_worker_v2.py", line 455, in draft_forward',
     "    logits_output = self.draft_model_runner.forward(forward_batch)"),
    ('  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 2939, in forward',
     "    output = self._forward_raw(forward_batch)"),
    ('  File "/sgl/python/sglang/srt/model_executor/cuda_graph_buffer_registry.py", line 461, in fill_from',
     "    _grouped_foreach_copy_(dsts, srcs)"),
    ('  File "/sgl/python/sglang/srt/model_executor/cuda_graph_buffer_registry.py", line 120, in _grouped_foreach_copy_',
     "    torch._foreach_copy_(dsts, srcs)"),
]
_SAMPLER = ('  File "/sgl/python/sglang/srt/layers/sampler.py", line 180, in forward', "    logits.div_(temperatures)")
EAGER = "frozen-kv-mtp-stale-out-cache-loc"


def _level(text: str) -> tuple[str | None, str]:
    from harness.signatures.catalogue import Catalogue
    from harness.triage.levels import judge_text, rank

    findings = judge_text(text, Catalogue.load())
    best = max(findings, key=lambda f: rank(f.level), default=None)
    return (best.signature.id if best is not None and best.signature is not None else None,
            best.level if best is not None else "none")


def _traceback(frames: list[tuple[str, str]]) -> str:
    return "\n".join(["Traceback (most recent call last):", *(x for f in frames for x in f), MESSAGE]) + "\n"


def test_frames_that_agree_never_lower_what_the_message_alone_earns() -> None:
    from itertools import combinations

    from harness.triage.levels import rank

    alone = _level(f"the server said:\n{MESSAGE}\n")
    assert alone == (EAGER, "probable")
    for k in range(1, len(_EAGER_FRAMES) + 1):
        for subset in combinations(_EAGER_FRAMES, k):
            got = _level(_traceback(list(subset)))
            assert got[0] == EAGER and rank(got[1]) >= rank(alone[1]), (subset, got)  # type: ignore[arg-type]


def test_only_frames_of_another_raiser_lower_it() -> None:
    assert _level(_traceback([*_EAGER_FRAMES[:3], _SAMPLER])) == (None, "none")


def test_the_verdict_line_says_which_frames_decided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paste = tmp_path / "issue.txt"
    paste.write_text(_traceback(_EAGER_FRAMES))
    ran = cli(["triage", "--no-releases", paste], capsys)
    verdict = ran.out.splitlines()[0]
    assert "[probable] by its message and 6 of 9 frames (draft, draft_forward, forward, _forward_raw, ...)" in verdict


def test_dashboard_refuses_a_mistyped_store_and_creates_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typo = tmp_path / "resluts.db"
    line = refused(["dashboard", "--store", typo, "-o", tmp_path / "site"], capsys)
    assert "no such store" in line and not typo.exists()


# --- triage's terminal: names and pasted lines shown, not sent; pastes in other encodings read ------------------------

def test_a_file_name_cannot_forge_a_verdict_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = tmp_path / "x\nFORGED: frozen-kv-mtp-stale-out-cache-loc (bug) [confirmed]\x1b[2J"
    forged.write_text("nothing to see\n")
    ran = cli(["triage", "--no-releases", forged], capsys)
    assert ran.code == 0 and len(ran.out.splitlines()) == 1 and "\x1b" not in ran.out, ran.out


def test_the_excerpt_shows_nul_escapes_and_bidi_overrides_as_escapes(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    paste = tmp_path / "p.txt"
    paste.write_text(f"{MESSAGE} \x00\x1b[31m\u202eevil\n")
    ran = cli(["triage", "--no-releases", "--excerpt", paste], capsys)
    assert "shape [812]" in ran.out
    assert not {"\x00", "\x1b", "\u202e"} & set(ran.out), ran.out
    assert "\\u202e" in ran.out


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "cr-only"])
def test_a_paste_in_another_encoding_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    text = f"the server said:\n{MESSAGE}\nthen stopped\n"
    paste = tmp_path / "p.txt"
    if encoding == "cr-only":
        paste.write_bytes(text.replace("\n", "\r").encode())
    else:
        paste.write_bytes(text.encode(encoding))
    ran = cli(["triage", "--no-releases", paste], capsys)
    assert f"{EAGER} (bug)" in ran.out and "[probable]" in ran.out, ran.out


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_is_named_for_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    path = tmp_path / "log"
    if kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)
    line = refused(["triage", path], capsys)
    assert ("a folder" if kind == "folder" else "a FIFO") in line


@pytest.mark.parametrize("argv", [["releases", "0." + "9" * 4400], ["contract", "0." + "9" * 4400],
                                  ["triage", "--version", "0." + "9" * 4400, "{log}"], ["triage", "--version", "1e999",
                                                                                         "{log}"]])
def test_a_version_of_thousands_of_digits_or_no_release_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     argv: list[str]) -> None:
    log = _pasted(tmp_path)
    refused([a.format(log=log) if a == "{log}" else a for a in argv], capsys)


# --- pre-flight ordered by cost ------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpus", ["", "0:NVIDIA L40S:44.5:8.9,1:NVIDIA L40S:44.5:8.9,2:NVIDIA L40S:44.5:8.9,"
                                      "3:NVIDIA L40S:44.5:8.9"])
def test_what_is_known_in_milliseconds_is_said_before_any_environment_is_made(tmp_path: Path, gpus: str) -> None:
    """No GPUs: the hardware; four L40S but no model files: the model. Neither waits for a pip environment (155 s)."""
    import subprocess
    import sys
    import time

    from tests.hostile._probe import CASE, REPO, SEED

    cache = tmp_path / "cache"
    env = {**os.environ, "SGLANG_REPRO_CACHE": str(cache), "SGLANG_REPRO_GPU_INVENTORY": gpus,
           "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(SEED), "--case", CASE, "--build",
                           "pip:sglang==0.5.14,deps=none", "--no-store", "--out", str(tmp_path / "o")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - began
    assert done.returncode == 3, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert ("hardware:" if not gpus else "model ") in said and "was not created" in said, said
    assert took < 30 and not (cache / "envs").exists(), took


def test_a_long_preparation_says_each_step_as_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The steps of making a pip environment (venv, sglang, torch and requirements) on stderr as each starts; the
    installs themselves stand in (pip would fetch gigabytes)."""
    import subprocess

    import harness.build.environments as environments

    def fake_run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        if "venv" in argv:
            Path(argv[-1], "bin").mkdir(parents=True)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(environments, "run_bounded", fake_run)
    monkeypatch.setattr(environments, "_pip", lambda *a, **k: None)
    monkeypatch.setattr(environments, "_install_stubs", lambda *a, **k: None)
    monkeypatch.setattr(environments, "read_answer", lambda *a, **k: [])
    environments.ensure_pip_env("0.5.14", deps="none", cache_dir=tmp_path / "cache")
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("sglang-repro: ")]
    assert [x.split(": ", 1)[1][:4] for x in said] == ["prep", "2/3 ", "3/3 ", "sgla"], said
    assert said[-1].endswith("s so far)") and "ready" in said[-1]


def test_a_set_value_with_a_newline_gives_bisect_no_copy(tmp_path: Path) -> None:
    """Was a copy bisect could not read (the error named the generated file); then a copy whose YAML folded the
    line break into a space. Refused now, one line, before anything is written (tests/hostile/test_set_copies.py)."""
    from harness.scenario.overrides import parse_sets
    from harness.util.errors import UserError

    with pytest.raises(UserError, match="line break") as got:
        parse_sets([f'description="two\nlines --api-key {KEY}"'])
    assert KEY not in str(got.value) and "\n" not in str(got.value)


def test_a_gpu_count_of_true_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.hostile._probe import SEED

    assert "hardware.gpus" in refused(["validate", SEED, "--set", "hardware.gpus=true"], capsys)


def test_every_page_and_readme_section_the_help_cites_exists() -> None:
    """`run --help` cited a README section ("running on a fleet") that does not exist."""
    import re

    from harness.cli import make_parser
    from tests.hostile._probe import REPO

    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    texts = [p.format_help() for p in sub.choices.values()]  # type: ignore[union-attr]
    headings = {m.group(1).strip().lower() for m in re.finditer(r"^#+ (.+)$", (REPO / "README.md").read_text(), re.M)}
    cited_pages = {m for t in texts for m in re.findall(r"docs/[\w.-]+\.md", t.replace("\n", " "))}
    assert all((REPO / page).is_file() for page in cited_pages), sorted(p for p in cited_pages if not (REPO / p).is_file())
    cited_sections = {m.strip().lower() for t in texts for m in re.findall(r"README: ([^)]+)\)", " ".join(t.split()))}
    assert cited_sections <= headings, sorted(cited_sections - headings)


def test_a_minimal_scenario_keeps_no_marker_of_a_feature_it_dropped() -> None:
    from harness.minimize.output import _markers_of_what_is_left

    base = {"server": {"args": {"hicache-ratio": 2, "tp-size": 4, "speculative-num-steps": 3}},
            "markers": ["frozen_kv_mtp", "hicache"]}
    left = {"server": {"args": {"speculative-num-steps": 1}}, "markers": ["frozen_kv_mtp", "hicache"]}
    assert _markers_of_what_is_left(left, base)["markers"] == ["frozen_kv_mtp"]
    kept = {"server": {"args": {"hicache-ratio": 2}}, "markers": ["frozen_kv_mtp", "hicache"]}
    assert _markers_of_what_is_left(kept, base)["markers"] == ["frozen_kv_mtp", "hicache"]


@pytest.mark.parametrize("sim", ["pre-fix,seed=x", "pre-fix,bogus=1", "pre-fix,step-cost-ms=-5"])
def test_validate_refuses_the_reference_server_specs_compare_would(sim: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.hostile._probe import SEED

    line = refused(["validate", SEED, "--set", f"builds.before.sim={sim}"], capsys)
    assert "builds.before.sim" in line and str(SEED) in line


def test_set_null_removes_the_key_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.hostile._probe import SEED

    ran = cli(["validate", SEED, "--set", "workload.warmup=null"], capsys)  # was 'Input should be a valid integer'
    assert ran.code == 0, ran.err


def test_pytests_junit_xml_keeps_no_secret_given_by_set(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.hostile._probe import REPO, SEED

    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-p", "no:cacheprovider", str(SEED),
                    "--set", f"hardware.gpus={HF}", f"--junitxml={junit}", "--collect-only"], cwd=REPO,
                   capture_output=True, text=True, timeout=120, check=False)
    assert junit.is_file() and "hardware.gpus" in junit.read_text()
    assert HF not in junit.read_text()
