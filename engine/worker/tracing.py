"""Traces of instances through OpenTelemetry, when it is installed and configured.

Every instance is one trace. Its start is a span under whatever span the caller has
open (a new trace when none), and that span's ``traceparent`` is kept on the
``instance_started`` event (``Event.trace_context``), so every worker that later runs
one of its steps, timers or compensations makes its spans children of the start: one
trace however many workers take part. An instance started without a trace (traces were
off, or it predates them) gets a trace id derived from its id, so its spans still form
one trace. A handler's own spans nest under its attempt's span: the attempt's span is
current while the handler runs, in its thread too.

Off is the default and costs nothing on a worker's path: without the optional packages
(``pip install wayline[otel]``) or without a tracer provider installed, ``Tracing.of``
gives None and every call site skips its span on one ``is None``. ``configure`` installs
the SDK's provider with the OTLP exporter only when the usual ``OTEL_*`` variables ask
for it; a process that installs its own provider (a test's in-memory exporter) is
traced the same way. Spans carry ids, names, attempts, idempotency keys and outcome
codes, never inputs, results or failure details.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.model.events import TRACE_CONTEXT_PATTERN

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags
except ImportError:  # the optional extra is not installed: traces are off
    trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from engine.model.instance import Instance

INSTRUMENTATION = "wayline"
"""The instrumentation scope of every Wayline span."""
EXPORTERS = ("otlp", "console")
"""The ``OTEL_TRACES_EXPORTER`` values ``configure`` acts on; ``none`` turns traces off."""
UNKNOWN = "unknown"
"""The ``wayline.outcome`` of an attempt whose effect may or may not have happened."""
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
EXPORT_COMPLAINT_SECONDS = 60.0
"""How often an export failure is logged: with its collector unreachable, the OTLP
exporter logs three retries and a failure for every batch of spans (four lines every
few seconds, for as long as the collector is down)."""
EXIT_FLUSH_SECONDS = 1.0
"""How long a short command (``wayline start``) waits at its end for its spans to be
exported. The SDK's own exit handler waits for the exporter, whose request to a
collector that does not answer times out only after 10 s (``OTEL_EXPORTER_OTLP_TIMEOUT``),
so a one-second command would take eleven; past this, its spans are dropped, said in
one log line."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tracing:
    """Where a process's Wayline spans go: a tracer and the process's worker id."""

    tracer: Any
    worker_id: str = ""

    @classmethod
    def of(cls, worker_id: str = "", provider: Any = None) -> Tracing | None:
        """Tracing to ``provider`` (the process's tracer provider unless given), or None
        when traces are off (the packages are missing, or no provider is installed: the
        API's default records nothing)."""
        if trace is None:
            return None
        provider = provider or trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
        return cls(provider.get_tracer(INSTRUMENTATION), worker_id)

    @contextlib.contextmanager
    def start(self, name: str, version: str, instance_id: str) -> Iterator[str]:
        """The span of a start under the caller's current span; gives its traceparent,
        which the start event keeps."""
        attributes = {**_ids(instance_id, name, version), "wayline.operation": "start"}
        with self.tracer.start_as_current_span(f"start {name}", attributes=attributes) as span:
            context = span.get_span_context()
            yield f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"

    @contextlib.contextmanager
    def attempt(
        self,
        state: Instance,
        track: str,
        step: str,
        attempt: int,
        key: str,
        started_ns: int | None = None,
    ) -> Iterator[Attempt]:
        """The span of one attempt (an activity's or a compensation's), current while its
        handler runs, so the handler's own spans nest under it; ended after its outcome
        is committed (or with the error that kept it from being committed). It starts
        now, or at ``started_ns`` for an attempt settled before its span opened."""
        attributes = {
            **_ids(state.instance_id, state.definition.name, state.definition.version),
            "wayline.step": step,
            "wayline.attempt": attempt,
            "wayline.idempotency_key": key,
            "wayline.worker_id": self.worker_id,
        }
        span = self.tracer.start_span(
            f"{track} {step}",
            context=instance_context(state),
            attributes=attributes,
            start_time=started_ns,
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield Attempt(span)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def record(self, name: str, state: Instance, started_ns: int, **attributes: str | int) -> None:
        """A span that already happened (a timer firing, a signal, an operator command):
        from ``started_ns`` (``time.time_ns()``) to now, in the instance's trace."""
        ids = _ids(state.instance_id, state.definition.name, state.definition.version)
        span = self.tracer.start_span(
            name,
            context=instance_context(state),
            attributes={**ids, **attributes, "wayline.worker_id": self.worker_id},
            start_time=started_ns,
        )
        span.end()


@dataclass(frozen=True)
class Attempt:
    """An attempt's open span, told the outcome once the handler returned."""

    span: Any

    def outcome(self, kind: str, code: str = "") -> None:
        """``kind``: succeeded, failed or unknown (marked as such: the effect may exist)."""
        self.span.set_attribute("wayline.outcome", kind)
        if code:
            self.span.set_attribute("wayline.outcome_code", code)
        _mark(self.span, kind, code)


def _mark(span: Any, kind: str, code: str) -> None:
    """An outcome other than success is an error span; an unknown one also carries the
    event ``outcome unknown``, so a backend can find attempts an operator must settle."""
    if kind == UNKNOWN:
        span.add_event("outcome unknown", {"wayline.outcome_code": code})
        span.set_status(Status(StatusCode.ERROR, "outcome unknown"))
    elif kind != "succeeded":
        span.set_status(Status(StatusCode.ERROR, code or kind))


def started_ns() -> int:
    """The start time of a span recorded afterwards (``Tracing.record``)."""
    return time.time_ns()


def instance_context(state: Instance) -> Any:
    """The OpenTelemetry context an instance's spans are children of: the span that
    started it, or, for an instance started without a trace, a parent derived from its
    id (so its spans still make one trace)."""
    return trace.set_span_in_context(NonRecordingSpan(_parent(state)))


def trace_id_of(instance_id: str, trace_context: str) -> str:
    """The 32-hex trace id of an instance's trace (what a tracing UI's address names)."""
    if TRACE_CONTEXT_PATTERN.fullmatch(trace_context):
        return trace_context[3:35]
    return _derived(instance_id)[:32]


@contextlib.contextmanager
def caller(traceparent: str) -> Iterator[None]:
    """A remote caller's W3C ``traceparent`` (an HTTP header) as the current trace
    context meanwhile, so an instance it starts joins the caller's trace; nothing when
    traces are off or the header is not a version-00 traceparent."""
    text = traceparent.strip().lower()
    if trace is None or not TRACE_CONTEXT_PATTERN.fullmatch(text):
        yield
        return
    parent = trace.set_span_in_context(NonRecordingSpan(_span_context(text)))
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


def _parent(state: Instance) -> Any:
    text = state.trace_context
    if TRACE_CONTEXT_PATTERN.fullmatch(text):
        return _span_context(text)
    derived = _derived(state.instance_id)
    return _span_context(f"00-{derived[:32]}-{derived[32:48]}-01")


def _span_context(traceparent: str) -> Any:
    trace_id, span_id, flags = traceparent[3:35], traceparent[36:52], traceparent[53:55]
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))
    )


