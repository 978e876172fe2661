"""Property: whatever a mutation does to a valid file, the loader answers with ScenarioError lines
(each naming the file and a position) or a valid scenario, never an unhandled exception."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.scenario import ScenarioError, load_file

SEED = Path(__file__).resolve().parent.parent / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
TEXT = SEED.read_text()
DATA = yaml.safe_load(TEXT)
LINE = re.compile(r"^.+:\d+:\d+: ")

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                     st.text(max_size=12), st.lists(st.integers(-5, 5), max_size=3), st.just({}), st.just([]))


def _check(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.yaml"
        p.write_text(text)
        try:
            load_file(p)
        except ScenarioError as exc:
            assert exc.lines
            for line in exc.lines:
                assert LINE.match(line), line
                assert "\n" not in line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_text_mutations_never_escape(data):
    text = TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = data.draw(st.text(alphabet=":-[]{}!&*#|>'\"\n\t @%`,?0123456789abc", min_size=1, max_size=4))
        if op == "insert":
            text = text[:i] + chunk + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + len(chunk):]
        else:
            text = text[:i] + chunk + text[i + len(chunk):]
    _check(text)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


ALL_PATHS = [p for p in _paths(DATA) if p]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_PATHS), _scalars, st.sampled_from(["set", "delete", "rename"]))
def test_structural_mutations_never_escape(path, value, op):
    data = yaml.safe_load(TEXT)
    node = data
    for part in path[:-1]:
        node = node[part]
    last = path[-1]
    if op == "set":
        node[last] = value
    elif op == "delete":
        del node[last]
    elif isinstance(node, dict):
        node[str(last) + "x"] = node.pop(last)
    _check(yaml.safe_dump(data))
