"""Import-only stand-in for ``torchvision`` (real-SGLang CPU build).

``sglang.srt.utils.common`` imports ``torchvision.io.decode_jpeg`` at module level, and once ``torchvision``
is importable ``transformers`` imports its image helpers too. Serving a text model uses none of them; the
real package is a CUDA-matched build of several hundred MB. Every name is a placeholder that raises when called.
"""

from __future__ import annotations

from _sglang_repro_placeholders import install_finder, module_getattr

__all__: list[str] = []

__version__ = "0.0.0+sglang-cpu-standin"
STANDIN = True

install_finder(__name__)
__getattr__ = module_getattr(__name__)
