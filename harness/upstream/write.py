"""From a finding to ``issue.md`` and its attachments: refuse the reference server unless asked, check known bugs,
scrub everything, keep the body under GitHub's limit, write.

The folder: ``issue.md`` (the body), ``title.txt``, and ``attachments/`` (the whole server log, the whole
traceback, ``client.py``, ``scenario.yaml``, ``check_env.txt``, the run's ``result.json``, for a regression
``chart.png`` and ``chart.csv``). ``gh issue create --repo sgl-project/sglang --title "$(cat title.txt)"
--body-file issue.md`` files it; the PNG is dragged in by hand (an issue's images are uploads).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness.records.outcome import Phase
from harness.signatures.catalogue import Catalogue
from harness.upstream.finding import Chart, Finding
from harness.upstream.known import KnownCheck, check_known, release_of
from harness.upstream.render import Parts, render_body
from harness.upstream.safe import Scrubber
from harness.util.atomic import write_atomic, write_atomic_bytes
from harness.util.bounded_read import ReadRefused, read_text
from harness.util.clock import folder_stamp
from harness.util.errors import UserError
from harness.util.output_path import make_folder

__all__ = ["BODY_LIMIT", "IssueOptions", "Written", "write_issue"]

BODY_LIMIT = 65_536  # GitHub's limit for an issue body, in characters
_MARGIN = 1_000  # room for what a person adds (the dragged-in image's link)
T = TypeVar("T")


@dataclass(frozen=True)
class IssueOptions:
    out: Path | None = None  # the folder to write (default: reports/issues/<time>-<slug>)
    root: Path | None = None  # where the default folder goes (default: reports/)
    force: bool = False  # write a known bug's report anyway
    allow_reference_server: bool = False
    keep_paths: bool = False


@dataclass(frozen=True)
class Written:
    known: KnownCheck
    title: str
    folder: Path | None  # None: nothing written (a known bug, without --force)
    body_chars: int = 0


def scrub_deep(value: T, scrub: Scrubber) -> T:
    """``value`` with every string in it (dataclass fields, mappings, sequences, paths) scrubbed; enums kept."""
    out: Any
    if isinstance(value, enum.Enum) or value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        out = scrub(value)
    elif isinstance(value, Path):
        out = Path(scrub(str(value)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = dataclasses.replace(value, **{f.name: scrub_deep(getattr(value, f.name), scrub)
                                            for f in dataclasses.fields(value) if f.init})
    elif isinstance(value, Mapping):
        out = {scrub_deep(k, scrub): scrub_deep(v, scrub) for k, v in value.items()}
    elif isinstance(value, (tuple, list)):
        out = type(value)(scrub_deep(v, scrub) for v in value)
    else:
        return value
    return out


def refuse_reference(finding: Finding, options: IssueOptions) -> None:
    build = finding.record.build
    if build.reference_server and not options.allow_reference_server:
        raise UserError(f"{finding.source_ref}: this ran on the CPU reference server ({build.spec}), a model of "
                        "SGLang, not SGLang: no report meant for upstream is written from it (reproduce it on a real "
                        "build, or pass --allow-reference-server to write one that says so throughout)")


def _newest_cached_release() -> str | None:
    from packaging.version import InvalidVersion, Version

    from harness.contract.wheels import wheel_dir

    found: list[Version] = []
    folder = wheel_dir()
    for path in folder.glob("sglang-*.whl") if folder.is_dir() else ():
        try:
            v = Version(path.name.split("-")[1])
        except (InvalidVersion, IndexError):
            continue
        if not v.is_prerelease and not v.is_devrelease:
            found.append(v)
    return str(max(found)) if found else None


def _harness_command(finding: Finding) -> str | None:
    if finding.scenario_file is None:
        return None
    return shlex.join(["sglang-repro", "run", "scenario.yaml", "--case", finding.case, "--build",
                       finding.record.build.spec])


def _scenario_text(finding: Finding) -> str | None:
    if finding.scenario_file is None:
        return None
    try:
        return read_text(finding.scenario_file, "scenario")
    except (ReadRefused, OSError):
        return None


def _case(finding: Finding) -> Any:
    from harness.scenario import ScenarioError, load_file

    if finding.scenario_file is None:
        return None
    try:
        loaded = load_file(finding.scenario_file)
    except (ScenarioError, ValueError, OSError):
        return None
    case = next((c for c in loaded.cases if c.name == finding.case), None)
    if case is not None and finding.record.build.reference_server:
        case = case.for_reference()
    return case


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:48] or "issue"


def _chart_csv(chart: Chart) -> str:
    rows = ["group,side,trial,value"]
    rows += [f"{json.dumps(g.label)},{'after' if g.bad else 'before'},{i},{v!r}"
             for g in chart.groups for i, v in enumerate(g.values)]
    return "\n".join(rows) + "\n"


def _fit(parts: Parts, files: dict[str, str | bytes]) -> str:
    """The body at the most detail that keeps it under the limit; what is left out is in the attachments (the
    last resort keeps 20 lines of the log's tail)."""
    for detail in (2, 1, 0):
        body = render_body(parts, detail)
        if len(body) <= BODY_LIMIT - _MARGIN:
            return body
    ev = parts.evidence
    short = dataclasses.replace(parts, evidence=dataclasses.replace(
        ev, tail="\n".join(ev.tail.splitlines()[-20:])[-8_000:], traceback=ev.traceback[-20_000:]))
    body = render_body(short, 0)
    if len(body) > BODY_LIMIT - _MARGIN:  # a record whose reason alone is enormous: the body says where the rest is
        files["body-full.md"] = body
        body = body[:BODY_LIMIT - _MARGIN - 200] + "\n\n(cut here: the whole body is `attachments/body-full.md`)\n"
    return body


def _files(finding: Finding, parts: Parts, scrub: Scrubber) -> dict[str, str | bytes]:
    from harness.upstream.chart import chart_png

    files: dict[str, str | bytes] = {}
    ev = parts.evidence
    if ev.log:  # parts are scrubbed already
        files["server.log"] = ev.log
    if ev.traceback_full:
        files["traceback.txt"] = ev.traceback_full + "\n"
    if parts.client is not None:
        files["client.py"] = parts.client.text
    if parts.scenario_text:
        files["scenario.yaml"] = parts.scenario_text
    if parts.check_env is not None:
        files["check_env.txt"] = str(parts.check_env.get("output", ""))
    if finding.chart is not None:
        files["chart.png"] = chart_png(finding.chart)
        files["chart.csv"] = _chart_csv(finding.chart)
    from harness.records.run_record import record_to_dict

    files["result.json"] = scrub(json.dumps(record_to_dict(finding.record), indent=2, default=str)) + "\n"
    return files


def _folder(options: IssueOptions, title: str) -> Path:
    if options.out is not None:
        folder = make_folder(options.out, "the issue folder")
        if any(folder.iterdir()):
            raise UserError(f"-o {options.out}: the folder is not empty; give a new or an empty one")
        return folder
    from harness.util.paths import reports_root

    base = (options.root or reports_root()) / "issues" / f"{folder_stamp()}-{_slug(title)}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return make_folder(path, "the issue folder", exist_ok=False)


def write_issue(finding: Finding, options: IssueOptions, catalogue: Catalogue | None = None) -> Written:
    """Check, scrub and write; ``Written.folder`` is None when a known bug stopped it (no ``force``)."""
    from harness.build.check_env import read_check_env
    from harness.upstream.client import client_script
    from harness.upstream.evidence import evidence_of
    from harness.upstream.launch import launch_command
    from harness.upstream.title import title_of

    refuse_reference(finding, options)
    catalogue = catalogue or Catalogue.load(None)
    release = release_of(finding.record, finding.scenario_file)
    known = check_known(finding.record, finding.run_dir, release, catalogue)
    if known.blocks and not options.force:
        return Written(known, "", None)
    scrub = Scrubber.for_hosts([finding.record.host.hostname], keep_paths=options.keep_paths)
    evidence = evidence_of(finding.record, finding.run_dir, catalogue)
    sig = known.signature or (catalogue.get(finding.record.signature)
                              if finding.record.signature and finding.record.signature in catalogue else None)
    title = scrub(title_of(finding, release, sig, evidence.traceback))
    early = finding.record.phase in (Phase.STARTUP, Phase.WARMUP)
    client = None if early else client_script(finding.record, _case(finding), finding.run_dir, title)
    no_client = (f"Starting the server is enough: it failed during {finding.record.phase}, before it was ready "
                 "(SGLang's own warm-up request runs before the ready line), so no client is needed."
                 if early else "" if client else "No client script: the run kept neither its prompts' seed nor its "
                 "first failing request.")
    parts = Parts(finding=scrub_deep(finding, scrub), title=title, known=scrub_deep(known, scrub),
                  forced=known.blocks, launch=scrub_deep(launch_command(finding.record, release), scrub),
                  client=scrub_deep(client, scrub), scenario_text=scrub_deep(_scenario_text(finding), scrub),
                  harness_command=_harness_command(finding), evidence=scrub_deep(evidence, scrub),
                  check_env=scrub_deep(read_check_env(finding.run_dir) if finding.run_dir else None, scrub),
                  newest=_newest_cached_release(), files=frozenset(), no_client=no_client)
    files = _files(parts.finding, parts, scrub)
    parts = dataclasses.replace(parts, files=frozenset(files))
    body = _fit(parts, files)
    body = scrub(body)  # a safety net: everything in it was scrubbed on the way in
    folder = _folder(options, title)
    attachments = make_folder(folder / "attachments", "the attachments folder")
    for name, data in sorted(files.items()):
        if isinstance(data, bytes):
            write_atomic_bytes(attachments / name, data)
        else:
            write_atomic(attachments / name, data)
    write_atomic(folder / "title.txt", title + "\n")
    write_atomic(folder / "issue.md", body)
    return Written(known, title, folder, len(body))
