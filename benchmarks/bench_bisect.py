"""Bisection: server launches and wrong answers of the harness beside two naive `git bisect run` scripts.

Usage: python benchmarks/bench_bisect.py [--seeds 20] [--first-seed 0] [--work DIR] [--out FILE]

Per seed, a generated 72-commit history of the CPU reference server (`harness.bisect.demo_repo`,
positions drawn by the seed): one commit turns the default revision to pre-fix (the stale
out_cache_loc crash), a later one back; four commits do not install; from before the culprit to a
few commits after it, an unrelated CUDA illegal-memory-access crash happens at random decode steps
(about one run in four). The search: the crash, from the first commit (good) to the commit before
the fix (bad), case `fixtures/bisect/stale_out_cache_loc_tiny.yaml`.

Three searchers, each on its own fresh clone of the history:

* (a) `sglang-repro bisect --trials 1 --confirm-trials 1` (endpoints verified, retries on other
  crashes, confirmation of the culprit and its parent; no trial cache shared between searchers);
* (b) `git bisect run` with a script that runs the scenario once per step with `sglang-repro run`:
  pass is good, the searched signature bad, anything else skip (125);
* (c) the same script, but any crash is bad.

With ``--jobs 1,2,4`` only the harness searches, once per K (``bisect --jobs K``: K commits judged at once,
each a local probe process; K = 1 is ``git bisect run``), and the report puts rounds and wall time of
each K side by side (a machine with fewer cores than K runs the K probes slower, not fewer rounds).

A wrong answer is any result other than the exact culprit commit, including "could be any of" and
an aborted search. Launches count server starts (a build that does not install starts none);
decisions count the oracle's answers (steps, endpoints, confirmations) for (a), the steps for (b)/(c).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.bisect.demo_repo import make_demo_repo, random_layout  # noqa: E402

SCENARIO = REPO / "fixtures" / "bisect" / "stale_out_cache_loc_tiny.yaml"
SIG = "frozen-kv-mtp-stale-out-cache-loc"
SERVER = "sglang-repro CPU reference server (a model of SGLang's Frozen-KV MTP mechanism, not SGLang)"

# The naive step: one `sglang-repro run` of the checkout under test, its outcome mapped to git's codes.
NAIVE_STEP = r"""
import json, os, subprocess, sys
mode, scenario, out, ledger = sys.argv[1:5]
done = subprocess.run([sys.executable, "-P", "-m", "harness", "run", scenario, "--build", "simsrc:" + os.getcwd(),
                       "--out", out, "--no-progress"], capture_output=True, text=True)
run_dir = done.stdout.strip().splitlines()[-1].split("-> ")[-1] if "-> " in done.stdout else None
result = json.load(open(os.path.join(run_dir, "result.json"))) if run_dir else {"outcome": "infra", "signature": None}
code = 0 if result["outcome"] == "pass" else 125
if result["outcome"] == "crash" and (mode == "any-crash" or result["signature"] == "SIGNATURE"):
    code = 1
with open(ledger, "a") as f:
    f.write(json.dumps({"outcome": result["outcome"], "signature": result["signature"], "code": code}) + "\n")
