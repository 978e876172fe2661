"""The outcomes of a run, the phases a run goes through, and every ordering of outcomes the harness uses.

One owner: nothing else in the harness defines an outcome, a phase or an order over outcomes.

Orderings, each for one question (they differ on purpose):

- deciding one run (``harness.pipeline``, phase by phase), first that applies: infra
  (could not even try) > crash (the server died, or logged a known signature) > timeout (a bound was
  reached) > fail (a check did not hold) > pass. ``interrupted`` (the harness was stopped by a signal)
  comes before all of them except infra: what did not finish was not judged.
- ``EXIT_ORDER``: the exit code of several runs is that of the worst by this order: an infra or
  timeout run means "could not decide", which outweighs a decided crash or fail (design.md exit codes).
- ``TELLING_ORDER``: the single outcome that summarises a role's trials in a comparison: the most
  telling one that occurred; one crash in five trials is what a reader must see.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from harness.util.str_enum import StrEnum

__all__ = [
    "EXIT_CODE",
    "EXIT_ORDER",
    "MEASURED",
    "BROKEN",
    "MISBEHAVED",
    "NOT_TRIED",
    "Outcome",
    "Phase",
    "SIGNED",
    "TELLING_ORDER",
    "UNDECIDED",
    "exit_code_for",
    "most_telling",
    "parse_outcome",
    "parse_phase",
]


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    CRASH = "crash"
    INFRA = "infra"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"

    @property
    def decided(self) -> bool:
        """Whether the product was tried and judged (pass, fail, crash): not infra, timeout or interrupted."""
        return self in (Outcome.PASS, Outcome.FAIL, Outcome.CRASH)


class Phase(str, Enum):
    """Where in a run its outcome arose (design.md, "Memory and search")."""

    PREFLIGHT = "pre-flight"
    STARTUP = "start-up"
    WARMUP = "warm-up"
    WORKLOAD = "workload"
    TEARDOWN = "teardown"

    def __str__(self) -> str:
        return self.value


# The sets of outcomes the harness asks about, each named once (a code-shape test keeps them here):
# ran the whole workload, so its figures are measurements (a failed check judged those very figures);
MEASURED: frozenset[Outcome] = frozenset({Outcome.PASS, Outcome.FAIL})
# the product misbehaved (a nightly alert, a minimize observation worth keeping);
MISBEHAVED: frozenset[Outcome] = frozenset({Outcome.CRASH, Outcome.FAIL})
# nothing was decided about the product (the complement of ``Outcome.decided``);
UNDECIDED: frozenset[Outcome] = frozenset(o for o in Outcome if not o.decided)
# the run broke: the product misbehaved or did not finish within a bound (what a comparison reports as removed or
# introduced, and what an upstream report can be about);
BROKEN: frozenset[Outcome] = MISBEHAVED | {Outcome.TIMEOUT}
# the product was not even tried: the harness could not, or was stopped (an expectation is not judged on it);
NOT_TRIED: frozenset[Outcome] = frozenset({Outcome.INFRA, Outcome.INTERRUPTED})
# may carry a signature (a crash's traceback, an infra failure's known cause).
SIGNED: frozenset[Outcome] = frozenset({Outcome.CRASH, Outcome.INFRA})

EXIT_ORDER: tuple[Outcome, ...] = (
    Outcome.INTERRUPTED, Outcome.INFRA, Outcome.TIMEOUT, Outcome.CRASH, Outcome.FAIL, Outcome.PASS)
TELLING_ORDER: tuple[Outcome, ...] = (
    Outcome.CRASH, Outcome.FAIL, Outcome.TIMEOUT, Outcome.INFRA, Outcome.INTERRUPTED, Outcome.PASS)

# design.md: run exits 0 pass, 1 fail or crash, 3 infra or timeout. An interrupted run decided nothing: 3.
EXIT_CODE: dict[Outcome, int] = {
    Outcome.PASS: 0, Outcome.FAIL: 1, Outcome.CRASH: 1,
    Outcome.INFRA: 3, Outcome.TIMEOUT: 3, Outcome.INTERRUPTED: 3,
}


def parse_outcome(text: str | Outcome) -> Outcome:
    """An outcome from its name; ValueError naming the valid ones otherwise."""
    try:
        return Outcome(text)
    except ValueError:
        raise ValueError(f"outcome {text!r} is not one of {', '.join(o.value for o in Outcome)}") from None


def parse_phase(text: str | Phase | None) -> Phase | None:
    if text is None:
        return None
    try:
        return Phase(text)
    except ValueError:
        raise ValueError(f"phase {text!r} is not one of {', '.join(p.value for p in Phase)}") from None


def exit_code_for(outcomes: Iterable[Outcome]) -> int:
    """The exit code of several runs: that of the first outcome in ``EXIT_ORDER`` that occurred (0 for none)."""
    seen = set(outcomes)
    for outcome in EXIT_ORDER:
        if outcome in seen:
            return EXIT_CODE[outcome]
    return 0


def most_telling(outcomes: Iterable[Outcome]) -> Outcome:
    """The one outcome that summarises several trials (``TELLING_ORDER``); pass for none."""
    seen = set(outcomes)
    return next((o for o in TELLING_ORDER if o in seen), Outcome.PASS)
