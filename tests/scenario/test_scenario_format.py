"""The scenario format: seed files, every kind of bad input, and the CLI around it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.expectations.judge import run_holds
from harness.records.outcome import Outcome, Phase
from harness.scenario import (
    ScenarioError,
    load_file,
    load_paths,
    select_cases,
    sglang_argv,
)

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "scenarios" / "frozen_kv_mtp"

VALID = textwrap.dedent(
    """\
    name: tiny
    description: a tiny valid scenario
    server:
      model: google/gemma-4-E4B-it
      draft_model: google/gemma-4-E4B-it-assistant
      args:
        speculative-algorithm: NEXTN
        speculative-num-steps: 1
    workload:
      requests: 2
      prompt: {tokens: 8}
      max_new_tokens: 4
    builds:
      before: {spec: "pip:sglang==0.5.14", sim: pre-fix}
      after: {spec: "pip:sglang==0.5.15", sim: post-fix}
    expect:
      before: {outcome: crash, signature: frozen-kv-mtp-stale-out-cache-loc}
      after: {outcome: pass}
    """
)


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    return info.value.lines


def test_seed_scenarios_expand_as_the_issue_describes():
    loaded = {item.scenario.name: item for item in load_paths([SEEDS])}
    long = loaded["frozen-kv-mtp-long-prompt-28264"]
    names = {c.name for c in long.cases}
    assert {"tokens=276,path=eager", "tokens=271,path=eager", "tokens=276,path=graph",
            "tokens=276+chunk256,path=eager", "tokens=257+chunk256,path=eager"} <= names
    for case in long.cases:
        before = case.scenario.expect["before"]
        args = case.scenario.server.args
        # prompt-length cases skip SGLang's own warm-up, so the crash is the workload's; 276+warmup keeps it
        keeps_warmup = case.values["tokens"] == "276+warmup"
        assert ("skip-server-warmup" not in args) == keeps_warmup
        # a prompt longer than the chunked-prefill size: N is its last chunk (20 crashes; 1 fits: no crash)
        chunked = args.get("chunked-prefill-size") == 256
        if case.values["path"] == "eager" and chunked and case.values["tokens"] == "257+chunk256":
            assert run_holds(before, Outcome.PASS, None, None) and before.status == "hypothesis"
        elif case.values["path"] == "eager":
            assert args["speculative-num-steps"] == 1 and args["disable-cuda-graph"] is True
            at, elsewhere = (Phase.WARMUP, Phase.WORKLOAD) if keeps_warmup else (Phase.WORKLOAD, Phase.WARMUP)
            assert run_holds(before, Outcome.CRASH, "frozen-kv-mtp-stale-out-cache-loc", at)
            assert not run_holds(before, Outcome.CRASH, "frozen-kv-mtp-stale-out-cache-loc", elsewhere)
            assert before.status == ("hypothesis" if keeps_warmup or chunked else "confirmed")
        else:
            assert args["speculative-num-steps"] == 5 and "disable-cuda-graph" not in args
            assert run_holds(before, Outcome.PASS, None, None)
            assert not run_holds(before, Outcome.CRASH, "frozen-kv-mtp-stale-out-cache-loc", None)
        assert run_holds(case.scenario.expect["after"], Outcome.PASS, None, None)
        assert "--enable-hierarchical-cache" in sglang_argv(case.scenario)
    guard = loaded["frozen-kv-mtp-accept-length-guard"]
    topk = {c.scenario.server.args["speculative-eagle-topk"]: c.scenario.server.args["speculative-num-draft-tokens"]
            for c in guard.cases}
    assert topk == {1: 6, 3: 12}
    nvfp4 = loaded["frozen-kv-mtp-trtllm-swa-nvfp4-29021"].cases[0].scenario
    argv = sglang_argv(nvfp4)
    assert argv[argv.index("--attention-backend") + 1] == "trtllm_mha"
    assert argv[argv.index("--quantization") + 1] == "modelopt_fp4"
    # the BF16 draft must not inherit modelopt_fp4 (sglang server_args: unset inherits --quantization)
    assert argv[argv.index("--speculative-draft-model-quantization") + 1] == "unquant"


def test_misspelt_key_is_one_line_with_suggestion(tmp_path, run_cli):
    p = write(tmp_path, VALID.replace("workload:", "workloda:"))
    res = run_cli("validate", p)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{p}:9:1: workloda: unknown key 'workloda'; did you mean 'workload'?")


def test_nested_unknown_key_names_path_and_suggestion(tmp_path):
    p = write(tmp_path, VALID.replace("  requests: 2", "  requests: 2\n  concurency: 4"))
    (line,) = errors_of(p)
    assert line.startswith(f"{p}:11:3: workload.concurency: unknown key 'concurency'; did you mean 'concurrency'?")


def test_wrong_type_names_field_and_value(tmp_path):
    p = write(tmp_path, VALID.replace("requests: 2", "requests: lots"))
    (line,) = errors_of(p)
    assert f"{p}:10:3: workload.requests:" in line and "'lots'" in line


def test_bad_prompt_tokens_is_one_clear_error(tmp_path):
    p = write(tmp_path, VALID.replace("{tokens: 8}", "{tokens: [8, 0]}"))
    (line,) = errors_of(p)
    assert "workload.prompt.tokens" in line and "int >= 1" in line


def test_malformed_yaml_reports_position(tmp_path):
    p = write(tmp_path, VALID.replace("  requests: 2", "  requests: [2"))
    (line,) = errors_of(p)
    assert line.startswith(f"{p}:") and "YAML error" in line


def test_python_tag_is_refused_not_constructed(tmp_path):
    marker = tmp_path / "pwned"
    p = write(tmp_path, VALID.replace("description: a tiny valid scenario",
                                      f"description: !!python/object/apply:os.system ['touch {marker}']"))
    (line,) = errors_of(p)
    assert line.startswith(f"{p}:2:14:") and "python/object/apply" in line and "plain YAML" in line
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty file"),
        ("# only a comment\n", "empty file"),
        ("- name: a\n- name: b\n", "top level must be a mapping of scenario fields, got a list"),
        ("just a string\n", "top level must be a mapping"),
    ],
)
def test_degenerate_files(tmp_path, text, expected):
    (line,) = errors_of(write(tmp_path, text))
    assert expected in line and ":1:1:" in line


def test_duplicate_key(tmp_path):
    p = write(tmp_path, VALID + "name: again\n")
    (line,) = errors_of(p)
    assert "duplicate key 'name' (first given on line 1)" in line


def test_empty_matrix_and_empty_axis(tmp_path):
    (line,) = errors_of(write(tmp_path, VALID + "matrix: {}\n"))
    assert "matrix is empty" in line
    (line,) = errors_of(write(tmp_path, VALID + "matrix:\n  tokens: {field: workload.prompt.tokens, values: []}\n"))
    assert "non-empty list of values" in line and "matrix.tokens.values" in line


@pytest.mark.parametrize(
    ("expect", "fragment"),
    [
        ("  after: {outcome: pass, signature: frozen-kv-mtp-stale-out-cache-loc}\n",
         "signature is only expected with outcome crash or infra"),
        ("  later: {outcome: pass}\n", "no build role 'later'"),
        ("  after: {outcome: [], signature: x}\n", "empty list accepts nothing"),
        ("  after: {outcome: crash, signature: no-such-signature}\n", "unknown signature 'no-such-signature'"),
    ],
)
def test_contradicting_expectations(tmp_path, expect, fragment):
    text = VALID.replace("  after: {outcome: pass}\n", expect)
    lines = errors_of(write(tmp_path, text))
    assert any(fragment in line for line in lines), lines


def test_expected_signature_must_be_watched(tmp_path):
    text = VALID + "checks:\n  crash_signatures: [cuda-out-of-memory]\n"
    lines = errors_of(write(tmp_path, text))
    assert any("checks.crash_signatures does not watch" in line for line in lines), lines


def test_matrix_override_error_points_at_matrix_line(tmp_path):
    text = VALID + "matrix:\n  path:\n    eager: {workload.concurrency: 0}\n    graph: {workload.prompt.tokenz: 5}\n"
    lines = errors_of(write(tmp_path, text))
    assert any(":21:13: workload.concurrency:" in line and "[case path=eager]" in line for line in lines), lines
    assert any(":22:13:" in line and "did you mean 'tokens'" in line for line in lines), lines


def test_matrix_cases_and_selection(tmp_path):
    text = VALID + textwrap.dedent(
        """\
        matrix:
          tokens: {field: workload.prompt.tokens, values: [271, 276]}
          path:
            eager: {server.args.speculative-num-steps: 1}
            graph: {server.args.speculative-num-steps: 5, expect.before: {outcome: pass}}
        """
    )
    loaded = load_file(write(tmp_path, text))
    assert [c.name for c in loaded.cases] == [
        "tokens=271,path=eager", "tokens=271,path=graph", "tokens=276,path=eager", "tokens=276,path=graph"]
    picked = select_cases(loaded, "path=graph")
    assert {c.scenario.workload.prompt.tokens for c in picked} == {271, 276}
    assert all(c.scenario.expect["before"].outcomes == ("pass",) for c in picked)
    with pytest.raises(ScenarioError):
        select_cases(loaded, "path=nope")


def test_validate_and_list_cli_on_seeds(run_cli):
    res = run_cli("validate", "scenarios/")
    assert res.returncode == 0, res.stderr
    res = run_cli("list", "scenarios/", "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == sum(len(item.cases) for item in load_paths([REPO / "scenarios"]))
    for row in rows:
        assert {"scenario", "file", "case", "argv", "prompt_tokens", "expect"} <= set(row)
        assert row["argv"][:3] == ["python", "-m", "sglang.launch_server"]
        assert "--model-path" in row["argv"] and "--port" in row["argv"]


def test_schema_cli_is_json_schema(run_cli):
    res = run_cli("schema")
    schema = json.loads(res.stdout)
    assert res.returncode == 0
    assert {"server", "workload", "builds", "expect", "matrix"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_yaml_roundtrip_of_seed_is_still_valid(tmp_path):
    for seed in SEEDS.glob("*.yaml"):
        data = yaml.safe_load(seed.read_text())
        copy = write(tmp_path, yaml.safe_dump(data), seed.name)
        assert load_file(copy).cases


def test_reference_overrides_apply_only_to_the_reference_case(tmp_path):
    loaded = load_file(write(tmp_path, VALID + "reference:\n  workload.requests: 1\n"))
    (case,) = loaded.cases
    assert case.scenario.workload.requests == 2
    assert case.for_reference().scenario.workload.requests == 1
    lines = errors_of(write(tmp_path, VALID + "reference:\n  server.args.tp-size: 1\n", "r2.yaml"))
    assert any(":20:3: reference.server.args.tp-size: reference may only change workload" in line
               for line in lines), lines
    lines = errors_of(write(tmp_path, VALID + "reference:\n  workload.requests: 0\n", "r3.yaml"))
    assert any(":20:3: workload.requests:" in line and "[reference, case default]" in line for line in lines), lines
