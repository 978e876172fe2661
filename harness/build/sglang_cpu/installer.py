"""Which installer fills a real-SGLang CPU environment: uv when the harness has it, else pip.

uv fills the same environment from the same requirements and constraints file several times faster than pip, and
spends a sixth of pip's CPU on it (0.5.14 on this 2-core machine at load 5-8, uv with an empty cache: 42 s, 17 CPU-s,
against pip's 102 s, 50 CPU-s, with its HTTP cache warm; 0.5.15 through ``prepare`` at load 4: 10 s); a cold
``make demo`` waits on these builds. The uv used is the pinned one ``make``
installs beside the harness's interpreter (``<venv>/.uv/bin/uv``), or the ``uv`` package installed into it; without
either, pip. ``$SGLANG_REPRO_INSTALLER`` = ``pip`` or ``uv`` forces one (``uv`` then fails when it is missing).

uv reads no pip configuration, and these machines keep the CPU build of torch in pip's ``find-links`` (without it
uv would take the CUDA build, 3 GB): pip's index, find-links, constraint and certificate settings are handed on,
and ``--index-strategy unsafe-best-match`` makes uv choose among indexes the way pip does.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.util.errors import UserError
from harness.util.proc import run_bounded

__all__ = ["INSTALLER_ENV", "Installer", "choose_installer", "pip_settings", "uv_options"]

INSTALLER_ENV = "SGLANG_REPRO_INSTALLER"
_CHOICES = ("pip", "uv")


@dataclass(frozen=True)
class Installer:
    """How to run ``install`` into an environment: ``uv`` is the binary, or None for pip in that environment."""

    uv: Path | None = None
    options: tuple[str, ...] = ()  # uv only: pip's settings, translated
    env: dict[str, str] = field(default_factory=dict)  # uv only: the certificate pip was told to trust

    @property
    def name(self) -> str:
        return "uv" if self.uv else "pip"

    def argv(self, python: Path, constraints: Path, args: Sequence[str]) -> list[str]:
        if self.uv is None:
            # --no-compile: pip byte-compiles every file it installs (torch alone: 38 s against 13 s here, two cores);
            # the server imports a fraction of them and Python compiles those on first import. uv never compiles.
            return [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", "-q", "-c",
                    str(constraints), *args]
        return [str(self.uv), "pip", "install", "-q", "--python", str(python), "-c", str(constraints), *self.options, *args]


def _harness_uv() -> Path | None:
    beside = Path(sys.prefix) / ".uv" / "bin" / "uv"
    if os.access(beside, os.X_OK):
        return beside
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except (FileNotFoundError, OSError):
        return None


def pip_settings() -> dict[str, list[str]]:
    """pip's own settings (``pip config list``: its files and ``$PIP_*``), each key's values; ``{}`` if pip says nothing."""
    done = run_bounded([sys.executable, "-m", "pip", "config", "list"], timeout=60)
    settings: dict[str, list[str]] = {}
    if done.returncode != 0:
        return settings
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        name = key.rpartition(".")[2]  # global.find-links, :env:.find-links, install.constraint -> the option
        try:
            values = shlex.split(value)
        except ValueError:
            continue
        for one in (part for joined in values for part in joined.split()):
            if one not in settings.setdefault(name, []):
                settings[name].append(one)
    return settings


def uv_options(settings: dict[str, list[str]]) -> tuple[tuple[str, ...], dict[str, str]]:
    """uv's flags (and environment) for pip's settings: indexes, find-links, constraints, certificate."""
    options: list[str] = ["--index-strategy", "unsafe-best-match"]
    for url in settings.get("index-url", [])[:1]:
        options += ["--index-url", url]
    for url in settings.get("extra-index-url", []):
        options += ["--extra-index-url", url]
    for link in settings.get("find-links", []):
        options += ["--find-links", link]
    for constraint in settings.get("constraint", []):
        options += ["-c", constraint]
    certs = settings.get("cert", [])
    return tuple(options), ({"SSL_CERT_FILE": certs[0]} if certs else {})


def choose_installer() -> Installer:
    """uv when the harness has it (or ``$SGLANG_REPRO_INSTALLER`` says which), else pip."""
    wanted = os.environ.get(INSTALLER_ENV, "").strip().lower()
    if wanted and wanted not in _CHOICES:
        raise UserError(f"${INSTALLER_ENV}={wanted!r}: valid are {', '.join(_CHOICES)} (unset: uv when installed, else pip)")
    if wanted == "pip":
        return Installer()
    uv = _harness_uv()
    if uv is None:
        if wanted == "uv":
            raise UserError(f"${INSTALLER_ENV}=uv but no uv beside {sys.executable} ({Path(sys.prefix) / '.uv/bin/uv'}, "
                            "or the uv package): `make sglang-cpu-envs` installs it, or unset the variable for pip")
        return Installer()
    options, env = uv_options(pip_settings())
    return Installer(uv, options, env)
