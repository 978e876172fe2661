"""A generated git history of sglang-repro's reference server, with known culprits, for tests and benchmarks.

``python -m harness.bisect.demo_repo DIR [--seed N] [--scheduler standin]`` copies what the reference server needs
(``harness/sim/``) into a new repository and makes many small commits (a changelog line each),
among which a few change what the server really does:

- ``culprit``: ``DEFAULT_REVISION`` becomes ``pre-fix`` (the eager draft keeps the prefill's
  out_cache_loc: the stale out_cache_loc crash); ``fix``: back to ``post-fix``.
- ``unrelated_add`` .. ``unrelated_remove``: the scheduler raises a CUDA illegal-memory-access
  error at some decode steps (another catalogued signature, at random: not every run).
- ``broken``: a syntax error in ``harness/sim/sampling.py`` that the next commit repairs: the
  build does not install there.
- ``slowdown``: each target step costs 20% more (``--sim-step-cost-ms`` is scaled in the scheduler).
- a release tag ``vX.Y.0`` every ``tag_every`` commits, and on the last one.

The first commit sets a base step cost of ``STEP_COST_MS`` so that a 20% slowdown is measurable
through the reference server's noise. Every knob is a code change the server really reads.

The scheduler knobs are turned in both schedulers the copy holds, the PyTorch model's and the stand-in's
(harness.sim.standin), so the history is the same whichever runs; ``scheduler="standin"`` makes the first
commit turn ``DEFAULT_SCHEDULER`` so that every build of the history starts the stand-in (tests whose claim is
about the search, not the server).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.build.reference_server import SCHEDULERS, source_dir
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_text
from harness.util.proc import git

__all__ = ["STEP_COST_MS", "Layout", "make_demo_repo", "random_layout"]

STEP_COST_MS = 250.0
_SIM = source_dir()
_IDENTITY = {"GIT_AUTHOR_NAME": "Demo Author", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
             "GIT_COMMITTER_NAME": "Demo Author", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
_CRASH_SNIPPET = """        if os.urandom(1)[0] < 6:  # a decode-step race, modelled: about 1 step in 40
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


@dataclass(frozen=True)
class Layout:
    """Commit indices (0 = the first commit) of each change; ``commits`` in all."""

    commits: int = 72
    culprit: int = 30
    fix: int = 50
    unrelated_add: int = 14
    unrelated_remove: int = 34
    broken: tuple[int, ...] = (9, 21, 27, 44)
    slowdown: int = 58
    tag_every: int = 12


def random_layout(seed: int, commits: int = 72) -> Layout:
    """A layout with the same shape (unrelated crash before and across the culprit), positions drawn by seed."""
    rng = random.Random(seed)
    culprit = rng.randrange(20, 38)
    fix = rng.randrange(culprit + 10, culprit + 22)
    unrelated_add = rng.randrange(6, culprit - 6)
    unrelated_remove = rng.randrange(culprit + 1, culprit + 6)
    slowdown = rng.randrange(fix + 4, commits - 3)
    taken = {0, culprit, fix, unrelated_add, unrelated_remove, slowdown}
    broken: list[int] = []
    while len(broken) < 4:
        i = rng.randrange(2, commits - 2)
        if not ({i, i + 1} & taken):
            broken.append(i)
            taken |= {i, i + 1}
    return Layout(commits, culprit, fix, unrelated_add, unrelated_remove, tuple(sorted(broken)), slowdown)


def _edit(path: Path, old: str, new: str) -> None:
    text = read_text(path, "source")
    if old not in text:
        raise RuntimeError(f"{path}: {old!r} not found; the demo repository no longer matches harness/sim")
    write_atomic(path, text.replace(old, new, 1))


