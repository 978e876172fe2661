"""Builds: spec parsing, and resolution of sim, python, pip (real sglang wheels) and src builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.build import (
    Build,
    BuildFailure,
    Builds,
    BuildSpec,
    describe_environment,
    ensure_pip_env,
    parse_build_spec,
    resolve_build,
)
from harness.util.errors import InfraError, UserError
from tests.helpers import git

RELEASES = ("0.5.14", "0.5.15")


@pytest.mark.parametrize(
    ("spec", "kind", "fields"),
    [
        ("sim:pre-fix", "sim", {"revision": "pre-fix"}),
        ("sim:post-fix,step-cost-ms=4,draft-agreement=0.7", "sim",
         {"revision": "post-fix", "step-cost-ms": "4", "draft-agreement": "0.7"}),
        ("python:/opt/py/bin/python", "python", {"path": "/opt/py/bin/python"}),
        ("pip:sglang==0.5.14", "pip", {"version": "0.5.14", "deps": "full"}),
        ("pip:sglang==0.5.15,deps=none,torch=2.14.1", "pip", {"version": "0.5.15", "deps": "none", "torch": "2.14.1"}),
        ("src:../sglang", "src", {"checkout": "../sglang"}),
        ("src:/w/sglang@v0.5.14,base=/usr/bin/python3", "src",
         {"checkout": "/w/sglang", "rev": "v0.5.14", "base": "/usr/bin/python3"}),
    ],
)  # fmt: skip
def test_valid_specs_parse_into_their_fields(spec: str, kind: str, fields: dict[str, str]) -> None:
    parsed = parse_build_spec(spec)
    assert parsed == BuildSpec(kind, spec, fields)
    assert dict(parsed.fields) == fields


@pytest.mark.parametrize(
    "spec",
    ["", "sim", "sim:", "sim:mid-fix", "sim:pre-fix,unknown-knob=1", "sim:pre-fix,seed", "docker:img",
     "pip:sglang", "pip:sglang>=0.5", "pip:vllm==0.1", "pip:sglang==0.5.14,deps=some",
     "pip:sglang==0.5.14,torch=2.13.0", "pip:sglang==0.5.14,deps=none,deps=full", "src:@abc", "src:repo@"],
)  # fmt: skip
def test_bad_specs_are_one_line_user_errors_naming_what_is_valid(spec: str) -> None:
    with pytest.raises(UserError) as info:
        parse_build_spec(spec)
    message = str(info.value)
    assert "\n" not in message
    assert "valid build specs: sim:" in message and "pip:sglang==X" in message


def test_sim_build_launches_the_reference_server_with_knobs_as_sim_flags() -> None:
    build = resolve_build("sim:post-fix,step-cost-ms=4,draft-agreement=0.7")
    assert build.is_reference and build.kind == "sim"
    # The release rules of the release the revision stands for (post-fix: 0.5.15), unless the spec names them.
    assert build.launcher == (sys.executable, "-m", "harness.sim.server", "--sim-revision", "post-fix",
                              "--sim-step-cost-ms", "4", "--sim-draft-agreement", "0.7",
                              "--sim-rules", "0.5.15")  # fmt: skip
    assert resolve_build("sim:pre-fix").launcher[-2:] == ("--sim-rules", "0.5.14")
    assert resolve_build("sim:pre-fix,rules=0.5.23").launcher.count("--sim-rules") == 1
    assert build.version is not None and build.version.startswith("post-fix") and "not SGLang" in build.version
    assert build.commit is None


def test_python_build_with_a_missing_interpreter_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not an executable interpreter"):
        resolve_build(f"python:{tmp_path / 'nope' / 'python'}")


@pytest.mark.slow
def test_python_build_without_sglang_is_an_infra_error() -> None:
    # The harness's own interpreter has no sglang.
    with pytest.raises(InfraError, match="cannot find sglang"):
        resolve_build(f"python:{sys.executable}")


# --------------------------------------------------------------------------- real wheels


@pytest.fixture(scope="session")
def nodeps_env() -> dict[str, Path]:
    """Real sglang wheels installed with deps=none, cached under $SGLANG_REPRO_CACHE (created once)."""
    return {version: ensure_pip_env(version, deps="none") for version in RELEASES}


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_pip_nodeps_build_resolves_the_installed_release(version: str, nodeps_env: dict[str, Path]) -> None:
    build = resolve_build(f"pip:sglang=={version},deps=none")
    assert build.kind == "pip" and not build.is_reference
    assert Path(build.python).parent.parent == nodeps_env[version]
    assert build.launcher == (build.python, "-m", "sglang.launch_server")
    assert build.version == version


@pytest.mark.slow
def test_python_build_reads_version_from_its_own_interpreter(nodeps_env: dict[str, Path]) -> None:
    python = nodeps_env["0.5.14"] / "bin" / "python"
    build = resolve_build(f"python:{python}")
    assert build.python == str(python)
    assert build.version == "0.5.14"
    environment = describe_environment(build)
    assert environment["sglang"]["version"] == "0.5.14"
    assert environment["packages"]["sglang"] == "0.5.14"
    assert environment["torch"] == environment["packages"]["torch"]
    assert "triton" not in environment["packages"]  # the stub is import-only, not a distribution


@pytest.mark.slow
def test_nodeps_env_carries_the_stubs_not_real_gpu_packages(nodeps_env: dict[str, Path]) -> None:
    python = nodeps_env["0.5.15"] / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import triton, torchvision; print(triton.STUB, torchvision.STUB)"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.split() == ["True", "True"], done.stderr


# --------------------------------------------------------------------------- src builds


@pytest.fixture
def fake_checkout(tmp_path: Path) -> tuple[Path, list[str]]:
    """A tiny git repo shaped like sglang's (tests the worktree/PYTHONPATH mechanics only)."""
    repo = tmp_path / "sglang"
    package = repo / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "srt" / "__init__.py").write_text("")
    (package / "srt" / "server_args.py").write_text("class ServerArgs:\n    pass\n")
    git(repo, "init", "-q")
    commits = []
    for version in ("9.9.1", "9.9.2"):
        (package / "__init__.py").write_text(f'__version__ = "{version}"\n')
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", version)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def _imported_from(build: Build) -> str:
    done = subprocess.run(
        [build.python, "-c", "import sglang; print(sglang.__version__, sglang.__file__)"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **build.env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_src_build_at_a_rev_uses_a_worktree_under_the_cache(fake_checkout, tmp_path: Path) -> None:
    repo, (first, second) = fake_checkout
    cache = tmp_path / "cache"
    build = resolve_build(f"src:{repo}@{first[:8]}", cache_dir=cache)
    assert build.commit == first
    assert build.version == "9.9.1"
    tree = Path(build.env["PYTHONPATH"]).parent
    assert tree.parent == cache / "worktrees"
    assert _imported_from(build).split() == ["9.9.1", str(tree / "python" / "sglang" / "__init__.py")]
    # Resolving again reuses the worktree; the checkout itself is untouched.
    assert resolve_build(f"src:{repo}@{first}", cache_dir=cache).env == build.env
    assert git(repo, "rev-parse", "HEAD") == second


@pytest.mark.slow
def test_src_build_without_rev_uses_the_checkout_as_is(fake_checkout, tmp_path: Path) -> None:
    repo, (_, second) = fake_checkout
    build = resolve_build(f"src:{repo}", cache_dir=tmp_path / "cache")
    assert (build.commit, build.version) == (second, "9.9.2")
    assert build.env["PYTHONPATH"] == str(repo / "python")
    assert _imported_from(build).startswith("9.9.2 " + str(repo))


@pytest.mark.slow
def test_src_build_with_an_unknown_rev_is_a_user_error(fake_checkout, tmp_path: Path) -> None:
    repo, _ = fake_checkout
    with pytest.raises(UserError, match="no-such-rev is not a commit"):
        resolve_build(f"src:{repo}@no-such-rev", cache_dir=tmp_path / "cache")


def test_src_build_of_a_missing_checkout_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a directory"):
        resolve_build(f"src:{tmp_path / 'absent'}", cache_dir=tmp_path / "cache")


def test_a_build_that_cannot_be_had_is_tried_once_per_command(tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho start >> "{log}"\necho "no sglang here" >&2\nexit 1\n')
    python.chmod(0o755)
    builds = Builds()
    first = builds.get(f"python:{python}")
    assert isinstance(first, BuildFailure)
    assert first.reason == f"interpreter {python} failed to describe itself: no sglang here"
    assert builds.get(f"python:{python}") == first
    assert log.read_text().splitlines() == ["start"]


def test_a_full_environment_is_not_created_on_a_host_that_cannot_run_the_case(tmp_path: Path) -> None:
    asked: list[str] = []

    def gap() -> str:
        asked.append("gap")
        return "hardware: needs 1 GPU, found 0"

    builds = Builds(cache_dir=tmp_path / "cache")
    refused = builds.get("pip:sglang==9.9.9", install_gap=gap)
    assert refused == BuildFailure("pip", "pip:sglang==9.9.9", "hardware: needs 1 GPU, found 0; the environment "
                                   "of pip:sglang==9.9.9 was not created")
    assert builds.get("pip:sglang==9.9.9", install_gap=gap) == refused
    assert asked == ["gap", "gap"]  # asked per case: another may need less
    assert builds.prepared("pip:sglang==9.9.9") is None
    assert not (tmp_path / "cache").exists()


def test_prepare_is_a_command_of_the_one_cli(run_cli, tmp_path: Path) -> None:
    res = run_cli("prepare", "sim:post-fix,seed=3", "--cache-dir", tmp_path / "cache")
    assert res.returncode == 0, res.stderr
    printed = json.loads(res.stdout)
    assert printed["kind"] == "sim" and printed["spec"] == "sim:post-fix,seed=3"
    assert printed["launcher"][1:] == ["-m", "harness.sim.server", "--sim-revision", "post-fix", "--sim-seed", "3",
                                       "--sim-rules", "0.5.15"]
    bad = run_cli("prepare", "pip:numpy==1.0")
    assert bad.returncode == 2 and "is not sglang==VERSION" in bad.stderr
