"""Run by Python at start-up from the stand-ins' PYTHONPATH root: the CPU-gap hook of sglang_cpu_gaps, and the
AMX platform fact of sglang_cpu_platform (only with SGLANG_REPRO_CPU_HAS_AMX=1)."""

import sglang_cpu_gaps
import sglang_cpu_platform

sglang_cpu_gaps.install()
sglang_cpu_platform.install()
