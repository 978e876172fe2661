"""An upstream report's title: what broke (the signature's title and the exception's message, or the metric and its
change), the model and the release, e.g. ``[Bug] Frozen-KV MTP eager draft reuses the prefill's out_cache_loc:
output with shape [1] doesn't match the broadcast shape [276] on gemma-4-31B-it (sglang 0.5.14)``."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from harness.records.run_record import RunRecord
from harness.signatures.catalogue import Signature
from harness.upstream.finding import Finding
from harness.upstream.known import Release

__all__ = ["MAX_TITLE", "exception_message", "model_name", "title_of"]

MAX_TITLE = 256  # GitHub's limit for an issue title
_CLASS = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Fault)|[A-Za-z_]\w*(?:\.\w+)+): ")


def model_name(record: RunRecord) -> str:
    argv = list(record.server.argv)
    path = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--model-path"), "")
    return PurePosixPath(path.rstrip("/")).name or "the model"


def exception_message(traceback: str) -> str:
    """The exception line's message, its class left out (the title names the kind of bug already)."""
    lines = [ln for ln in traceback.splitlines() if ln.strip()]
    return _CLASS.sub("", lines[-1].strip()) if lines else ""


def _release(record: RunRecord, release: Release) -> str:
    if record.build.reference_server:
        return "sglang-repro CPU reference server, not SGLang"
    if release.version:
        return f"sglang {release.version}"
    return record.build.spec


def title_of(finding: Finding, release: Release, signature: Signature | None, traceback: str) -> str:
    record = finding.record
    where = f"on {model_name(record)} ({_release(record, release)})"
    if finding.metric is not None:
        m = finding.metric
        what = (f"{m.label} {m.effect:+.1%} ({m.before.mean:.4g} -> {m.after.mean:.4g}"
                f"{' ' + m.unit if m.unit else ''})" + (f" since {finding.since}" if finding.since else ""))
    else:
        message = exception_message(traceback) or record.reason
        if signature is not None and signature.kind == "bug":
            head = signature.title.split(" (", 1)[0]
            what = f"{head}: {message}" if message and message not in head else head
        elif finding.kind == "timeout":
            what = f"timeout: {record.reason}"
        else:
            what = message
    title = " ".join(f"[Bug] {what} {where}".split())
    return title if len(title) <= MAX_TITLE else title[:MAX_TITLE - 3] + "..."
