"""Secrets out of saved artifacts: environments, argv, HTTP headers and free log text.

Two complementary passes:

- by shape (:func:`redact_text`): ``NAME=value`` / ``"NAME": "value"`` for secret-looking names,
  ``Authorization:`` headers and bare ``Bearer`` credentials, ``--api-key VALUE`` style flags,
  credentials in URLs, and token shapes (``hf_...``, ``sk-...``);
- by value (:func:`redact_values`, :func:`redact_log`): the actual values of secret-named variables
  of an environment, replaced wherever they appear, since a token can end up anywhere in a log.

A secret-looking name is one with a part (split at ``_`` or ``-``) that ends in TOKEN, KEY, SECRET,
PASSWORD, PASSWD, CREDENTIAL(S) or AUTH (``PGPASSWORD``, ``SERVICE_KEY``, ``SGLANG_AUTH_TOKEN``), not
``TOKENIZERS_PARALLELISM`` or ``KEYBOARD``; a secret flag is one whose last part is such a word
(``--api-key``, ``--admin-api-key``, ``--hf-token``; not ``--ssl-keyfile``, a path). Values of secret
variables and flags that a run hands to a server are registered (:func:`register_secrets`), so every
later artifact of this process (result.json, repro.sh, the store, reports) drops them by value too.

Everything is replaced with ``<redacted>``. Values ``None``/``null``/empty are left alone: they
leak nothing and show that no secret was set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "REDACTED",
    "is_secret_name",
    "is_secret_flag",
    "redact_text",
    "redact_env",
    "redact_argv",
    "redact_headers",
    "secret_values",
    "redact_values",
    "redact_log",
    "register_secrets",
    "registered_secrets",
    "secret_flag_values",
    "shape_values",
    "redact_everywhere",
]

REDACTED = "<redacted>"

# Secret env-style names: HF_TOKEN, HUGGING_FACE_HUB_TOKEN, FOO_TOKEN, [FOO_]API_KEY, [FOO_]SECRET[_KEY],
# [FOO_]PASSWORD, ... A bare "token" is not one: SGLang logs "#token: 276".
_NAME = (r"(?:[A-Za-z0-9]+_)*(?:[A-Za-z0-9]+_TOKEN|API_?KEY|SECRET(?:_ACCESS)?(?:_KEY)?|ACCESS_KEY|PRIVATE_KEY"
         r"|[A-Za-z0-9]*PASSWORD|[A-Za-z0-9]*PASSWD)")
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH")
_SECRET_FLAG = re.compile(r"--(?:[a-z0-9]+-)*(?:[a-z0-9]*key|token|secret|password|passwd|credentials?)\Z",
                          re.IGNORECASE)
_FLAG_MIN = 4  # a flag's value is replaced by value from this length (a 3-character api key protects nothing)
_REGISTERED: set[str] = set()  # secret values handed to servers by this process (register_secrets)
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"})
_SKIP_VALUES = frozenset({"", "none", "null", "''", '""'})

_ASSIGNMENT = re.compile(
    rf"""(?<![A-Za-z0-9_])(?P<key>["']?{_NAME}["']?\s*[=:]\s*)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;&)}}\]'"]+)""",
    re.IGNORECASE,
)
_AUTH_HEADER = re.compile(
    r"""(?P<key>\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?)(?P<value>[^\s"',]+)""",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
_FLAG = re.compile(
    r"""(?P<key>(?<![\w-])--(?:[a-z0-9]+-)*(?:api-key|token|secret|password|passwd)(?:=|\s+)["']?)(?P<value>(?!-)[^\s"']+)""",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<key>://[^/\s:@]+:)(?P<value>[^@\s/]+)(?=@)")
_TOKEN_SHAPES = re.compile(r"(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})")


def is_secret_name(name: str) -> bool:
    """True for environment-variable names that hold secrets (HF_TOKEN, OPENAI_API_KEY, PGPASSWORD, SERVICE_KEY,
    SGLANG_AUTH_TOKEN, AWS_CREDENTIALS, ...): a part of the name ends in one of the secret words."""
    parts = [p for p in re.split(r"[_\-.]+", name.upper()) if p]
    if len(parts) == 1 and parts[0] in ("TOKEN", "KEY", "AUTH"):
        return False  # a bare word is a counter or a mode more often than a secret ("token: 276")
    return any(part.endswith(_SECRET_WORDS) for part in parts)


def is_secret_flag(flag: str) -> bool:
    """True for command-line flags whose value is a secret (--api-key, --admin-api-key, --hf-token, ...)."""
    return _SECRET_FLAG.match(flag) is not None


def _keep_key(m: re.Match[str]) -> str:
    value = m.group("value")
    if value.strip("'\"").lower() in _SKIP_VALUES:
        return m.group(0)
    quote = value[0] if value[:1] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{m.group('key')}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """Replace secrets recognisable by their shape or their name in free text."""
    for pattern in (_AUTH_HEADER, _BEARER, _FLAG, _ASSIGNMENT, _URL_CREDENTIALS):
        text = pattern.sub(_keep_key, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret-named values replaced, and in the others every known secret value
    (this env's, this process's, registered ones) and token shape removed."""
    known = secret_values(env) | secret_values() | registered_secrets()
    out = {}
    for name, value in env.items():
        if is_secret_name(name) and value.strip().lower() not in _SKIP_VALUES:
            out[name] = REDACTED
        else:
            out[name] = redact_text(redact_values(value, known))
    return out


def secret_flag_values(argv: Sequence[str]) -> frozenset[str]:
    """Values of secret flags (``--api-key X``, ``--api-key=X``) in ``argv``, of at least 4 characters."""
    out = set()
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if is_secret_flag(flag):
            if eq and value:
                out.add(value)
            elif not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.add(argv[i + 1])
    return frozenset(v for v in out if len(v.strip()) >= _FLAG_MIN and v.strip().lower() not in _SKIP_VALUES)


def register_secrets(values: Iterable[str]) -> None:
    """Remember secret values handed to a server (its env's secret variables, its secret flags): every
    later redaction in this process removes them wherever they appear, whatever the name beside them."""
    _REGISTERED.update(v for v in values if v and v.strip().lower() not in _SKIP_VALUES)


def registered_secrets() -> frozenset[str]:
    return frozenset(_REGISTERED)


def redact_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """A copy of ``argv`` with the values of secret flags (``--api-key X``, ``--api-key=X``) replaced, and
    every known secret value (of ``env``, this process's environment, registered ones) wherever it appears."""
    known = secret_values(env or {}) | secret_values() | registered_secrets() | secret_flag_values(argv)
    argv = [redact_values(arg, known) for arg in argv]
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next and not arg.startswith("--"):
            out.append(REDACTED)
            redact_next = False
            continue
        redact_next = False
        flag, eq, _value = arg.partition("=")
        if is_secret_flag(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                redact_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """A copy of HTTP headers with credentials replaced; an Authorization scheme (Bearer, Basic) is kept."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = {}
    for name, value in items:
        lname = name.lower()
        if lname in {"authorization", "proxy-authorization"}:
            scheme, sep, _cred = value.strip().partition(" ")
            out[name] = f"{scheme} {REDACTED}" if sep else REDACTED
        elif lname in _SECRET_HEADERS or is_secret_name(name.replace("-", "_")):
            out[name] = REDACTED
        else:
            out[name] = redact_text(value)
    return out


def secret_values(env: Mapping[str, str] | None = None, *, min_length: int = 6) -> frozenset[str]:
    """The values of secret-named variables of ``env`` (default: this process's environment).

    Values shorter than ``min_length`` are left out: replacing "abc" everywhere would wreck a log
    and protect nothing worth protecting.
    """
    env = os.environ if env is None else env
    return frozenset(v for k, v in env.items() if is_secret_name(k) and len(v.strip()) >= min_length)


def redact_values(text: str, values: Iterable[str]) -> str:
    """Replace every occurrence of each of ``values`` in ``text`` (longest first, so no partial leaks)."""
    for value in sorted(set(values), key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    return text


def redact_log(text: str, env: Mapping[str, str] | None = None) -> str:
    """Both passes: known secret values of ``env`` (default: this process's) and registered ones, then
    secret shapes."""
    return redact_text(redact_values(text, secret_values(env) | registered_secrets()))


def shape_values(text: str) -> frozenset[str]:
    """The secret values that :func:`redact_text` recognises by shape in ``text`` (a bearer token, a
    ``--api-key`` value, ``PASSWORD=...``, a URL's password, an ``hf_``/``sk-`` token), each of at least 4
    characters: redacted by value afterwards, they are gone from every other place they reappear too."""
    found: set[str] = set()
    for pattern in (_AUTH_HEADER, _BEARER, _FLAG, _ASSIGNMENT, _URL_CREDENTIALS):
        for m in pattern.finditer(text):
            value = m.group("value").strip("'\"")
            if len(value) >= _FLAG_MIN and value.lower() not in _SKIP_VALUES and value != REDACTED:
                found.add(value)
    found.update(_TOKEN_SHAPES.findall(text))
    return frozenset(found)


def redact_everywhere(text: str, known: Iterable[str] = ()) -> str:
    """:func:`redact_log`, and every value found by shape anywhere in ``text`` (or given in ``known``) removed
    from all of it: a token recognisable once (``Bearer X``) is not left where it stands bare (``... X``)."""
    values = set(known) | shape_values(text) | secret_values() | registered_secrets()
    return redact_text(redact_values(text, values))
