"""sglang-repro: a reproduction and regression harness for SGLang servers.

The words used across the package (scenario, build, run, outcome, signature,
expectation) are defined in the project's design notes; each has its own module.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
