"""The build cache: flag-parser verdicts and the environment description are paid for once per build.

Real processes throughout: a small package laid out like sglang (``sglang/srt/server_args.py``) whose
parser notes each time it is loaded, an interpreter wrapper that notes each probe, and (slow) the real
``sglang==0.5.14`` wheel.
"""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from harness.build import Build, default_cache_dir, describe_environment, ensure_pip_env, resolve_build
from harness.build.cache import cache_file, flag_set_key
from harness.launch.preflight import check_flag_sets, check_flags
from harness.util.errors import InfraError

_SERVER_ARGS = """
import json, os, sys
with open(os.environ["PARSER_LOG"], "a") as log:  # one line per parser process: how many sets it got
    log.write(json.dumps(len(json.loads(sys.argv[1]))) + "\\n")

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--tp-size", type=int, default=1)
{extra}
"""


REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
_PREPARED = default_cache_dir()  # read before the fixture below points the cache elsewhere


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("SGLANG_REPRO_CACHE", str(root))
    return root


def _fake_sglang(root: Path, extra: str = "") -> Path:
    pkg = root / "sglang"
    (pkg / "srt").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('__version__ = "0.0.1"\n')
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(_SERVER_ARGS.format(extra=textwrap.indent(extra, " " * 8)))
    return pkg


def _fake_build(tmp_path: Path, log: Path) -> Build:
    src = tmp_path / "src"
    pkg = _fake_sglang(src)
    return Build("python", "python:fake-sglang", sys.executable, (sys.executable, "-m", "sglang.launch_server"),
                 env={"PYTHONPATH": str(src), "PARSER_LOG": str(log)}, version="0.0.1", location=str(pkg))


