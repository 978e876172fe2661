"""``issue.md``: the body SGLang's bug template asks for, as GitHub renders an issue form's answers.

The template (sgl-project/sglang ``.github/ISSUE_TEMPLATE/1-bug-report.yml``, read at commit f1ad3ee) has four
fields: a checklist (searched related issues; not fixed in the latest version; environment and a minimal
reproduction given; a bug, not a question; English), "Describe the bug", "Reproduction" ("What command or script
did you run? Which **model** are you using?") and "Environment" ("``python3 -m sglang.check_env``"). A submitted
form shows each as a ``### Label`` heading with the answer under it; this body has the same four headings, and the
evidence (traceback, log, chart, culprit) under "Describe the bug".

Everything here is already scrubbed (:mod:`harness.upstream.safe`); what came from a log is fenced, what came from
a record is escaped or in a code span. ``detail`` lowers what is inlined when the body is over GitHub's limit:
what is not inlined is in the attachments, and the body names the file.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.upstream.client import ClientScript
from harness.upstream.evidence import Evidence
from harness.upstream.finding import Finding, Interval
from harness.upstream.known import KnownCheck
from harness.upstream.launch import Launch
from harness.upstream.safe import code_span, fence, prose

__all__ = ["Parts", "render_body"]

TEMPLATE = "sgl-project/sglang .github/ISSUE_TEMPLATE/1-bug-report.yml"


@dataclass(frozen=True)
class Parts:
    """Everything a body is made of, scrubbed; ``files``: the attachments' names (what the body may point to)."""

    finding: Finding
    title: str
    known: KnownCheck
    forced: bool
    launch: Launch
    client: ClientScript | None
    scenario_text: str | None
    harness_command: str | None
    evidence: Evidence
    check_env: Mapping[str, Any] | None
    newest: str | None  # the newest sglang release known here, for the checklist
    files: frozenset[str]
    no_client: str = ""  # why there is no client script (the server fails before it is ready)


def _att(parts: Parts, name: str) -> str:
    return f"`attachments/{name}`" if name in parts.files else ""


def _details(summary: str, block: str) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", block, "", "</details>", ""]


def _checklist(parts: Parts) -> list[str]:
    k = parts.known
    searched = (f"sglang-repro matched the log against its catalogue of known crashes: {prose(k.message)}. Search "
                "GitHub's issues too before ticking this.")
    version = parts.known.release.version
    latest = (f"this ran on sglang {version}; the newest release here is {parts.newest}: run the reproduction on it "
              "before ticking this." if version and parts.newest and version != parts.newest
              else "run the reproduction on the newest release before ticking this.")
    return ["### Checklist", "",
            f"- [ ] 1. I have searched related issues but cannot get the expected help. ({searched})",
            f"- [ ] 2. The bug has not been fixed in the latest version. ({latest})",
            "- [x] 3. Please note that if the bug-related issue you submitted lacks corresponding environment info and "
            "a minimal reproducible demo, it will be challenging for us to reproduce and resolve the issue, reducing "
            "the likelihood of receiving feedback.",
            "- [x] 4. If the issue you raised is not a bug but a question, please raise a discussion at "
            "https://github.com/sgl-project/sglang/discussions/new/choose Otherwise, it will be closed.",
            "- [x] 5. Please use English, otherwise it will be closed.", ""]


def _level(i: Interval, unit: str) -> str:
    u = f" {unit}" if unit else ""
    if i.points == 1:
        return f"{i.mean:.4g}{u} (1 value, {i.trials} trial(s))"
    return f"{i.mean:.4g}{u}, 95% CI [{i.low:.4g}, {i.high:.4g}] ({i.points} values, {i.trials} trials)"


