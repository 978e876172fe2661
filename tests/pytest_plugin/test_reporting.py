"""The server-log lines a failing scenario item shows: the traceback its signature matched, not merely the last.

A crashed server can log more tracebacks after the one that killed it (a request handler that meets the dead
scheduler, another rank): the item must show the one its signature names.
"""

from __future__ import annotations

from pathlib import Path

from harness.pytest_plugin.reporting import log_excerpt

REPO = Path(__file__).resolve().parents[2]
CRASH = REPO / "fixtures" / "tracebacks" / "sglang-0.5.14-real-fill_from-cpu.log"  # 0.5.14's own fill_from
SIGNATURE = "frozen-kv-mtp-stale-out-cache-loc"
LATER = ("ERROR:aiohttp.server:Error handling request\nTraceback (most recent call last):\n"
         '  File "/x/harness/sim/scheduler_client.py", line 63, in _send\n    self._send_conn.send(msg)\n'
         "BrokenPipeError: [Errno 32] Broken pipe\n")


def _log(tmp_path: Path, *parts: str) -> Path:
    path = tmp_path / "server.log"
    path.write_text("".join(parts))
    return path


def test_the_signatures_traceback_is_shown_before_a_later_one(tmp_path: Path) -> None:
    log = _log(tmp_path, "INFO boot\n", CRASH.read_text(), "INFO shutting down\n", LATER)
    what, lines = log_excerpt(log, SIGNATURE)
    assert what == f"the traceback {SIGNATURE} matched"
    assert any("doesn't match the broadcast shape" in line for line in lines)
    assert not any("BrokenPipeError" in line for line in lines)


def test_without_a_matching_signature_the_last_traceback_is_shown(tmp_path: Path) -> None:
    log = _log(tmp_path, CRASH.read_text(), LATER)
    for signature in (None, "no-such-signature", "frozen-kv-mtp-stale-out-cache-loc-graph"):
        what, lines = log_excerpt(log, signature)
        assert what == "last traceback" and lines[-1].startswith("BrokenPipeError"), signature


def test_a_log_without_a_traceback_shows_its_tail(tmp_path: Path) -> None:
    log = _log(tmp_path, "".join(f"line {i}\n" for i in range(50)))
    what, lines = log_excerpt(log, SIGNATURE)
    assert what == "last 20 lines" and lines[-1] == "line 49" and len(lines) == 20
