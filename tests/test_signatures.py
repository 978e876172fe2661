"""The crash-signature catalogue and the log matcher."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.signatures.catalogue import (
    Catalogue,
    default_catalogue_path,
    last_traceback,
    looks_like_crash,
)
from harness.util.errors import UserError

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
BUG = "frozen-kv-mtp-stale-out-cache-loc"


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.load()


def upstream_traceback(n: int, *, root: str = "/sgl-workspace/sglang/python/sglang/srt", v2: bool = False) -> list[str]:
    """The frames of #28264, innermost last, ending in PyTorch's message for prompt length ``n``."""
    worker = "frozen_kv_mtp_worker_v2.py" if v2 else "frozen_kv_mtp_worker.py"
    return [
        "Traceback (most recent call last):",
        f'  File "{root}/managers/scheduler.py", line 2611, in run_batch',
        "    batch_result = self.model_worker.forward_batch_generation(model_worker_batch)",
        f'  File "{root}/speculative/{worker}", line 676, in draft_forward',
        "    seed_output = self.draft_model_runner.forward(forward_batch).logits_output",
        f'  File "{root}/model_executor/model_runner.py", line 3454, in forward',
        "    output = self._forward_raw(",
        f'  File "{root}/model_executor/model_runner.py", line 3573, in _forward_raw',
        "    ret = self.forward_decode(",
        f'  File "{root}/model_executor/model_runner.py", line 3208, in forward_decode',
        "    forward_batch = self._eager_fb_view(forward_batch, pp_proxy_tensors)",
        f'  File "{root}/model_executor/model_runner.py", line 3188, in _eager_fb_view',
        "    registry.fill_from(",
        f'  File "{root}/model_executor/cuda_graph_buffer_registry.py", line 448, in fill_from',
        "    _grouped_foreach_copy_(gpu_dsts, gpu_srcs)",
        f'  File "{root}/model_executor/cuda_graph_buffer_registry.py", line 52, in _grouped_foreach_copy_',
        "    torch._foreach_copy_(dsts, srcs)",
        f"RuntimeError: output with shape [1] doesn't match the broadcast shape [{n}]",
    ]


# -- the catalogue file ------------------------------------------------------------------------


def test_catalogue_has_the_required_entries(catalogue: Catalogue) -> None:
    assert catalogue.source == default_catalogue_path()
    expected = {
        BUG: "bug",
        "frozen-kv-mtp-stale-out-cache-loc-graph": "bug",
        "cuda-out-of-memory": "bug",
        "cuda-illegal-memory-access": "bug",
        "nccl-error": "infra",
        "address-already-in-use": "infra",
        "model-not-found": "infra",
        "no-accelerator": "infra",
    }
    for sig_id, kind in expected.items():
        assert catalogue.get(sig_id).kind == kind
    assert "https://github.com/sgl-project/sglang/issues/28264" in catalogue.get(BUG).upstream
    assert "https://github.com/sgl-project/sglang/pull/29616" in catalogue.get(BUG).upstream
    assert "https://github.com/sgl-project/sglang/issues/29021" in catalogue.get(f"{BUG}-graph").upstream
    assert all("sim-" not in i for i in catalogue.ids)  # no failure of the reference server's own invention
    assert len(catalogue.get(BUG).frames) >= 3
    # specific before generic: the family of #28264 (the MRoPE sibling's narrower message first) above the rest
    family = [s.id for s in catalogue.signatures if s.family == "frozen-kv-mtp-28264"]
    assert catalogue.ids[: len(family)] == tuple(family) and BUG in family
    assert catalogue.ids.index(f"{BUG}-graph") < catalogue.ids.index("cuda-illegal-memory-access")


def test_get_unknown_id_names_it(catalogue: Catalogue) -> None:
    with pytest.raises(KeyError, match="no-such-thing"):
        catalogue.get("no-such-thing")
    with pytest.raises(KeyError, match="no-such-thing"):
        catalogue.stream(only=["no-such-thing"])


