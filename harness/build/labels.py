"""What a build is, in the words every record, report, dashboard page and CLI line uses.

Two kinds of build are not "SGLang on the hardware a scenario names", and their figures must never be read as
GPU performance: the CPU reference server (a model of SGLang, ``sim:``/``simsrc:``) and the real-SGLang CPU
build (``pip:sglang==X,deps=cpu``: SGLang's own code with plain-torch kernels). Each has one label, said
wherever such a build is shown. The label is a function of the spec, so a record written before labels were
kept is labelled the same way when it is read back.
"""

from __future__ import annotations

from harness.build.reference_server import REFERENCE_SERVER_LABEL
from harness.util.errors import UserError

__all__ = ["CPU_BUILD_LABEL", "CPU_BUILD_NOTICE", "REFERENCE_NOTICE", "REFERENCE_SERVER_LABEL", "build_label", "cpu_build_of",
           "runs_on_cpu"]

# The same words as harness.build.sglang_cpu.LABEL (tests/sglang_cpu/test_labels.py holds them equal): written
# here so that labelling a record never imports the environment maker.
CPU_BUILD_LABEL = "real SGLang, plain-torch kernels on CPU"
CPU_BUILD_NOTICE = (
    f"Builds marked “{CPU_BUILD_LABEL}” run the real SGLang release (its scheduler, memory pools, speculative "
    "workers, HTTP server and log lines) on the CPU, with plain-torch ports of the GPU kernels and a tiny random "
    "model. Outcomes, signatures and SGLang's own accounting (acceptance length) are SGLang's; the speed is not "
    "a GPU figure."
)
# Said wherever a reference-server build is shown (reports, the dashboard): written here, beside the CPU build's,
# so that a page showing it imports no report code (harness.report's import is scipy's, most of a second).
REFERENCE_NOTICE = (
    f"Builds marked “{REFERENCE_SERVER_LABEL}” run the harness's CPU reference server: a model of "
    "SGLang's Frozen-KV MTP mechanism in PyTorch, not SGLang. Its numbers say nothing about SGLang's speed."
)


def runs_on_cpu(spec: str) -> bool:
    """Whether ``spec`` is the real-SGLang CPU build (``pip:sglang==X,deps=cpu``)."""
    kind, _, rest = spec.partition(":")
    if kind.strip() != "pip":
        return False
    options = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in rest.split(",")[1:])}
    return options.get("deps") == "cpu"


def cpu_build_of(spec: str) -> str:
    """The real-SGLang CPU build of a release's spec (``pip:sglang==X[,...]`` -> ``pip:sglang==X,deps=cpu``), as
    ``--cpu`` runs a role; UserError for a spec that is no release (a checkout, an interpreter, the reference server).
    """
    kind, _, rest = spec.partition(":")
    requirement = rest.split(",")[0].strip()
    if kind.strip() != "pip" or not requirement.lower().startswith("sglang=="):
        raise UserError(f"build spec {spec!r} is not a release (pip:sglang==X): --cpu runs a release's real-SGLang "
                        "CPU build (pip:sglang==X,deps=cpu); give the role's spec with --build ROLE=SPEC instead")
    return f"pip:{requirement},deps=cpu"


def build_label(spec: str, *, reference_server: bool = False) -> str | None:
    """The label of a build that is not SGLang on its scenario's hardware, or None for one that is."""
    if reference_server or spec.startswith(("sim:", "simsrc:")):
        return REFERENCE_SERVER_LABEL
    if runs_on_cpu(spec):
        return CPU_BUILD_LABEL
    return None
