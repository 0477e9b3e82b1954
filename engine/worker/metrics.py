"""Worker metrics: counters and latency summaries, through the Prometheus client library.

Each ``Metrics`` has its own registry (a process may run several workers, as the tests
do). Metric names are made on first use: ``count("claimed")`` is the counter
``wayline_claimed_total``, ``observe("claim", s)`` the summary ``wayline_claim_seconds``
(its ``_count`` and ``_sum``); a name keeps the label names of its first use. The
``_created`` series are turned off: one more series per counter that no dashboard of
a worker reads. ``serve`` exposes the registry over HTTP on an optional port, on the
worker's own event loop rather than the library's server thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import prometheus_client
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Summary

PREFIX = "wayline_"

prometheus_client.disable_created_metrics()

LabelKey = tuple[str, tuple[tuple[str, str], ...]]


class Metrics:
    """Counts of claims, attempts, outcomes, retries, dead letters, lease losses, ..."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._counts: dict[LabelKey, Callable[[float], None]] = {}
        self._observations: dict[LabelKey, Callable[[float], None]] = {}
        self._families: dict[str, Counter | Summary] = {}

    def count(self, name: str, amount: int = 1, **labels: str) -> None:
        key = (name, tuple(labels.items()))  # a call site's own order: no sort
        inc = self._counts.get(key)
        if inc is None:
            inc = self._counts[key] = self._child(Counter, name, key[1]).inc
        inc(amount)

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        key = (name, tuple(labels.items()))  # a call site's own order: no sort
        record = self._observations.get(key)
        if record is None:
            child = self._child(Summary, f"{name}_seconds", key[1])
            record = self._observations[key] = child.observe
        record(seconds)

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
        and any other path with the current metrics."""

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            request = await reader.readuntil(b"\r\n\r\n")
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
        self, kind: type[Counter] | type[Summary], name: str, labels: tuple[tuple[str, str], ...]
    ) -> Counter | Summary:
        """The series of ``name`` with ``labels``, making the metric on its first use."""
        family = self._families.get(name)
        if family is None:
            names = [label for label, _ in labels]
            help_text = f"Wayline worker: {name.replace('_', ' ')}"
            family = kind(PREFIX + name, help_text, names, registry=self.registry)
            self._families[name] = family
        return family.labels(**dict(labels)) if labels else family
