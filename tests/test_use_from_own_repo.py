"""The harness used from another repository (issue 45), as a user would: a wheel of this working tree installed in a
fresh virtualenv outside the checkout, a new git repository in a temporary folder, ``init`` there, and from that
folder every command a user types, each with the exit code docs/commands.md gives it. Nothing may be written under
the virtualenv (a listing before and after: CI runs as root, so read-only permissions would prove nothing); what the
commands write lands in the repository (reports/, baselines/) or the cache.

The virtualenv reuses this one's dependencies (a ``.pth`` naming its site-packages; the wheel goes in with
``--no-deps``), so it takes seconds, not a resolve; the plugin is found by its ``pytest11`` entry point (no
conftest.py anywhere in the user's repository). A second repository has a ``harness/`` package of its own: the
commands still work (the harness's own child interpreters never put the working directory on sys.path), and
``python -m pytest`` is the documented limit (docs/configuration.md), ``python -P -m pytest`` its workaround.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from harness import __version__

# The reference servers of this module are the torch-free stand-in (tests/conftest.py): the claims are the package's.
# One worker builds the wheel and the virtualenv once for both tests (make test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.standin, pytest.mark.xdist_group("use-from-own-repo")]

REPO = Path(__file__).resolve().parent.parent
SCAFFOLDED = Path("scenarios") / "frozen_kv_mtp_28264.yaml"
USER_SIGNATURES = """\
version: 1
signatures:
  - id: myteam-scheduler-stall
    title: "our scheduler's watchdog: no progress"
    kind: bug
    upstream:
      - https://example.org/myteam/issues/1
    message: "RuntimeError: scheduler made no progress for (\\\\d+) s"
    message_alone: probable
"""
USER_LOG = """\
[2026-12-01 10:00:00] INFO server started
Traceback (most recent call last):
  File "/srv/ours/scheduler.py", line 10, in loop
    check()
