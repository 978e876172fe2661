"""Run by Python at start-up from the stand-ins' PYTHONPATH root: the CPU-gap hook of sglang_cpu_gaps."""

import sglang_cpu_gaps

sglang_cpu_gaps.install()
