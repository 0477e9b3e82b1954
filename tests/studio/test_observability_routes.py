"""Issue 26 in the studio: /healthz and /readyz for orchestrators (no account needed),
request latencies on /metrics, and an instance page linking to its trace when a
tracing UI's address is configured."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from psycopg import sql

from engine import trace_id_of
from studio.instance_urls import instance_url
from studio.roles import Role
from studio.settings import StudioSettings
from tests.studio.live import LiveStudio, definition, serve_studio

TRACE_URL = "https://traces.example/trace/{trace_id}?from=wayline"


@pytest.fixture(scope="module")
def traced_studio(pg_dsn: str) -> Iterator[LiveStudio]:
    with serve_studio(pg_dsn, trace_url=TRACE_URL) as live:
        yield live


def instance_page(studio: LiveStudio, prefix: str) -> tuple[str, httpx.Response]:
    """A new instance of a new team's definition, and its page as a viewer sees it."""
    team = studio.team(prefix)
    name = f"{prefix}.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    instance_id = studio.start(team, name)
    viewer = studio.client(studio.user(team, Role.VIEWER))
    return instance_id, viewer.get(instance_url(instance_id))


def test_health_and_readiness_answer_without_signing_in(traced_studio: LiveStudio) -> None:
    anonymous = traced_studio.client()
    health, ready = anonymous.get("/healthz"), anonymous.get("/readyz")
    assert (health.status_code, health.text) == (200, "ok\n")
    assert (ready.status_code, ready.text) == (200, "ok\n")


def test_readiness_fails_while_the_schema_is_not_current(traced_studio: LiveStudio) -> None:
    ledger = sql.Identifier(traced_studio.schema, "schema_migrations")
    newest = sql.SQL("(SELECT max(version) FROM {})").format(ledger)
    hide = sql.SQL("UPDATE {} SET version = -version WHERE version = {}").format(ledger, newest)
    with psycopg.connect(traced_studio.dsn, autocommit=True) as conn:
        conn.execute(hide)
        try:
            ready = traced_studio.client().get("/readyz")
        finally:
            conn.execute(
                sql.SQL("UPDATE {} SET version = -version WHERE version < 0").format(ledger)
            )
    assert ready.status_code == 503
    assert ready.text == "the schema is not current: run `wayline migrate`\n"
    assert traced_studio.client().get("/readyz").status_code == 200


def test_request_latencies_are_metrics_by_route_template(traced_studio: LiveStudio) -> None:
    instance_id, page = instance_page(traced_studio, "latency")
    assert page.status_code == 200

    text = traced_studio.client().get("/metrics").text
    assert "# TYPE wayline_studio_request_seconds histogram" in text
    page = 'method="GET",route="/instances/{ref}",status="200"'
    assert f"wayline_studio_request_seconds_count{{{page}}} 1.0" in text
    assert instance_id not in text  # the template, never the ids in a path


def test_requests_no_route_answered_are_counted(traced_studio: LiveStudio) -> None:
    """An unknown address (404) or a method the address does not take (405) never
    reaches a route's middleware: it was in no metric, so a burst of them was unseen."""
    anonymous = traced_studio.client()

    def count(method: str, status: int) -> float:
        series = f'wayline_studio_unrouted_requests_total{{method="{method}",status="{status}"}}'
        for line in anonymous.get("/metrics").text.splitlines():
            if line.startswith(series + " "):
                return float(line.rpartition(" ")[2])
        return 0.0

    before = (count("GET", 404), count("DELETE", 405))
    assert anonymous.get("/no/such/page").status_code == 404
    assert anonymous.get("/api/no-such-thing").status_code == 404
    assert anonymous.request("DELETE", "/healthz").status_code == 405
    assert (count("GET", 404), count("DELETE", 405)) == (before[0] + 2, before[1] + 1)


def test_an_instance_page_links_to_its_trace(traced_studio: LiveStudio) -> None:
    instance_id, page = instance_page(traced_studio, "traced")
    link = TRACE_URL.replace("{trace_id}", trace_id_of(instance_id, "")).replace("&", "&amp;")
    assert f'<a href="{link}" id="trace-link"' in page.text


def test_without_a_trace_address_there_is_no_link(studio: LiveStudio) -> None:
    _, page = instance_page(studio, "untraced")
    assert page.status_code == 200 and 'id="trace-link"' not in page.text


def test_a_trace_address_without_its_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match=r"WAYLINE_TRACE_URL must be an http\(s\) address"):
        StudioSettings("postgresql://nowhere", trace_url="https://traces.example/")


def test_a_refused_body_is_recorded_with_the_status_it_was_answered(
    traced_studio: LiveStudio,
) -> None:
    """A body the input gate refuses (not JSON: 400; over the size limit: 413) is answered
    by the app's error handler, outside the latency middleware: it is recorded under that
    status, not as a 500 that never happened."""
    anonymous = traced_studio.client()
    series = 'wayline_studio_request_seconds_count{{method="POST",route="/api/holds",status="{}"}}'

    def count(status: int) -> float:
        for line in anonymous.get("/metrics").text.splitlines():
            if line.startswith(series.format(status) + " "):
                return float(line.rpartition(" ")[2])
        return 0.0

    before = {status: count(status) for status in (400, 413, 500)}
    json_headers = {"Content-Type": "application/json"}
    bad = anonymous.post("/api/holds", content=b"{not json", headers=json_headers)
    huge = anonymous.post(
        "/api/holds", content=b'"' + b"a" * 4_100_000 + b'"', headers=json_headers
    )
    assert (bad.status_code, huge.status_code) == (400, 413)
    after = {status: count(status) for status in (400, 413, 500)}
    assert {s: after[s] - before[s] for s in after} == {400: 1, 413: 1, 500: 0}
