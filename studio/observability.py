"""What an operator's tools read from the studio: health, readiness, request latencies.

``/healthz`` says the process answers; ``/readyz`` says whether it can serve (its
database answers and its schema is current: the engine's ``store_readiness``), 503
with the reason otherwise; ``/metrics`` is the Prometheus text of
``wayline_studio_request_seconds``, a histogram of every routed request's latency by
method, route template (never the path itself, which holds ids) and status, and of
``wayline_studio_unrouted_requests_total``, the requests no route answered (404, 405)
by method and status: Litestar runs no middleware for those, so they are counted
where their error is answered, untimed. All three are
public routes (``studio.routes``) so an orchestrator or scraper needs no account: they
show no instance, team or account data.
"""

from __future__ import annotations

import time

import prometheus_client
from litestar import Response
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram

from engine import store_readiness
from engine.worker import tracing
from studio.failures import status_of
from studio.runtime import Runtime

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds; a live page's stream is held open for minutes and lands in ``+Inf``."""


class RequestLatencies(ASGIMiddleware):
    """Times every HTTP request into its own registry (one per app, as tests run many)."""

    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.seconds = Histogram(
            "wayline_studio_request_seconds",
            "Wayline studio: request latency by method, route template and status",
            ("method", "route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.unrouted = Counter(
            "wayline_studio_unrouted_requests",
            "Wayline studio: requests no route answered (an unknown address, a method the "
            "address does not take), by method and status",
            ("method", "status"),
            registry=self.registry,
        )

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        started = time.perf_counter()
        status = [500]  # unless a response starts

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await next_app(scope, receive, noting)
        except Exception as error:  # answered by the app's handler, outside this middleware
            status[0] = status_of(error, scope.get("route_handler"))
            raise
        finally:
            labels = (scope.get("method", ""), scope.get("path_template", ""), str(status[0]))
            self.seconds.labels(*labels).observe(time.perf_counter() - started)

    def render(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)


class CallerTrace(ASGIMiddleware):
    """An API caller's ``traceparent`` header is the current trace context while its
    request is handled: an instance it starts (``Client.start``) joins the caller's
    trace, as one started by the Python client in the caller's own span does."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        header = next((v for k, v in scope["headers"] if k == b"traceparent"), b"")
        with tracing.caller(header.decode("latin-1")):
            await next_app(scope, receive, send)


async def healthz() -> Response[str]:
    return Response("ok\n", media_type="text/plain")


async def readyz(runtime: NamedDependency[Runtime]) -> Response[str]:
    why = await store_readiness(runtime.store)
    return Response(f"{why or 'ok'}\n", media_type="text/plain", status_code=503 if why else 200)


async def metrics(state: State) -> Response[bytes]:
    return Response(state.request_latencies.render(), media_type=CONTENT_TYPE_LATEST)
