"""Real SGLang serving a tiny Llama on the CPU: it answers, caches prefixes, and stops without survivors.

All of it is SGLang's own code between the HTTP edge and the kernels (the build: "real SGLang, plain-torch
kernels on CPU"); the figures measured here describe this CPU, never a GPU.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from harness.contract import facts as contract
from tests.sglang_cpu.observe import GET_PATHS, Observations, stream_events

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sglang_cpu")]


def test_every_endpoint_answers(plain_server: Observations) -> None:
    statuses = {path: plain_server.get[path][0] for path in GET_PATHS}
    assert statuses == dict.fromkeys(GET_PATHS, 200), f"sglang {plain_server.version}: {statuses}"
    assert plain_server.flush_status == 200


def test_generate_plain_by_ids_and_streamed_agree(plain_server: Observations) -> None:
    ids = plain_server.generated["output_ids"]
    assert isinstance(ids, list) and len(ids) == 8, plain_server.generated
    assert isinstance(plain_server.generated_by_ids.get("output_ids"), list)
    events = stream_events(plain_server.stream_raw)
    assert events[-1].strip() == contract.STREAM_DONE
    last = json.loads(events[-2][len(contract.STREAM_DATA_PREFIX):])
    assert last["output_ids"][-len(ids):] == ids or last["output_ids"] == ids, "greedy: a stream and a plain call agree"


def test_prefix_cache_hits_then_flush_empties_it(plain_server: Observations) -> None:
    prompt_tokens = plain_server.cached_second["prompt_tokens"]
    assert isinstance(prompt_tokens, int)
    assert plain_server.cached_second["cached_tokens"] == prompt_tokens - 1, plain_server.cached_second
    assert plain_server.after_flush["cached_tokens"] == 0, plain_server.after_flush


def test_sigterm_leaves_no_process_of_sglangs_tree(plain_server: Observations) -> None:
    stopped = plain_server.stopped
    assert stopped is not None
    names = " ".join(stopped.tree)
    assert "sglang::scheduler" in names and "sglang::detokenizer" in names, stopped.tree
    assert stopped.survivors == (), f"sglang {plain_server.version}: left after SIGTERM: {stopped.survivors}"
    assert plain_server.drain_status == 200, "the request in flight at SIGTERM is drained, not dropped"


def test_figures_are_recorded(plain_server: Observations, record_property: Callable[[str, object], None]) -> None:
    """Start-up, memory and speed of this build on this machine (figures, not thresholds: the machine is shared)."""
    record_property("ready_s", round(plain_server.ready_s, 1))
    record_property("tree_rss_gb", round(plain_server.tree_rss_bytes / 1e9, 2))
    record_property("decode_tokens_per_s", round(plain_server.decode_tokens_per_s, 1))
    record_property("sigterm_to_gone_s", round(plain_server.stopped.seconds, 1) if plain_server.stopped else None)
    assert plain_server.prompt_tokens_for_speed >= 150
    assert plain_server.decode_tokens_per_s > 0
