"""Collected tracebacks of the #28264 family: every positive matches, also with any one frame lost, under any
SGLang rank prefix; no negative does. One positive is regenerated from sglang 0.5.14's own code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.contract.facts import LOG_RANK_TAGS
from harness.signatures.catalogue import Catalogue
from harness.signatures.frame_evidence import FILE_LINE

ROOT = Path(__file__).resolve().parent.parent
TRACEBACKS = ROOT / "fixtures" / "tracebacks"
BUG = "frozen-kv-mtp-stale-out-cache-loc"
SOURCES = yaml.safe_load((TRACEBACKS / "sources.yaml").read_text(encoding="utf-8"))["tracebacks"]
POSITIVES = [e["file"] for e in SOURCES if e["expect"] == "positive"]
EXPECTED = {e["file"]: e.get("signature", BUG) for e in SOURCES if e["expect"] == "positive"}
# the two forms PyTorch gives a copy that cannot broadcast
MESSAGES = re.compile(r"doesn't match the broadcast shape|The size of tensor a \(\d+\) must match the size of tensor b")
NEGATIVES = [e["file"] for e in SOURCES if e["expect"] == "negative"]
CATALOGUE = Catalogue.load()


def lines_of(name: str) -> list[str]:
    return (TRACEBACKS / name).read_text(encoding="utf-8").rstrip("\n").split("\n")


def frames_of(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each printed frame: its File line and the code/caret lines under it."""
    starts = [i for i, line in enumerate(lines) if FILE_LINE.match(_content(line))]
    spans = []
    for k, start in enumerate(starts):
        end = start + 1
        limit = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while end < limit and _content(lines[end])[:1] in (" ", "\t"):
            end += 1
        spans.append((start, end))
    return spans


def _content(line: str) -> str:
    return re.sub(r"^\[[^\]]*\] (?:Scheduler hit an exception: )?", "", line)


def drop_frame(lines: list[str], index: int) -> list[str]:
    start, end = frames_of(lines)[index]
    return lines[:start] + lines[end:]


def with_rank_prefix(lines: list[str], tags: str, every_line: bool) -> list[str]:
    """SGLang's prefix on the first line (the rest bare, as its logger prints one message), or on every line."""
    prefix = f"[2026-06-29 10:00:00{' ' + tags if tags else ''}] "
    if every_line:
        return [prefix + line for line in lines]
    return [prefix + lines[0], *lines[1:]]


# every combination SGLang's scheduler can write, in its order (scheduler.py: DP, PP, ATTN_CP, MOE_DP, TP, EP)
TAG_SETS = st.lists(st.booleans(), min_size=len(LOG_RANK_TAGS), max_size=len(LOG_RANK_TAGS)).map(
    lambda on: " ".join(f"{tag}{i % 4}" for i, (tag, yes) in enumerate(zip(LOG_RANK_TAGS, on, strict=True)) if yes)
)


def test_every_listed_fixture_exists_with_a_source() -> None:
    listed = {e["file"] for e in SOURCES}
    assert listed == {p.name for p in TRACEBACKS.glob("*.log")}
    for entry in SOURCES:
        assert entry["url"].startswith("https://") and entry["origin"] in ("upstream", "real-code", "real-server", "constructed")
    assert any(e["origin"] == "upstream" and e["expect"] == "positive" for e in SOURCES)


@pytest.mark.parametrize("name", POSITIVES)
def test_positive_matches_with_its_group(name: str) -> None:
    match = CATALOGUE.match_text("\n".join(lines_of(name)))
    assert match is not None and match.signature.id == EXPECTED[name], name
    assert match.groups == ("276",)


@pytest.mark.parametrize("name", NEGATIVES)
def test_negative_does_not_match(name: str) -> None:
    text = "\n".join(lines_of(name))
    assert MESSAGES.search(text)
    assert CATALOGUE.match_text(text) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tags=TAG_SETS, every_line=st.booleans())
