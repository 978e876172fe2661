"""Flag sets for the reference server's tests (its processes start through tests.helpers.start_server)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SPEC_31B = ["--model-path", "google/gemma-4-31B-it", "--speculative-algorithm", "NEXTN",
            "--speculative-draft-model-path", "google/gemma-4-31B-it-assistant", "--speculative-eagle-topk", "1"]
EAGER_28264 = [*SPEC_31B, "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2", "--disable-cuda-graph",
               "--tp-size", "4", "--enable-hierarchical-cache", "--hicache-ratio", "2", "--mem-fraction-static", "0.85",
               "--context-length", "8192"]
GRAPH_28264 = [*SPEC_31B, "--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6", "--tp-size", "4",
               "--enable-hierarchical-cache", "--hicache-ratio", "2", "--context-length", "8192"]
