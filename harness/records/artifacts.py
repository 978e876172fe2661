"""A run's artifact folder: ``result.json``, ``server.log``, ``requests.jsonl``, ``env.json``, ``repro.sh``.

Everything written here goes through :mod:`harness.util.redact` first: secret-named variables,
``--api-key`` style flags, Authorization headers, and any value of a secret variable of this
process's environment wherever it appears in a log.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.records.run_record import RunRecord, record_to_dict
from harness.util.atomic import write_atomic
from harness.util.clock import folder_stamp
from harness.util.net import url_host
from harness.util.output_path import make_folder
from harness.util.paths import reports_root
from harness.util.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_log,
    register_secrets,
    secret_flag_values,
    secret_values,
)

__all__ = ["new_run_dir", "write_env", "write_json", "write_record", "write_repro"]


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:limit] or "x"


def new_run_dir(scenario: str, case: str, label: str, trial: int, root: Path | None = None) -> Path:
    """A fresh folder ``<root>/runs/<time>-<scenario>-<case>-<label>-t<trial>-<random>``."""
    stamp = folder_stamp()
    name = f"{stamp}-{_slug(scenario, 32)}-{_slug(case)}-{_slug(label, 24)}-t{trial}-{secrets.token_hex(2)}"
    path = (root or reports_root()) / "runs" / name
    make_folder(path.parent, "the runs folder")
    make_folder(path, "the run folder", exist_ok=False)
    return path


def write_json(path: Path, data: Any) -> Path:
    # Whole or not at all: a store import, a resumed search or a SLURM submitter may read it at any moment.
    write_atomic(path, redact_log(json.dumps(data, indent=2, sort_keys=False, default=str)) + "\n")
    return path


def write_record(run_dir: Path, record: RunRecord) -> Path:
    """``result.json``: the run record at the edge (read back with :func:`harness.records.run_record.read_record`)."""
    return write_json(run_dir / "result.json", record_to_dict(record))


def write_env(run_dir: Path, env_info: Mapping[str, Any]) -> Path:
    return write_json(run_dir / "env.json", env_info)


def _env_lines(env: Mapping[str, str]) -> list[str]:
    """The script's exports: a secret variable is asked for from the environment, never written."""
    lines: list[str] = []
    for key, value in sorted(redact_env(env).items()):
        if not _ENV_NAME.match(key):  # a name bash cannot export is left out rather than run as code
            continue
        if is_secret_name(key) and value == REDACTED:
            lines.append(f': "${{{key}:?{key} is a secret, not saved here: export it before running}}"')
            lines.append(f"export {key}")
        else:
            lines.append(f"export {key}={shlex.quote(value)}")
    return lines


_API_KEY_FLAG = "--api-key"  # SGLang's: every request but /health must carry "Authorization: Bearer <key>"


def _server_words(argv: Sequence[str], env: Mapping[str, str], port: int, lines: list[str]) -> tuple[list[str], str]:
    """The server's command line, quoted, and the variable holding its ``--api-key`` ("" without one); each
    secret in it becomes a variable the script asks for (the asking lines are appended to ``lines``)."""
    api_var = ""
    words: list[str] = []
    asked: list[str] = []
    redacted = redact_argv(argv, env)  # element for element: the same length as argv
    by_value = {v: k for k, v in env.items() if is_secret_name(k) and _ENV_NAME.match(k) and v}
    for i, arg in enumerate(redacted):
        if arg == str(port):
            words.append('"$PORT"')
            continue
        if REDACTED not in arg:
            words.append(shlex.quote(arg))
            continue
        # A secret flag's value (or a secret value inside an argument) is asked for from the environment.
        flag, eq, _ = arg.partition("=")
        original = argv[i].partition("=")[2] if eq else argv[i]
        named = flag if eq and flag.startswith("--") else (redacted[i - 1] if i else f"argument {i}")
        if original in by_value:  # the value of a secret variable the script already asks for
            words.append(f'{shlex.quote(flag)}="${by_value[original]}"' if eq else f'"${by_value[original]}"')
            api_var = by_value[original] if named == _API_KEY_FLAG else api_var
            continue
        var = "SGLANG_REPRO_SECRET_" + (re.sub(r"[^A-Za-z0-9]+", "_", named.lstrip("-")).strip("_").upper() or str(i))
        if var not in asked:
            asked.append(var)
            # The message names only the variable: a flag's name is scenario text, and expansion applies here.
            lines.append(f': "${{{var}:?a secret flag value, not saved here: export {var}}}"')
        words.append(f'{shlex.quote(flag)}="${var}"' if eq and arg == f"{flag}={REDACTED}" else
                     (f'"${var}"' if arg == REDACTED else shlex.quote(arg)))
        api_var = var if named == _API_KEY_FLAG else api_var
    return words, api_var


def write_repro(
    run_dir: Path,
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    host: str,
    port: int,
    request: Mapping[str, Any] | None,
    note: str,
) -> Path:
    """A script that starts the same server and sends the first failing request with curl.

    Every value from the scenario or the environment is shell-quoted (``shlex.quote``) or kept out of
    the script: the script is meant to be run, so no value may become shell syntax.
    """
    register_secrets(secret_values(env) | secret_flag_values(argv))
    lines = [
        "#!/usr/bin/env bash",
        *(f"# {line}" for line in redact_log(note).splitlines() or [""]),
        "# Written by sglang-repro. Secrets are not in this file: it asks for them from the environment.",
        "set -euo pipefail",
        f"PORT=${{PORT:-{int(port)}}}",
        f"HOST={shlex.quote(url_host(host))}",
    ]
    lines += _env_lines(env)
    words, api_var = _server_words(argv, env, port, lines)
    # The key travels on curl's stdin ("-H @-"), never in its argv where ps would show it.
    auth = (f'printf \'Authorization: Bearer %s\\n\' "${api_var}" | ' if api_var else "",
            " -H @-" if api_var else "")
    lines += [
        "STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-600}  # seconds the server may take to answer /health",
        "REQUEST_TIMEOUT=${REQUEST_TIMEOUT:-600}  # seconds the request may take",
        f"{' '.join(words)} &",
        "SERVER_PID=$!",
        'trap \'kill -- "$SERVER_PID" 2>/dev/null || true\' EXIT',
        "DEADLINE=$((SECONDS + STARTUP_TIMEOUT))",
        f'until {auth[0]}curl -sf --max-time 5{auth[1]} "http://$HOST:$PORT/health" >/dev/null; do',
        '  kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited" >&2; exit 1; }',
        '  [ "$SECONDS" -lt "$DEADLINE" ] || { echo "server not healthy after ${STARTUP_TIMEOUT}s" >&2; exit 1; }',
        "  sleep 1",
        "done",
    ]
    if request is not None:
        write_atomic(run_dir / "first_failing_request.json", redact_log(json.dumps(request)) + "\n")
        lines += [
            'HERE="$(cd "$(dirname "$0")" && pwd)"',
            (f'{auth[0]}curl -sS -N --max-time "$REQUEST_TIMEOUT" "http://$HOST:$PORT/generate"{auth[1]} '
             '-H "Content-Type: application/json" --data-binary @"$HERE/first_failing_request.json"'),
            "echo",
        ]
    # Bounded: the server is stopped on exit (the trap); KEEP_SERVER=1 keeps it until it exits or Ctrl-C.
    lines.append('[ "${KEEP_SERVER:-0}" != 1 ] || wait "$SERVER_PID"')
    path = run_dir / "repro.sh"
    write_atomic(path, "\n".join(lines) + "\n")
    os.chmod(path, 0o755)
    return path
