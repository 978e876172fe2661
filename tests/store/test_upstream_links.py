"""``store link INCIDENT URL`` (issue 48): the upstream issue filed for an incident, kept by migration 8 on SQLite and
PostgreSQL, shown by ``store alerts`` and the dashboard, and carried by the nightly's messages; the message of an
incident that resolves names the build that resolved it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from harness.dashboard.site import build_site
from harness.store import migrations
from harness.store.links import add_link, check_url, links_by_incident
from harness.store.store import open_store
from harness.store.url import store_url as parse_store_url
from harness.util.errors import UserError
from tests.series.nights import record_slowdown

ISSUE = "https://github.com/sgl-project/sglang/issues/99999"


def test_migration_8_adds_the_links_table_to_an_older_store(store_url: str) -> None:
    engine = create_engine(parse_store_url(store_url))
    assert migrations.migrate(engine, target=7) == 7
    with engine.connect() as conn:
        assert not inspect(conn).has_table("upstream_links")
    engine.dispose()
    with open_store(store_url) as store:  # opening upgrades it
        with store.engine.connect() as conn:
            assert migrations.current_version(conn) == migrations.latest_version() >= 8
            assert {c["name"] for c in inspect(conn).get_columns("upstream_links")} == {"incident", "url", "linked_at"}
        assert add_link(store, "inc1", ISSUE) is True
        assert add_link(store, "inc1", ISSUE) is False  # each link once
        assert add_link(store, "inc1", ISSUE + "#issuecomment-1") is True
        assert links_by_incident(store) == {"inc1": (ISSUE, ISSUE + "#issuecomment-1")}


@pytest.mark.parametrize("url", ["ftp://x/y", "javascript:alert(1)", "https://user:pw@github.com/x", "github.com/x", ""])
def test_a_link_must_be_an_http_address_with_a_host(url: str) -> None:
    with pytest.raises(UserError, match="not an http\\(s\\) address"):
        check_url(url)


def _incident_store(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    with open_store(url) as store:
        reviews = record_slowdown(store, range(1, 21), lambda n: n >= 11, random.Random(3))
    (incident,) = [i.fingerprint for r in reviews for i in r.incidents]
    return url, incident


def test_store_link_is_shown_by_alerts_and_the_dashboard(run_cli, tmp_path: Path) -> None:
    url, incident = _incident_store(tmp_path)
    alert = next(a for a in open_store(url).alert_rows() if a["incident"] == incident)["fingerprint"]
    done = run_cli("store", "link", alert, ISSUE, "--store", url)  # an alert's fingerprint names its incident
    assert done.returncode == 0 and f"incident {incident}: linked to {ISSUE}" in done.stdout, done.stderr
    assert run_cli("store", "link", "no-such-incident", ISSUE, "--store", url).returncode == 2
    assert run_cli("store", "link", incident, "javascript:alert(1)", "--store", url).returncode == 2
    shown = run_cli("store", "alerts", "--store", url).stdout
    assert f"    upstream: {ISSUE}" in shown
    with open_store(url) as store:
        index = build_site(store, tmp_path / "site").read_text(encoding="utf-8")
    assert f'<td class="upstream"><a href="{ISSUE}">{ISSUE}</a></td>' in index


def test_the_resolve_message_names_the_build_and_the_upstream_issue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    rng = random.Random(3)
    with open_store(url) as store:
        opened = record_slowdown(store, range(1, 21), lambda n: n >= 11, rng)
        (incident,) = [i.fingerprint for r in opened for i in r.incidents]
        add_link(store, incident, ISSUE)
        back = record_slowdown(store, range(21, 29), lambda n: False, rng)  # the fast build again
    lines = [line for r in back for line in r.transitions() if line.startswith(f"RESOLVED incident {incident}")]
    assert len(lines) == 1, [line for r in back for line in r.transitions()]
    assert f"RESOLVED incident {incident}: recovered on sim:post-fix (night-2" in lines[0]
    assert lines[0].endswith(f"; upstream: {ISSUE} (close it)")
