"""Which release's rules the reference server follows where SGLang's releases differ (``--sim-rules VERSION``).

A model, labelled as such: the reference server is not SGLang. Three of SGLang's decisions changed along the
release line, and the reference server takes them from the release named by ``--sim-rules`` (a build spec's
``rules=VERSION``, as in ``sim:pre-fix,rules=0.5.23``):

- the eager rule: the Frozen-KV MTP draft skips its CUDA graph at ``--speculative-num-steps <= eager_max_steps``
  (1 up to 0.5.22: ``frozen_kv_mtp_worker_v2.py`` 0.5.15 :347; 0: 0.5.23 :382, "even a one-step frozen draft
  runs the assistant seed forward"), or when CUDA graphs are off for decode and prefill;
- the backends a topk > 1 draft may run on (triton only, 0.5.14 :246-251; triton and trtllm_mha from 0.5.17);
- trtllm_mha's graph-path SWA refill in ``init_forward_metadata_out_graph``: ``unguarded`` (copies the live
  ``out_cache_loc`` into its ``max_num_tokens`` buffer with only a None check: 0.5.13.x, 0.5.14), ``none`` (no
  refill there: 0.5.12, 0.5.15-0.5.18), or ``present-but-unreachable`` (from 0.5.19 the copy is back, inside
  ``if self.kv_index_translator.is_translating:``, which needs ``--enable-unified-memory``, which SGLang refuses
  for FROZEN_KV_MTP: ``trtllm_mha_backend.py`` 0.5.19 :904/:931, 0.5.23 :1142/:1171, ``kv_cache_hook.py`` 0.5.19
  :224-229, 0.5.23 :588-600; a Frozen-KV MTP draft never runs it, so the model copies nothing there either).

One more follows the release asked for, not a row: how a SIGTERM stop ends (``sigterm_exit``): the launcher
SIGKILLs itself with its tree up to 0.5.18 (wait status -9), and from 0.5.19 kills only its children and exits 0
(``tokenizer_manager.py`` 0.5.18 :3157, 0.5.19 :3177-3178, 0.5.21 :3352/:3362; harness.sim.sglang_words).

The table is this module's, so the reference server stays self-contained (bisect's demo history copies only
``harness/sim/``); ``tests/test_release_line.py`` checks every row against the profile
(``harness.contract.profile``) computed from each release's real wheel. Without ``--sim-rules`` the server
follows 0.5.14's and 0.5.15's shared rules with 0.5.14's unguarded refill, as it always has. The rules keep the
release they were asked for (``release``), which the server's log names, not the row's first release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from harness.sim.sglang_words import SIGTERM_CLEAN_EXIT, SIGTERM_CLEAN_EXIT_SINCE, SIGTERM_SELF_KILL

__all__ = ["DEFAULT_RULES", "FIRST_MODELLED", "RULES", "ReleaseRules", "parse_release", "rules_for"]


@dataclass(frozen=True)
class ReleaseRules:
    """From release ``since`` on (until the next row): the eager rule's step bound, the topk > 1 backends and
    trtllm_mha's graph-path SWA refill; ``release``: the release asked for (``--sim-rules``), "" in the table."""

    since: str
    eager_max_steps: int
    topk_backends: tuple[str, ...]
    swa_refill: str  # "unguarded" | "none" | "present-but-unreachable" (the profile's words)
    release: str = ""

    @property
    def name(self) -> str:
        """The release these rules are followed as: the one asked for, else the row's first."""
        return self.release or self.since

    @property
    def sigterm_exit(self) -> int:
        """The launcher's wait status after a SIGTERM stop in the release these rules are followed as."""
        key, since = parse_release(self.name), parse_release(SIGTERM_CLEAN_EXIT_SINCE)
        return SIGTERM_CLEAN_EXIT if key is not None and since is not None and key >= since else SIGTERM_SELF_KILL

    @property
    def refills(self) -> bool:
        """Whether a Frozen-KV MTP draft's graph path copies the live out_cache_loc into the SWA buffer."""
        return self.swa_refill == "unguarded"


_TRITON = ("triton",)
_BOTH = ("triton", "trtllm_mha")
RULES: tuple[ReleaseRules, ...] = (
    ReleaseRules("0.5.12", 1, _TRITON, "none"),
    ReleaseRules("0.5.13", 1, _TRITON, "unguarded"),
    ReleaseRules("0.5.15", 1, _TRITON, "none"),
    ReleaseRules("0.5.17", 1, _BOTH, "none"),
    ReleaseRules("0.5.19", 1, _BOTH, "present-but-unreachable"),
    ReleaseRules("0.5.23", 0, _BOTH, "present-but-unreachable"),
)
FIRST_MODELLED = RULES[0].since
# No --sim-rules: today's model (0.5.14's rules; 0.5.15 shares its eager rule and topk backends).
DEFAULT_RULES = ReleaseRules("0.5.14", 1, _TRITON, "unguarded", release="0.5.14")

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def parse_release(text: str) -> tuple[int, int, int, int] | None:
    """``0.5.13.post1`` -> (0, 5, 13, 1); None for anything but a final or post release number."""
    match = _RELEASE.match(text.strip())
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]), int(match[4] or 0))


def rules_for(version: str | None) -> ReleaseRules:
    """The rules of release ``version`` (None: :data:`DEFAULT_RULES`); ValueError for a version that is not a
    release number or is older than the first release modelled."""
    if version is None:
        return DEFAULT_RULES
    key = parse_release(version)
    if key is None:
        raise ValueError(f"--sim-rules {version!r} is not a release number (e.g. 0.5.23 or 0.5.13.post1)")
    first = parse_release(FIRST_MODELLED)
    assert first is not None
    if key < first:
        raise ValueError(f"--sim-rules {version}: the reference server models releases from {FIRST_MODELLED} on")
    reached = [r for r in RULES if parse_release(r.since) <= key]  # type: ignore[operator]
    return replace(reached[-1], release=version.strip())
