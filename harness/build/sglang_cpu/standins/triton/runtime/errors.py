"""``triton.runtime.errors`` stand-in: real exception classes, because torch Inductor names them in ``except``."""

from __future__ import annotations

__all__ = ["InterpreterError", "IntelGPUError", "OutOfResources", "PTXASError", "TritonError"]


class TritonError(Exception):
    pass


class OutOfResources(TritonError):
    def __init__(self, required: int = 0, limit: int = 0, name: str = "") -> None:
        super().__init__(f"out of resource: {name}, required: {required}, hardware limit: {limit}")
        self.required, self.limit, self.name = required, limit, name


class PTXASError(TritonError):
    pass


class InterpreterError(TritonError):
    pass


class IntelGPUError(TritonError):
    pass