def _start_repo(root: Path, step_cost_ms: float, scheduler: str) -> Path:
    """An empty repository with the reference server's copy (its step cost and scheduler set); its sim folder."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler={scheduler!r} (valid: {', '.join(SCHEDULERS)})")
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main", env=_IDENTITY)
    git(root, "config", "commit.gpgsign", "false", env=_IDENTITY)
    (root / "harness").mkdir()
    write_atomic((root / "harness" / "__init__.py"), '"""sglang-repro (a generated history for bisection tests)."""\n')
    shutil.copytree(_SIM, root / "harness" / "sim", ignore=shutil.ignore_patterns("__pycache__"))
    sim = root / "harness" / "sim"
    _edit(sim / "cli_args.py", '"step-cost-ms": {"type": float, "default": 0.0,',
          f'"step-cost-ms": {{"type": float, "default": {step_cost_ms},')
    if scheduler != "model":
        _edit(sim / "__init__.py", 'DEFAULT_SCHEDULER = "model"', f'DEFAULT_SCHEDULER = "{scheduler}"')
    write_atomic((root / "CHANGELOG.md"), "# Changelog\n")
    return sim


def make_demo_repo(root: Path, layout: Layout = Layout(), *, step_cost_ms: float = STEP_COST_MS,
                   scheduler: str = "model") -> dict[str, str]:
    """Create the repository at ``root``; return the commit id of each named change (and each tag).

    ``step_cost_ms`` is the base cost of a target step: a search for the 20% slowdown needs it large enough
    to rise above the server's timing noise; a search for a crash does not depend on it. ``scheduler``:
    ``model`` (the reference server's PyTorch model) or ``standin`` (its torch-free stand-in) in every build."""
    sim = _start_repo(root, step_cost_ms, scheduler)
    init, sampling = sim / "__init__.py", sim / "sampling.py"
    schedulers = (sim / "scheduler.py", sim / "standin" / "scheduler.py")
    named: dict[str, str] = {}
    broken_text = ""
    for i in range(layout.commits):
        subject = f"changelog: entry {i}"
        with (root / "CHANGELOG.md").open("a") as f:
            f.write(f"- entry {i}\n")
        if i == 0:
            subject = f"the reference server, post-fix, {step_cost_ms:g} ms per target step" + (
                "" if scheduler == "model" else f", scheduler {scheduler}")
        if i == layout.culprit:
            _edit(init, 'DEFAULT_REVISION = "post-fix"', 'DEFAULT_REVISION = "pre-fix"')
            subject = "sim: the eager draft keeps the prefill's out_cache_loc (default revision pre-fix)"
        if i == layout.fix:
            _edit(init, 'DEFAULT_REVISION = "pre-fix"', 'DEFAULT_REVISION = "post-fix"')
            subject = "sim: the draft sets out_cache_loc to None (default revision post-fix)"
        if i == layout.unrelated_add:
            head = "    def run_decode(self) -> None:\n"
            for path in schedulers:
                _edit(path, head, head + _CRASH_SNIPPET)
            subject = "scheduler: overlap the decode step with the output copy"
        if i == layout.unrelated_remove:
            for path in schedulers:
                _edit(path, _CRASH_SNIPPET, "")
            subject = "scheduler: revert the decode overlap (illegal memory access)"
        if i == layout.slowdown:
            for path in schedulers:
                _edit(path, "cost = s.step_cost_ms / 1000.0", "cost = s.step_cost_ms * 1.2 / 1000.0")
            subject = "scheduler: synchronise after every target step (20% slower)"
        if broken_text:
            write_atomic(sampling, broken_text)
            broken_text = ""
            subject = "sampling: repair the syntax error"
        if i in layout.broken:
            broken_text = read_text(sampling, "source")
            write_atomic(sampling, broken_text + "\ndef broken(:\n")
            subject = "sampling: work in progress (does not import)"
        git(root, "add", "-A", env=_IDENTITY)
        git(root, "commit", "-q", "-m", subject, env=_IDENTITY)
        commit = git(root, "rev-parse", "HEAD", env=_IDENTITY)
        named[f"c{i}"] = commit
        if i % layout.tag_every == 0 or i == layout.commits - 1:
            tag = f"v0.{i // layout.tag_every + 1 + (i % layout.tag_every != 0)}.0"
            git(root, "tag", tag, env=_IDENTITY)
            named[tag] = commit
    for name in ("culprit", "fix", "unrelated_add", "unrelated_remove", "slowdown"):
        named[name] = named[f"c{getattr(layout, name)}"]
    return named


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bisect.demo_repo", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--seed", type=int, default=None, help="draw the positions (default: the fixed layout)")
    parser.add_argument("--scheduler", choices=SCHEDULERS, default="model",
                        help="what every build starts: the reference server's model, or its torch-free stand-in")
    args = parser.parse_args(argv)
    if args.dir.exists() and any(args.dir.iterdir()):
        parser.error(f"{args.dir} exists and is not empty")
    layout = Layout() if args.seed is None else random_layout(args.seed)
    named = make_demo_repo(args.dir, layout, scheduler=args.scheduler)
    for key in ("culprit", "fix", "unrelated_add", "unrelated_remove", "slowdown"):
        print(f"{key:17} {named[key][:12]} (c{getattr(layout, key)})")
    print(f"broken           {', '.join(f'c{i}' for i in layout.broken)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