GOOD_ENTRY = """\
  - id: demo
    title: Demo
    kind: bug
    upstream: [https://example.org/1]
    message: "boom (\\\\d+)"
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (GOOD_ENTRY + "    frames: ['(unclosed']\n", r"cat\.yaml:3: signature 'demo': frames\[0\]: bad regex"),
        (GOOD_ENTRY.replace('"boom (\\\\d+)"', '"boom ("'), r"cat\.yaml:3: signature 'demo': message: bad regex"),
        (GOOD_ENTRY + "    colour: red\n", r"signature 'demo': unknown key\(s\) colour"),
        (GOOD_ENTRY + GOOD_ENTRY, r"cat\.yaml:8: signature 'demo': duplicate id"),
        (GOOD_ENTRY.replace("kind: bug", "kind: flaky"), r"signature 'demo': kind: 'flaky' is not valid; valid: bug, infra"),
        (GOOD_ENTRY.replace("    title: Demo\n", ""), r"signature 'demo': missing key\(s\) title"),
        (GOOD_ENTRY.replace("https://example.org/1", "not-a-url"), r"signature 'demo': upstream"),
        (GOOD_ENTRY.replace("id: demo", "id: Bad_Id"), r"signatures\[0\]: id: 'Bad_Id' is not valid"),
        (GOOD_ENTRY + "    frames: []\n", r"signature 'demo': frames: expected a non-empty list"),
        # triage's keys
        (GOOD_ENTRY + "    family: nowhere\n", r"signature 'demo': family: 'nowhere' is not one of the catalogue's"),
        (GOOD_ENTRY + "    message_alone: sure\n", r"signature 'demo': message_alone: 'sure' is not valid; valid: probable"),
        (GOOD_ENTRY + "    fixed: {version: soon, pr: 'https://x/pull/1'}\n", r"fixed\.version: 'soon' is not a release"),
        (GOOD_ENTRY + "    fixed: {version: 0.5.15}\n", r"signature 'demo': fixed: expected a mapping with exactly the keys"),
        (GOOD_ENTRY + "    context: ['(unclosed']\n", r"signature 'demo': context\[0\]: bad regex"),
        (GOOD_ENTRY + "    context: [x]\n    frames: ['y']\n", r"context: only for an entry without frames"),
        (GOOD_ENTRY + "    frames: [{file: a, function: b, tags: [t]}]\n    evidence: {alone: [u]}\n",
         r"evidence\.alone: unknown tag\(s\) u; tags of the frames: t"),
    ],
)
def test_bad_catalogue_is_a_user_error_naming_file_and_id(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text("version: 1\nsignatures:\n" + body)
    with pytest.raises(UserError, match=expected) as info:
        Catalogue.load(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("signatures: [\n", r"cat\.yaml:\d+: not valid YAML"),
        ("version: 2\nsignatures:\n" + GOOD_ENTRY, r"version: 2 is not supported"),
        ("- just a list\n", r"expected a mapping with exactly the keys"),
    ],
)
def test_bad_catalogue_structure(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=expected):
        Catalogue.load(path)


def test_missing_catalogue(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        Catalogue.load(tmp_path / "absent.yaml")


def test_custom_catalogue_matches_with_groups(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    path.write_text("version: 1\nsignatures:\n" + GOOD_ENTRY)
    match = Catalogue.load(path).match_text("fine\nstill fine\nboom 42\n")
    assert match is not None
    assert (match.signature.id, match.line_no, match.line, match.groups) == ("demo", 3, "boom 42", ("42",))


# -- the known bug: anchored on its frames -----------------------------------------------------


@pytest.mark.parametrize("n", [271, 276, 1])
@pytest.mark.parametrize("v2", [False, True])
def test_stale_out_cache_loc_matches_any_n(catalogue: Catalogue, n: int, v2: bool) -> None:
    lines = ["[2026-06-29 10:00:00] The server is fired up and ready to roll!"] + upstream_traceback(n, v2=v2)
    lines[1] = "[2026-06-29 10:00:01] Scheduler hit an exception: " + lines[1]
    match = catalogue.match_text("\n".join(lines) + "\n\n[2026-06-29 10:00:01] Received sigquit\n")
    assert match is not None
    assert match.signature.id == BUG
    assert match.groups == (str(n),)
    assert match.line_no == len(lines)
    assert match.line.endswith(f"[{n}]")
    assert match.excerpt.splitlines()[0].endswith("Traceback (most recent call last):")
    assert "fill_from" in match.excerpt and match.excerpt.splitlines()[-1] == match.line


def test_fixture_logs(catalogue: Catalogue) -> None:
    found = {p.name: catalogue.match_file(p) for p in LOGS.glob("*.log")}
    ids = {name: (m.signature.id if m else None) for name, m in found.items()}
    assert ids == {
        "frozen_kv_mtp_271.log": BUG,
        "sim_pre_fix_eager.log": BUG,
        "sim_pre_fix_graph_trtllm.log": f"{BUG}-graph",
        "cuda_oom.log": "cuda-out-of-memory",
        "no_accelerator.log": "no-accelerator",
        "unrelated_broadcast.log": None,
        "clean.log": None,
    }
    assert (m271 := found["frozen_kv_mtp_271.log"]) is not None and m271.groups == ("271",)
    assert (m288 := found["sim_pre_fix_graph_trtllm.log"]) is not None and m288.groups == ("288",)
    assert (m276 := found["sim_pre_fix_eager.log"]) is not None and m276.groups == ("276",)


def test_same_message_from_other_code_is_not_the_known_bug(catalogue: Catalogue) -> None:
    text = (LOGS / "unrelated_broadcast.log").read_text()
    assert "doesn't match the broadcast shape [276]" in text
    assert catalogue.match_text(text) is None
    # the generic matcher still sees a crash, and reports its traceback as the reason
    assert looks_like_crash(text)
    reason = last_traceback(text)
    assert reason is not None and reason.splitlines()[-1].startswith("RuntimeError: output with shape [1]")


def test_message_without_traceback_or_with_too_little_evidence_does_not_match(catalogue: Catalogue) -> None:
    message = "RuntimeError: output with shape [1] doesn't match the broadcast shape [276]"
    assert catalogue.match_text(message) is None
    frames = upstream_traceback(276)
    # no trace of the eager path at all (neither its frames nor a call to them): not this bug
    no_eager = [line for line in frames if "forward_decode" not in line and "_eager_fb_view" not in line]
    assert catalogue.match_text("\n".join(no_eager)) is None
    # the outer frames alone, the message raised right below them
    outer = [line for line in frames if "cuda_graph_buffer_registry" not in line and "fill_from" not in line
             and "_foreach_copy_" not in line]
    assert catalogue.match_text("\n".join(outer)) is None


def test_a_lost_registry_frame_is_still_evidenced_by_its_callers_code_line(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276)
    # the raising helper's frames are gone, but _eager_fb_view's code line shows the call into fill_from
    cut = [line for line in frames if "cuda_graph_buffer_registry" not in line and "_foreach_copy_" not in line]
    match = catalogue.match_text("\n".join(cut))
    assert match is not None and match.evidence is not None
    fill = next(h for h in match.evidence.hits if h.frame.endswith("fill_from"))
    assert (fill.via, fill.text) == ("code", "registry.fill_from(")


def test_frames_must_appear_in_order(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276)
    body, message = frames[1:-1], frames[-1]
    pairs = [body[i:i + 2] for i in range(0, len(body), 2)]
    reversed_body = [line for pair in reversed(pairs) for line in pair]
    assert catalogue.match_text("\n".join([frames[0], *reversed_body, message])) is None


def test_frames_of_an_earlier_traceback_do_not_count(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276)
    other = [
        "Traceback (most recent call last):",
        '  File "/opt/plugins/custom_model/modeling.py", line 211, in forward',
        "    hidden_states += residual_cache[request_slot]",
        frames[-1],
    ]
    # the bug's frames end in another exception; the broadcast error comes from other code
    text = "\n".join([*frames[:-1], "ValueError: something else", *other])
    assert catalogue.match_text(text) is None


# -- real log shapes: prefixes, interleaving, several ranks ------------------------------------


def test_interleaved_lines_of_other_ranks(catalogue: Catalogue) -> None:
    frames = upstream_traceback(271)
    lines = ["[2026-06-29 10:00:00 TP0] Scheduler hit an exception: " + frames[0]]
    for i, line in enumerate(frames[1:]):
        lines.append(line)
        if i % 3 == 0:
            lines.append(f"[2026-06-29 10:00:00 TP1] Decode batch, #running-req: 1, #token: {300 + i}, token usage: 0.00,")
    match = catalogue.match_text("\n".join(lines))
    assert match is not None and match.signature.id == BUG and match.groups == ("271",)
    assert "TP1" not in match.excerpt


def test_every_line_prefixed_and_interleaved(catalogue: Catalogue) -> None:
    lines = []
    for i, line in enumerate(upstream_traceback(276)):
        lines.append(f"[2026-06-29 10:00:00 DP0 TP1] {line}")
        lines.append(f"[2026-06-29 10:00:00 DP0 TP0] Decode batch, #running-req: 1, #token: {i},")
    match = catalogue.match_text("\n".join(lines))
    assert match is not None and match.signature.id == BUG and match.groups == ("276",)
    assert match.line.startswith("[2026-06-29 10:00:00 DP0 TP1] RuntimeError")


def test_two_ranks_crash_first_in_log_order_wins(catalogue: Catalogue) -> None:
    def rank(tag: str, n: int) -> list[str]:
        frames = upstream_traceback(n)
        return [f"[2026-06-29 10:00:00 {tag}] {line}" for line in frames]

    tp0, tp1 = rank("TP0", 271), rank("TP1", 276)
    interleaved = [line for pair in zip(tp0, tp1) for line in pair]
    match = catalogue.match_text("\n".join(interleaved))
    assert match is not None and match.groups == ("271",)
    assert match.line_no == len(interleaved) - 1


def test_container_runtime_prefixes(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276)
    frames[0] = "[2026-06-29 10:00:00 TP2] Scheduler hit an exception: " + frames[0]
    lines = [f"2026-06-29T10:00:00.{i:06d}+08:00 stdout F {line}" for i, line in enumerate(frames)]
    match = catalogue.match_text("\n".join(lines))
    assert match is not None and match.signature.id == BUG


def test_reference_server_paths(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276, root="/work/main/harness/sim")
    frames = [line.replace("/speculative/", "/").replace("/model_executor/", "/") for line in frames]
    match = catalogue.match_text("\n".join(frames))
    assert match is not None and match.signature.id == BUG


# -- streaming ---------------------------------------------------------------------------------


def test_stream_reports_on_the_matching_line(catalogue: Catalogue) -> None:
    matcher = catalogue.stream()
    results = [matcher.feed(line + "\n") for line in upstream_traceback(271)]
    assert all(r is None for r in results[:-1])
    assert results[-1] is not None and results[-1].line_no == len(results)
    assert matcher.last_traceback() == "\n".join(upstream_traceback(271))


def test_stream_only_restricts(catalogue: Catalogue) -> None:
    text = (LOGS / "cuda_oom.log").read_text()
    assert catalogue.match_text(text, only=[BUG]) is None
    assert catalogue.match_text(text, only=["cuda-out-of-memory"]) is not None


def test_deep_traceback_is_bounded_and_still_matches(catalogue: Catalogue) -> None:
    frames = upstream_traceback(276)
    deep = [f'  File "/x/recursive.py", line {i}, in helper' for i in range(20_000)]
    match = catalogue.match_text("\n".join([frames[0], *deep, *frames[1:]]))
    assert match is not None and match.signature.id == BUG
    assert len(match.excerpt.splitlines()) <= 400


def test_quoted_message_in_source_line_matches_on_exception_line(catalogue: Catalogue) -> None:
    text = (LOGS / "no_accelerator.log").read_text()
    match = catalogue.match_text(text)
    assert match is not None and match.signature.id == "no-accelerator"
    assert match.line.startswith("RuntimeError: No accelerator")
    assert match.excerpt.startswith("Traceback (most recent call last):")


@pytest.mark.parametrize(
    ("line", "sig_id"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda-illegal-memory-access"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda-out-of-memory"),
        ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl-error"),
        ("[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
         "address-already-in-use"),
        ("OSError: [Errno 98] Address already in use", "address-already-in-use"),
        ("huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: x)", "model-not-found"),
        ("OSError: /models/missing is not a local folder and is not a valid model identifier listed on "
         "'https://huggingface.co/models'", "model-not-found"),
        ("OSError: Can't load the configuration of 'google/nope'.", "model-not-found"),
        ("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available.", "no-accelerator"),
        ("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available.", "no-accelerator"),
    ],
)
def test_generic_signatures(catalogue: Catalogue, line: str, sig_id: str) -> None:
    match = catalogue.match_text(f"[2026-06-29 10:00:00 TP0] starting\n{line}\n")
    assert match is not None and match.signature.id == sig_id and match.line_no == 2


def test_clean_log_and_helpers(catalogue: Catalogue) -> None:
    text = (LOGS / "clean.log").read_text()
    assert catalogue.match_text(text) is None
    assert last_traceback(text) is None
    assert not looks_like_crash(text)


def test_last_traceback_is_the_last_one() -> None:
    first = upstream_traceback(1)
    second = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "ValueError: second"]
    assert last_traceback("\n".join([*first, "log line", *second, "after"])) == "\n".join(second)


# -- a real traceback, printed by Python, with PyTorch's own message ---------------------------


def _write_module_tree(root: Path, names: dict[str, str]) -> None:
    for name, body in names.items():
        (root / name).write_text(textwrap.dedent(body))


@pytest.mark.slow
def test_real_python_traceback_with_pytorch_message(tmp_path: Path, catalogue: Catalogue) -> None:
    pytest.importorskip("torch")
    _write_module_tree(tmp_path, {
        "cuda_graph_buffer_registry.py": """
            import torch
            def _grouped_foreach_copy_(dsts, srcs):
                torch._foreach_copy_(dsts, srcs)
            def fill_from(dst, src, bs):
                _grouped_foreach_copy_([dst[:bs]], [src])
        """,
        "model_runner.py": """
            import torch
            import cuda_graph_buffer_registry as registry
            def _eager_fb_view(out_cache_loc):
                registry.fill_from(torch.zeros(8), out_cache_loc, 1)
            def forward_decode(out_cache_loc):
                _eager_fb_view(out_cache_loc)
            def forward(out_cache_loc):
                forward_decode(out_cache_loc)
        """,
        "frozen_kv_mtp_worker_v2.py": """
            import torch
            import model_runner
            def draft_forward(prompt_len):
                model_runner.forward(torch.zeros(prompt_len))
            draft_forward(271)
        """,
        "unrelated.py": """
            import torch
            def forward(prompt_len):
                torch._foreach_copy_([torch.zeros(1)], [torch.zeros(prompt_len)])
            forward(276)
        """,
    })

    def run(script: str) -> str:
        proc = subprocess.run(
            [sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 1, proc.stderr
        return proc.stderr

    bug = run("frozen_kv_mtp_worker_v2.py")
    match = catalogue.match_text(bug)
    assert match is not None and match.signature.id == BUG and match.groups == ("271",)

    other = run("unrelated.py")
    assert "doesn't match the broadcast shape [276]" in other
    assert catalogue.match_text(other) is None


def test_line_numbers_agree_between_text_and_file(tmp_path: Path, catalogue: Catalogue) -> None:
    progress = "Capturing batches:  10%|#         | 1/10\rCapturing batches: 100%|##########| 10/10"
    text = "\n".join(["start", progress, "form\x0cfeed", *upstream_traceback(276)]) + "\r\n"
    path = tmp_path / "server.log"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    from_text, from_file = catalogue.match_text(text), catalogue.match_file(path)
    assert from_text is not None and from_file is not None
    assert from_text.line_no == from_file.line_no == 3 + len(upstream_traceback(276))
    assert from_file.line == from_text.line.rstrip("\r")


# -- every rank tag SGLang writes (harness.contract.facts.LOG_RANK_TAGS, scheduler.py's order) ----------


def test_every_combination_of_sglangs_rank_tags_is_a_prefix() -> None:
    import itertools

    from harness.contract.facts import LOG_RANK_TAGS
    from harness.signatures.catalogue import _split_prefix

    for n in range(len(LOG_RANK_TAGS) + 1):
        for combo in itertools.combinations(LOG_RANK_TAGS, n):
            tags = " ".join(f"{tag}{i + 1}" for i, tag in enumerate(combo))
            for stamp in ("2026-06-29 10:00:00", "2026-06-29 10:00:00.123"):  # SGLANG_LOG_MS adds milliseconds
                line = f"[{stamp}{' ' + tags if tags else ''}] Scheduler hit an exception: x"
                assert _split_prefix(line) == (tags, "Scheduler hit an exception: x")
    assert _split_prefix("[2026-06-29 10:00:00 encode_dp_worker[3]] x") == ("encode_dp_worker[3]", "x")
    assert _split_prefix("[2026-06-29 10:00:00 encode_server] x") == ("encode_server", "x")


def test_ranks_that_differ_only_in_attn_cp_and_moe_dp_are_kept_apart(catalogue: Catalogue) -> None:
    one, two = "DP0 ATTN_CP0 MOE_DP0 TP0", "DP0 ATTN_CP1 MOE_DP1 TP1"
    crash = [f"[2026-06-29 10:00:00 {one}] {line}" for line in upstream_traceback(271)]
    other = [f"[2026-06-29 10:00:00 {two}] {line}" for line in upstream_traceback(276)[:-1]]
    other.append(f"[2026-06-29 10:00:00 {two}] ValueError: unrelated")
    mixed = [line for pair in zip(other, crash) for line in pair]
    match = catalogue.match_text("\n".join(mixed))
    assert match is not None and match.groups == ("271",)
    assert all(one in line for line in match.excerpt.splitlines())


def test_both_sigquit_handlers_lines_are_crash_markers() -> None:
    # SGLang's launch-phase handler, then the running-phase one the first request installs (harness.contract.facts)
    assert looks_like_crash("[2026-06-29 10:00:00] Received sigquit from a child process. It usually means the child failed.")
    assert looks_like_crash("[2026-06-29 10:00:00] SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    assert not looks_like_crash("[2026-06-29 10:00:00] SIGTERM received. signum=None frame=None. Draining requests")