def _derived(instance_id: str) -> str:
    return hashlib.sha256(f"wayline-trace:{instance_id}".encode()).hexdigest()


def _ids(instance_id: str, name: str, version: str) -> dict[str, str]:
    return {
        "wayline.instance_id": instance_id,
        "wayline.definition": name,
        "wayline.version": version,
    }


def exporter_wanted(environ: Mapping[str, str] = os.environ) -> str | None:
    """The span exporter the ``OTEL_*`` variables ask for (``EXPORTERS``), or None: traces
    stay off without an OTLP endpoint or an exporter named, and with
    ``OTEL_TRACES_EXPORTER=none`` or ``OTEL_SDK_DISABLED=true``."""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if exporter:
        return exporter if exporter in EXPORTERS else None
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" if any(environ.get(name) for name in endpoints) else None


def configure(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK's tracer provider for this process when the ``OTEL_*`` variables
    ask for traces (``exporter_wanted``); True when it did. ``service`` names the
    process unless ``OTEL_SERVICE_NAME`` does. RuntimeError, saying what to install,
    when they ask for traces without the optional packages."""
    exporter = exporter_wanted(environ)
    if exporter is None:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise RuntimeError(
            "OTEL_* asks for traces but OpenTelemetry is not installed: pip install 'wayline[otel]'"
        ) from None
    if exporter == "console":
        span_exporter: Any = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
        _quieten(logging.getLogger(EXPORTER_LOGGER))
    named = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": service}
    provider = TracerProvider(resource=Resource.create(named))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    return True


def flush_at_exit(seconds: float = EXIT_FLUSH_SECONDS) -> bool:
    """Shut the process's tracer provider down (exporting the spans it holds), waiting
    at most ``seconds``: True when it finished in time, or there is none to shut down;
    False, with one warning that the spans were dropped, when it did not. The shutdown
    goes on in a daemon thread, which the process's exit ends; the SDK's exit handler
    then finds the provider shut down and does not wait again."""
    shutdown = getattr(trace.get_tracer_provider(), "shutdown", None) if trace else None
    if shutdown is None:  # traces are off: the API's default provider exports nothing
        return True
    flushing = threading.Thread(target=shutdown, name="wayline-trace-flush", daemon=True)
    flushing.start()
    flushing.join(seconds)
    if not flushing.is_alive():
        return True
    logger.warning(
        "the trace collector did not take this command's spans within %g s "
        "(EXIT_FLUSH_SECONDS); they were dropped",
        seconds,
    )
    return False


class ExportComplaints(logging.Filter):
    """Lets one export complaint through per ``seconds``; the next one says how many
    were left out meanwhile, so a collector that stays down costs a line a minute. An
    exception it quotes is named by its type, as every Wayline log names one."""

    def __init__(
        self, seconds: float = EXPORT_COMPLAINT_SECONDS, clock: Any = time.monotonic
    ) -> None:
        super().__init__()
        self.seconds, self.clock = seconds, clock
        self._quiet_until = float("-inf")
        self._left_out = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = self.clock()
        if now < self._quiet_until:
            self._left_out += 1
            return False
        if isinstance(record.args, tuple):
            record.args = tuple(_named_by_type(arg) for arg in record.args)
        if self._left_out:
            record.msg = f"{record.getMessage()} ({self._left_out} more left out before it)"
            record.args = ()
        self._quiet_until, self._left_out = now + self.seconds, 0
        return True


def _named_by_type(arg: object) -> object:
    """An exception the exporter quotes, by its type only (``engine.worker.logs``): its
    text names the collector's address with its query, which may carry a token."""
    return type(arg).__name__ if isinstance(arg, BaseException) else arg


def _quieten(logger: logging.Logger) -> None:
    if not any(isinstance(f, ExportComplaints) for f in logger.filters):
        logger.addFilter(ExportComplaints())
