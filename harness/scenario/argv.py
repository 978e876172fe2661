"""The SGLang command line a case stands for."""

from __future__ import annotations

from harness.scenario.model import FlagValue, Scenario

__all__ = ["DEFAULT_PORT", "SGLANG_LAUNCHER", "server_flags", "sglang_argv"]

SGLANG_LAUNCHER = ("python", "-m", "sglang.launch_server")
DEFAULT_PORT = 30000  # SGLang's default; a real run leases a free port instead


def _values(value: FlagValue) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return [str(value)]
    return [str(value)]


def server_flags(scenario: Scenario, *, port: int = DEFAULT_PORT, host: str | None = None) -> list[str]:
    """SGLang launch flags (no launcher): model, draft, the scenario's args, host and port.

    ``true`` is a switch, ``false`` and ``null`` leave the flag out, a list gives several values.
    """
    srv = scenario.server
    argv = ["--model-path", srv.model]
    if srv.draft_model:
        argv += ["--speculative-draft-model-path", srv.draft_model]
    for name, value in srv.args.items():
        if value is None or value is False:
            continue
        argv.append(f"--{name}")
        if value is not True:
            argv += _values(value)
    argv += ["--host", host or srv.host, "--port", str(port)]
    return argv


def sglang_argv(scenario: Scenario, *, port: int = DEFAULT_PORT) -> list[str]:
    """The full command that starts a real SGLang server for this scenario."""
    return [*SGLANG_LAUNCHER, *server_flags(scenario, port=port)]
