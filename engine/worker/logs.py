"""Process logs as readable text (the default) or one JSON object per line.

``--log-format json`` (``wayline worker``, ``wayline studio``, ``wayline drill``) is for
log pipelines: each record is one line with its time, level, logger and message, the
ids of the work it is about (``bind``: instance, step, attempt, idempotency key, worker)
and, when traces are on, the ``trace_id`` and ``span_id`` of the span it happened in,
the same ids a tracing backend shows (``engine.worker.tracing``). A record never
carries payloads or secrets: only the message the engine wrote (which names ids, never
inputs or results), the ids above, and for an exception only its type, since an
exception's text may quote a driver's message or an input.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import logging
from datetime import UTC, datetime
from typing import Any

try:
    from opentelemetry import trace
except ImportError:  # traces are off without the optional extra
    trace = None  # type: ignore[assignment]

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ID_FIELDS = (
    "instance_id",
    "definition",
    "version",
    "step",
    "attempt",
    "idempotency_key",
    "work_id",
    "worker_id",
    "command_id",
)
"""The ids a JSON record may carry beside its message (bound, or a logging ``extra``)."""

_bound: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "wayline_log_ids", default=None
)
json_logs = False
"""Whether this process logs JSON: ``bind`` is skipped otherwise (a worker's hot path)."""


def add_option(parser: argparse.ArgumentParser) -> None:
    """The ``--log-format`` option of a long-running command."""
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="text (default) or json: one JSON object per line, with trace and work ids",
    )


def use_format(name: str, level: int = logging.WARNING) -> None:
    """Log every record of this process in format ``name`` (``FORMATS``) to stderr."""
    global json_logs
    json_logs = name == "json"
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if json_logs else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def bind(**ids: Any) -> None:
    """Name the work the current task (or handler thread) is doing in its later records,
    beside the ids bound before (tasks it starts inherit them); nothing when the
    process logs text."""
    if json_logs:
        _bound.set({**(_bound.get() or {}), **ids})


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_bound.get() or {})
        entry.update({k: getattr(record, k) for k in ID_FIELDS if hasattr(record, k)})
        entry.update(_span_ids())
        if record.exc_info and record.exc_info[0] is not None:
            entry["error"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False, default=str)


def _span_ids() -> dict[str, str]:
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
