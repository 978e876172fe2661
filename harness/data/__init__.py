"""The harness's own data, shipped inside the package and read as package data (:mod:`importlib.resources`):

- ``signatures.yaml``: the built-in crash-signature catalogue (:mod:`harness.signatures`);
- ``stubs/``: the import-only ``triton`` / ``torchvision`` stubs copied into a flags-only build (:mod:`harness.build`);
- ``fixtures/``: the built-in fixtures, looked up after a project's own (``prompt.fixture: prompts/word_problems.txt``);
- ``scaffold/``: what ``sglang-repro init`` writes into a user's repository.

Nothing is ever written here: an installed package may be read-only, shared by several projects, or rebuilt by CI.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["data_path"]


def data_path(name: str) -> Path:
    """The file or folder ``name`` of the package's data, on disk.

    A wheel installs as files, so the resource is a real path; a package imported from a zip archive has none,
    and the folders here (the stubs are copied as a tree) could not be handed on, so that is refused by name."""
    ref = files(__name__).joinpath(name)
    if not isinstance(ref, Path):
        raise RuntimeError(f"harness.data/{name}: the package is not installed as files ({type(ref).__name__}); "
                           "install sglang-repro from a wheel or a checkout")
    return ref
