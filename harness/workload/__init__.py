"""What is sent to a server: prompts of exact token counts, the request driver, stateful phases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.util.face import lazy_face

if TYPE_CHECKING:  # the face's names; each module is imported when one of its names is first used
    from harness.workload.driver import ErrorKind, request_body, run_workload
    from harness.workload.phases import PhasePlan, drive_phases, evaluate_phase_checks, phase_metric, phase_plans, refuse_flush
    from harness.workload.prompts import Prompt, fit_token_ids, prompt_lengths, random_id_prompts, text_prompts

__all__ = ["ErrorKind", "PhasePlan", "Prompt", "drive_phases", "evaluate_phase_checks", "fit_token_ids", "phase_metric",
           "phase_plans", "prompt_lengths", "random_id_prompts", "refuse_flush", "request_body", "run_workload", "text_prompts"]
__getattr__ = lazy_face(__name__)