def test_any_one_frame_lost_still_matches(data: st.DataObject, tags: str, every_line: bool) -> None:
    name = data.draw(st.sampled_from(POSITIVES))
    lines = lines_of(name)
    index = data.draw(st.integers(0, len(frames_of(lines)) - 1))
    cut = with_rank_prefix(drop_frame(lines, index), tags, every_line)
    match = CATALOGUE.match_text("\n".join(cut))
    assert match is not None and match.signature.id == EXPECTED[name], (name, index, tags)
    assert match.groups == ("276",)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tags=TAG_SETS, every_line=st.booleans(), drop=st.booleans())
def test_no_negative_matches_however_cut_or_prefixed(
    data: st.DataObject, tags: str, every_line: bool, drop: bool
) -> None:
    name = data.draw(st.sampled_from(NEGATIVES))
    lines = lines_of(name)
    if drop:
        lines = drop_frame(lines, data.draw(st.integers(0, len(frames_of(lines)) - 1)))
    assert CATALOGUE.match_text("\n".join(with_rank_prefix(lines, tags, every_line))) is None


@settings(max_examples=60, deadline=None)
@given(tags=TAG_SETS, other=TAG_SETS)
def test_a_positive_interleaved_with_another_ranks_lines_matches(tags: str, other: str) -> None:
    if tags == other:
        other = "TP9" if tags != "TP9" else "TP8"
    lines = with_rank_prefix(lines_of("upstream-28264-issue.log"), tags, every_line=True)
    noise = f"[2026-06-29 10:00:00{' ' + other if other else ''}] Decode batch, #running-req: 1, #token: 300,"
    mixed = [x for line in lines for x in (line, noise)]
    match = CATALOGUE.match_text("\n".join(mixed))
    assert match is not None and match.signature.id == BUG
    assert noise not in match.excerpt


# -- sglang 0.5.14's own code --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_real_0514_fill_from_traceback_is_triaged_as_the_bug(device: str, tmp_path: Path) -> None:
    from tests.real_fill_from import real_fill_from_traceback
    from tests.real_sglang import real_sglang

    release = real_sglang("0.5.14")
    stderr = real_fill_from_traceback(release, device=device, prompt_len=276)
    assert stderr.rstrip().endswith("RuntimeError: output with shape [1] doesn't match the broadcast shape [276]")
    log = tmp_path / "server.log"
    log.write_text(stderr, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "triage", "--explain", str(log)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"{log}: {BUG} (bug)")
    assert "+ cuda_graph_buffer_registry.py fill_from" in proc.stdout
    assert "+ eager_runner.py load_batch" in proc.stdout
    # the stored fixture is what this code prints (paths shortened)
    body = stderr[stderr.index("Traceback (most recent call last):"):]
    body = body.replace(str(release.package.parent), "/venv/lib/python3.11/site-packages")
    body = re.sub(r'File "[^"]*eager_decode_with_stale_out_cache_loc.py"',
                  'File "/tmp/eager_decode_with_stale_out_cache_loc.py"', body)
    assert body.rstrip("\n").split("\n") == lines_of(f"sglang-0.5.14-real-fill_from-{device}.log")


def test_chained_exceptions_either_way_round() -> None:
    bug = ["Traceback (most recent call last):", *lines_of("upstream-28264-issue.log")]
    other = ["Traceback (most recent call last):", '  File "/x/scheduler.py", line 1, in run_scheduler_process',
             "    scheduler.event_loop()", "ValueError: the scheduler gave up"]
    for first, second, link in (
        (bug, other, "During handling of the above exception, another exception occurred:"),
        (other, bug, "The above exception was the direct cause of the following exception:"),
    ):
        text = "\n".join(["[2026-06-29 10:00:00 TP0] Scheduler hit an exception: " + first[0], *first[1:], "",
                          link, "", *second])
        match = CATALOGUE.match_text(text)
        assert match is not None and match.signature.id == BUG and match.groups == ("276",)
        assert "ValueError" not in match.excerpt
