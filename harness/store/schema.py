"""The store's tables as they are after the newest migration (``migrations.py`` builds them).

- ``builds``: where the server code came from (spec, sglang version, git commit, kind), keyed by a digest.
- ``hosts``: the machine (GPU name and count, driver, CUDA, compute capability, CPU), keyed by a digest;
  ``hardware_key`` is what a metric series is keyed by.
- ``batches``: one invocation that recorded runs (a nightly, a ``run``, a ``compare``, a pytest session,
  an import, a bisect or a minimize); a series orders its points by the batch's start.
- ``runs``: one run record each, idempotent on ``run_id``; ``record`` keeps the whole ``result.json``;
  ``kind`` is what made the run (``RUN_KINDS``: a nightly, a one-off ``run``, a ``compare``, a pytest session, a
  ``bisect`` or a ``minimize``; an imported run the kind its import says, a nightly by default): a series
  holds nightly runs only, unless asked (``harness.series.points``);
  ``search_key`` (runs of a bisect or a minimize only) is what the search asked the run to answer, by which
  a repeat of the search finds it again (``harness.store.searches``).
- ``metrics``: long format, one row per (run, metric): every raw per-trial value, not only a mean.
- ``alerts``: confirmed changes and events, keyed by a fingerprint so each fires once. ``state`` is
  ``open``, ``resolved`` (``resolution``: ``recovered``, ``superseded``, ``accepted`` by ``store ack``,
  ``by hand`` by ``store resolve``; ``closed_at`` the night) or ``transient`` (an excursion that came
  back: recorded, reaches no one). ``names``: a level change's names over its nights (JSON: night,
  name, evidence), renamed in place.
- ``detections``: per series (scenario, case, hardware, metric and its rule), the sequential detector's
  state after the first ``points`` points, the digest of those points' inputs, and the detector's own
  digest (its source): a cache, so a review recomputes only the nights since (``harness.series.detections``).
- ``upstream_links``: the upstream issues a person filed for an incident (``store link INCIDENT URL``), keyed by the
  incident's fingerprint and the URL; the dashboard and the nightly's messages show them (``harness.store.links``).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text

__all__ = ["ALERT_STATES", "RESOLUTIONS", "RUN_KINDS", "alerts", "batches", "builds", "detections", "hosts", "metadata",
           "metrics", "runs", "store_version", "upstream_links"]

ALERT_STATES = ("open", "resolved", "transient")
RESOLUTIONS = ("recovered", "superseded", "accepted", "by hand")
RUN_KINDS = ("nightly", "run", "compare", "pytest", "bisect", "minimize")

metadata = MetaData()

store_version = Table(
    "store_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("description", Text, nullable=False),
    Column("applied_at", String(40), nullable=False),
)

builds = Table(
    "builds", metadata,
    Column("key", String(32), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("spec", Text, nullable=False),
    Column("version", Text),
    Column("commit", String(64)),
)

hosts = Table(
    "hosts", metadata,
    Column("key", String(32), primary_key=True),
    Column("hardware_key", Text, nullable=False),
    Column("hostname", Text),
    Column("gpu_name", Text),
    Column("gpu_count", Integer, nullable=False),
    Column("driver_version", Text),
    Column("cuda_version", Text),
    Column("compute_capability", Text),
    Column("cpu", Text),
    Column("platform", Text),
)

batches = Table(
    "batches", metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("label", Text, nullable=False),
    Column("started_at", String(40), nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("run_id", String(200), primary_key=True),
    Column("batch_id", String(64), ForeignKey("batches.id"), nullable=False),
    Column("scenario", Text, nullable=False),
    Column("scenario_file", Text, nullable=False),
    Column("case_name", Text, nullable=False),
    Column("case_values", Text, nullable=False),
    Column("role", Text),
    Column("build_key", String(32), ForeignKey("builds.key"), nullable=False),
    Column("host_key", String(32), ForeignKey("hosts.key"), nullable=False),
    Column("hardware_key", Text, nullable=False),
    Column("trial", Integer, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("signature", Text),
    Column("phase", String(16)),
    Column("reason", Text, nullable=False),
    Column("started_at", String(40), nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("artifacts", Text, nullable=False),
    Column("experiment", String(64), nullable=False),
    Column("harness_version", Text, nullable=False),
    Column("record", Text, nullable=False),
    Column("search_key", String(64)),
    Column("kind", String(16)),  # RUN_KINDS; every run written since migration 7 has one
    Column("set_overrides", Text),  # JSON list of the run's --set texts (secrets as ${VAR}); NULL: none
    Index("ix_runs_series", "scenario", "case_name"),
    Index("ix_runs_batch", "batch_id"),
    Index("ix_runs_search", "search_key"),
    Index("ix_runs_kind", "kind"),
)

metrics = Table(
    "metrics", metadata,
    Column("run_id", String(200), ForeignKey("runs.run_id"), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("value", Float, nullable=False),
)

alerts = Table(
    "alerts", metadata,
    Column("fingerprint", String(32), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("scenario", Text, nullable=False),
    Column("case_name", Text, nullable=False),
    Column("metric", Text),
    Column("hardware_key", Text, nullable=False),
    Column("signature", Text),
    Column("last_good", Text),
    Column("first_bad", Text, nullable=False),
    Column("effect", Float),
    Column("detail", Text, nullable=False),
    Column("bisect", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("batch_id", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("incident", String(32), index=True),  # the incident's fingerprint: its alerts share one state
    Column("names", Text),  # JSON [{night, name, evidence}]: every name it had (NULL: only ``kind``)
    Column("resolution", String(16)),  # how a resolved one was resolved (RESOLUTIONS)
    Column("closed_at", Text),  # the night (batch label) it was resolved on
)

detections = Table(
    "detections", metadata,
    Column("series_key", String(64), primary_key=True),
    Column("detector", String(64), nullable=False),
    Column("points", Integer, nullable=False),
    Column("inputs", String(64), nullable=False),
    Column("state", Text, nullable=False),
    Column("updated_at", String(40), nullable=False),
)

upstream_links = Table(
    "upstream_links", metadata,
    Column("incident", String(32), primary_key=True),
    Column("url", Text, primary_key=True),
    Column("linked_at", String(40), nullable=False),
)
