"""The README's route, followed in order as a newcomer does: the first scenario's one-off run, the nightly twice,
then the dashboard. Each command line is read from the README itself (so a README that drifts from the CLI fails
here) and run in a fresh folder that sees the repository's scenarios; each ends with the exit code the README
gives it, and the dashboard ends as the README says: written, charting the two nights only."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"

# A claim about the harness, not the model: its reference servers are the torch-free stand-in (tests/conftest.py).
pytestmark = pytest.mark.standin


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _route() -> list[tuple[list[str], int]]:
    """(argv after ``sglang-repro``, exit code) for each command of the route, from the README."""
    text = README.read_text(encoding="utf-8")
    first = _section(text, "A first scenario")
    scenario = re.search(r"`sglang-repro list (\S+)`", first)
    run = re.search(r"`sglang-repro (run [^`]+)` runs\s+one case \(exit (\d)", first)
    assert scenario and run, "the README's first scenario no longer names its list and run commands"
    route = [(shlex.split(run[1].replace("SCENARIO", scenario[1])), int(run[2]))]
    nightly = _section(text, "A nightly and its dashboard")
    block = re.search(r"```sh\n(.*?)```", nightly, re.S)
    assert block, "the README's nightly section has no command block"
    env: dict[str, str] = {}
    steps: list[list[str]] = []
    for line in block[1].splitlines():
        line = line.split("  #")[0].strip()
        if m := re.fullmatch(r"(\w+)=(\S+)", line):
            env[m[1]] = m[2]
        elif line:
            argv = shlex.split(re.sub(r"\$(\w+)", lambda v: env[v[1]], line))
            assert argv[0].endswith("sglang-repro"), line
            steps.append(argv[1:])
    (night,) = [s for s in steps if s[0] == "nightly"]
    (dashboard,) = [s for s in steps if s[0] == "dashboard"]
    # The README runs the nightly on several nights ("Run it on several nights"); its "Measured" says what the
    # two nights and the dashboard gave: 2 passes, exit 0, dashboard written.
    return [*route, (night, 0), (night, 0), (dashboard, 0)]


def test_the_readme_route_ends_as_the_readme_says(tmp_path: Path) -> None:
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios")  # the README's paths, from a folder of its own
    said: list[str] = []
    for argv, code in _route():
        if argv[0] == "nightly":
            argv = [*argv, "--no-progress"]
        proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        said.append(proc.stdout)
        assert proc.returncode == code, f"sglang-repro {shlex.join(argv)}: exit {proc.returncode}, README says {code}\n" \
                                        f"{proc.stdout}\n{proc.stderr[-3000:]}"
    run, first, second, dashboard = said
    assert "CRASH" in run and "frozen-kv-mtp-stale-out-cache-loc" in run
    # The one-off run stays out of the nightly series: no incident on either night, and each young case says so.
    assert "INCIDENT" not in first + second and "2 pass" in first and "2 pass" in second
    assert "YOUNG" in first and "1 night: no change can be judged yet" in first
    assert "YOUNG" in second and "2 nights: " in second
    index = tmp_path / "reports" / "dashboard" / "index.html"
    assert f"dashboard: {index.relative_to(tmp_path)}" in dashboard or str(index) in dashboard
    page = next(index.parent.glob("scenario-*.html")).read_text()
    overview = index.read_text()
    # Charted: the two nights of each case only; the one-off crash is listed apart, marked as the reference server.
    assert page.count("tokens=276,path=eager") >= 1 and '"x":[0,1]' in page
    assert "<h2>Other runs</h2>" in overview and ">run<" in overview and "sim:pre-fix" in overview
    assert overview.count('class="buildmark">reference server (CPU model, not SGLang)') >= 2
    # The build's release rules: post-fix follows 0.5.15's (the release it stands for).
    assert "follows sglang 0.5.15&#x27;s rules" in page
    assert "2 nights: " in overview and 'class="young"' in overview
