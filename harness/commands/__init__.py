"""One module per sub-command. Each module defines ``COMMAND`` (its name), ``HELP``,
``add_arguments(parser)`` and ``main(args) -> int``; the work itself lives in plain
functions elsewhere in the package so tests can call it without argparse."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

__all__ = ["discover"]


def discover() -> list[ModuleType]:
    """The command modules of this package, in a stable order."""
    mods = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "COMMAND"):
            mods.append(mod)
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 50), m.COMMAND))
