"""``triton.knobs`` stand-in: knob groups without compile or load hooks (there is no compiler here).

SGLang installs Triton load diagnostics only when ``knobs.runtime.kernel_load_start_hook`` exists (0.5.21
``srt/utils/triton_load_watch.py:51-55``; it skips triton builds without the hook), so this module must
answer ``None`` for it rather than a placeholder.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["amd", "cache", "compilation", "nvidia", "runtime"]


class _Group(types.SimpleNamespace):
    @contextmanager
    def scope(self) -> Iterator[None]:
        saved = dict(vars(self))
        try:
            yield
        finally:
            vars(self).clear()
            vars(self).update(saved)


runtime = _Group(kernel_load_start_hook=None, interpret=False, debug=False)
compilation = _Group()  # no `listener`: nothing is ever compiled
cache = _Group(dir=os.path.join(os.path.expanduser("~"), ".triton", "cache"))
amd = _Group(use_buffer_ops=False)
nvidia = _Group()
