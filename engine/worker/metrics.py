"""Worker metrics: counters and histograms, through the Prometheus client library.

Each ``Metrics`` has its own registry (a process may run several workers, as the tests
do). Metric names are made on first use: ``count("claimed")`` is the counter
``wayline_claimed_total``, ``observe("claim", s)`` the histogram ``wayline_claim_seconds``
(its buckets, ``_count`` and ``_sum``), ``observe("group", n, unit="size")`` the
histogram ``wayline_group_size`` (in ``SIZE_BUCKETS``); a name keeps the label names of
its first use. The ``_created`` series are turned off: one more series per counter
that no dashboard of a worker reads. ``serve`` exposes the registry over HTTP on an
optional port, on the worker's own event loop rather than the library's server thread,
beside ``/healthz`` and ``/readyz`` (``engine.worker.health``). The README lists every
name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import prometheus_client
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "wayline_"
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""Latency buckets in seconds: a step's commit takes about a millisecond, a handler may
take its whole timeout."""
REQUEST_SECONDS = 10
"""How long ``serve`` waits for a request's head before it closes the connection."""
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32)
"""Count buckets (a commit group has at most ``group_commit.MAX_GROUP_MEMBERS``)."""

WORKER_COUNTERS = (
    "claimed",
    "offered",
    "offers_missed",
    "eager_dispatches",
    "recovered_leases",
    "readmitted",
    "write_retries",
    "lease_lost",
    "dead_letters",
    "claim_failures",
    "renew_failures",
    "listen_failures",
    "processing_failures",
)
"""The worker's unlabelled counters the README lists, shown at 0 from its start."""
WORKER_HISTOGRAMS = (
    ("claim", "seconds"),
    ("commit", "seconds"),
    ("group", "size"),
    ("processing", "seconds"),
)
"""Its unlabelled histograms (``step`` has a track: ``declare_worker`` makes each)."""
OUTCOME_KINDS = ("succeeded", "failed", "unknown")
TRACKS = ("activity", "compensation")

prometheus_client.disable_created_metrics()

LabelKey = tuple[str, tuple[tuple[str, str], ...]]


class Metrics:
    """Counts of claims, attempts, outcomes, retries, dead letters, lease losses, ..."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._counts: dict[LabelKey, Callable[[float], None]] = {}
        self._observations: dict[LabelKey, Callable[[float], None]] = {}
        self._families: dict[str, Counter | Histogram | Gauge] = {}

    def count(self, name: str, amount: int = 1, **labels: str) -> None:
        key = (name, tuple(labels.items()))  # a call site's own order: no sort
        inc = self._counts.get(key)
        if inc is None:
            inc = self._counts[key] = self._child(Counter, name, key[1]).inc
        inc(amount)

    def observe(self, name: str, value: float, unit: str = "seconds", **labels: str) -> None:
        """One observation of the histogram ``<name>_<unit>`` (seconds, or a size)."""
        key = (name, tuple(labels.items()))  # a call site's own order: no sort
        record = self._observations.get(key)
        if record is None:
            child = self._child(Histogram, f"{name}_{unit}", key[1])
            record = self._observations[key] = child.observe
        record(value)

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        """The gauge ``wayline_<name>``, ``read()`` at each scrape: a state the worker
        keeps (not an event it counts), shown as it is now."""
        family = self._families.get(name)
        if family is None:
            help_text = f"Wayline worker: {name.replace('_', ' ')}"
            family = self._families[name] = Gauge(PREFIX + name, help_text, registry=self.registry)
        assert isinstance(family, Gauge)
        family.set_function(read)

    def declare_worker(self) -> None:
        """Make every series the README lists for a worker, at zero, so that a scrape
        shows them before their first event: a dashboard or an alert on a series that is
        missing (``wayline_lease_lost_total`` on a worker that never lost one) sees no
        data rather than 0."""
        for name in WORKER_COUNTERS:
            self.count(name, 0)
        for track in TRACKS:
            for kind in OUTCOME_KINDS:
                self.count("outcomes", 0, kind=kind, track=track)
            self._child(Histogram, "step_seconds", (("track", track),))
        for name, unit in WORKER_HISTOGRAMS:
            self._child(Histogram, f"{name}_{unit}", ())

    def value(self, name: str, **labels: str) -> int:
        """A counter's current value (0 before its first count)."""
        sample = self.registry.get_sample_value(f"{PREFIX}{name}_total", labels)
        return int(sample or 0)

    def counts(self) -> dict[str, int]:
        """Every counter's value, keyed ``name[label=value]...`` (the benchmark's profile)."""
        return {
            sample.name.removeprefix(PREFIX).removesuffix("_total")
            + "".join(f"[{k}={v}]" for k, v in sorted(sample.labels.items())): int(sample.value)
            for family in self.registry.collect()
            if family.type == "counter"
            for sample in family.samples
            if sample.name.endswith("_total")
        }

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        return prometheus_client.generate_latest(self.registry).decode()

    async def serve(
        self, host: str, port: int, ready: Callable[[], Awaitable[str]] | None = None
    ) -> asyncio.Server:
        """Answer HTTP requests on (host, port): ``/healthz`` (the process answers),
        ``/readyz`` (``ready()`` gives '' when ready, else why not: 503 with that reason)
        and any other path with the current metrics. A connection closed, or left silent
        for ``REQUEST_SECONDS``, before its request's head is closed without an answer
        (a TCP health probe does that), not logged as an error."""

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                async with asyncio.timeout(REQUEST_SECONDS):
                    request = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, TimeoutError):
                writer.close()  # a TCP probe, a port scan, a client that never asks
                return
            path = request.split(b" ", 2)[1].partition(b"?")[0] if b" " in request else b""
            status, kind, body = "200 OK", CONTENT_TYPE_LATEST, b""
            if path in (b"/healthz", b"/readyz"):
                why = await ready() if ready is not None and path == b"/readyz" else ""
                status = "503 Service Unavailable" if why else status
                kind, body = "text/plain; charset=utf-8", (why or "ok").encode() + b"\n"
            else:
                body = self.render().encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n".encode()
                + b"Content-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
            writer.close()

        return await asyncio.start_server(answer, host, port)

    def _child(
        self, kind: type[Counter] | type[Histogram], name: str, labels: tuple[tuple[str, str], ...]
    ) -> Counter | Histogram:
        """The series of ``name`` with ``labels``, making the metric on its first use."""
        family = self._families.get(name)
        if family is None:
            names = [label for label, _ in labels]
            help_text = f"Wayline worker: {name.replace('_', ' ')}"
            buckets = {"buckets": _buckets(name)} if kind is Histogram else {}
            family = kind(PREFIX + name, help_text, names, registry=self.registry, **buckets)
            self._families[name] = family
        return family.labels(**dict(labels)) if labels else family


def _buckets(name: str) -> tuple[float, ...]:
    return SECONDS_BUCKETS if name.endswith("_seconds") else SIZE_BUCKETS