sys.exit(code)
""".replace("SIGNATURE", SIG)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}


def harness_search(origin: Path, good: str, bad: str, work: Path, jobs: int = 1) -> dict[str, Any]:
    name = "a" if jobs == 1 else f"a-k{jobs}"
    repo = work / f"{name}-repo"
    subprocess.run(["git", "clone", "-q", str(origin), str(repo)], check=True)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", str(SCENARIO), "--repo", str(repo), "--good",
                           good, "--bad", bad, "--trials", "1", "--confirm-trials", "1", "--out", str(work / name),
                           "--jobs", str(jobs)],
                          capture_output=True, text=True, env={**_env(), "SGLANG_REPRO_CACHE": str(work / "cache")},
                          cwd=REPO)
    reports = list((work / name / "bisect").glob("*/report.json"))
    report = json.loads(reports[0].read_text()) if reports else {}
    commits = report.get("commits") or {}
    culprit = (commits.get("culprit") or {}).get("commit")
    steps = commits.get("steps") or []
    return {"answer": culprit, "exit_code": done.returncode, "launches": report.get("server_launches"),
            "decisions": len(steps), "search_steps": sum(1 for s in steps if s["kind"] == "step"),
            "skips": sum(1 for s in steps if s["verdict"] == "skip"), "confirmed": commits.get("confirmed"),
            "jobs": jobs, "rounds": commits.get("rounds"), "expected_rounds": commits.get("expected_steps"),
            "wall_s": round(time.monotonic() - started, 1)}


def naive_search(origin: Path, good: str, bad: str, work: Path, mode: str) -> dict[str, Any]:
    repo = work / f"{mode}-repo"
    subprocess.run(["git", "clone", "-q", str(origin), str(repo)], check=True)
    step = work / "naive_step.py"
    step.write_text(NAIVE_STEP)
    ledger = work / f"{mode}-ledger.jsonl"
    started = time.monotonic()
    _git(repo, "bisect", "start", bad, good)
    done = subprocess.run(["git", "-C", str(repo), "bisect", "run", sys.executable, str(step), mode, str(SCENARIO),
                           str(work / mode), str(ledger)], capture_output=True, text=True, env=_env())
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", done.stdout, re.MULTILINE)
    rows = [json.loads(x) for x in ledger.read_text().splitlines()] if ledger.exists() else []
    return {"answer": found.group(1) if found else None, "launches": sum(1 for r in rows if r["outcome"] != "infra"),
            "decisions": len(rows), "search_steps": len(rows), "skips": sum(1 for r in rows if r["code"] == 125),
            "ambiguous": "could be any of" in done.stdout, "wall_s": round(time.monotonic() - started, 1)}


def _summary(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    runs = [r[key] for r in rows]
    wrong = sum(1 for r in runs if not r["correct"])
    launches = sorted(r["launches"] or 0 for r in runs)
    return {"searches": len(runs), "wrong_answers": wrong, "wrong_rate": round(wrong / len(runs), 3) if runs else None,
            "launches_mean": round(sum(launches) / len(launches), 2) if launches else None,
            "launches_max": launches[-1] if launches else None,
            "decisions_mean": round(sum(r["decisions"] for r in runs) / len(runs), 2) if runs else None,
            "skips_mean": round(sum(r["skips"] for r in runs) / len(runs), 2) if runs else None,
            "wall_s_mean": round(sum(r["wall_s"] for r in runs) / len(runs), 1) if runs else None}


def _summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"server": SERVER, "case": str(SCENARIO.relative_to(REPO)), "seeds": [r["seed"] for r in rows],
            "commits": 72, **{k: _summary(rows, k) for k in ("harness", "naive_once", "naive_any_crash")},
            "per_seed": rows}


def _kary_summary(rows: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"server": SERVER, "case": str(SCENARIO.relative_to(REPO)), "seeds": [r["seed"] for r in rows],
                           "cpus": os.cpu_count()}
    for k in ks:
        runs = [r[f"k{k}"] for r in rows]
        out[f"k{k}"] = {"searches": len(runs), "wrong_answers": sum(1 for r in runs if not r["correct"]),
                        "rounds_mean": round(sum(r["rounds"] or 0 for r in runs) / len(runs), 2),
                        "rounds_max": max(r["rounds"] or 0 for r in runs),
                        "search_steps_mean": round(sum(r["search_steps"] for r in runs) / len(runs), 2),
                        "launches_mean": round(sum(r["launches"] or 0 for r in runs) / len(runs), 2),
                        "wall_s_mean": round(sum(r["wall_s"] for r in runs) / len(runs), 1)}
    out["per_seed"] = rows
    return out


def kary_main(args: argparse.Namespace, ks: list[int]) -> int:
    rows: list[dict[str, Any]] = []
    text = ""
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        work = args.work / f"kary-seed-{seed}-{int(time.time())}"
        work.mkdir(parents=True)
        layout = random_layout(seed)
        named = make_demo_repo(work / "origin", layout)
        good, bad, culprit = named["c0"], named[f"c{layout.fix - 1}"], named["culprit"]
        row: dict[str, Any] = {"seed": seed, "culprit_index": layout.culprit, "commits_in_range": layout.fix - 1}
        for k in ks:
            row[f"k{k}"] = harness_search(work / "origin", good, bad, work, jobs=k)
            row[f"k{k}"]["correct"] = row[f"k{k}"]["answer"] == culprit
        rows.append(row)
        sys.stderr.write(f"seed {seed}: " + ", ".join(
            f"K={k} {'ok' if row[f'k{k}']['correct'] else 'WRONG'} {row[f'k{k}']['rounds']} rounds "
            f"{row[f'k{k}']['wall_s']} s" for k in ks) + "\n")
        text = json.dumps(_kary_summary(rows, ks), indent=2)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
    print(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=REPO / "reports" / "benchmarks" / "bisect")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--jobs", default=None, metavar="K,K,...",
                        help="only the harness, once per K (bisect --jobs K), rounds and wall time side by side")
    args = parser.parse_args()
    if args.jobs:
        return kary_main(args, [int(k) for k in args.jobs.split(",")])
    rows: list[dict[str, Any]] = []
    text = ""
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        work = args.work / f"seed-{seed}-{int(time.time())}"
        work.mkdir(parents=True)
        layout = random_layout(seed)
        named = make_demo_repo(work / "origin", layout)
        good, bad, culprit = named["c0"], named[f"c{layout.fix - 1}"], named["culprit"]
        row: dict[str, Any] = {"seed": seed, "culprit_index": layout.culprit, "commits_in_range": layout.fix - 1}
        row["harness"] = harness_search(work / "origin", good, bad, work)
        row["naive_once"] = naive_search(work / "origin", good, bad, work, "signature")
        row["naive_any_crash"] = naive_search(work / "origin", good, bad, work, "any-crash")
        for key in ("harness", "naive_once", "naive_any_crash"):
            row[key]["correct"] = row[key]["answer"] == culprit
        rows.append(row)
        sys.stderr.write(f"seed {seed}: " + ", ".join(f"{k} {'ok' if row[k]['correct'] else 'WRONG'} "
                                                       f"({row[k]['launches']} launches)"
                                                       for k in ("harness", "naive_once", "naive_any_crash")) + "\n")
        text = json.dumps(_summarise(rows), indent=2)
        if args.out:  # after every seed: a long run that is stopped still leaves its figures
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