RuntimeError: scheduler made no progress for 300 s
"""


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and link under ``root``: relative path -> (size, mtime_ns)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            out[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the wheel of this working tree (and, beside it, the sdist built from the same copy)."""
    root = tmp_path_factory.mktemp("dist")
    src, dist, venv = root / "src", root / "dist", root / "venv"
    # The working tree as git sees it (tracked and new files, nothing ignored), copied: the build's own build/ and
    # egg-info folders land in the copy, never in the checkout that other tests run from.
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file() and not name.startswith("reports/"):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    # What `python -m build` calls (PEP 517); the folder is read first: setuptools rewrites sys.argv as it builds.
    build = ("from setuptools import build_meta as b; import sys; out = sys.argv[1]; "
             "w = b.build_wheel(out); s = b.build_sdist(out); print('BUILT', w, s)")
    done = subprocess.run([sys.executable, "-c", build, str(dist)], cwd=src, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    built = next(line for line in done.stdout.splitlines() if line.startswith("BUILT ")).split()[1:]
    wheel, sdist = dist / built[0], dist / built[1]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "_reuse_checkout_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           "--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        meta = whl.read(f"sglang_repro-{__version__}.dist-info/METADATA").decode()
        entry_points = whl.read(f"sglang_repro-{__version__}.dist-info/entry_points.txt").decode()
    assert {"harness/data/signatures.yaml", "harness/data/stubs/triton/__init__.py", "harness/dashboard/dashboard.js",
            "harness/build/sglang_cpu/standins/_sglang_repro_placeholders.py",  # the flags-only build copies it too
            "harness/data/fixtures/prompts/word_problems.txt", "harness/data/scaffold/workflow.yml"} <= names
    assert "[pytest11]\nharness.pytest_plugin = harness.pytest_plugin" in entry_points
    for field in ("License-Expression: Apache-2.0", "Project-URL: ", "Classifier: Framework :: Pytest",
                  "Description-Content-Type: text/markdown", 'Requires-Dist: torch<3,>=2.13; extra == "sim"',
                  'Requires-Dist: pytest<9.2,>=8; extra == "test"', "Provides-Extra: slurm"):
        assert field in meta, field
    with tarfile.open(sdist) as tar:
        members = {m.name.partition("/")[2] for m in tar.getmembers()}
    assert {"LICENSE", "README.md", "pyproject.toml", "harness/data/signatures.yaml"} <= members
    return venv


def _env(root: Path) -> dict[str, str]:
    """The user's environment: none of this checkout's SGLANG_REPRO_* settings but the stand-in's, a cache of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_REPRO_") or k == "SGLANG_REPRO_SIM_SCHEDULER"}
    env.update(XDG_CACHE_HOME=str(root / "cache"), SGLANG_REPRO_LOCK_DIR=str(root / "locks"),
               SGLANG_REPRO_GPU_INVENTORY="")
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python writes bytecode caches: where, is what is checked
    return env


def _user(venv: Path, repo: Path, env: Mapping[str, str]):
    def run(*argv: str, expect: int, timeout: float = 300) -> str:
        program = [str(venv / "bin" / argv[0])] if argv[0] == "sglang-repro" else [str(venv / "bin" / "python"), *argv[:1]]
        done = subprocess.run([*program, *argv[1:]], cwd=repo, env=dict(env), capture_output=True, text=True,
                              timeout=timeout)
        said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == expect, f"{' '.join(argv)}: exit {done.returncode}\n{said}"
        return done.stdout
    return run


def _new_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=60)
    return path


def test_a_user_repository_from_init_to_ci_matrix(installed: Path, tmp_path: Path) -> None:
    venv = installed
    repo = _new_repo(tmp_path / "their-repo")
    run = _user(venv, repo, _env(tmp_path))
    before = _tree(venv)

    assert run("sglang-repro", "--version", expect=0).strip() == f"sglang-repro {__version__}"  # no checkout: no commit
    first = run("sglang-repro", "init", expect=0)
    assert "wrote sglang-repro.toml" in first and f"wrote {SCAFFOLDED}" in first and "5 file(s) written" in first
    assert run("sglang-repro", "init", expect=0).splitlines()[-1] == "0 file(s) written, 5 kept"  # idempotent
    # The user's own signature file, named in the configuration and merged with the built-in catalogue.
    (repo / "signatures.yaml").write_text(USER_SIGNATURES)
    with (repo / "sglang-repro.toml").open("a") as config:
        config.write('signatures = ["signatures.yaml"]\n')
    shown = run("sglang-repro", "config", expect=0)
    assert f'reports    = "{repo / "reports"}"' in shown and f"{repo / 'sglang-repro.toml'}:" in shown
    assert str(repo / "signatures.yaml") in shown

    assert "1 file(s) valid" in run("sglang-repro", "validate", "scenarios", expect=0)
    assert "frozen_kv_mtp_28264.yaml::default" in run("sglang-repro", "list", "scenarios", expect=0)
    assert "PASS" in run("sglang-repro", "run", str(SCAFFOLDED), "--build", "sim:post-fix,scheduler=standin",
                         "--no-progress", expect=0)
    assert "every expectation held" in run("sglang-repro", "compare", str(SCAFFOLDED), "--reference", "--trials", "1",
                                           "--no-progress", expect=0)
    # The plugin by its entry point: no conftest.py in the repository, and pytest's own rootdir is this folder.
    assert not list(repo.rglob("conftest.py"))
    assert "2 passed" in run("-m", "pytest", "-m", "sim", "-p", "no:cacheprovider", "-q", expect=0)
    assert f"store sqlite:///{repo / 'reports' / 'results.db'}" in run(
        "sglang-repro", "nightly", "scenarios", "--build", "sim:post-fix", "--trials", "1", "--no-progress", expect=0)
    run("sglang-repro", "dashboard", expect=0)
    pages = "".join(p.read_text() for p in (repo / "reports" / "dashboard").glob("*.html"))
    assert "site-packages" not in pages and str(venv) not in pages

    shutil.copy(REPO / "fixtures" / "tracebacks" / "upstream-28264-issue.log", repo / "pasted-28264.log")
    (repo / "pasted-ours.log").write_text(USER_LOG)
    judged = run("sglang-repro", "triage", "pasted-28264.log", "pasted-ours.log", "--no-releases", expect=1)
    assert "pasted-28264.log: frozen-kv-mtp-stale-out-cache-loc (bug)" in judged
    assert "pasted-ours.log: myteam-scheduler-stall (bug)" in judged

    # A scenario of their own with baseline checks; its prompt fixture is one the package ships.
    (repo / "scenarios" / "own").mkdir()
    shutil.copy(REPO / "scenarios" / "frozen_kv_mtp" / "accept_length_guard.yaml", repo / "scenarios" / "own")
    run("sglang-repro", "baselines", "record", "scenarios/own/accept_length_guard.yaml", "--build", "after",
        "--reference", "--trials", "2", "--case", "draft=topk1", expect=0)
    assert (repo / "baselines" / "frozen-kv-mtp-accept-length-guard.yaml").is_file()
    matrix = json.loads(run("sglang-repro", "ci-matrix", "scenarios", "--format", "github", expect=0))
    assert {job["runner"] for job in matrix["include"]} == {"gpu-l40s-x4", "gpu-any-x1"}

    # pytest caches the plugin's entry module, and the package above it, rewritten beside their sources before any
    # plugin code runs, as it does for every pytest11 plugin; nothing else (harness.pytest_plugin._not_rewritten).
    pytest_cache = [f"lib/python3*/site-packages/harness/{where}__pycache__/__init__.*-pytest-*.pyc"
                    for where in ("", "pytest_plugin/")]
    after = {name: stat for name, stat in _tree(venv).items()
             if not any(fnmatch.fnmatch(name, pattern) for pattern in pytest_cache)}
    assert after == before, f"written under the virtualenv: {sorted(set(after.items()) ^ set(before.items()))[:10]}"
    written = {p.relative_to(repo).parts[0] for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert {"reports", "baselines", "scenarios"} <= written
    assert (repo / "reports" / "results.db").is_file() and list((repo / "reports" / "runs").iterdir())


def test_a_repository_with_a_harness_package_of_its_own(installed: Path, tmp_path: Path) -> None:
    """A user's own ``harness/`` package: the commands and ``python -P -m pytest`` work; ``python -m pytest`` puts the
    working directory first on sys.path, so theirs shadows the plugin's package (the documented limit)."""
    venv = installed
    repo = _new_repo(tmp_path / "has-harness")
    (repo / "harness").mkdir()
    (repo / "harness" / "__init__.py").write_text('WHO = "theirs"\n')
    run = _user(venv, repo, _env(tmp_path))
    run("sglang-repro", "init", expect=0)
    assert "PASS" in run("sglang-repro", "run", str(SCAFFOLDED), "--build", "sim:post-fix,scheduler=standin",
                         "--no-progress", expect=0)
    assert "2 passed" in run("-P", "-m", "pytest", "-m", "sim", "-p", "no:cacheprovider", "-q", "scenarios", expect=0)
    shadowed = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-m", "sim", "-q", "scenarios"], cwd=repo,
                              env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert shadowed.returncode != 0 and "No module named 'harness.pytest_plugin'" in shadowed.stdout + shadowed.stderr
