"""The profile of the build a run uses (harness.contract.profile), kept per build, and its case in the build's words.

Never a gate: a profile that cannot be read is recorded as such (``{"unavailable": why}``) and the run goes on.
For real SGLang it is read from the build's installed sources (cached per build in ``harness.build.cache``,
stamped with the files it reads); for the reference server it is the release whose rules the model follows
(``rules=VERSION``, harness.sim.release_rules), labelled as a model.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.build import Build
from harness.build.cache import cached_answer, file_stamps
from harness.contract.check import sglang_package_of
from harness.contract.profile import BuildProfile, ProfileUnavailable, compute_profile
from harness.contract.render import in_build_words
from harness.contract.sources import DirSources
from harness.scenario import Case
from harness.util.errors import InfraError

__all__ = ["build_profile", "case_in_build_words"]

logger = logging.getLogger(__name__)
_SAID: set[str] = set()

_SECTION = "profile"
# The files a profile reads (harness.contract.profile): a change to any of them computes it again.
_READ = ("srt/speculative/frozen_kv_mtp_worker_v2.py", "srt/speculative/frozen_kv_mtp_worker.py",
         "srt/layers/attention/trtllm_mha_backend.py", "srt/server_args.py", "srt/arg_groups/speculative_hook.py",
         "srt/speculative/spec_info.py", "srt/mem_cache/kv_index_translator.py", "srt/mem_cache/kv_cache_configurator.py",
         "srt/arg_groups/kv_cache_hook.py", "srt/arg_groups/pipeline.py")
# The code that computes it: a change to any of them computes it again too.
_CODE = ("build_profile.py", "../contract/profile.py", "../contract/guards.py", "../contract/derived.py")


def _reference_profile(build: Build) -> dict[str, Any]:
    from harness.build.reference_server import default_rules, rules_for

    knob = next((build.launcher[i + 1] for i, a in enumerate(build.launcher[:-1]) if a == "--sim-rules"), None)
    rules = rules_for(knob) if knob else default_rules()
    return {"model": "the CPU reference server (a model of SGLang, not SGLang)", "rules": knob or f"{rules.since} (default)",
            "eager_max_steps": rules.eager_max_steps, "topk_backends": list(rules.topk_backends),
            "swa_refill": rules.swa_refill}


def build_profile(build: Build) -> dict[str, Any]:
    """``build``'s profile as JSON-able data for the run record: :meth:`BuildProfile.to_json`, or
    ``{"unavailable": why}``."""
    if build.is_reference:
        return _reference_profile(build)
    try:
        package = Path(build.location) if build.location else sglang_package_of(build.python)
    except InfraError as exc:
        return {"unavailable": str(exc)}
    version = build.version or "unknown"
    identity = {"python": build.python, "version": version, "package": str(package),
                "files": file_stamps([package / name for name in _READ]),
                "code": [(Path(__file__).parent / name).stat().st_size for name in _CODE]}

    def compute() -> dict[str, Any]:
        try:
            return compute_profile(DirSources(package), version).to_json()
        except ProfileUnavailable as exc:
            return {"unavailable": str(exc)}

    answer: dict[str, Any] = cached_answer(build, _SECTION, identity, compute)
    return answer


def case_in_build_words(build: Build, case: Case) -> tuple[Case, tuple[str, ...]]:
    """``case`` with its server args in ``build``'s words (a deprecated flag written as its replacement) and a
    note per rewrite, logged here: pre-flight names the deprecation instead of a build failing on it later."""
    data = build_profile(build)
    if build.is_reference or "unavailable" in data:
        return case, ()
    rendered = in_build_words(case.scenario.server.args, BuildProfile.from_json(data))
    if not rendered.notes:
        return case, ()
    for note in rendered.notes:
        if note not in _SAID:  # once per process: a case is resolved more than once (pre-flight, the run)
            _SAID.add(note)
            logger.warning("pre-flight: %s", note)
    server = case.scenario.server.model_copy(update={"args": rendered.args})
    return replace(case, scenario=case.scenario.model_copy(update={"server": server})), rendered.notes
