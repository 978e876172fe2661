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
def plain_server(request: pytest.FixtureRequest, tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Observations:
    """Real sglang (one release per param) serving the tiny Llama on the CPU, observed once and stopped."""
    version = str(request.param)
    return observe_plain_server(version, tiny_llama, tmp_path_factory.mktemp(f"sglang-{version}"))


@pytest.fixture(scope="session", params=releases())
def crashed_server(request: pytest.FixtureRequest, tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory,
                   ) -> CrashObservations:
    """Real sglang whose scheduler was SIGKILLed after it served a request."""
    version = str(request.param)
    return observe_scheduler_kill(version, tiny_llama, tmp_path_factory.mktemp(f"sglang-{version}-crash"))
