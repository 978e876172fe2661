"""Secrets are removed from environments, argv, headers and log text."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.util.redact import (
    REDACTED,
    is_secret_flag,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_headers,
    redact_log,
    redact_text,
    redact_values,
    secret_values,
)

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123"


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
     "CLIENT_SECRET", "PASSWORD", "DB_PASSWORD", "hf_token"],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["PATH", "TOKENIZERS_PARALLELISM", "SGLANG_REPRO_RUN", "CUDA_VISIBLE_DEVICES", "TOKEN", "MAX_TOKENS", "KEY"]
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_redact_env() -> None:
    env = {
        "HF_TOKEN": HF,
        "OPENAI_API_KEY": "sk-live-123456",
        "DB_PASSWORD": "hunter22",
        "EMPTY_TOKEN": "",
        "PATH": "/usr/bin",
        "SGLANG_REPRO_RUN": "run-42",
        "NOTE": f"see {HF}",
    }
    original = dict(env)
    out = redact_env(env)
    assert env == original  # not mutated
    assert out == {
        "HF_TOKEN": REDACTED,
        "OPENAI_API_KEY": REDACTED,
        "DB_PASSWORD": REDACTED,
        "EMPTY_TOKEN": "",
        "PATH": "/usr/bin",
        "SGLANG_REPRO_RUN": "run-42",
        "NOTE": f"see {REDACTED}",
    }


def test_redact_argv() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "google/gemma-4-E4B-it", "--api-key", "s3cr3t-key",
            "--admin-api-key=adm1n-key", "--max-total-tokens", "4096", "--hf-token", "--port", "30000"]
    out = redact_argv(argv)
    assert out == ["python", "-m", "sglang.launch_server", "--model-path", "google/gemma-4-E4B-it", "--api-key", REDACTED,
                   f"--admin-api-key={REDACTED}", "--max-total-tokens", "4096", "--hf-token", "--port", "30000"]
    assert argv[6] == "s3cr3t-key"  # not mutated
    assert redact_argv(["env", f"HF_TOKEN={HF}", "python"]) == ["env", f"HF_TOKEN={REDACTED}", "python"]


def test_secret_flags() -> None:
    assert is_secret_flag("--api-key") and is_secret_flag("--admin-api-key") and is_secret_flag("--hf-token")
    assert not is_secret_flag("--max-total-tokens") and not is_secret_flag("--tokenizer-path")


def test_redact_headers() -> None:
    headers = {"Authorization": "Bearer abc.def.ghi", "X-Api-Key": "k-123", "Content-Type": "application/json",
               "Cookie": "session=1"}
    assert redact_headers(headers) == {"Authorization": f"Bearer {REDACTED}", "X-Api-Key": REDACTED,
                                       "Content-Type": "application/json", "Cookie": REDACTED}
    assert redact_headers([("authorization", "opaque")]) == {"authorization": REDACTED}
    assert headers["Authorization"] == "Bearer abc.def.ghi"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"export HF_TOKEN={HF}\n", f"export HF_TOKEN={REDACTED}\n"),
        ("HUGGING_FACE_HUB_TOKEN='abc def'", f"HUGGING_FACE_HUB_TOKEN='{REDACTED}'"),
        ('{"OPENAI_API_KEY": "sk-xyz", "PATH": "/bin"}', f'{{"OPENAI_API_KEY": "{REDACTED}", "PATH": "/bin"}}'),
        ("ServerArgs(api_key='k-123', port=30000)", f"ServerArgs(api_key='{REDACTED}', port=30000)"),
        ("ServerArgs(api_key=None, port=30000)", "ServerArgs(api_key=None, port=30000)"),
        ("PASSWORD=hunter2 next", f"PASSWORD={REDACTED} next"),
        ("curl -H 'Authorization: Bearer eyJhbGciOi.x.y' http://127.0.0.1:30000",
         f"curl -H 'Authorization: Bearer {REDACTED}' http://127.0.0.1:30000"),
        ("bearer abcdefgh12345", f"bearer {REDACTED}"),
        ("launch --api-key s3cr3t --port 1", f"launch --api-key {REDACTED} --port 1"),
        ("launch --api-key=s3cr3t --port 1", f"launch --api-key={REDACTED} --port 1"),
        (f"token in the middle {HF}.", f"token in the middle {REDACTED}."),
        ("https://user:pa55@example.org/x", f"https://user:{REDACTED}@example.org/x"),
        # SGLang's own log lines must survive
        ("Decode batch, #running-req: 1, #token: 310, token usage: 0.00, accept len: 3.12,",
         "Decode batch, #running-req: 1, #token: 310, token usage: 0.00, accept len: 3.12,"),
        ("Prefill batch, #new-token: 271, max_new_tokens=128", "Prefill batch, #new-token: 271, max_new_tokens=128"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_secret_values_and_redact_values() -> None:
    env = {"HF_TOKEN": "plain-token-value", "MY_PASSWORD": "abc", "PATH": "/usr/bin/plain-token-value-not-secret"}
    values = secret_values(env)
    assert values == frozenset({"plain-token-value"})  # "abc" is too short to replace everywhere
    log = "loading with plain-token-value from cache\n"
    assert redact_values(log, values) == f"loading with {REDACTED} from cache\n"
    assert redact_values("ab abcd", ["ab", "abcd"]) == f"{REDACTED} {REDACTED}"


def test_redact_log_uses_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_REPRO_TEST_TOKEN", "zz-unusual-value-77")
    text = "request header x: zz-unusual-value-77 and HF_TOKEN=abcdef123"
    assert redact_log(text) == f"request header x: {REDACTED} and HF_TOKEN={REDACTED}"
    assert "zz-unusual-value-77" in redact_log(text, env={})


@settings(max_examples=60, deadline=None)
@given(
    secret=st.text(alphabet=string.ascii_letters + string.digits + "-_.+/=", min_size=6, max_size=40),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_a_known_secret_never_survives(secret: str, before: str, after: str) -> None:
    text = before + secret + after + f"\nHF_TOKEN={secret}\n"
    assert secret not in redact_log(text, env={"HF_TOKEN": secret})
