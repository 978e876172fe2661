"""Greedy speculative decoding re-enacted with Hugging Face transformers (no SGLang code, no port): run by the
real-SGLang environment's interpreter, ``python hf_spec_sim.py MODEL PROMPT MAX_NEW STEPS DTYPE``.

``DTYPE`` is the one the server computes in: SGLang runs a float32 checkpoint in float16 ("following the common
practice", 0.5.21 ``srt/configs/model_config.py:2126-2128``), and a draft's near-tie can go either way between
float32 and float16, so the re-enactment must round as the server does.

Prints one JSON object: for a chain draft of ``STEPS`` tokens whose draft model is the target itself, the
per-verify-step histogram of accepted drafts SGLang would report (``spec_correct_drafts_histogram``) and the
output tokens, under two readings of the draft's input:

- ``shifted``: the draft sees the committed tokens less the first one, as EAGLE's draft does (its token ``i+1``
  with the target's hidden state ``i``) and as SGLang's STANDALONE draft, which reuses EAGLE's draft extend,
  also does (0.5.21 ``srt/speculative/eagle_worker_v2.py:915-935``);
- ``unshifted``: the draft sees the same tokens as the target (every draft accepted).
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    model_dir, prompt, max_new, steps, dtype = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    eos = model.config.eos_token_id

    @torch.no_grad()
    def greedy_next(ids: list[int]) -> int:
        return int(model(torch.tensor([ids])).logits[0, -1].argmax())

    def run(shift: bool) -> dict[str, object]:
        seq = list(tokenizer(prompt).input_ids)
        start = len(seq)
        seq.append(greedy_next(seq))  # the prefill's token

        def going() -> bool:
            return len(seq) - start < max_new and seq[-1] != eos

        histogram = [0] * (steps + 1)
        while going():
            context = seq[1:] if shift else list(seq)
            drafts: list[int] = []
            for _ in range(steps):
                drafts.append(greedy_next(context + drafts))
            accepted = 0
            for draft in drafts:
                if draft == greedy_next(seq) and going():
                    seq.append(draft)
                    accepted += 1
                else:
                    break
            histogram[accepted] += 1
            if going():
                seq.append(greedy_next(seq))  # the bonus token
        return {"histogram": histogram, "output_ids": seq[start:][:max_new]}

    print(json.dumps({"shifted": run(True), "unshifted": run(False)}))


if __name__ == "__main__":
    main()
