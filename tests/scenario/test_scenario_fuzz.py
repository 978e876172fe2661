"""Property: whatever a mutation does to a valid file, the loader answers with ScenarioError lines
(each naming the file and a position) or a valid scenario, never an unhandled exception.

Two kinds of examples: hypothesis mutations checked in-process (quick, shrinkable), and a seeded
mutator over every seed file whose examples each run as ``sglang-repro validate`` in a child bounded
in memory and time, so a hang or a memory bomb fails the test instead of stalling it.
``SGLANG_REPRO_FUZZ_EXAMPLES`` (default 300) and ``SGLANG_REPRO_FUZZ_SEED`` change the run.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.scenario import ScenarioError, load_file

SEED = Path(__file__).resolve().parents[2] / "scenarios" / "frozen_kv_mtp" / "long_prompt_stale_out_cache_loc.yaml"
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
            lines = exc.lines
        else:
            return  # a valid file: nothing to check
    assert lines
    for line in lines:
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


# --- A seeded mutator over every seed file, each example run as `sglang-repro validate` in a bounded
# --- child (tests/fuzz_worker.py): exit 0 or 2, never a traceback, never slow, never a file created.

SEEDS = sorted((SEED.parent.parent).rglob("*.yaml"))
FUZZ_SEED = int(os.environ.get("SGLANG_REPRO_FUZZ_SEED", "20261130"))
FUZZ_EXAMPLES = int(os.environ.get("SGLANG_REPRO_FUZZ_EXAMPLES", "300"))
CPU_BOUND_S = 3.0  # per example; the slowest legitimate seed validates in a few hundredths
ERROR_LINE = re.compile(r"^\S.*:\d+:\d+: ")

HOSTILE_VALUES = [
    "!!float abc", "!!int ''", "!!int 0b", "!!timestamp 2024-13-45x", "!!bool maybe", "!!binary '???'",
    "!!python/object/apply:os.system ['touch pwned']", "!!python/name:os.system", "!!set {a, b}",
    "!!omap [{a: 1}]", "!local x", "*nowhere", '"\\0"', '"a\\0b"', '"\\ud800"', '"\\udfff tail"',
    "0x" + "f" * 200, "9" * 5000, "1e999", ".nan", "-.inf", "~", "[]", "{}", "'" + "x" * 5000 + "'",
    "$(touch pwned)", "'::1'", "'[::1]'", '"a\\nb"', "|\n  text", ">-\n  folded", "<<: *nowhere",
    "[" * 60 + "]" * 60, "{a: " * 40 + "1" + "}" * 40, "&a [*a]", "2024-01-01", "0o777", "1_000",
    "-1", "0", "true", "'2048'", "[1, [2, [3]]]", "{field: x}", "'\\x01'", "\"\\x7f\"", "!!str 5",
]
CHUNK_ALPHABET = ":-[]{}!&*#|>'\"\n\t @%`,?0123456789abc\x01\x7f\u2028\ufeff"


def _laughs(rng: random.Random) -> tuple[str, str]:
    width, depth = rng.randint(2, 10), rng.randint(3, 9)
    lines = [f"x-l0: &l0 [{', '.join(['lol'] * width)}]"]
    for d in range(1, depth):
        lines.append(f"x-l{d}: &l{d} [{', '.join([f'*l{d - 1}'] * width)}]")
    return "\n".join(lines) + "\n", f"*l{depth - 1}"


def _matrix(rng: random.Random) -> str:
    axes = []
    for a in range(rng.randint(1, 8)):
        values = ", ".join(str(rng.randint(1, 4096)) for _ in range(rng.randint(1, 12)))
        field = rng.choice(["workload.prompt.tokens", "workload.requests", "server.args.tp-size", "x.y", ""])
        axes.append(f"  ax{a}:\n    field: {field}\n    values: [{values}]")
    return "matrix:\n" + "\n".join(axes) + "\n"


def _value_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if re.match(r"^\s*[\w.-]+:\s*\S", line)]


def mutate(text: str, rng: random.Random) -> bytes:
    """One to three mutations of a seed file's text; some change bytes, so bytes come back."""
    raw: bytes | None = None
    for _ in range(rng.randint(1, 3)):
        lines = text.splitlines()
        op = rng.choice(["chunk", "chunk", "line", "value", "value", "value", "laughs", "matrix", "deep",
                         "recursive", "merge", "bytes", "huge"])
        if op == "chunk":
            i = rng.randint(0, len(text))
            chunk = "".join(rng.choice(CHUNK_ALPHABET) for _ in range(rng.randint(1, 4)))
            text = text[:i] + chunk + text[i + rng.choice([0, len(chunk)]):]
        elif op == "line" and lines:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            kind = rng.choice(["dup", "del", "swap", "indent", "dedent"])
            if kind == "dup":
                lines.insert(j, lines[i])
            elif kind == "del":
                del lines[i]
            elif kind == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            elif kind == "indent":
                lines[i] = "  " + lines[i]
            else:
                lines[i] = lines[i][2:]
            text = "\n".join(lines) + "\n"
        elif op == "value" and _value_lines(text):
            i = rng.choice(_value_lines(text))
            key, _, _ = lines[i].partition(":")
            value = rng.choice(HOSTILE_VALUES)
            if "\n" in value:  # block scalars continue on the next lines, indented below the key
                indent = " " * (len(key) - len(key.lstrip()) + 2)
                value = value.replace("\n  ", "\n" + indent)
            lines[i] = f"{key}: {value}"
            text = "\n".join(lines) + "\n"
        elif op == "laughs" and _value_lines(text):
            anchors, top = _laughs(rng)
            i = rng.choice(_value_lines(text))
            key, _, _ = lines[i].partition(":")
            lines[i] = f"{key}: {top}"
            text = anchors + "\n".join(lines) + "\n"
        elif op == "matrix":
            text = re.sub(r"(?ms)^matrix:\n(?:[ \t].*\n?)*", "", text) + _matrix(rng)
        elif op == "deep":
            depth = rng.choice([10, 40, 200, 3000])
            text = text + f"x-deep: {'[' * depth}{']' * depth}\n"
        elif op == "recursive":
            text = text + rng.choice(["x-r: &r [*r]\n", "x-r: &r {a: *r}\n", "x-r: &r [1, [*r, *r]]\n"])
        elif op == "merge":
            text = text + "x-base: &base {requests: 1}\nx-m:\n  <<: *base\n  <<: [*base, *base]\n"
        elif op == "bytes":
            data = text.encode()
            i = rng.randint(0, len(data))
            raw = data[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"]) + data[i:]
        elif op == "huge":
            raw = text.encode() + b"#" * (1 << 20) + b"\n"
    return raw if raw is not None else text.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def validate_worker():
    worker = Path(__file__).resolve().parents[1] / "fuzz_worker.py"
    env = {**os.environ, "PYTHONPATH": str(SEED.parent.parent.parent)}
    proc = subprocess.Popen([sys.executable, str(worker), str(SEEDS[0])], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdin is not None
    stdin, stdout = proc.stdin, proc.stdout
    assert json.loads(stdout.readline()) == {"ready": True}

    def ask(request: dict[str, str]) -> dict[str, object]:
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        answer = stdout.readline()
        assert answer, "the fuzz worker died"
        return json.loads(answer)

    yield ask
    proc.stdin.close()
    proc.wait(30)


def _snapshot(*folders: Path) -> set[str]:
    return {str(p) for folder in folders for p in folder.rglob("*")}


def test_seeded_mutations_of_every_seed_validate_or_fail_in_one_line(tmp_path: Path, validate_worker) -> None:
    rng = random.Random(FUZZ_SEED)
    texts = {seed: seed.read_text() for seed in SEEDS}
    outcomes: dict[int, int] = {}
    slowest = 0.0
    for n in range(FUZZ_EXAMPLES):
        seed = rng.choice(SEEDS)
        data = mutate(texts[seed], rng)
        case_dir, cwd, out = tmp_path / f"e{n}", tmp_path / f"e{n}-cwd", tmp_path / f"e{n}-out"
        for folder in (case_dir, cwd, out):
            folder.mkdir()
        target = case_dir / seed.name
        target.write_bytes(data)
        before = _snapshot(case_dir, cwd)
        answer = validate_worker({"file": str(target), "cwd": str(cwd), "out": str(out)})
        where = f"example {n} (SGLANG_REPRO_FUZZ_SEED={FUZZ_SEED}, mutated from {seed.name}, kept at {target})"
        code, stderr = answer["code"], str(answer["stderr"])
        assert code in (0, 2), f"{where}: exit {code}\n{stderr[-3000:]}"
        assert "Traceback" not in stderr, f"{where}:\n{stderr[-3000:]}"
        if code == 2:
            lines = stderr.splitlines()
            assert lines and all(ERROR_LINE.match(line) for line in lines), f"{where}: {lines[:5]}"
            assert all(len(line) < 1200 for line in lines), f"{where}: a line of {max(map(len, lines))} chars"
        else:
            assert "file(s) valid" in str(answer["stdout"]), where
        assert float(answer["cpu"]) < CPU_BOUND_S, f"{where}: {answer['cpu']:.2f} s of CPU"
        assert _snapshot(case_dir, cwd) == before, f"{where}: created {_snapshot(case_dir, cwd) - before}"
        slowest = max(slowest, float(answer["cpu"]))
        outcomes[int(code)] = outcomes.get(int(code), 0) + 1
        for path in (target, *out.iterdir()):
            path.unlink()
    # The mutator must exercise both answers, or it tests nothing.
    assert outcomes.get(2, 0) > FUZZ_EXAMPLES // 4 and outcomes.get(0, 0) > 0, outcomes
