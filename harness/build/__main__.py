"""``python -m harness.build prepare|describe SPEC``: the older spelling of ``sglang-repro prepare [--describe]``."""

import sys

from harness.cli import main

argv = sys.argv[1:]
if argv[:1] == ["describe"]:
    argv = ["prepare", "--describe", *argv[1:]]
raise SystemExit(main(argv))
