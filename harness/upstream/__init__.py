"""From a finding to an upstream report: ``issue.md`` in the shape of SGLang's bug template, with its evidence, checked
against known bugs and safe to paste (``sglang-repro issue``).

Readers turn each kind of input into one :class:`Finding` (:mod:`~harness.upstream.from_run`, ``from_compare``,
``from_incident``, ``from_bisect``, ``from_minimize``; :mod:`~harness.upstream.inputs` picks one); the writer
(:mod:`~harness.upstream.write`) checks it against the catalogue (:mod:`~harness.upstream.known`), builds the
launch command (:mod:`~harness.upstream.launch`), the client script (:mod:`~harness.upstream.client`), the evidence
(:mod:`~harness.upstream.evidence`, :mod:`~harness.upstream.chart`), scrubs it (:mod:`~harness.upstream.safe`) and
renders the body (:mod:`~harness.upstream.render`).
"""

from harness.upstream.finding import Finding
from harness.upstream.inputs import finding_from_path, finding_from_store
from harness.upstream.write import BODY_LIMIT, IssueOptions, Written, write_issue

__all__ = ["BODY_LIMIT", "Finding", "IssueOptions", "Written", "finding_from_path", "finding_from_store", "write_issue"]
