"""What a baseline is keyed by: the hardware a run stood on and the build line its role stands for."""

from __future__ import annotations

from harness.records.run_record import HostInfo
from harness.scenario import Case

__all__ = ["build_line", "hardware_key", "this_cpu_key"]


def _cpu_key(host: HostInfo) -> str:
    model = host.cpu or host.platform or "unknown"
    return f"cpu {model} x{host.cpu_count}" if host.cpu_count else f"cpu {model}"


def hardware_key(host: HostInfo, *, reference_server: bool, gpus: int) -> str:
    """``cpu <model> x<cores>`` for the CPU reference server (it runs on the CPU whatever GPUs the host has);
    ``<count>x <GPU model>`` for a real build on ``gpus`` of the host's GPUs (the scenario's count)."""
    if reference_server or not host.gpus or gpus < 1:
        return _cpu_key(host)
    names = sorted(set(host.gpu_names))
    return f"{gpus}x {'+'.join(names)}"


def this_cpu_key() -> str:
    """This machine's key for reference-server runs."""
    import os

    from harness.server.hardware import cpu_model

    return _cpu_key(HostInfo(cpu=cpu_model(), cpu_count=os.cpu_count()))


def build_line(case: Case, role: str, *, reference_server: bool) -> str:
    """The build the scenario names for ``role``: its reference-server spec or its real one. A run of another
    build for the role (``--build after=python:...``, a pull request's) is judged by this line's baseline."""
    build = case.scenario.builds[role]
    if reference_server:
        # The revision only: a knob (draft-agreement=0.6) models a change of that build, judged by its baseline.
        return build.sim_spec.partition(",")[0]
    return build.spec
