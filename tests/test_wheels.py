"""The real wheels of sglang releases, read unzipped (network: the package index; cached after the first run)."""

from __future__ import annotations

import pytest

from harness.contract.wheels import WheelSources, fetch_wheel
from harness.util.errors import InfraError


def test_a_release_is_read_from_its_own_wheel() -> None:
    sources = WheelSources.of("0.5.14")
    assert sources.version == "0.5.14"
    args = sources.text("srt/server_args.py")
    assert args is not None and "class ServerArgs" in args
    assert sources.text("srt/no/such/file.py") is None
    assert fetch_wheel("0.5.14") == sources.wheel  # cached: the same file again


def test_a_version_that_is_not_one_is_refused_by_name() -> None:
    with pytest.raises(InfraError, match="not a PEP 440 version"):
        fetch_wheel("latest")
