"""Worker metrics in the Prometheus text format (the client library's), over HTTP."""

from __future__ import annotations

import asyncio

from engine.worker.metrics import Metrics


def test_counters_and_latencies_render_in_prometheus_text_format() -> None:
    metrics = Metrics()
    metrics.count("claimed", 3)
    metrics.count("outcomes", kind="succeeded", track="activity")
    metrics.observe("claim", 0.25)
    metrics.observe("claim", 0.5)
    text = metrics.render()
    assert "# TYPE wayline_claimed_total counter\n" in text
    assert "wayline_claimed_total 3.0\n" in text
    assert 'wayline_outcomes_total{kind="succeeded",track="activity"} 1.0\n' in text
    assert "# TYPE wayline_claim_seconds summary\n" in text
    assert "wayline_claim_seconds_sum 0.75\n" in text
    assert "wayline_claim_seconds_count 2.0\n" in text
    assert "_created" not in text


def test_a_counter_reads_back_and_is_zero_before_its_first_count() -> None:
    metrics = Metrics()
    assert metrics.value("write_retries") == 0
    metrics.count("outcomes", track="activity", kind="failed")
    metrics.count("outcomes", kind="failed", track="activity")  # labels in any order
    assert metrics.value("outcomes", kind="failed", track="activity") == 2
    assert metrics.counts() == {"outcomes[kind=failed][track=activity]": 2}


async def test_metrics_are_served_over_http() -> None:
    metrics = Metrics()
    metrics.count("lease_lost")
    server = await metrics.serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        response = (await reader.read()).decode()
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    head, _, body = response.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 OK")
    assert "Content-Type: text/plain; version=" in head
    assert body.splitlines()[-1] == "wayline_lease_lost_total 1.0"