def _what(parts: Parts) -> list[str]:
    f, rec = parts.finding, parts.finding.record
    sig = parts.known.signature
    if f.metric is not None:
        m = f.metric
        better = "higher" if m.higher_is_better else "lower"
        return [f"**What happened:** {prose(m.label)} ({code_span(m.metric)}, {better} is better) moved "
                f"{m.effect:+.1%}: {prose(_level(m.before, m.unit))} before, {prose(_level(m.after, m.unit))} after. "
                f"It rests on {prose(m.rests_on)}.", "",
                f"**What was expected:** {prose(m.label)} at its level before the change.", ""]
    phase = f" during {rec.phase.value}" if rec.phase else ""
    named = (f" It matches the catalogued signature {code_span(sig.id)}: {prose(sig.title)}." if sig is not None else "")
    expected = ("the server to stay up and every request to complete" if f.kind == "crash" else
                "the scenario's checks to hold: " + "; ".join(prose(c.check) for c in rec.checks) if rec.checks else
                "the run to finish within its bounds")
    return [f"**What happened:** the run ended as {code_span(rec.outcome.value)}{phase}: {code_span(rec.reason)}.{named}",
            "", f"**What was expected:** {expected}.", ""]


def _describe(parts: Parts) -> list[str]:
    f, rec = parts.finding, parts.finding.record
    out = ["### Describe the bug", ""]
    if parts.known.verdict != "none":
        lead = "Known-bug check (written anyway: --force)" if parts.forced else "Known-bug check"
        out += [f"> **{lead}:** {prose(parts.known.message)}", ""]
    if rec.build.reference_server:
        out += ["> **Not SGLang.** This was found on the sglang-repro CPU reference server, a PyTorch model of "
                "SGLang's mechanism, not SGLang. Reproduce it on a real build before filing it upstream.", ""]
    out += _what(parts)
    out += [f"**How often:** {prose(f.how_often)}.", ""]
    if f.since or f.last_good:
        out += [f"**Since:** {prose(f.since or 'not known')}" + (f" (last good: {prose(f.last_good)})" if f.last_good
                                                                 else "") + ".", ""]
    build = rec.build
    out += [f"**Build:** {code_span(build.spec)}" + (f", version {code_span(build.version)}" if build.version else "")
            + (f", commit {code_span(build.commit)}" if build.commit else "") + ".", ""]
    if f.minimized:
        out += [f"**Minimized:** {f.minimized}.", ""]
    out += [f"- {prose(line)}" for line in f.context if line] + ([""] if f.context else [])
    return out + _evidence(parts)


def _evidence(parts: Parts) -> list[str]:
    f, ev = parts.finding, parts.evidence
    out = ["#### The evidence", ""]
    if ev.traceback:
        full = _att(parts, "traceback.txt")
        out += [f"The traceback's decisive part (the exception, the frames the signature matched and the raising frame;"
                f" `...` marks lines left out{'; the whole traceback: ' + full if full else ''}):", "",
                fence(ev.traceback, "text"), ""]
    if f.chart is not None and "chart.png" in parts.files:
        out += [f"![{prose(f.chart.title)}](attachments/chart.png)", "",
                "(The chart is `attachments/chart.png`, its values `attachments/chart.csv`: drag the PNG into the "
                "issue to replace the link above.)", ""]
    if f.culprit is not None:
        c = f.culprit
        out += ["The bisection's culprit (`sglang-repro bisect`):", "",
                f"- first bad: {code_span(c.revision)} {prose(c.subject)}" + (f" ({prose(c.author)}, {prose(c.date)})"
                                                                              if c.author else ""),
                f"- parent (good): {code_span(c.parent)}",
                f"- searched: {prose(c.searched)}",
                f"- confirmed with fresh trials: {'yes' if c.confirmed else 'no'}"]
        out += [f"  - {prose(line)}" for line in c.confirmation]
        if c.files:
            out += ["- files touched: " + ", ".join(code_span(x) for x in c.files)]
        out.append("")
    if ev.tail:
        whole = " (whole log: attachments/server.log)" if _att(parts, "server.log") else ""
        out += _details(f"Server log, last {len(ev.tail.splitlines())} lines{whole}", fence(ev.tail, "text"))
    return out


