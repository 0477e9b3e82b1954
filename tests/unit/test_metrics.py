"""Worker metrics in the Prometheus text format, over HTTP on a local port."""

from __future__ import annotations

import asyncio

from engine.metrics import Metrics


def test_counters_and_latencies_render_in_prometheus_text_format() -> None:
    metrics = Metrics()
    metrics.count("claimed", 3)
    metrics.count("outcomes", kind="succeeded", track="activity")
    metrics.observe("claim", 0.25)
    metrics.observe("claim", 0.5)
    text = metrics.render()
    assert "wayline_claimed_total 3\n" in text
    assert 'wayline_outcomes_total{kind="succeeded",track="activity"} 1\n' in text
    assert "wayline_claim_seconds_sum 0.750000\n" in text
    assert "wayline_claim_seconds_count 2\n" in text


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
    assert "text/plain; version=0.0.4" in head
    assert body == "wayline_lease_lost_total 1\n"
