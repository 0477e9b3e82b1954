"""Issue 26 through ``wayline worker``: ``OTEL_*`` turns its traces on, its metrics port
answers ``/healthz`` and ``/readyz``, and ``--log-format json`` is accepted."""

from __future__ import annotations

import asyncio
import socket
import time

from engine.model.instance import InstanceStatus
from tests.e2e import definitions as d
from tests.e2e.conftest import Harness

TWO_STEPS = d.definition("e2e.observed", d.activity("first"), d.activity("second"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def answer(port: int, path: str) -> str:
    """The status line and body of ``GET path`` ('' while nothing listens)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return ""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    head, _, body = response.partition("\r\n\r\n")
    return f"{head.splitlines()[0]} {body}"


async def test_a_worker_process_exports_its_spans_and_answers_readiness(e2e: Harness) -> None:
    await e2e.publish(TWO_STEPS)
    port = free_port()
    options = ("--metrics-port", str(port), "--log-format", "json")
    [worker] = await e2e.spawn(options=options, env={"OTEL_TRACES_EXPORTER": "console"})

    async def ready() -> bool:  # not before it holds its owner lock
        return await answer(port, "/readyz") == "HTTP/1.1 200 OK ok\n"

    await e2e.until(ready, what="readiness")
    assert await answer(port, "/healthz") == "HTTP/1.1 200 OK ok\n"

    await e2e.start(TWO_STEPS, "observed-1")
    await e2e.settled("observed-1", InstanceStatus.COMPLETED)
    await worker.stop()  # spans are exported in batches, the last at exit

    spans = worker.stdout.read_text()
    assert spans.count('"wayline.instance_id": "observed-1"') == 2
    assert '"name": "activity first"' in spans and '"name": "activity second"' in spans
    assert '"service.name": "wayline-worker"' in spans


async def test_a_start_from_the_command_line_begins_the_instances_trace(e2e: Harness) -> None:
    await e2e.publish(TWO_STEPS)
    console = {"OTEL_TRACES_EXPORTER": "console"}
    started = await e2e.cli("start", "e2e.observed", "--id", "cli-1", "--input", "{}", env=console)
    assert started.code == 0, started.stderr
    assert '"name": "start e2e.observed"' in started.stdout
    assert '"service.name": "wayline-cli"' in started.stdout
    [(kept,)] = await e2e.query(
        "SELECT trace_context FROM history WHERE instance_id = 'cli-1' AND sequence = 1"
    )
    trace_id = kept.split("-")[1]  # traceparent: version-trace_id-span_id-flags
    assert f'"trace_id": "0x{trace_id}"' in started.stdout


EXIT_BOUND_SECONDS = 10.0
"""How soon a start must exit with its collector silent: generous for a loaded 2-core
machine (a start takes about a second), and far below the exporter's timeout the test
sets, which the command used to wait for at its exit."""


async def test_a_start_exits_promptly_when_its_collector_does_not_answer(e2e: Harness) -> None:
    """The SDK's exit handler waited for the exporter, whose request to a collector that
    never answers times out after 10 s (here 60 s): a start took that long to exit. It
    now waits EXIT_FLUSH_SECONDS and says in one line that its spans were dropped."""
    await e2e.publish(TWO_STEPS)
    with socket.socket() as collector:  # the kernel accepts connections; nothing answers
        collector.bind(("127.0.0.1", 0))
        collector.listen()
        silent = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.getsockname()[1]}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "60",
        }
        began = time.monotonic()
        started = await e2e.cli("start", "e2e.observed", "--id", "unheard", env=silent)
        took = time.monotonic() - began
    assert started.code == 0, started.stderr
    assert started.stdout.startswith("started unheard on e2e.observed@1")
    assert took < EXIT_BOUND_SECONDS, f"the start took {took:.1f} s to exit"
    (line,) = started.stderr.splitlines()
    assert line.endswith(
        "the trace collector did not take this command's spans within 1 s "
        "(EXIT_FLUSH_SECONDS); they were dropped"
    )


async def scrape(port: int) -> dict[str, float]:
    """The worker's metrics by series (buckets left out)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    body = (await reader.read()).decode().partition("\r\n\r\n")[2]
    writer.close()
    series = (line.rpartition(" ") for line in body.splitlines() if line[:1] != "#")
    return {name: float(value) for name, _, value in series if "_bucket{" not in name}


async def test_a_workers_metrics_are_there_from_its_start_and_count_what_happened(
    e2e: Harness,
) -> None:
    """Every series the README lists shows before its first event (0, not missing), and
    the counts after one instance of two steps are what happened, by name."""
    await e2e.publish(TWO_STEPS)
    port = free_port()
    [worker] = await e2e.spawn(concurrency=1, options=("--metrics-port", str(port)))
    await e2e.until(lambda: answer(port, "/healthz"), what="the metrics port")

    idle = await scrape(port)
    for name in (
        "wayline_lease_lost_total",
        "wayline_offered_total",
        "wayline_offers_missed_total",
        "wayline_readmitted_total",
        "wayline_write_retries_total",
        "wayline_processing_failures_total",
        "wayline_eager_dispatches_total",
        'wayline_outcomes_total{kind="unknown",track="activity"}',
        'wayline_outcomes_total{kind="failed",track="compensation"}',
        'wayline_step_seconds_count{track="activity"}',
        "wayline_commit_seconds_count",
        "wayline_group_size_count",
        "wayline_processing_seconds_count",
    ):
        assert idle.get(name) == 0, name

    await e2e.start(TWO_STEPS, "counted-1")
    await e2e.settled("counted-1", InstanceStatus.COMPLETED)

    async def processed() -> dict[str, float] | None:  # counted just after the commit
        scraped = await scrape(port)
        # an offer a claim took first is processed too, and writes nothing
        items = 1 + scraped["wayline_offers_missed_total"]
        return scraped if scraped["wayline_processing_seconds_count"] == items else None

    done = await e2e.until(processed, what="the work item counted")
    await worker.stop()
    assert done['wayline_outcomes_total{kind="succeeded",track="activity"}'] == 2
    assert done['wayline_step_seconds_count{track="activity"}'] == 2
    # leased once: by a claim, or by taking the start's offer (engine.store.offers), which
    # an offer that found it claimed first counts as missed
    taken = done["wayline_offered_total"] - done["wayline_offers_missed_total"]
    assert done["wayline_claimed_total"] + taken == 1
    assert done["wayline_eager_dispatches_total"] == 1
    assert done['wayline_completed_total{kind="activity"}'] == 1
    assert 'wayline_completed_total{kind="1"}' not in done
