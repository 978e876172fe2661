"""The scenario reader's two YAML paths agree: libyaml for small files, PyYAML's bounded loader otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.scenario import source

REPO = Path(__file__).resolve().parents[2]
SEEDS = sorted((REPO / "scenarios").rglob("*.yaml")) + sorted((REPO / "fixtures").rglob("*.yaml"))

pytestmark = pytest.mark.skipif(not source._LIBYAML, reason="PyYAML was built without libyaml 0.2.5+")


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: str(p.relative_to(REPO)))
def test_both_paths_give_the_same_data_and_positions(path: Path) -> None:
    text = path.read_text()
    try:
        slow = source._parse_with(source._BoundedLoader, path, text)
    except source.SourceError:  # a file both paths refuse (read_source then answers with PyYAML's words)
        with pytest.raises(source.SourceError):
            source._parse_with(source._CLoader, path, text)
        return
    fast = source._parse_with(source._CLoader, path, text)
    assert (fast.data, fast.positions) == (slow.data, slow.positions)


def test_positions_count_characters_not_bytes_on_both_paths() -> None:
    text = 'name: x\nd: {é€😀: "ü", b: [1, {c: 2}]}\nz: "😀😀"  # c\ny: 3\nm: &a {k: 1}\nn: {<<: *a, j: 2}\n'
    fast = source._parse_with(source._CLoader, Path("x.yaml"), text)
    slow = source._parse_with(source._BoundedLoader, Path("x.yaml"), text)
    assert fast.positions == slow.positions
    assert fast.positions[("d", "b")] == (2, 15)  # characters: a byte count would say 20
    assert fast.data == slow.data and fast.data["n"] == {"k": 1, "j": 2}


def test_an_error_reads_as_pyyaml_words_it(tmp_path: Path) -> None:
    # libyaml words this "did not find expected ',' or ']'"; the reader answers with PyYAML's own message.
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nb: [1\n")
    with pytest.raises(source.SourceError) as caught:
        source.read_source(path)
    assert "expected ',' or ']', but got '<stream end>'" in caught.value.message


def test_a_file_past_the_libyaml_size_is_read_by_the_bounded_loader(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    filler = "".join(f"  k{i}: {'v' * 60}\n" for i in range(source._LIBYAML_MAX_CHARS // 60 + 10))
    path.write_text("name: x\nextra:\n" + filler)
    assert len(path.read_text()) > source._LIBYAML_MAX_CHARS
    read = source.read_source(path)
    assert read.positions[("extra", "k0")] == (3, 3) and len(read.data["extra"]) > 1000


# Scalars of every implicit type (and texts that only look like one), flow and block collections, aliases
# and merge keys: the data the walk builds must be SafeConstructor's, value and type, key and order.
_ATOMS = ["a", "1", "01", "0x1f", "0o17", "1_000", "+1", "-0", "1.5", "1e3", ".inf", "-.inf", "true", "True",
          "yes", "no", "off", "null", "~", "''", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "12:30:00",
          '"quoted"', "'1'", "!!str 5", "é€", "x y"]


@given(st.lists(st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_ATOMS), st.sampled_from(_ATOMS),
                          st.integers(0, 3)), min_size=1, max_size=8),
       st.booleans())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_walk_builds_the_data_the_constructor_builds(entries: list[tuple[str, str, str, int]],
                                                         aliases: bool) -> None:
    lines = ["base: &b {x: 1, y: [1, 2]}", "alias: *b", "merged: {<<: *b, z: 3}"] if aliases else []
    for key, value, other, shape in entries:
        lines.append([f"{key}: {value}", f"{key}:\n  - {value}\n  - {other}", f"{key}: {{{other}: {value}}}",
                      f"{key}:\n  {other}: [{value}, {other}]"][shape])
    text = "\n".join(lines) + "\n"
    try:
        expected = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return
    try:
        got = source._parse_with(source._CLoader, Path("x.yaml"), text)
    except source.SourceError:
        return  # refused (a duplicate key, an out-of-range integer): nothing built
    assert repr(got.data) == repr(expected)
    assert [type(v) for v in got.data.values()] == [type(v) for v in expected.values()]
    if aliases:  # the constructor's own data: an alias is the same object as its anchor
        assert got.data["alias"] is got.data["base"] and got.data["merged"] == {"x": 1, "y": [1, 2], "z": 3}


def test_an_alias_of_an_empty_list_is_the_constructors_one_object() -> None:
    # No scalar inside whose second visit would give the alias away: the walk must notice the list itself.
    got = source._parse_with(source._CLoader, Path("x.yaml"), "none: &e []\nagain: *e\nname: x\n")
    assert got.data == {"none": [], "again": [], "name": "x"} and got.data["again"] is got.data["none"]
