"""Evidence levels over what people paste, and precision kept: on every real-log fixture triage confirms exactly
what the log matcher of runs matched before (the verdicts below were read with the code before levels existed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.signatures.catalogue import Catalogue
from harness.triage.levels import judge_text
from harness.triage.release_frames import fit_releases, sglang_frames
from harness.triage.stated_version import stated_version
from harness.triage.verdicts import triage_text

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CATALOGUE = Catalogue.load()
EAGER = "frozen-kv-mtp-stale-out-cache-loc"
MROPE = "mrope-draft-extend-fill-from-width"

# sglang-repro triage at e4d10fb/8ee6521 (the log matcher, first match in log order): (signature, line) or None
BEFORE: dict[str, tuple[str, int] | None] = {
    "logs/clean.log": None,
    "logs/cuda_oom.log": ("cuda-out-of-memory", 16),
    "logs/frozen_kv_mtp_271.log": (EAGER, 51),
    "logs/no_accelerator.log": ("no-accelerator", 12),
    "logs/sim_pre_fix_eager.log": (EAGER, 23),
    "logs/sim_pre_fix_graph_trtllm.log": ("frozen-kv-mtp-stale-out-cache-loc-graph", 31),
    "logs/unrelated_broadcast.log": None,
    "tracebacks/sglang-0.5.14-attention-backend-in-eager-draft.log": None,
    "tracebacks/sglang-0.5.14-graph-draft-path.log": None,
    "tracebacks/sglang-0.5.14-graph-draft-trtllm-swa-one-slot.log": ("frozen-kv-mtp-stale-out-cache-loc-graph", 22),
    "tracebacks/sglang-0.5.14-graph-draft-trtllm-swa.log": ("frozen-kv-mtp-stale-out-cache-loc-graph", 22),
    "tracebacks/sglang-0.5.14-graph-runner-own-copy-size.log": None,
    "tracebacks/sglang-0.5.14-real-fill_from-cpu.log": (EAGER, 14),
    "tracebacks/sglang-0.5.14-real-fill_from-meta.log": (EAGER, 18),
    # the real 0.5.14 server on the CPU build, its own scheduler traceback (compare --cpu): confirmed where it raised
    "tracebacks/sglang-0.5.14-real-server-cpu.log": (EAGER, 45),
    "tracebacks/sglang-0.5.14-sampler-below-model-runner.log": None,
    "tracebacks/sglang-0.5.14-target-graph-trtllm-refill.log": None,
    "tracebacks/upstream-28264-issue.log": (EAGER, 18),
    "tracebacks/upstream-comfyui-bmab-45-sampler.log": None,
}

# sglang#28264's body: the frames, no exception line (the message is in the title)
BODY_28264 = (FIXTURES / "triage" / "sglang-28264-issue-body.md").read_text(encoding="utf-8")
TITLE_28264 = ("[Bug] SGLang + Gemma w/ MTP + 4L40s + HiCache Config throws Error: \" output with shape [1] "
               "doesn't match the broadcast shape [276] \"")


def test_every_real_log_fixture_is_listed() -> None:
    on_disk = {f"{p.parent.name}/{p.name}" for d in ("logs", "tracebacks") for p in (FIXTURES / d).glob("*.log")}
    assert on_disk == set(BEFORE)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_precision_kept_confirmed_is_what_runs_matched_before(name: str) -> None:
    path = FIXTURES / name
    verdict = triage_text(path, path.read_text(encoding="utf-8"), CATALOGUE, releases=False)
    confirmed = [j.finding for j in verdict.judged if j.finding.level == "confirmed"]
    first = (confirmed[0].signature.id, confirmed[0].line_no) if confirmed and confirmed[0].signature else None
    assert first == BEFORE[name]
    # and the log matcher itself still says so
    match = CATALOGUE.match_file(path)
    assert ((match.signature.id, match.line_no) if match else None) == BEFORE[name]


def _best(text: str, title: str | None = None) -> tuple[str | None, str]:
    findings = judge_text(text, CATALOGUE, title)
    ranked = [f for f in findings if f.level != "none"]
    order = ("possible", "probable", "confirmed")
    top = max(ranked, key=lambda f: order.index(f.level), default=None)
    return (top.signature.id if top and top.signature else None, top.level if top else "none")


def test_frames_without_the_message_are_probable_and_the_title_confirms() -> None:
    assert _best(BODY_28264) == (EAGER, "probable")
    assert _best(BODY_28264, TITLE_28264) == (EAGER, "confirmed")


def test_a_message_alone_is_probable_when_specific_and_possible_when_generic() -> None:
    assert _best("it died with: output with shape [1] doesn't match the broadcast shape [271]") == (EAGER, "probable")
    generic = "RuntimeError: The size of tensor a (4) must match the size of tensor b (8) at non-singleton dimension 0"
    assert _best(generic)[1] == "possible"
    assert _best("RuntimeError: output with shape [1, 5, 7] doesn't match the broadcast shape [2, 5, 7]") == (None,
                                                                                                          "none")


def test_frames_of_other_code_make_the_message_nothing() -> None:
    text = (FIXTURES / "tracebacks" / "sglang-0.5.14-sampler-below-model-runner.log").read_text(encoding="utf-8")
    assert _best(text) == (None, "none")


def test_ansi_fences_quotes_and_rank_prefixes_are_read_through() -> None:
    lines = BODY_28264.split("\n")
    body = [x for x in lines if x.startswith("  ") and not x.startswith("# ")]
    pasted = ["> ```", *(f"> [2026-06-20 12:00:00 TP0] \x1b[31m{x}\x1b[0m" for x in body), "> ```",
              "Any idea?"]
    assert _best("\n".join(pasted)) == (EAGER, "probable")
    assert _best("\n".join(pasted), TITLE_28264) == (EAGER, "confirmed")
    # the prose after the fence ends the traceback; the finding points at its last frame line, not the prose
    finding = next(f for f in judge_text("\n".join(pasted), CATALOGUE) if f.source == "cut traceback")
    assert finding.line_no == len(pasted) - 2 and "_grouped_foreach_copy_" in pasted[finding.line_no - 1]


def test_several_tracebacks_are_each_judged() -> None:
    eager = (FIXTURES / "tracebacks" / "upstream-28264-issue.log").read_text(encoding="utf-8")
    oom = (FIXTURES / "logs" / "cuda_oom.log").read_text(encoding="utf-8")
    sampler = (FIXTURES / "tracebacks" / "sglang-0.5.14-sampler-below-model-runner.log").read_text(encoding="utf-8")
    findings = judge_text("\n".join([oom, "", "Traceback (most recent call last):", eager, "", sampler]), CATALOGUE)
    got = [(f.source, f.signature.id if f.signature else None, f.level) for f in findings if f.source == "traceback"]
    assert ("traceback", "cuda-out-of-memory", "confirmed") in got
    assert ("traceback", EAGER, "confirmed") in got
    assert ("traceback", None, "none") in got  # the sampler's


def test_siblings_are_named_with_what_decided() -> None:
    text = (FIXTURES / "triage" / "sglang-29516-issue-body.md").read_text(encoding="utf-8")
    findings = [f for f in judge_text(text, CATALOGUE) if f.signature is not None]
    sig = findings[0].signature
    assert sig is not None and sig.id == MROPE and sig.family == "frozen-kv-mtp-28264"
    assert {c.signature.id for c in findings[0].siblings} == {
        EAGER, "frozen-kv-mtp-stale-out-cache-loc-graph", "frozen-kv-mtp-trtllm-swa-illegal-memory-access"}
    body = judge_text(BODY_28264, CATALOGUE)[0]
    mrope = next(c for c in body.siblings if c.signature.id == MROPE)
    assert mrope.level == "none" and "draft-extend" in mrope.missing[0]  # its deciding frame is not there


def test_the_version_is_read_from_the_text() -> None:
    assert stated_version("sglang: 0.5.13.post1\nflashinfer: 0.6.14").version == "0.5.13.post1"
    assert stated_version("pip install sglang==0.5.14").version == "0.5.14"
    assert stated_version("image lmsysorg/sglang:v0.5.15-cu129").version == "0.5.15"
    assert stated_version("Name: sglang\nVersion: 0.5.16\nSummary: x").version == "0.5.16"
    found = stated_version('  File "/usr/lib/python3.12/site-packages/sglang-0.5.13.dist-info/x"')
    assert found.version == "0.5.13" and found.installed is False
    assert stated_version('File "/usr/local/lib/python3.12/dist-packages/sglang/srt/x.py"').installed
    assert stated_version("no version here").version is None
    assert stated_version("sglang: 0.5.13", given="0.5.15").version == "0.5.15"


def test_28264_frames_fit_only_the_0513_releases() -> None:
    """Hand-checked in the wheels: frozen_kv_mtp_worker.py:676, model_runner.py:3454/3573/3208/3188 and
    cuda_graph_buffer_registry.py:448/:52 are those lines of 0.5.13 and 0.5.13.post1; 0.5.14 has no
    frozen_kv_mtp_worker.py, 0.5.12 no cuda_graph_buffer_registry.py (and other code at those model_runner.py lines)."""
    frames = sglang_frames(BODY_28264.split("\n"))
    assert [f.label() for f in frames] == [
        "frozen_kv_mtp_worker.py:676 draft_forward", "model_runner.py:3454 forward", "model_runner.py:3573 _forward_raw",
        "model_runner.py:3208 forward_decode", "model_runner.py:3188 _eager_fb_view",
        "cuda_graph_buffer_registry.py:448 fill_from", "cuda_graph_buffer_registry.py:52 _grouped_foreach_copy_"]
    fit = fit_releases(frames, releases=("0.5.12", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15"))
    assert fit.error is None and fit.fits == ("0.5.13", "0.5.13.post1")
    verdict = triage_text(Path("body.md"), BODY_28264, CATALOGUE)
    assert verdict.best is not None and verdict.best.fixed == (
        "known bug, fixed in 0.5.15 (PR #29616); 0.5.13 and 0.5.13.post1 lack the fix "
        "(its 7 sglang frames fit 0.5.13, 0.5.13.post1 line for line, no other release)")
    stated = triage_text(Path("body.md"), BODY_28264, CATALOGUE, version="0.5.16")
    assert stated.best is not None and stated.best.fixed is not None
    assert stated.best.fixed.startswith("0.5.16 has the fix (0.5.15, PR #29616): a regression or a new bug")


def _frames_from_wheel(version: str, frames: list[tuple[str, int, str]]) -> list[str]:
    """A traceback's frame lines as Python prints them, each code line read from the release's own wheel."""
    from harness.contract.wheels import WheelSources

    sources = WheelSources.of(version)
    out = []
    for path, line, function in frames:
        code = (sources.lines(path) or [])[line - 1].strip()
        out += [f'  File "/sgl-workspace/sglang/python/sglang/{path}", line {line}, in {function}', f"    {code}"]
    return out


def test_the_mrope_sibling_is_told_from_28264_by_its_draft_extend_frame() -> None:
    """The MRoPE draft-extend path of 0.5.13.post1 (eagle_worker_v2.py _draft_extend_for_decode -> model_runner
    forward -> _forward_raw -> forward_extend -> _eager_fb_view -> fill_from), printed from the wheel: the same
    registry frames as #28264, another cause; the draft-extend frame decides."""
    mr, reg = "srt/model_executor/model_runner.py", "srt/model_executor/cuda_graph_buffer_registry.py"
    frames = _frames_from_wheel("0.5.13.post1", [
        ("srt/speculative/eagle_worker_v2.py", 778, "_draft_extend_for_decode"), (mr, 3454, "forward"),
        (mr, 3584, "_forward_raw"), (mr, 3298, "forward_extend"), (mr, 3188, "_eager_fb_view"),
        (reg, 448, "fill_from"), (reg, 52, "_grouped_foreach_copy_")])
    text = "\n".join(["[2026-06-27 14:30:24] Scheduler hit an exception: Traceback (most recent call last):", *frames,
                      "RuntimeError: The size of tensor a (96) must match the size of tensor b (90) at non-singleton "
                      "dimension 1"])
    verdict = triage_text(Path("qwen.log"), text, CATALOGUE)
    best = verdict.best
    assert best is not None and best.finding.signature is not None
    assert (best.finding.signature.id, best.finding.level) == (MROPE, "confirmed")
    assert "frame eagle_worker_v2.py:778 _draft_extend_for_decode" in best.finding.best.seen  # type: ignore[union-attr]
    eager = next(c for c in best.finding.siblings if c.signature.id == EAGER)
    assert eager.level == "none"  # not its message; and its eager-decode frames are not there
    # eagle_worker_v2.py changed between 0.5.13 and 0.5.13.post1: these frames fit one release, and say so
    assert best.fit is not None and best.fit.fits == ("0.5.13.post1",)
    assert best.fixed == ("known bug, fixed in 0.5.14 (PR #28464); 0.5.13.post1 lacks the fix "
                          "(its 7 sglang frames fit only 0.5.13.post1, line for line)")
    # the log matcher of runs takes it for the sibling too, never for #28264
    match = CATALOGUE.match_text(text)
    assert match is not None and match.signature.id == MROPE
