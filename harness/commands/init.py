"""sglang-repro init [DIR]: scaffold a project inside an existing repository (harness.scaffold)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from harness.scaffold import install_spec, plan, write

DESCRIPTION = ("Scaffold a project in DIR (default: here): sglang-repro.toml, one scenario (sglang#28264, named after "
               "the project, on the GPUs named), an empty baselines/ folder, reports/.gitignore and a GitHub Actions "
               "workflow (pytest -m sim on push; nightly on the runners ci-matrix plans). A file that exists is never "
               "overwritten: a second run writes nothing. Prints what it wrote and what it kept.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", nargs="?", type=Path, default=Path("."), metavar="DIR",
                        help="the repository's folder (default: the working directory)")
    parser.add_argument("--gpu-name", default="L40S", metavar="NAME",
                        help="the GPU model of the scenario and the CI runners (default L40S, as sglang#28264)")
    parser.add_argument("--gpus", type=int, default=4, metavar="N", help="GPUs per run (default 4)")
    parser.add_argument("--install", default=None, metavar="SPEC",
                        help="how CI installs the harness (default: as it was installed here, else sglang-repro==VERSION)")


def main(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    planned = plan(folder, gpu_name=args.gpu_name, gpus=args.gpus, install=args.install or install_spec())
    done = write(folder, planned)
    for (path, written), item in zip(done, planned):
        print(f"{'wrote' if written else 'kept '} {folder / path}: {item.what}" + ("" if written else " (exists)"))
    lacking = missing_extras()
    if lacking:
        # Without them `pytest -m sim` runs another interpreter's pytest, which collects nothing and says only that.
        print(f"note: this environment lacks {', '.join(lacking)}: pip install 'sglang-repro[sim,test]' "
              "(a CPU-only machine installs torch's CPU build first)")
    wrote = sum(written for _, written in done)
    print(f"{wrote} file(s) written, {len(done) - wrote} kept" +
          ("; next: sglang-repro validate scenarios, then pytest -m sim" if wrote else ""))
    return 0


def missing_extras() -> list[str]:
    """The modules ``pytest -m sim`` needs in this interpreter that it cannot import: pytest, and torch for the
    reference server."""
    return [name for name in ("pytest", "torch") if importlib.util.find_spec(name) is None]
