"""Command-line options of the plugin, parsed once into :class:`Settings`."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

import pytest

from harness.build import BUILD_KINDS
from harness.scenario import SetOverride, parse_set
from harness.server.hardware import injected_inventory
from harness.server.lease import DEFAULT_GPU_LEASE_TIMEOUT_S
from harness.util.argtypes import positive_int

__all__ = ["Settings", "settings", "parse_build", "parse_shard"]

# Real builds only: the reference server is chosen with --reference items, not --build.
_BUILD_KINDS = tuple(f"{kind}:" for kind in BUILD_KINDS if kind != "sim")


@dataclass(frozen=True)
class Settings:
    builds: dict[str, str]
    trials: int | None
    shard: tuple[int, int] | None
    gpu_lease_timeout_s: float
    overrides: tuple[SetOverride, ...] = ()  # --set FIELD=VALUE, applied to every scenario before validation


_SETTINGS = pytest.StashKey[Settings]()


def parse_build(text: str) -> tuple[str, str]:
    role, sep, spec = text.partition("=")
    if not sep or not role or not spec:
        raise argparse.ArgumentTypeError(f"{text!r} is not ROLE=SPEC (e.g. after=pip:sglang==0.5.15)")
    if spec.startswith("sim:"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: the reference server runs in the [sim] items (pytest -m sim); --build sets real builds")
    if not spec.startswith(_BUILD_KINDS):
        raise argparse.ArgumentTypeError(f"{text!r}: SPEC must start with one of {', '.join(_BUILD_KINDS)}")
    return role, spec


def _parse_set(text: str) -> SetOverride:
    from harness.util.errors import UserError

    try:
        return parse_set(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--set {text}: ")) from None


def parse_shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N (e.g. 1/4)")
    k, n = int(match[1]), int(match[2])
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"{text!r}: K must be between 1 and N")
    return k, n


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be greater than 0")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang-repro", "sglang-repro scenarios (scenarios/**/*.yaml)")
    group.addoption("--build", action="append", type=parse_build, default=[], metavar="ROLE=SPEC",
                    help="real build for a role in the gpu items, e.g. after=python:/opt/sglang/bin/python "
                         "(repeatable; default: the scenario's own spec)")
    group.addoption("--trials", type=positive_int, default=None, metavar="N",
                    help="trials per item instead of the scenario's workload.trials")
    group.addoption("--shard", type=parse_shard, default=None, metavar="K/N",
                    help="run only the K-th of N deterministic slices of the selected items (CI matrix jobs)")
    group.addoption("--gpu-lease-timeout", type=_seconds, default=DEFAULT_GPU_LEASE_TIMEOUT_S, metavar="S",
                    help=f"how long a gpu item waits for its GPUs to be free (default {DEFAULT_GPU_LEASE_TIMEOUT_S:g})")
    group.addoption("--set", action="append", type=_parse_set, default=[], metavar="FIELD=VALUE", dest="scenario_set",
                    help="change a field of every scenario before validation, e.g. --set hardware.gpu_name=H200 "
                         "--set hardware.gpus=8 --set server.model=/models/gemma-4-31B-it (repeatable)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        injected_inventory()  # fail at start-up, not in the first gpu item
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SETTINGS] = Settings(
        builds=dict(config.getoption("build") or []),
        trials=config.getoption("trials"),
        shard=config.getoption("shard"),
        gpu_lease_timeout_s=config.getoption("gpu_lease_timeout"),
        overrides=tuple(config.getoption("scenario_set") or ()),
    )


def settings(config: pytest.Config) -> Settings:
    return config.stash[_SETTINGS]
