"""Pre-flight: flags parsed by each build's own parser (real sglang wheels), model presence."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path

import pytest

from harness.build import Build, ensure_pip_env, resolve_build
from harness.launch.preflight import check_flags, model_gap
from harness.util.errors import InfraError
from tests.helpers import free_port
from tests.process_marks import MARK_VAR, marked

RELEASES = ("0.5.14", "0.5.15")

# The flags the seed scenarios use (see sglang-reference.md); all parse in 0.5.14 and 0.5.15.
KNOWN_FLAGS = [
    "--model-path", "google/gemma-4-E4B-it", "--speculative-algorithm", "NEXTN",
    "--speculative-draft-model-path", "google/gemma-4-E4B-it-assistant", "--speculative-num-steps", "1",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2", "--disable-cuda-graph",
    "--tp-size", "2", "--enable-hierarchical-cache", "--hicache-ratio", "2.0", "--mem-fraction-static", "0.55",
    "--context-length", "2048", "--attention-backend", "trtllm_mha", "--quantization", "modelopt_fp4",
    "--swa-full-tokens-ratio", "0.5", "--dtype", "bfloat16", "--max-running-requests", "16", "--enable-metrics",
    "--load-format", "dummy", "--host", "127.0.0.1", "--port", "30000", "--cuda-graph-max-bs", "8",
]  # fmt: skip


@pytest.fixture(scope="session")
def real_builds() -> dict[str, Build]:
    """Real sglang wheels (deps=none), cached under $SGLANG_REPRO_CACHE and created once."""
    for version in RELEASES:
        ensure_pip_env(version, deps="none")
    return {version: resolve_build(f"pip:sglang=={version},deps=none") for version in RELEASES}


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_known_flags_parse_in_the_real_release(version: str, real_builds: dict[str, Build]) -> None:
    check = check_flags(real_builds[version], KNOWN_FLAGS, timeout_s=120)
    assert check.ok, check.message
    assert version in check.message


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_unknown_flag_is_rejected_with_the_parsers_message_and_nothing_started(
    version: str, real_builds: dict[str, Build], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every process this call starts inherits the mark (the parser runs with os.environ plus the build's
    # env), so "nothing left" is checked on what this call started, not on whatever else the worker runs.
    mark = f"preflight-{uuid.uuid4().hex}"
    monkeypatch.setenv(MARK_VAR, mark)
    port = free_port()
    argv = ["--model-path", "m", "--port", str(port), "--definitely-not-a-flag"]
    check = check_flags(real_builds[version], argv, timeout_s=120)
    assert not check.ok
    assert check.message == "unrecognized arguments: --definitely-not-a-flag"
    assert marked(mark) == []  # psutil.Process reprs name each leftover
    with socket.socket() as sock:  # no server took the port
        sock.bind(("127.0.0.1", port))


@pytest.mark.slow
def test_bad_flag_value_is_rejected_by_the_real_parser(real_builds: dict[str, Build]) -> None:
    check = check_flags(real_builds["0.5.15"], ["--model-path", "m", "--tp-size", "two"], timeout_s=120)
    assert not check.ok
    assert check.message == "argument --tp-size/--tensor-parallel-size: invalid int value: 'two'"


@pytest.mark.slow
def test_interpreter_without_sglang_is_an_infra_error_not_a_flag_verdict() -> None:
    build = Build("python", f"python:{sys.executable}", sys.executable, (sys.executable, "-m", "sglang.launch_server"))
    with pytest.raises(InfraError, match="cannot load sglang's flag parser"):
        check_flags(build, ["--model-path", "m"], timeout_s=60)


def test_reference_build_uses_the_reference_parser() -> None:
    from harness.launch.launcher import launcher_for

    launcher = launcher_for(resolve_build("sim:pre-fix,seed=1"))
    ok, rejected = launcher.check_flags([["--model-path", "m", "--speculative-num-steps", "1"],
                                         ["--model-path", "m", "--definitely-not-a-flag"]])
    assert ok.ok
    assert (rejected.ok, rejected.message) == (False, "unrecognized arguments: --definitely-not-a-flag")


# --------------------------------------------------------------------------- model presence


def test_local_model_dir_with_config_is_present(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert model_gap(str(tmp_path), load_format=None) is None


def test_local_model_dir_without_config_is_a_gap(tmp_path: Path) -> None:
    gap = model_gap(str(tmp_path), load_format="dummy")
    assert gap is not None and "no config.json" in gap and "dummy still needs" in gap


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_missing_hub_model_is_a_gap_naming_it(hub_cache: Path) -> None:
    gap = model_gap("org/absent-model", load_format=None)
    assert gap is not None and "org/absent-model" in gap and str(hub_cache) in gap


def test_hub_model_in_the_cache_is_present(hub_cache: Path) -> None:
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = hub_cache / "models--org--tiny-model"
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "snapshots" / revision / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    assert model_gap("org/tiny-model", load_format=None) is None
    assert model_gap("org/other-model", load_format=None) is not None


def test_only_the_reference_server_skips_the_model_check(hub_cache: Path) -> None:
    from harness.build import resolve_build
    from harness.launch.launcher import launcher_for
    from harness.scenario import load_file

    assert model_gap("org/absent-model", load_format="dummy") is not None
    case = load_file(Path(__file__).parent.parent / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml").cases[0]
    assert launcher_for(resolve_build("sim:post-fix")).missing(case) is None
