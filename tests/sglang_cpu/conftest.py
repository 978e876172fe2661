"""Fixtures of the real-SGLang CPU tests: a tiny Llama made at test time and one observed server per release."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.build.sglang_cpu.tiny_models import make_tiny_llama
from tests.sglang_cpu.live import releases
from tests.sglang_cpu.observe import CrashObservations, Observations, observe_plain_server, observe_scheduler_kill


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session", params=releases())
def release(request: pytest.FixtureRequest) -> str:
    """A release that serves on this build; every live fixture of one test takes the same one."""
    return str(request.param)


@pytest.fixture(scope="session")
def plain_server(release: str, tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Observations:
    """Real sglang ``release`` serving the tiny Llama on the CPU, observed once and stopped."""
    return observe_plain_server(release, tiny_llama, tmp_path_factory.mktemp(f"sglang-{release}"))


@pytest.fixture(scope="session")
def crashed_server(release: str, tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> CrashObservations:
    """Real sglang ``release`` whose scheduler was SIGKILLed after it served a request."""
    return observe_scheduler_kill(release, tiny_llama, tmp_path_factory.mktemp(f"sglang-{release}-crash"))
