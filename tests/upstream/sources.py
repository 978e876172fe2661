"""The four findings the upstream-report tests start from, each made the way a user makes it: a crash run on the
reference server, a nightly incident of a slowdown, the demo bisection and a minimization's output.

The crash run carries planted secrets: in its environment (a secret-named variable and a ``--set`` server env value)
and, appended to its server log afterwards, lines a real log can hold (an Authorization header, a token by shape, a
home folder, the host's name), so the report is held to scrubbing what it reads, not only what the run wrote.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

from harness.incidents.review import review
from harness.records.manifest import build_manifest
from harness.records.run_record import ScenarioRef
from harness.scenario import load_file, server_flags
from harness.store.store import new_batch, open_store
from harness.workload.driver import _prompts_digest
from harness.workload.prompts import prompt_lengths, random_id_prompts
from tests.helpers import make_record

REPO = Path(__file__).resolve().parent.parent.parent
LONG = Path("scenarios/frozen_kv_mtp/long_prompt_stale_out_cache_loc.yaml")
TINY = Path("fixtures/bisect/stale_out_cache_loc_tiny.yaml")
# Planted: the values must appear in no file the report writes.
SECRETS = {
    "HF_TOKEN": "hf_" + "PlantedTokenValue0123456789abcd",
    "SGLANG_REPRO_TEST_API_KEY": "planted-api-key-6f1e2d3c4b5a",
    "BEARER": "planted.bearer.value.9a8b7c6d5e4f",
}
HOME_PATH = "/home/alice-planted/models/gemma-4-31B-it"


def harness(*args: object, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "SGLANG_REPRO_SIM_SCHEDULER": "standin", **(env or {})},
                          check=False)


def crash_run(out: Path) -> Path:
    """``run`` of the #28264 eager case on the stand-in, with secrets in its environment; its folder."""
    done = harness("run", LONG, "--case", "tokens=276,path=eager", "--build", "sim:pre-fix,scheduler=standin",
                   "--out", out, "--no-store", "--set",
                   f"server.env.SGLANG_REPRO_TEST_API_KEY={SECRETS['SGLANG_REPRO_TEST_API_KEY']}",
                   env={"HF_TOKEN": SECRETS["HF_TOKEN"]})
    assert done.returncode == 1, done.stdout + done.stderr
    (folder,) = sorted((out / "runs").iterdir())
    with open(folder / "server.log", "a", encoding="utf-8") as log:  # lines a real log can hold
        log.write(f"[late] Authorization: Bearer {SECRETS['BEARER']}\n[late] HF_TOKEN={SECRETS['HF_TOKEN']}\n"
                  f"[late] loading {HOME_PATH} on {socket.gethostname()}\n")
    return folder


def slowdown_incident(db: Path) -> tuple[str, str]:
    """A nightly store where a build 25% slower (throughput) lands on night 14 of 20, reviewed night by night as the
    nightly does; (store URL, the incident's fingerprint). The records are the runs of a real case: its argv, its
    manifest (the digest of its seeded prompts)."""
    case = next(c for c in load_file(REPO / LONG).cases if c.name == "tokens=276,path=graph").for_reference()
    wl = case.scenario.workload
    assert isinstance(wl.prompt.tokens, int)  # the case's one length: 276
    prompts = random_id_prompts(prompt_lengths(wl.prompt.tokens, wl.warmup + wl.requests, wl.prompt.seed),
                                seed=wl.prompt.seed)
    manifest = build_manifest(prompt_tokens=[p.tokens for p in prompts[wl.warmup:]], prompt_digest=_prompts_digest(prompts),
                              warmup=wl.warmup, concurrency=wl.concurrency, request_rate=wl.request_rate,
                              max_new_tokens=wl.max_new_tokens, temperature=wl.temperature, ignore_eos=wl.ignore_eos,
                              stream=wl.stream).to_dict()
    rng = random.Random(7)
    url = f"sqlite:///{db}"
    raised: list[str] = []
    with open_store(url) as store:
        for night in range(1, 21):
            slow = night >= 14
            batch = new_batch("nightly", f"night-{night:02d}", started_at=f"2026-11-{night:02d}T02:00:00+00:00")
            argv = [sys.executable, "-m", "harness.sim.server", "--sim-revision", "post-fix",
                    *(["--sim-step-cost-ms", "20"] if slow else []), *server_flags(case.scenario, port=41000)]
            records = [dataclasses.replace(make_record(
                run_id=f"n{night}-t{t}", case=case.name, case_values=case.values, trial=t, started_at=batch.started_at,
                spec="sim:post-fix,step-cost-ms=20" if slow else "sim:post-fix", argv=argv, manifest=manifest,
                version="post-fix (sglang-repro CPU reference model, not SGLang)",
                metrics={"accept_length": 1.84 * (1 + 0.01 * rng.gauss(0, 1)),
                         "output_throughput_tok_s": 200 * (0.75 if slow else 1.0) * (1 + 0.02 * rng.gauss(0, 1))}),
                scenario=ScenarioRef(case.scenario.name, str(LONG))) for t in range(3)]
            store.record_many(records, batch)
            raised += [i.fingerprint for i in review(store, batch.id).incidents]
    assert len(raised) == 1, raised
    return url, raised[0]


def demo_bisection(out: Path) -> Path:
    """The demo route of docs/commands.md#bisect on a history whose every build starts the stand-in; its folder."""
    from harness.bisect.demo_repo import make_demo_repo

    history = out / "demo-history"
    make_demo_repo(history, scheduler="standin")
    done = harness("bisect", TINY, "--repo", history, "--good", "v0.1.0", "--bad", "v0.4.0", "--trials", 1,
                   "--confirm-trials", 1, "--out", out, "--no-cache", "--no-progress", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = sorted((out / "bisect").iterdir())
    return folder


def minimization(out: Path) -> Path:
    """docs/commands.md#minimize's example on the stand-in; the session folder."""
    done = harness("minimize", LONG, "--case", "tokens=276,path=eager", "--build", "sim:pre-fix,scheduler=standin",
                   "-o", out / "minimal.yaml", "--out", out, "--no-store", "--no-progress", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = sorted((out / "minimize").iterdir())
    return folder