def _loads(log: Path) -> list[int]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_second_check_of_a_flag_set_starts_no_parser_even_on_another_port(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    first = check_flags(build, ["--model-path", "m", "--tp-size", "2", "--host", "127.0.0.1", "--port", "31001"])
    assert first.ok and "0.0.1" in first.message
    assert _loads(log) == [1]
    again = check_flags(build, ["--model-path", "m", "--tp-size", "2", "--host", "127.0.0.1", "--port", "31002"])
    assert again == first
    assert _loads(log) == [1]  # no parser process the second time
    assert cache_file(build).is_file()


def test_a_rejection_is_kept_with_the_parsers_own_words(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    argv = ["--model-path", "m", "--tp-size", "two"]
    first = check_flags(build, argv)
    assert not first.ok and first.message == "argument --tp-size: invalid int value: 'two'"
    assert check_flags(build, argv) == first
    assert _loads(log) == [1]


def test_unknown_sets_are_parsed_together_in_one_process(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    check_flags(build, ["--model-path", "a"])
    checks = check_flag_sets(build, [["--model-path", "a"], ["--model-path", "b"], ["--model-path", "c", "--bogus"],
                                     ["--model-path", "b", "--port", "1"]])
    assert [c.ok for c in checks] == [True, True, False, True]
    assert checks[2].message == "unrecognized arguments: --bogus"
    assert _loads(log) == [1, 2]  # one process for the two new sets ("b" twice is one set)


def test_editing_the_builds_parser_clears_its_verdicts(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    argv = ["--model-path", "m", "--enable-new-thing"]
    assert not check_flags(build, argv).ok
    _fake_sglang(tmp_path / "src", extra='parser.add_argument("--enable-new-thing", action="store_true")')
    assert check_flags(build, argv).ok
    assert _loads(log) == [1, 1]


def test_editing_the_parsers_helpers_or_reinstalling_clears_its_verdicts(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    pkg = Path(build.location or "")
    helpers = pkg / "srt" / "arg_groups" / "arg_utils.py"
    helpers.parent.mkdir()
    helpers.write_text("# helpers\n")
    record = pkg.parent / "sglang-0.0.1.dist-info" / "RECORD"
    record.parent.mkdir()
    record.write_text("sglang/__init__.py,,\n")
    argv = ["--model-path", "m"]
    check_flags(build, argv)
    check_flags(build, argv)
    helpers.write_text("# helpers, edited\n")
    check_flags(build, argv)
    record.write_text("sglang/__init__.py,,\nsglang/srt/__init__.py,,\n")  # what a reinstall rewrites
    check_flags(build, argv)
    check_flags(build, argv)
    assert _loads(log) == [1, 1, 1]


def test_a_parser_that_cannot_load_is_infra_and_nothing_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    args_py = Path(build.location or "") / "srt" / "server_args.py"
    args_py.write_text("raise ImportError('no torch here')\n")
    for _ in range(2):  # tried again each time: a failure is not an answer
        with pytest.raises(InfraError, match="cannot load sglang's flag parser"):
            check_flags(build, ["--model-path", "m"])
    assert not cache_file(build).exists() or "flag_checks" not in json.loads(cache_file(build).read_text())


def test_an_unusable_cache_costs_the_parser_again_not_the_check(tmp_path: Path, cache_root: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    cache_root.mkdir(parents=True)
    (cache_root / "builds").write_text("not a folder")
    assert check_flags(build, ["--model-path", "m"]).ok
    assert check_flags(build, ["--model-path", "m"]).ok
    assert _loads(log) == [1, 1]


def test_a_build_of_unknown_location_is_never_cached(tmp_path: Path) -> None:
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    unlocated = Build(build.kind, build.spec, build.python, build.launcher, build.env, build.version)
    check_flags(unlocated, ["--model-path", "m"])
    check_flags(unlocated, ["--model-path", "m"])
    assert _loads(log) == [1, 1]


@pytest.mark.parametrize(("flags", "kept"), [
    (["--model-path", "m", "--host", "0.0.0.0", "--port", "1"], ["--model-path", "m"]),
    (["--port=30000", "--model-path", "m", "--host=::1"], ["--model-path", "m"]),
    (["--portal", "x", "--model-path", "m"], ["--portal", "x", "--model-path", "m"]),
])  # fmt: skip
def test_the_key_of_a_flag_set_leaves_out_host_and_port_only(flags: list[str], kept: list[str]) -> None:
    assert json.loads(flag_set_key(flags)) == kept


# --------------------------------------------------------------------------- environment description


def _counting_interpreter(tmp_path: Path, log: Path) -> Path:
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho probe >> "{log}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_the_environment_is_probed_again_only_when_a_package_is_installed(tmp_path: Path) -> None:
    log = tmp_path / "probes.log"
    site = tmp_path / "site"
    site.mkdir()
    python = _counting_interpreter(tmp_path, log)
    build = Build("python", f"python:{python}", str(python), (str(python), "-m", "sglang.launch_server"),
                  env={"PYTHONPATH": str(site)})
    first = describe_environment(build)
    assert describe_environment(build) == first
    assert log.read_text().count("probe") == 1
    assert "sglang-repro-demo-pkg" not in first["packages"]
    info = site / "sglang_repro_demo_pkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang-repro-demo-pkg\nVersion: 1.2.3\n")
    after = describe_environment(build)
    assert after["packages"]["sglang-repro-demo-pkg"] == "1.2.3"
    assert log.read_text().count("probe") == 2


def test_reference_revisions_share_an_interpreter_without_evicting_each_other(tmp_path: Path) -> None:
    pre, post = resolve_build("sim:pre-fix"), resolve_build("sim:post-fix")
    assert cache_file(pre) == cache_file(post)
    facts = [describe_environment(b) for b in (pre, post)]
    entries = json.loads(cache_file(pre).read_text())["environment"]
    assert len(entries) == 2
    assert [describe_environment(b) for b in (pre, post)] == facts
    assert facts[0]["build"]["version"] != facts[1]["build"]["version"]


# --------------------------------------------------------------------------- a real sglang wheel


def _counting_wrapper(tmp_path: Path, python: Path, log: Path) -> Path:
    wrapper = tmp_path / "sglang-python"
    # Notes each start of sglang's parser (the harness's parse script names ServerArgs) and runs it.
    wrapper.write_text(f'#!/bin/sh\ncase "$2" in *ServerArgs*) echo parser >> "{log}";; esac\n'
                       f'exec "{python}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


@pytest.mark.slow
def test_a_real_sglang_parser_is_started_once_for_a_flag_set(tmp_path: Path) -> None:
    venv = ensure_pip_env("0.5.14", deps="none", cache_dir=_PREPARED)  # what `make sglang-envs` made
    log = tmp_path / "parsers.log"
    build = resolve_build(f"python:{_counting_wrapper(tmp_path, venv / 'bin' / 'python', log)}")
    assert build.version == "0.5.14" and build.location
    flags = ["--model-path", "m", "--speculative-algorithm", "NEXTN", "--disable-cuda-graph", "--host", "127.0.0.1"]
    first = check_flags(build, [*flags, "--port", "30001"], timeout_s=120)
    assert first.ok, first.message
    assert log.read_text().splitlines() == ["parser"]
    assert check_flags(build, [*flags, "--port", "30002"], timeout_s=120) == first
    assert check_flag_sets(build, [[*flags, "--port", "30003"]] * 3, timeout_s=120) == [first] * 3
    assert log.read_text().splitlines() == ["parser"]
    rejected = check_flags(build, [*flags, "--definitely-not-a-flag"], timeout_s=120)
    assert rejected.message == "unrecognized arguments: --definitely-not-a-flag"
    assert log.read_text().splitlines() == ["parser", "parser"]


# --------------------------------------------------------------------------- a batch of runs


def test_a_batch_loads_each_builds_parser_once_and_every_run_then_finds_its_verdict(
    tmp_path: Path, cache_root: Path
) -> None:
    from harness.launch.preflight_batch import check_flags_up_front
    from harness.scenario import load_file, server_flags

    cases = load_file(SCENARIO).cases
    assert len(cases) > 1
    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    absent = "pip:sglang==9.9.9,deps=full"  # not created: a batch never installs anything
    assert check_flags_up_front(cases, [build, "sim:pre-fix", absent, build]) == 1
    assert _loads(log) == [len({flag_set_key(server_flags(c.scenario)) for c in cases})]
    for port, case in enumerate(cases, start=31000):  # what each run asks, on its own leased port
        check_flags(build, server_flags(case.scenario, port=port))
    assert len(_loads(log)) == 1
    assert not (cache_root / "envs").exists()


def test_a_batch_leaves_a_broken_parser_to_the_runs(tmp_path: Path) -> None:
    from harness.launch.preflight_batch import check_flags_up_front
    from harness.scenario import load_file

    log = tmp_path / "parser.log"
    build = _fake_build(tmp_path, log)
    (Path(build.location or "") / "srt" / "server_args.py").write_text("raise ImportError('no torch here')\n")
    assert check_flags_up_front(load_file(SCENARIO).cases, [build]) == 0
    with pytest.raises(InfraError):
        check_flags(build, ["--model-path", "m"])
