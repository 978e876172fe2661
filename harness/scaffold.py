"""``sglang-repro init``: a project scaffolded inside an existing repository.

What it writes (from ``harness/data/scaffold``): the configuration (``sglang-repro.toml``), one scenario (the #28264
case, named after the project, on the hardware named), an empty baselines folder, a GitHub Actions workflow whose
GPU jobs are what ``ci-matrix`` plans, and ``reports/.gitignore`` so the reports stay out of git without touching
the repository's own ``.gitignore``. A file that exists is never overwritten, so a second run writes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from harness.data import data_path
from harness.util.atomic import write_atomic
from harness.util.bounded_read import read_text
from harness.util.errors import UserError
from harness.util.project_config import CONFIG_FILE, PYPROJECT, find_config_file

__all__ = ["Planned", "install_spec", "plan", "write"]

SCENARIO = Path("scenarios") / "frozen_kv_mtp_28264.yaml"
WORKFLOW = Path(".github") / "workflows" / "sglang-repro.yml"


@dataclass(frozen=True)
class Planned:
    """One file of the scaffold: where, its text, and what it is for."""

    path: Path
    text: str
    what: str


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "project"


def install_spec() -> str:
    """How CI installs this harness: the git URL (and commit) or the version it was installed from here."""
    try:
        dist = distribution("sglang-repro")
    except PackageNotFoundError:
        return "sglang-repro"
    found = [f for f in dist.files or () if f.name == "direct_url.json" and f.parent.name.endswith(".dist-info")]
    if found:
        info = json.loads(read_text(Path(str(dist.locate_file(found[0]))), "config"))
        vcs = info.get("vcs_info") or {}
        if vcs.get("vcs") == "git" and str(info.get("url", "")).startswith(("https://", "ssh://")):
            return f"sglang-repro @ git+{info['url']}@{vcs.get('commit_id', 'HEAD')}"
    return f"sglang-repro=={dist.version}"


def plan(folder: Path, *, gpu_name: str, gpus: int, install: str) -> list[Planned]:
    """The scaffold's files for ``folder`` (an existing folder), whether or not they exist yet."""
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder; init scaffolds inside an existing repository")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 _.+-]{0,39}", gpu_name):
        raise UserError(f"--gpu-name {gpu_name!r}: give a GPU model as nvidia-smi names it (H100, L40S, ...)")
    if not 1 <= gpus <= 64:
        raise UserError(f"--gpus {gpus}: give 1 to 64")
    from harness.ci_matrix import runner_label
    from harness.scenario.model import Hardware

    name = f"{_slug(folder.resolve().name)[:22].strip('-')}-frozen-kv-mtp-28264"
    if not name[0].isalpha():
        name = f"p-{name}"[:40]
    label = runner_label(Hardware(gpus=gpus, gpu_name=gpu_name))
    values = {"project": folder.resolve().name, "name": name, "gpus": gpus, "gpu_name": json.dumps(gpu_name),
              "hardware": f"{gpus}x {gpu_name}", "label": label, "scenarios": "scenarios",
              "install": _quoted(install), "install_sim": _quoted(_with_extras(install, "sim,test"))}
    files = [
        Planned(SCENARIO, _fill(_template("scenario.yaml"), values), f"the #28264 case as {name}, on {gpus}x {gpu_name}"),
        Planned(Path("baselines") / ".gitkeep", "", "the baselines folder (sglang-repro baselines record fills it)"),
        Planned(Path("reports") / ".gitignore", "# sglang-repro's output: never committed\n*\n",
                "keeps reports/ out of git"),
        Planned(WORKFLOW, _fill(_template("workflow.yml"), values), f"CI: pytest -m sim, and nightly on {label}"),
    ]
    found = find_config_file(folder)
    if found is not None and found.name == PYPROJECT and found.parent.resolve() == folder.resolve():
        files.insert(0, Planned(Path(PYPROJECT), "", "the project's configuration ([tool.sglang-repro])"))
    else:
        files.insert(0, Planned(Path(CONFIG_FILE), _template(CONFIG_FILE), "the project's configuration"))
    return files


def write(folder: Path, planned: list[Planned]) -> list[tuple[Path, bool]]:
    """Write each planned file that does not exist yet; ``(path, written)`` for each, in order."""
    out = []
    for item in planned:
        target = folder / item.path
        if target.exists() or target.is_symlink():
            out.append((item.path, False))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, item.text)
        out.append((item.path, True))
    return out


def _template(name: str) -> str:
    return read_text(data_path(f"scaffold/{name}"), "source")


def _fill(template: str, values: dict[str, object]) -> str:
    """``<<key>>`` replaced by its value (YAML's braces and GitHub's ``${{ }}`` stay as written)."""
    return re.sub(r"<<([a-z_]+)>>", lambda m: str(values[m.group(1)]), template)


def _with_extras(spec: str, extras: str) -> str:
    head, at, rest = spec.partition(" @ ")
    if at:
        return f"{head}[{extras}] @ {rest}"
    match = re.match(r"([A-Za-z0-9_.-]+)(.*)", spec)
    return f"{match.group(1)}[{extras}]{match.group(2)}" if match else spec


def _quoted(spec: str) -> str:
    return "'" + spec.replace("'", "") + "'"
