"""``triton.language`` stand-in: the types SGLang and torch touch at import time are real classes.

Kernel bodies (``tl.load``, ``tl.dot``...) never run here, so their names are placeholders. ``tl.dtype`` and
its instances are real because torch Inductor calls ``isinstance(s, triton.language.dtype)``
(``torch/_inductor/codegen/wrapper.py:3723``, torch 2.13.0) and SGLang keeps dtypes in module-level maps.
"""

from __future__ import annotations

from typing import Any

from _sglang_repro_placeholders import install_finder, module_getattr

__all__ = ["block_type", "constexpr", "dtype", "pointer_type", "tensor"]


class dtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"triton.language.{self.name}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dtype) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("triton.dtype", self.name))


class pointer_type(dtype):
    def __init__(self, element_ty: Any, address_space: int = 1, const: bool = False) -> None:
        super().__init__(f"pointer<{element_ty}>")
        self.element_ty = element_ty


class block_type(dtype):
    def __init__(self, element_ty: Any, shape: Any) -> None:
        super().__init__(f"block<{element_ty}>")
        self.element_ty = element_ty
        self.shape = shape


class constexpr:
    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"


class tensor:
    pass


_DTYPES = ("int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
           "float32", "float64", "float8e4nv", "float8e5", "float8e4b8", "float8e5b16", "float8e4b15", "void")
for _name in _DTYPES:
    globals()[_name] = dtype(_name)
float8e4b15x4 = dtype("float8e4b15x4")

install_finder(__name__)
__getattr__ = module_getattr(__name__)
