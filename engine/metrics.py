"""Worker metrics: counters and latency sums, exposed in Prometheus text format.

Kept deliberately small (no client library): a counter per (name, labels) and a
count/sum pair per observed latency, rendered on demand by ``render``; ``serve``
exposes them over HTTP on an optional port.
"""

from __future__ import annotations

import asyncio
from collections import Counter

PREFIX = "wayline_"


def _key(name: str, labels: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


class Metrics:
    """Counts of claims, attempts, outcomes, retries, dead letters, lease losses, ..."""

    def __init__(self) -> None:
        self.counters: Counter = Counter()
        self.latency_sum: Counter = Counter()
        self.latency_count: Counter = Counter()

    def count(self, name: str, amount: int = 1, **labels: str) -> None:
        self.counters[_key(name, labels)] += amount

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        key = _key(name, labels)
        self.latency_sum[key] += seconds
        self.latency_count[key] += 1

    def value(self, name: str, **labels: str) -> int:
        return self.counters[_key(name, labels)]

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        lines = []
        for (name, labels), value in sorted(self.counters.items()):
            lines.append(f"{PREFIX}{name}_total{_labels(labels)} {value}")
        for (name, labels), total in sorted(self.latency_sum.items()):
            count = self.latency_count[(name, labels)]
            lines.append(f"{PREFIX}{name}_seconds_sum{_labels(labels)} {total:.6f}")
            lines.append(f"{PREFIX}{name}_seconds_count{_labels(labels)} {count}")
        return "\n".join(lines) + "\n"

    async def serve(self, host: str, port: int) -> asyncio.Server:
        """Answer every HTTP request on (host, port) with the current metrics."""

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            body = self.render().encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                b"Content-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
            writer.close()

        return await asyncio.start_server(answer, host, port)


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    return "{" + inner + "}"
