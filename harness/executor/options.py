"""``--executor local|slurm`` and the SLURM flags, shared by ``run``, ``compare``, ``nightly`` and ``bisect``.

The store rule of a fleet: jobs on other machines cannot share an SQLite file safely (SQLite's locks do
not hold over NFS, and every job would write it), so ``--executor slurm`` records into a server store
(PostgreSQL), which every job writes itself; an SQLite store is refused before anything is submitted.
``--no-store`` (where a command has it) is allowed: the jobs hand their records back and nothing is written.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.executor.job import RunJob
from harness.executor.slurm import ExecutorInterrupted, SlurmExecutor, SlurmOptions
from harness.records.run_record import RunRecord
from harness.store.url import store_url
from harness.util.argtypes import positive_int
from harness.util.errors import InfraError, UserError
from harness.util.paths import reports_root

__all__ = ["add_executor_arguments", "dispatch", "slurm_executor", "slurm_store"]


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("executor", "where the runs execute (docs/fleet.md)")
    group.add_argument("--executor", choices=("local", "slurm"), default="local",
                       help="local: this machine (default); slurm: one SLURM job per case and trial")
    group.add_argument("--partition", metavar="NAME", help="SLURM partition of the jobs")
    group.add_argument("--account", metavar="NAME", help="SLURM account of the jobs")
    group.add_argument("--qos", metavar="NAME", help="SLURM quality of service of the jobs")
    group.add_argument("--time", type=positive_int, metavar="MIN",
                       help="SLURM time limit per job in minutes (default: the scenario's deadline + 10)")
    group.add_argument("--slurm-arg", type=_pair, action="append", default=[], metavar="KEY=VALUE",
                       help="any other sbatch option, as --KEY=VALUE (repeatable), e.g. mem=64G, cpus-per-task=8")
    group.add_argument("--slurm-gpu-type", type=_pair, action="append", default=[], metavar="PATTERN=TYPE",
                       help="the cluster's gres type for a hardware.gpu_name (repeatable), e.g. H200=h200")
    group.add_argument("--slurm-poll", type=float, default=5.0, metavar="S",
                       help="seconds between two looks at the jobs' SLURM states (default 5)")


def slurm_store(store: str | None, command: str) -> str | None:
    """The store URL the jobs record into (PostgreSQL), None for no store; UserError for an SQLite file."""
    if store is None:
        return None
    url = store_url(store)
    if url.drivername == "sqlite":
        raise UserError(f"{command} --executor slurm: the store {url.database} is an SQLite file, which jobs on "
                        "other machines cannot share safely; give --store postgresql+psycopg://USER@HOST/DB")
    return url.render_as_string(hide_password=False)


def slurm_executor(args: argparse.Namespace, out_root: Path | None, label: str) -> SlurmExecutor:
    """The executor of ``args`` (``--executor slurm``); InfraError when this machine cannot submit."""
    if shutil.which("sbatch") is None or shutil.which("sacct") is None:
        raise InfraError("--executor slurm: sbatch/sacct not found on PATH (is this a SLURM login node?)")
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise InfraError("--executor slurm needs submitit (pip install submitit)") from None
    folder = (out_root or reports_root()).resolve() / "slurm" / label
    return SlurmExecutor(SlurmOptions(
        folder=folder, partition=args.partition, account=args.account, qos=args.qos, time_min=args.time,
        extra=dict(args.slurm_arg), gpu_types=dict(args.slurm_gpu_type), poll_s=args.slurm_poll))


def dispatch(executor: SlurmExecutor, jobs: Sequence[RunJob],
             on_record: Callable[[RunRecord], None]) -> tuple[list[RunRecord], bool]:
    """Run ``jobs``; (every record, whether the submitter was interrupted). On Ctrl-C the jobs are cancelled
    and the unfinished ones come back as ``interrupted`` records, like a local run stopped by a signal."""
    try:
        return executor.run_all(jobs, on_record), False
    except ExecutorInterrupted as exc:
        return exc.records, True
