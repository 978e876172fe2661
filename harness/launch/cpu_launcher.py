"""The launcher of the real-SGLang CPU build (``pip:sglang==X,deps=cpu``): real SGLang, plain-torch kernels on CPU.

A scenario states how it runs on this build in its ``cpu:`` section (docs/scenario-format.md): overrides that
point it at a tiny model made at run time (``tiny:NAME``, :mod:`harness.build.tiny_model_cache`) and give the
CPU flags in SGLang's own words (``--device cpu``, an attention backend with a plain-torch port, no CUDA graph,
a small KV pool); a matrix variant that needs a GPU-only path says ``cpu.unsupported: why``. The scenario's
``hardware`` block describes the GPU run and does not apply here: nothing is leased and NVML is not asked.
What pre-flight still holds: the build's own parser takes the flags, the flags put the server on the CPU, the
contract holds in the build's sources, and the models are there (a tiny one is made when it is not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.build import Build
from harness.build.labels import CPU_BUILD_LABEL
from harness.build.tiny_model_cache import ensure_tiny_model, is_tiny, tiny_model_path, tiny_name_of
from harness.launch.build_profile import case_in_build_words
from harness.launch.contract_gate import contract_gap
from harness.launch.preflight import FlagCheck, check_flag_sets, model_gap
from harness.scenario import Case
from harness.scenario.model import CpuRun, Hardware
from harness.util.errors import HarnessError
from harness.workload.prompts import Prompt

__all__ = ["CpuLauncher", "NOT_ON_CPU"]

NOT_ON_CPU = "does not run on the real-SGLang CPU build"


@dataclass(frozen=True)
class CpuLauncher:
    """Real SGLang from a ``deps=cpu`` environment, serving a tiny model on the CPU."""

    build: Build
    label: str = CPU_BUILD_LABEL
    is_reference: bool = False

    def case_for(self, case: Case) -> Case:
        on_cpu = case.for_cpu()
        sc = on_cpu.scenario
        server = sc.server
        update: dict[str, Any] = {}
        if is_tiny(server.model):
            update["model"] = str(tiny_model_path(server.model))
        if is_tiny(server.draft_model):
            update["draft_model"] = str(tiny_model_path(str(server.draft_model)))
        hardware = Hardware(gpus=0, cpus=sc.hardware.cpus, host_memory_gib=sc.hardware.host_memory_gib)
        # The overrides are applied now, once: a case written back out (minimize's candidates) must not have them
        # put back a flag the search took away. Why a case does not run here stays with it.
        cpu = CpuRun(unsupported=sc.cpu.unsupported) if sc.cpu is not None else None
        scenario = sc.model_copy(update={"server": server.model_copy(update=update), "hardware": hardware, "cpu": cpu})
        return case_in_build_words(self.build, replace(on_cpu, scenario=scenario))[0]

    def check_flags(self, flag_sets: Sequence[Sequence[str]]) -> list[FlagCheck]:
        return check_flag_sets(self.build, flag_sets)

    def missing(self, case: Case) -> str | None:
        if case.cpu_unsupported:
            return f"case {case.name} {NOT_ON_CPU}: {case.cpu_unsupported}"
        device = case.scenario.server.args.get("device")
        if str(device).lower() != "cpu":
            return (f"{case.file.name} does not say how it runs on the real-SGLang CPU build (its flags give "
                    f"--device {device or '(none: the GPU)'}): give it a `cpu:` section with server.args.device: cpu "
                    "and a tiny model (docs/scenario-format.md)")
        drift = contract_gap(self.build, case)
        if drift:
            return drift
        return self._models_gap(case)

    def _models_gap(self, case: Case) -> str | None:
        sc = case.scenario
        for model in filter(None, (sc.server.model, sc.server.draft_model)):
            tiny = tiny_name_of(model)
            if tiny is not None:
                try:
                    ensure_tiny_model(tiny, python=self.build.python)
                except HarnessError as exc:
                    return f"{tiny}: {exc}"
                continue
            gap = model_gap(model, load_format=None)
            if gap:
                return gap
        return None

    def gpus_needed(self, case: Case) -> int:
        return 0

    def prompts(self, case: Case, trial: int) -> list[Prompt]:
        from harness.launch.launcher import SGLangLauncher

        if case.scenario.workload.prompt.source != "random-ids":
            self._models_gap(case)  # a text prompt is cut with the model's tokenizer: the tiny model made first
        return SGLangLauncher(self.build).prompts(case, trial)

    def ground_truth(self, url: str) -> Mapping[str, Any] | None:
        return None  # SGLang's own accounting is read like any SGLang's (meta_info, /server_info)

    def begin_trial(self, url: str, headers: Mapping[str, str]) -> str | None:
        from harness.launch.launcher import flush_cache

        return flush_cache(url, headers)
