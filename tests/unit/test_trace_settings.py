"""Issue 26: traces are off unless the usual ``OTEL_*`` variables ask for them, and the
trace context a start keeps is a W3C traceparent on ``instance_started`` only."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from engine.model.definitions import DefinitionRef
from engine.model.errors import EventInvalid
from engine.model.events import Event, EventKind, event_to_json, make_event
from engine.worker.tracing import (
    EXPORTER_LOGGER,
    ExportComplaints,
    exporter_wanted,
    trace_id_of,
)

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
FLOW = DefinitionRef("flow", "1", "a" * 64)
AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "orders"}, None),
        (ENDPOINT, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, None),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, None),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "zipkin"}, None),
    ],
)
def test_traces_are_off_unless_the_environment_asks(
    environ: dict[str, str], wanted: str | None
) -> None:
    assert exporter_wanted(environ) == wanted


def event(kind: EventKind, sequence: int, **fields: object) -> Event:
    """An event of ``order-1`` at one fixed time, checked by ``make_event`` as the engine's."""
    return make_event(sequence=sequence, instance_id="order-1", kind=kind, occurred_at=AT, **fields)


def started(**fields: object) -> Event:
    """The start of ``order-1`` (a ``flow@1``), with ``fields`` such as a trace context."""
    return event(EventKind.INSTANCE_STARTED, 1, definition=FLOW, **fields)


def test_a_start_keeps_its_callers_traceparent_outside_its_exchange_form() -> None:
    traced, plain = started(trace_context=PARENT), started()
    assert traced.trace_context == PARENT
    assert event_to_json(traced) == event_to_json(plain)  # so fingerprints are the same
    assert trace_id_of("order-1", PARENT) == "0af7651916cd43dd8448eb211c80319c"
    assert trace_id_of("order-1", "") == trace_id_of("order-1", "") != trace_id_of("order-2", "")


@pytest.mark.parametrize("bad", ["00-xyz", PARENT.upper(), PARENT + "-extra"])
def test_a_trace_context_must_be_a_traceparent(bad: str) -> None:
    with pytest.raises(EventInvalid, match="trace_context must be a W3C traceparent"):
        started(trace_context=bad)


def test_only_a_start_carries_a_trace_context() -> None:
    with pytest.raises(EventInvalid, match="may not carry trace_context"):
        event(EventKind.PAUSED, 2, trace_context=PARENT)


def test_an_unreachable_collector_is_complained_of_once_a_minute() -> None:
    """The OTLP exporter logs four lines for every batch it cannot send; a worker whose
    collector is down logs one a minute, the next saying how many it left out."""
    now = [0.0]
    quiet = ExportComplaints(60.0, lambda: now[0])
    kept = []
    for second in range(0, 125, 5):
        now[0] = float(second)
        for _ in range(4):
            record = logging.LogRecord(
                "x", logging.WARNING, "", 0, "Transient error %s", ("p",), None
            )
            if quiet.filter(record):
                kept.append((second, record.getMessage()))
    assert kept == [
        (0, "Transient error p"),
        (60, "Transient error p (47 more left out before it)"),
        (120, "Transient error p (47 more left out before it)"),
    ]


def test_an_export_complaint_names_the_error_by_its_type_never_the_collector_address() -> None:
    """The exporter quotes its HTTP client's exception, whose text holds the endpoint with
    its query (a collector's token travels there); the complaint keeps only its type."""
    refused = ConnectionError(
        "HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded with url: "
        "/v1/traces?token=s3cret"
    )
    record = logging.LogRecord(
        EXPORTER_LOGGER,
        logging.WARNING,
        "",
        0,
        "Transient error %s encountered while exporting %s batch, retrying in %.2fs.",
        (refused, "span", 0.91),
        None,
    )
    assert ExportComplaints(60.0, lambda: 0.0).filter(record)
    assert record.getMessage() == (
        "Transient error ConnectionError encountered while exporting span batch, retrying in 0.91s."
    )
