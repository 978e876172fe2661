"""Safe to paste: a CommonMark parser (markdown-it-py) reads every ``issue.md`` with its fences balanced, also when
the log holds backtick runs, ``<details>``, HTML and Markdown of its own; the body stays under GitHub's 65,536
characters however long the log, the rest in the attachments; the chart is a PNG that decodes."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from markdown_it import MarkdownIt

from harness.records.run_record import record_to_dict
from harness.upstream import BODY_LIMIT, IssueOptions, finding_from_path, write_issue
from harness.upstream.chart import chart_png
from harness.upstream.finding import Chart, ChartGroup
from harness.upstream.safe import code_span, fence
from tests.helpers import make_record

HOSTILE = [
    "plain line",
    "a ```` run of four and a `````` run of six backticks",
    "```",
    "~~~",
    "</details>",
    "<details><summary>not ours</summary>",
    "<script>alert('x')</script>",
    "# not a heading",
    "### Environment",
    "-->",
    "| a | table |",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 10, in run',
    "    self.step()  # a ``` in code",
    "RuntimeError: something `odd` happened </details>",
]


def _run(folder: Path, log_lines: list[str], reason: str = "workload: RuntimeError: something `odd` happened") -> Path:
    folder.mkdir(parents=True)
    data = record_to_dict(make_record("crash", reason=reason, spec="pip:sglang==0.5.16", version="0.5.16",
                                      artifacts=str(folder), argv=["python", "-m", "sglang.launch_server", "--model-path",
                                                                   "/models/m", "--port", "30001"]))
    data["build"]["reference_server"] = False
    (folder / "result.json").write_text(json.dumps(data), encoding="utf-8")
    (folder / "server.log").write_text("\n".join(log_lines) + "\n", encoding="utf-8")
    return folder


def _tokens(body: str) -> list:
    return MarkdownIt("commonmark").parse(body)


def test_hostile_log_text_stays_inside_its_fences(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", ["[start]", *HOSTILE, *TRACEBACK, *HOSTILE])
    written = write_issue(finding_from_path(run), IssueOptions(out=tmp_path / "issue"))
    assert written.folder is not None
    body = (written.folder / "issue.md").read_text(encoding="utf-8")
    tokens = _tokens(body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Checklist", "Describe the bug", "The evidence", "Reproduction", "Environment"]
    fences = [t for t in tokens if t.type == "fence"]
    tail = next(t for t in fences if "plain line" in t.content)
    assert tail.content.splitlines() == ["[start]", *HOSTILE, *TRACEBACK, *HOSTILE]
    decisive = next(t for t in fences if t.content.startswith("Traceback"))
    assert decisive.content.splitlines()[-1] == TRACEBACK[-1]
    # The only HTML is ours: the comment on top and the <details> around the log; none of the log's.
    html = [t.content for t in tokens if t.type == "html_block"] + [
        c.content for t in tokens if t.type == "inline" for c in t.children or () if c.type == "html_inline"]
    assert all(h.startswith(("<!--", "<details>", "<summary>", "</details>")) for h in html), html
    assert not any("script" in h or "not ours" in h for h in html)


def test_a_huge_log_keeps_the_body_under_the_limit(tmp_path: Path) -> None:
    lines = [f"{i:06d} " + "x" * 300 + " ``" for i in range(3_000)] + TRACEBACK
    run = _run(tmp_path / "run", lines, reason="workload: " + "r" * 70_000)
    written = write_issue(finding_from_path(run), IssueOptions(out=tmp_path / "issue"))
    assert written.folder is not None
    body = (written.folder / "issue.md").read_text(encoding="utf-8")
    assert len(body) < BODY_LIMIT
    assert "attachments/body-full.md" in body  # a 70k-character reason: the whole body is attached
    log = (written.folder / "attachments" / "server.log").read_text(encoding="utf-8")
    assert log.count("\n") >= 3_000 and "000000 " in log


def test_fence_and_code_span_outlast_any_backtick_run() -> None:
    for text in ("```", "a ```` b", "`````` x", "``"):
        block = fence(text)
        tokens = _tokens(block + "\n\nafter\n")
        assert tokens[0].type == "fence" and tokens[0].content == text + "\n"
        assert any(t.type == "paragraph_open" for t in tokens)
        span = _tokens(code_span(text))[1].children
        assert span is not None and span[0].type == "code_inline" and span[0].content == text


def _decode_png(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, chunk = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + chunk) & 0xFFFFFFFF == struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_the_chart_is_a_png_with_both_sides_drawn() -> None:
    groups = tuple(ChartGroup(f"night-{i}", (200.0 if i < 5 else 150.0, 201.0 if i < 5 else 151.0), i >= 5)
                   for i in range(8))
    width, height, raw = _decode_png(chart_png(Chart("Output throughput", "tok/s", groups)))
    assert (width, height) == (960, 480) and len(raw) == height * (1 + 3 * width)
    pixels = {raw[i:i + 3] for row in range(height) for i in range(row * (1 + 3 * width) + 1, (row + 1) * (1 + 3 * width), 3)}
    assert bytes((0, 114, 178)) in pixels and bytes((213, 94, 0)) in pixels  # the before and the after colours
