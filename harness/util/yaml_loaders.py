"""Which safe YAML loader the harness uses: libyaml's when it is there and bounds nesting itself, else PyYAML's.

One decision for every reader (scenario files, the signature catalogue): libyaml before 0.2.5 has no nesting
limit, so a deeply nested file would exhaust the C stack instead of ending in a one-line error.
"""

from __future__ import annotations

import yaml

__all__ = ["LIBYAML", "SAFE_LOADER"]


def _libyaml_ok() -> bool:
    """libyaml is there and bounds nesting itself (0.2.5 added its limit of 1000 levels)."""
    if not getattr(yaml, "__with_libyaml__", False):
        return False
    try:
        from yaml import _yaml  # the C extension

        return tuple(_yaml.get_version()) >= (0, 2, 5)
    except (ImportError, AttributeError):
        return False


LIBYAML = _libyaml_ok()
# Safe constructors either way (plain types only); libyaml's parser is about 10-20x faster.
SAFE_LOADER: type[yaml.SafeLoader] = yaml.CSafeLoader if LIBYAML else yaml.SafeLoader  # type: ignore[assignment]
