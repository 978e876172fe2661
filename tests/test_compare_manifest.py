"""compare puts side by side only workloads with the same manifest, and leaves out a client that fell behind."""

from __future__ import annotations

from harness.compare.runner import manifest_problem
from harness.records.manifest import build_manifest
from tests.helpers import make_record


def _manifest(**change: object) -> dict:
    args: dict = dict(prompt_tokens=[276] * 4, prompt_digest="abc", warmup=0, concurrency=1, request_rate=None,
                      max_new_tokens=32, temperature=0.0, ignore_eos=True, stream=True)
    args.update(change)
    return build_manifest(**args).to_dict()


def test_same_manifests_compare() -> None:
    by_role = {"before": [make_record("pass", role="before", manifest=_manifest())],
               "after": [make_record("pass", manifest=_manifest()), make_record("crash", manifest=None)]}
    assert manifest_problem(by_role) is None


def test_a_differing_field_is_named_in_one_line() -> None:
    by_role = {"before": [make_record("pass", role="before", manifest=_manifest())],
               "after": [make_record("pass", trial=2, manifest=_manifest(ignore_eos=False))]}
    problem = manifest_problem(by_role)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("before vs after trial 2:") and "ignore_eos" in problem
