"""The reference server's spelling of SGLang (harness.sim.sglang_words, written in its own code) and the
contract's (harness.contract.facts, checked against the real wheels by tests/test_contract.py) say the same,
fact by fact. Neither imports the other, so a word changed on either side fails here, naming the fact; the
end-to-end tests on the reference server then check the harness against words it did not write itself."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

from harness.build import reference_server
from harness.contract import facts as contract
from harness.sim import sglang_words

SIM = Path(sglang_words.__file__).resolve().parent


def differences(words: ModuleType | SimpleNamespace, facts: ModuleType | SimpleNamespace, names: list[str]) -> list[str]:
    """One line per fact the two spell differently (or that the contract does not record)."""
    out = []
    for name in names:
        if not hasattr(facts, name):
            out.append(f"{name}: the reference server spells it, the contract records no such fact")
        elif getattr(words, name) != getattr(facts, name):
            out.append(f"{name}: reference server {getattr(words, name)!r}, contract {getattr(facts, name)!r}")
    return out


def test_every_word_of_the_reference_server_is_the_contracts() -> None:
    assert len(sglang_words.__all__) >= 30
    assert differences(sglang_words, contract, list(sglang_words.__all__)) == []


def test_a_word_changed_on_either_side_fails_naming_the_fact() -> None:
    names = list(sglang_words.__all__)
    words = SimpleNamespace(**{n: getattr(sglang_words, n) for n in names})
    facts = SimpleNamespace(**{n: getattr(contract, n) for n in names})
    words.READY_LINE = "The server is fired up and ready to roll"  # one character dropped by the model
    facts.SIGTERM_LINE = "Draining requests and shutting down"  # a release rewords it, the contract follows
    said = differences(words, facts, names)
    assert [line.split(":")[0] for line in said] == ["READY_LINE", "SIGTERM_LINE"]
    assert "fired up and ready to roll'" in said[0] and "contract 'The server is fired up and ready to roll!'" in said[0]


def _string_literals(folder: Path) -> set[str]:
    """Every string (or bytes) constant in the reference server's code, f-strings' literal parts included."""
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
                found.add(node.value if isinstance(node.value, str) else node.value.decode("latin-1"))
    return found


# Facts the reference server writes as literals where it uses them (paths, keys of its JSON answers): each value
# must stand in its code. The live comparison of what it answers is tests/sim/test_sim_contract.py.
_LITERAL_FACTS = ("FLUSH_CACHE_PATH", "HEALTH_GENERATE_PATH", "MODEL_INFO_PATHS", "SERVER_INFO_PATHS", "METRICS_PATH",
                  "MODELS_PATH", "AVG_ACCEPT_LENGTH_KEY", "SPEC_HISTOGRAM_KEYS", "ABORT_TYPE", "STREAM_DATA_PREFIX",
                  "SKIP_SERVER_WARMUP_FLAG", "LOG_DATE_FORMAT")


def test_the_paths_and_keys_the_reference_server_writes_are_the_contracts() -> None:
    literals = _string_literals(SIM)
    missing = []
    for name in _LITERAL_FACTS:
        value = getattr(contract, name)
        for word in (value,) if isinstance(value, str) else value:
            if word not in literals:
                missing.append(f"{name}: {word!r} is nowhere in harness/sim's code")
    assert missing == []


def test_the_core_names_a_sim_build_as_the_reference_server_does() -> None:
    from harness import sim

    assert (reference_server.REVISIONS, reference_server.SCHEDULERS) == (sim.REVISIONS, sim.SCHEDULERS)
    assert reference_server.REFERENCE_SERVER_LABEL == sim.REFERENCE_SERVER_LABEL


def _refusal(check: Callable[[str], object], version: str) -> str | None:
    try:
        check(version)
    except ValueError as exc:
        return str(exc)
    return None


def test_the_cores_copy_of_the_knobs_and_rule_releases_is_the_servers() -> None:
    """harness.build.reference_server writes the knob names and the first modelled release as data, so that
    validate/list read a ``sim:`` spec without importing the server; they must be the server's own."""
    from harness.sim.cli_args import SIM_KNOBS
    from harness.sim.release_rules import FIRST_MODELLED, rules_for

    assert tuple(SIM_KNOBS) == reference_server.KNOBS
    assert FIRST_MODELLED == reference_server.FIRST_MODELLED
    versions = ("0.5.12", "0.5.13.post1", "0.5.99", " 0.5.23 ", "0.5.11", "0.4.9.post3", "0.5", "v0.5.14", "0.5.14rc1", "")
    said = {v: (_refusal(rules_for, v), _refusal(reference_server.check_rules_version, v)) for v in versions}
    assert {v: pair for v, pair in said.items() if pair[0] != pair[1]} == {}
    assert sum(pair[0] is None for pair in said.values()) == 4  # the four modelled ones pass, the rest are refused
