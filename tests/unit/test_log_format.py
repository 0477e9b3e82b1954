"""Issue 26: ``--log-format json`` logs one JSON object per line with the ids of the work
and of the span it happened in, and never a payload or an exception's text; text stays
the default."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from engine.cli.main import build_parser
from engine.worker import logs


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Root logging as ``use_format`` leaves it, into a buffer; restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs.json_logs)
    buffer = io.StringIO()
    yield buffer
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logs.json_logs = saved[2]


def use(name: str, buffer: io.StringIO) -> None:
    logs.use_format(name)
    logging.getLogger().handlers[0].setStream(buffer)  # type: ignore[attr-defined]


def lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_record_is_one_json_line_with_the_bound_ids_and_no_payload(
    captured: io.StringIO,
) -> None:
    use("json", captured)
    logs.bind(worker_id="w-1")
    logs.bind(instance_id="order-1", step="reserve", attempt=2, idempotency_key="k-9")
    extra = {"work_id": "order-1#w3", "input": {"card": "4111"}, "payload": "secret"}
    logging.getLogger("wayline.worker").warning("lease %s was lost", 7, extra=extra)

    [record] = lines(captured)
    assert record["level"] == "warning" and record["logger"] == "wayline.worker"
    assert record["message"] == "lease 7 was lost"
    assert {k: record[k] for k in ("worker_id", "instance_id", "step", "attempt")} == {
        "worker_id": "w-1",
        "instance_id": "order-1",
        "step": "reserve",
        "attempt": 2,
    }
    assert record["idempotency_key"] == "k-9" and record["work_id"] == "order-1#w3"
    assert "input" not in record and "payload" not in record
    assert "4111" not in captured.getvalue() and "secret" not in captured.getvalue()


def test_an_exception_is_named_by_its_type_only(captured: io.StringIO) -> None:
    use("json", captured)
    try:
        raise ValueError("password=hunter2 for host db.internal")
    except ValueError:
        logging.getLogger("wayline.worker").warning("processing failed", exc_info=True)
    [record] = lines(captured)
    assert record["error"] == "ValueError"
    assert "hunter2" not in captured.getvalue() and "Traceback" not in captured.getvalue()


def test_a_record_in_a_span_carries_its_trace_and_span_ids(captured: io.StringIO) -> None:
    use("json", captured)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("activity reserve") as span:
        logging.getLogger("wayline.worker").error("inside")
    logging.getLogger("wayline.worker").error("outside")
    inside, outside = lines(captured)
    context = span.get_span_context()
    assert inside["trace_id"] == f"{context.trace_id:032x}"
    assert inside["span_id"] == f"{context.span_id:016x}"
    assert "trace_id" not in outside


def test_text_stays_the_default_and_binds_nothing(captured: io.StringIO) -> None:
    for command in (["worker", "--app", "x:y"], ["studio"], ["drill", "run"]):
        assert build_parser().parse_args(command).log_format == "text"
    assert build_parser().parse_args(["worker", "--app", "x:y", "--log-format", "json"]).log_format
    use("text", captured)
    logs.bind(instance_id="order-2")
    logging.getLogger("wayline.worker").warning("plain %s", "words")
    text = captured.getvalue()
    assert text.rstrip().endswith("WARNING wayline.worker: plain words")
    assert "order-2" not in text and not text.startswith("{")
