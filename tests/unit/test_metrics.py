"""Worker metrics in the Prometheus text format (the client library's), over HTTP."""

from __future__ import annotations

import asyncio
from typing import cast

from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.loop import Worker, WorkerConfig
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
    assert "# TYPE wayline_claim_seconds histogram\n" in text
    assert 'wayline_claim_seconds_bucket{le="0.25"} 1.0\n' in text
    assert 'wayline_claim_seconds_bucket{le="0.5"} 2.0\n' in text
    assert "wayline_claim_seconds_sum 0.75\n" in text
    assert "wayline_claim_seconds_count 2.0\n" in text
    assert "_created" not in text


def test_sizes_are_histograms_in_count_buckets() -> None:
    metrics = Metrics()
    for members in (1, 3, 32):
        metrics.observe("group", members, unit="size")
    text = metrics.render()
    assert "# TYPE wayline_group_size histogram\n" in text
    assert 'wayline_group_size_bucket{le="1.0"} 1.0\n' in text
    assert 'wayline_group_size_bucket{le="4.0"} 2.0\n' in text
    assert 'wayline_group_size_bucket{le="32.0"} 3.0\n' in text


async def test_health_answers_and_readiness_says_why_not() -> None:
    reasons = iter(["", "the database is not reachable"])

    async def ready() -> str:
        return next(reasons)

    server = await Metrics().serve("127.0.0.1", 0, ready)
    port = server.sockets[0].getsockname()[1]
    try:
        answers = [await _get(port, path) for path in ("/healthz", "/readyz", "/readyz?x=1")]
    finally:
        server.close()
        await server.wait_closed()
    assert [a.split("\r\n", 1)[0] for a in answers] == [
        "HTTP/1.1 200 OK",
        "HTTP/1.1 200 OK",
        "HTTP/1.1 503 Service Unavailable",
    ]
    assert [a.partition("\r\n\r\n")[2] for a in answers] == [
        "ok\n",
        "ok\n",
        "the database is not reachable\n",
    ]


async def _get(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    return response


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
        response = await _get(port, "/metrics")
    finally:
        server.close()
        await server.wait_closed()
    head, _, body = response.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 OK")
    assert "Content-Type: text/plain; version=" in head
    assert body.splitlines()[-1] == "wayline_lease_lost_total 1.0"


async def test_a_probe_that_connects_and_closes_is_no_error() -> None:
    """A TCP health check, a port scan, a request cut short: the connection is closed
    without an answer, and nothing reaches the loop's exception handler (which logs
    each as an ERROR with a traceback)."""
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    server = await Metrics().serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for sent in (b"", b"GARBAGE", b"GET /metrics HTTP/1.1\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(sent)
            writer.write_eof()
            assert await reader.read() == b""  # closed once the server gave up on it
            writer.close()
        assert (await _get(port, "/healthz")).endswith("ok\n")
    finally:
        server.close()
        await server.wait_closed()
        loop.set_exception_handler(None)
    assert errors == []


def test_a_worker_shows_how_many_of_its_slots_hung_handlers_hold() -> None:
    """Handlers that hang past their attempts' timeouts (a provider that never answers)
    keep the worker's slots until they return: once they held all of them the worker
    claimed nothing, and no series said so (its counters only stopped moving)."""
    worker = Worker(cast(Store, None), ActivityRegistry(), WorkerConfig(worker_id="w"))
    assert "wayline_lingering_handlers 0.0" in worker.metrics.render()
    worker.ctx.threads.lingering = 3
    assert "wayline_lingering_handlers 3.0" in worker.metrics.render()