def _reproduction(parts: Parts, detail: int) -> list[str]:
    rec = parts.finding.record
    argv = list(rec.server.argv)
    model = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--model-path"), "?")
    draft = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--speculative-draft-model-path"), None)
    out = ["### Reproduction", "", f"Model: {code_span(model)}" + (f", draft model {code_span(draft)}" if draft else "")
           + ".", "", "1. Start the server:", "", fence(shlex.join(parts.launch.argv), "sh"), ""]
    out += [f"   - {prose(n)}" for n in parts.launch.notes] + ([""] if parts.launch.notes else [])
    if parts.client is not None:
        out += [f"2. Send the workload that reproduced it with plain Python (no harness needed): {prose(parts.client.summary)}"
                f". It is {_att(parts, 'client.py') or 'below'}; run `python3 client.py --port 30000` (exit 1: a request "
                "failed).", ""]
        if parts.client.note:
            out += [f"   - {prose(parts.client.note)}", ""]
        if detail >= 2:
            out += _details("client.py", fence(parts.client.text, "python"))
    elif parts.no_client:
        out += [f"2. {prose(parts.no_client)}", ""]
    if parts.harness_command:
        out += ["3. With sglang-repro installed, the scenario runs as it did "
                f"here{' (' + _att(parts, 'scenario.yaml') + ')' if _att(parts, 'scenario.yaml') else ''}:", "",
                fence(parts.harness_command, "sh"), ""]
        if parts.scenario_text and detail >= 1:
            out += _details("The scenario file", fence(parts.scenario_text, "yaml"))
    return out


def _environment(parts: Parts, detail: int) -> list[str]:
    rec = parts.finding.record
    host = rec.host
    out = ["### Environment", ""]
    if rec.build.reference_server:
        out += ["This ran on the sglang-repro **CPU reference server**, a PyTorch model of SGLang's mechanism; it is "
                "not SGLang and has no `python3 -m sglang.check_env`. There is no SGLang environment to report.", ""]
    elif parts.check_env is None:
        out += ["`python3 -m sglang.check_env` was not kept with this run (a run recorded before the harness kept it, "
                "or a store record whose folder is gone): run it in the build's environment and paste it here.", ""]
    elif parts.check_env.get("exit_code") != 0:
        lines = str(parts.check_env.get("output", "")).strip().splitlines()
        out += [f"`python3 -m sglang.check_env` could not run on the machine that ran the server (exit "
                f"{parts.check_env.get('exit_code')}: {code_span(lines[-1] if lines else 'no output')}); sglang's "
                "check_env needs an accelerator that torch sees.", ""]
    else:
        text = str(parts.check_env.get("output", "")).rstrip()
        keep = text if detail >= 1 else "\n".join(text.splitlines()[:40])
        out += [f"`python3 -m sglang.check_env`, taken when the server ran ({prose(str(parts.check_env.get('ran_at', '')))})"
                + (", first 40 lines; all of it: `attachments/check_env.txt`" if keep != text else "") + ":", "",
                fence(keep, "text"), ""]
    gpus = ", ".join(f"{g.name}" + (f" ({g.memory_gib:g} GiB)" if g.memory_gib else "") for g in host.gpus) or "none"
    out += [f"- GPUs: {prose(gpus)}; driver {prose(host.driver_version or 'none')}; CUDA (driver) "
            f"{prose(host.cuda_version or 'none')}",
            f"- host: {prose(host.platform or '?')}, Python {prose(host.python or '?')}, {host.cpu_count or '?'} CPU(s)",
            f"- harness: sglang-repro {prose(rec.harness_version)}, run {code_span(rec.run_id)}", ""]
    return out


def render_body(parts: Parts, detail: int = 2) -> str:
    """The body; ``detail`` 2 inlines the client script and the scenario, 1 the scenario, 0 neither."""
    origin = f"{parts.finding.source} {parts.finding.source_ref}".replace("--", "-").replace(">", "")
    lines = [f"<!-- Written by sglang-repro issue from {origin}, in the shape of {TEMPLATE}. Title: title.txt. -->", ""]
    lines += _checklist(parts) + _describe(parts) + _reproduction(parts, detail) + _environment(parts, detail)
    return "\n".join(lines).rstrip() + "\n"
