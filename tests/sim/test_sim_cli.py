"""Launch flags: SGLang's names parse, unknown flags exit 2, unknown models fail clearly."""

from __future__ import annotations

import pytest

from harness.sim import DEFAULT_REVISION, REVISIONS, version_string
from harness.sim.cli_args import build_parser
from harness.sim.model_config import ModelNotFoundError, resolve_model
from tests.helpers import refused_start
from tests.sim.sim_helpers import EAGER_28264, GRAPH_28264

GUARD = ["--model-path", "google/gemma-4-E4B-it", "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path",
         "google/gemma-4-E4B-it-assistant", "--speculative-num-steps", "5", "--speculative-eagle-topk", "3",
         "--speculative-num-draft-tokens", "12", "--attention-backend", "triton", "--dtype", "bfloat16",
         "--mem-fraction-static", "0.55", "--max-running-requests", "16", "--context-length", "2048",
         "--enable-metrics", "--load-format", "dummy", "--cuda-graph-max-bs", "16", "--tp", "2"]
NVFP4 = ["--model-path", "nvidia/Gemma-4-31B-IT-NVFP4", "--quantization", "modelopt_fp4", "--attention-backend",
         "trtllm_mha", "--swa-full-tokens-ratio", "0.5", "--tensor-parallel-size", "2", "--hicache-size", "4",
         "--hicache-write-policy", "write_back", "--decode-attention-backend", "triton", "--port", "1234"]


@pytest.mark.parametrize("argv", [EAGER_28264, GRAPH_28264, GUARD, NVFP4])
def test_scenario_flags_parse(argv):
    args = build_parser().parse_args(argv)
    assert args.sim_revision == DEFAULT_REVISION in REVISIONS


def test_unknown_flag_exits_2_in_process(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([*GUARD, "--no-such-flag"])
    assert info.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


@pytest.mark.slow
def test_unknown_flag_exits_2_as_a_process(tmp_path):
    code, log = refused_start([*GUARD, "--bogus-flag"], tmp_path / "server.log")
    assert code == 2
    assert "unrecognized arguments: --bogus-flag" in log


@pytest.mark.slow
def test_unknown_model_exits_non_zero_with_clear_error(tmp_path):
    code, log = refused_start(["--model-path", "acme/unknown-7b"], tmp_path / "server.log")
    assert code == 1
    assert "acme/unknown-7b: unknown model for the reference server" in log


def test_models_resolve_case_insensitively_and_from_folders(tmp_path):
    target = resolve_model("GOOGLE/Gemma-4-31B-IT")
    assert "sliding_attention" in target.layer_types and "full_attention" in target.layer_types
    assert resolve_model("google/gemma-4-E4B-it-assistant").is_assistant
    (tmp_path / "config.json").write_text('{"architectures": ["Gemma4AssistantForCausalLM"], "hidden_size": 4096,'
                                          ' "num_hidden_layers": 2, "model_type": "gemma4_assistant"}')
    local = resolve_model(str(tmp_path))
    assert local.is_assistant and local.hidden_size == 64 and local.num_layers == 2
    with pytest.raises(ModelNotFoundError, match="known ids"):
        resolve_model("meta-llama/Llama-3-8B")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))


def test_version_names_the_reference_server():
    v = version_string("pre-fix")
    assert v.startswith("sglang-repro-reference-server/pre-fix") and "not SGLang" in v
