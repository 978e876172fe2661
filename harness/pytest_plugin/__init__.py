"""The pytest plugin: scenario files under ``scenarios/`` (or the project's configured folders) become test items.

Registered wherever the package is installed, by its ``pytest11`` entry point named ``harness.pytest_plugin`` (so a
``conftest.py`` that still lists it in ``pytest_plugins`` loads nothing twice; ``-p no:harness.pytest_plugin``
turns it off).
Each concern is its own plugin module, loaded through ``pytest_plugins`` below:

- :mod:`.options`    ``--build ROLE=SPEC``, ``--trials N``, ``--shard K/N``, ``--gpu-lease-timeout S``
- :mod:`.markers`    ``gpu``, ``sim`` and the hardware / scenario markers, all registered
- :mod:`.collection` one item per case x build role, real (``gpu``) and reference-server (``sim``)
- :mod:`.items`      what an item runs and when it passes, fails or is skipped
- :mod:`.gating`     hardware requirements checked against the GPUs present (or an injected inventory)
- :mod:`.leasing`    disjoint GPU sets across pytest-xdist workers
- :mod:`.runner`     the default ``pytest_sglang_repro_run``: resolve the build, ``execute_run``
- :mod:`.reporting`  failure text, JUnit properties, the ``$GITHUB_STEP_SUMMARY`` table
- :mod:`.sharding`   the deterministic ``--shard K/N`` split
- :mod:`.baselines` baseline checks on an item's trials; ``--update-baselines``
- :mod:`.store`      ``--store URL`` / ``$SGLANG_REPRO_STORE``: each trial recorded in the results store

Item ids: ``<file>::<case>::<role>`` runs the role's real build (marker ``gpu``);
``<file>::<case>::<role>[sim]`` runs the CPU reference server, a model of SGLang's mechanism
(marker ``sim``).
"""

from __future__ import annotations

import importlib

import pytest

__all__: list[str] = []

# Registered by pytest_addhooks below, not through ``pytest_plugins``: pytest marks each module it imports that way
# for assertion rewriting, and caches it rewritten beside its source (see _not_rewritten).
PLUGINS = [
    "harness.pytest_plugin.options",
    "harness.pytest_plugin.markers",
    "harness.pytest_plugin.collection",
    "harness.pytest_plugin.runner",
    "harness.pytest_plugin.reporting",
    "harness.pytest_plugin.store",
    "harness.pytest_plugin.sharding",
    "harness.pytest_plugin.baselines",
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    _not_rewritten(pluginmanager)
    from harness.pytest_plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    for name in PLUGINS:
        if not pluginmanager.is_blocked(name) and pluginmanager.get_plugin(name) is None:
            pluginmanager.register(importlib.import_module(name), name)


def _not_rewritten(pluginmanager: pytest.PytestPluginManager) -> None:
    """Leave the harness's own modules to Python's import, not pytest's assertion rewriting.

    pytest marks every top-level package of a distribution with a ``pytest11`` entry point for rewriting, and caches
    each module it rewrote beside its source (``harness/**/__pycache__/*-pytest-*.pyc``): an installed harness would
    be written into by every pytest run, about 120 files (issue 45: nothing is written inside the installation).
    The harness is no test, so its asserts need no rewriting; only ``harness`` and this module, imported before any
    plugin code runs, stay in pytest's cache. The marks are pytest's private state: read defensively, so another
    pytest only rewrites as before."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set):
        marked.difference_update({name for name in marked if name == "harness" or name.startswith("harness.")})
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(cache, dict):
        for name in [n for n in cache if n == "harness" or n.startswith("harness.")]:
            del cache[name]
