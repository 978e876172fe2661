"""The three failures seen under load, each shown deterministically at its cause (issue 31, item 4).

- ``[INT-compare]``: a second Ctrl-C landed between shields (a pool closing its servers) as a fresh
  KeyboardInterrupt, printed from ``Popen.__del__``.
- ``[TERM-run]``: a second SIGTERM landed after the run's ``sigterm_as_ctrl_c`` had closed and killed the
  process with -15 instead of its verdict.
  Both: once a command has taken its first interrupt (``harness.util.interrupts.taken``), every later SIGINT
  and SIGTERM only counts and hurries until the command ends.
- ``test_sim_stateful``: under load the client fell behind and compare blanked every figure of the trial,
  the server's own counts too, leaving "not enough data"; only the client-timed figures are blanked now.

The signal tests send real signals to a real child interpreter (an in-process signal would also reach pytest).
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.compare.runner import _role_result
from harness.records.metric_definitions import METRICS, client_timed
from tests.helpers import make_record

REPO = Path(__file__).resolve().parent.parent


def _child(body: str) -> subprocess.CompletedProcess[str]:
    script = "import os, signal, subprocess, sys\nfrom harness.util import interrupts\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)


def test_a_second_sigterm_after_the_run_closed_its_handler_counts_instead_of_killing() -> None:
    """The ``[TERM-run]`` window: the run's SIGTERM handler is gone, the command not yet ended."""
    body = """
        with interrupts.command_signals():
            try:
                with interrupts.sigterm_as_ctrl_c():
                    os.kill(os.getpid(), signal.SIGTERM)
                    for _ in range(10**7):  # the handler runs between bytecodes: here
                        pass
                    sys.exit(9)  # never reached: the first SIGTERM interrupts
            except KeyboardInterrupt:
                pass  # the run's verdict is written; its handler is closed; the command goes on
            os.kill(os.getpid(), signal.SIGTERM)  # the second signal, in the window
            os.kill(os.getpid(), signal.SIGINT)  # and a Ctrl-C for good measure
            print("late", interrupts.late_signals())
        print("after", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
              signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        sys.exit(3)
    """
    done = _child(body)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)  # was -15 (-SIGTERM)
    assert done.stdout.split() == ["late", "2", "after", "True", "True"], done.stdout
    assert "Traceback" not in done.stderr, done.stderr


def test_a_second_ctrl_c_while_a_pool_closes_is_counted_not_raised_from_popen_del() -> None:
    """The ``[INT-compare]`` window: after the run's interrupted verdict, objects holding processes are collected;
    a KeyboardInterrupt raised there is printed as 'Exception ignored in: <function Popen.__del__>'."""
    body = """
        import gc
        with interrupts.command_signals():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10**7):
                    pass
            except KeyboardInterrupt:
                interrupts.taken()  # where a run turns its interrupt into the 'interrupted' verdict
            children = [subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(3)]
            for child in children:
                child.wait()
            os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, while the children are let go
            del children, child
            gc.collect()
            print("late", interrupts.late_signals())
        sys.exit(3)
    """
    done = _child(body)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.split() == ["late", "1"], done.stdout
    assert "KeyboardInterrupt" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_a_shield_that_defers_a_later_signal_does_not_raise_it_as_a_new_interrupt() -> None:
    body = """
        hurried = []
        with interrupts.command_signals():
            interrupts.taken()
            with interrupts.Shield(on_signal=lambda: hurried.append(1)) as shield:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10**6):
                    pass
            print(shield.count, len(hurried), interrupts.late_signals())
    """
    done = _child(body)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "1"]


def test_outside_a_command_nothing_latches_and_a_first_signal_still_interrupts() -> None:
    """The harness as a library (the pytest plugin, a test): ``taken`` changes nothing, Ctrl-C still raises."""
    body = """
        interrupts.taken()
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**7):
                pass
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted")
        with interrupts.command_signals():
            pass
        try:
            with interrupts.Shield():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10**6):
                    pass
        except KeyboardInterrupt:
            print("deferred then raised")
    """
    done = _child(body)
    assert done.stdout.split() == ["interrupted", "deferred", "then", "raised"], (done.stdout, done.stderr)


def test_a_trial_whose_client_fell_behind_keeps_its_counts_and_loses_its_timed_figures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``test_sim_stateful`` failure: a trial on a loaded machine whose client fell behind kept none of its
    figures, so the per-phase acceptance verdicts had too few samples ("not enough data")."""
    behind = {"client_fell_behind": 1.0, "sched_delay_ms_p99": 80.0}
    figures = {"accept_length": 3.0, "accept_length@after": 2.5, "cache_hit_rate@after": 0.9,
               "output_throughput_tok_s": 100.0, "ttft_ms_p50": 20.0}
    runs = [make_record("pass", trial=0, metrics=figures),
            make_record("pass", trial=1, metrics={**figures, **behind}),
            make_record("crash", trial=2, metrics=figures)]
    monkeypatch.chdir(tmp_path)  # the records' artifact folders are relative: runs/after-N under the report
    role = _role_result("after", "sim:post-fix", runs, tmp_path)
    assert role.metrics["accept_length"][:2] == (3.0, 3.0) and math.isnan(role.metrics["accept_length"][2])
    assert role.metrics["accept_length@after"][:2] == (2.5, 2.5)
    assert role.metrics["output_throughput_tok_s"][0] == 100.0
    assert math.isnan(role.metrics["output_throughput_tok_s"][1]), "a client that fell behind timed itself"
    assert math.isnan(role.metrics["ttft_ms_p50"][1])


def test_which_figures_are_client_timed() -> None:
    timed = {name for name in METRICS if client_timed(name)}
    assert timed == {"output_throughput_tok_s", "request_throughput_rps", "ttft_ms_p50", "itl_ms_p50", "e2e_ms_p50"}
    assert client_timed("output_throughput_tok_s@after") and not client_timed("accept_rate_pos2@after")
    assert client_timed("accept_length_chunks"), "an unregistered figure is never lent a comparison"
