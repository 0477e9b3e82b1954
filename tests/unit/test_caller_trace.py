"""The studio's API joins its caller's trace: a ``traceparent`` header is the current
trace context while the request is handled (what ``Client.start`` records), and a
malformed one is ignored rather than refused."""

from __future__ import annotations

from litestar import Litestar, get
from litestar.testing import TestClient
from opentelemetry import trace

from studio.observability import CallerTrace

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@get("/current", sync_to_thread=False)
def current() -> str:
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else "none"


def answer(headers: dict[str, str]) -> str:
    with TestClient(Litestar([current], middleware=[CallerTrace()])) as client:
        return client.get("/current", headers=headers).text


def test_a_callers_traceparent_is_the_current_context_of_its_request() -> None:
    assert answer({"traceparent": PARENT}) == TRACE_ID
    assert answer({"traceparent": PARENT.upper()}) == TRACE_ID


def test_without_a_valid_traceparent_the_request_has_no_trace() -> None:
    assert answer({}) == "none"
    assert answer({"traceparent": "01-not-a-trace"}) == "none"
    assert answer({"traceparent": PARENT[:-1]}) == "none"
