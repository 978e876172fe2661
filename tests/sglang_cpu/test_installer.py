"""How the real-SGLang CPU environments are filled (issue 51: a cold `make demo` under 5 minutes): uv with pip's own
settings handed on, pip where uv is not had, and a build that cannot import sglang's server fails then, not at a run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.build.sglang_cpu import environment, installer
from harness.build.sglang_cpu.installer import INSTALLER_ENV, Installer, choose_installer, uv_options
from harness.util.errors import InfraError, UserError


def test_pips_indexes_find_links_constraints_and_certificate_reach_uv() -> None:
    # These machines keep the CPU build of torch in pip's find-links: without it uv would take the CUDA build.
    options, env = uv_options({"index-url": ["https://mirror/simple"], "extra-index-url": ["file:///opt/pypi/simple"],
                               "find-links": ["/opt/wheels"], "constraint": ["/etc/xdg/pip/constraints.txt"],
                               "cert": ["/etc/ssl/certs/ca.crt"]})
    text = " ".join(options)
    assert "--index-strategy unsafe-best-match" in text  # pip's choice among indexes, not uv's first-index
    assert "--index-url https://mirror/simple" in text and "--extra-index-url file:///opt/pypi/simple" in text
    assert "--find-links /opt/wheels" in text and "-c /etc/xdg/pip/constraints.txt" in text
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt"}
    assert uv_options({}) == (("--index-strategy", "unsafe-best-match"), {})


def test_pip_settings_are_read_from_pip_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/somewhere/wheels /elsewhere")
    assert {"/somewhere/wheels", "/elsewhere"} <= set(installer.pip_settings().get("find-links", []))


def test_the_installer_is_uv_when_the_harness_has_it_pip_otherwise_or_as_told(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    fake_uv = tmp_path / "uv"
    fake_uv.write_text("#!/bin/sh\n")
    fake_uv.chmod(0o755)
    monkeypatch.setattr(installer, "_harness_uv", lambda: fake_uv)
    monkeypatch.delenv(INSTALLER_ENV, raising=False)
    chosen = choose_installer()
    assert chosen.name == "uv" and chosen.uv == fake_uv
    argv = chosen.argv(Path("/env/bin/python"), Path("/env/c.txt"), ["--no-deps", "x.whl"])
    assert argv[:6] == [str(fake_uv), "pip", "install", "-q", "--python", "/env/bin/python"]
    assert argv[-2:] == ["--no-deps", "x.whl"] and "-c" in argv
    monkeypatch.setenv(INSTALLER_ENV, "pip")
    assert choose_installer() == Installer()
    monkeypatch.setattr(installer, "_harness_uv", lambda: None)
    monkeypatch.delenv(INSTALLER_ENV)
    assert choose_installer().name == "pip"
    pip_argv = choose_installer().argv(Path("/env/bin/python"), Path("/env/c.txt"), ["torch==2.13.0"])
    assert pip_argv[:4] == ["/env/bin/python", "-m", "pip", "install"] and "--no-compile" in pip_argv
    monkeypatch.setenv(INSTALLER_ENV, "uv")
    with pytest.raises(UserError, match="SGLANG_REPRO_INSTALLER=uv but no uv"):
        choose_installer()
    monkeypatch.setenv(INSTALLER_ENV, "conda")
    with pytest.raises(UserError, match="valid are pip, uv"):
        choose_installer()


def test_an_environment_that_cannot_import_the_server_fails_its_build_naming_the_module(tmp_path: Path) -> None:
    # The harness's own interpreter has no sglang: the build's check says so, as a missing dependency would.
    with pytest.raises(InfraError, match="cannot import sglang.s server .*No module named 'sglang"):
        environment._warm_imports(Path(sys.executable), tmp_path)


def test_an_environment_made_before_the_warm_up_is_warmed_once_and_a_failure_leaves_it_serving(tmp_path: Path) -> None:
    import json

    venv = environment.cpu_env_dir("0.0.1", tmp_path)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)  # no sglang in it: the warm-up's imports fail
    marker = venv / "sglang-repro-cpu-env.json"
    marker.write_text(json.dumps({"recipe": environment.RECIPE, "sglang": "0.0.1"}))
    assert environment.ensure_cpu_env("0.0.1", cache_dir=tmp_path) == venv
    record = json.loads(marker.read_text())
    assert "No module named 'sglang" in record["bytecode"] and record["sglang"] == "0.0.1"
    (venv / "bin" / "python").unlink()  # a second warm-up would now fail otherwise: it is not tried again
    assert environment.ensure_cpu_env("0.0.1", cache_dir=tmp_path) == venv
    assert json.loads(marker.read_text()) == record
