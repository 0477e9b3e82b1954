"""Issue 26: an instance is one trace, joined to the trace of the caller that started it,
even when two workers each run some of its steps; a handler's own spans nest under its
attempt's span; an unknown outcome is marked on its span.

Spans go to the SDK's in-memory exporter through a provider of the test's own (the
process's global provider stays unset, so no other test is traced).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine import trace_id_of
from engine.api.client import Client
from engine.model.definitions import Definition
from engine.model.instance import InstanceStatus
from engine.model.validation import parse_definition
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry, ActivityRequest, UnknownOutcome
from engine.worker.loop import Worker, WorkerConfig

WAIT_SECONDS = 20.0
STEPS = ("one", "two", "three")


def activities(name: str, steps: tuple[str, ...]) -> Definition:
    """A definition of one activity per step, each with target ``traced.<step>``."""
    step = {"kind": "activity", "timeout": "10s", "input_limit": 1000, "result_limit": 1000}
    retry = {"max_attempts": 1, "initial_delay": "1s", "max_delay": "1s"}
    return parse_definition(
        {
            "name": name,
            "version": "1",
            "mode": "orchestration",
            "steps": [{**step, "name": s, "target": f"traced.{s}", "retry": retry} for s in steps],
        }
    )


THREE_STEPS = activities("traced.three", STEPS)
ZERO_FIRST = activities("traced.zero", ("zero",))
"""One step, run by a worker that dies in it."""


@dataclass
class Traced:
    """Two workers on the test's schema, tracing to ``exporter``; ``client`` starts
    instances of ``THREE_STEPS`` with traces on; each step answers what ``answers``
    says (success unless a test changes it)."""

    provider: TracerProvider
    exporter: InMemorySpanExporter
    client: Client
    answers: dict[str, Callable[[], Any]]


def handler(tracer_provider: TracerProvider, step: str, answer: Callable[[], Any]) -> Any:
    """A sync handler (it runs in a worker thread) that opens a span of its own."""
    tracer = tracer_provider.get_tracer("test.handlers")

    def run(request: ActivityRequest) -> Any:
        with tracer.start_as_current_span(f"handler {step}"):
            return answer()

    return run


@pytest.fixture
async def traced(db_store: Store) -> AsyncIterator[Traced]:
    """Worker ``w-a`` runs steps one and three, ``w-b`` step two (see ``Traced``)."""
    exporter, tracer_provider = InMemorySpanExporter(), TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = Client(db_store, tracer_provider=tracer_provider)
    await client.publish(THREE_STEPS)
    world = Traced(tracer_provider, exporter, client, {s: lambda: {"ok": True} for s in STEPS})
    apps = {"w-a": ActivityRegistry(), "w-b": ActivityRegistry()}
    for step in STEPS:
        answer = functools.partial(lambda s: world.answers[s](), step)
        apps["w-b" if step == "two" else "w-a"].register(
            f"traced.{step}", handler(tracer_provider, step, answer)
        )
    stop = asyncio.Event()
    workers = [worker(db_store, app, worker_id, tracer_provider) for worker_id, app in apps.items()]
    tasks = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        yield world
    finally:
        stop.set()
        await asyncio.gather(*tasks)


def worker(
    store: Store, app: ActivityRegistry, worker_id: str, tracer_provider: TracerProvider
) -> Worker:
    """A worker that drains for 10 ms only when stopped (then cancels its attempts)."""
    config = WorkerConfig(
        worker_id=worker_id,
        poll_interval=timedelta(milliseconds=50),
        drain_timeout=timedelta(milliseconds=10),
    )
    return Worker(store, app, config, tracer_provider=tracer_provider)


async def ended(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    """The finished spans once there are ``count`` of them."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(spans := list(exporter.get_finished_spans())) < count:
        assert time.monotonic() < deadline, f"only {len(spans)} of {count} spans ended"
        await asyncio.sleep(0.02)
    return spans


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


async def test_three_steps_on_two_workers_make_one_trace_under_the_caller(
    traced: Traced,
) -> None:
    with traced.provider.get_tracer("test.caller").start_as_current_span("caller"):
        await traced.client.start("traced.three", "order-7", {"n": 1})

    spans = by_name(await ended(traced.exporter, 8))  # caller, start, 3 attempts, 3 handlers
    assert (await traced.client.inspect("order-7")).status is InstanceStatus.COMPLETED
    caller, start = spans["caller"], spans["start traced.three"]
    assert {s.context.trace_id for s in spans.values()} == {caller.context.trace_id}
    assert start.parent.span_id == caller.context.span_id
    workers = {}
    for step in STEPS:
        attempt, own = spans[f"activity {step}"], spans[f"handler {step}"]
        assert attempt.parent.span_id == start.context.span_id
        assert own.parent.span_id == attempt.context.span_id
        assert attempt.attributes["wayline.instance_id"] == "order-7"
        assert attempt.attributes["wayline.definition"] == "traced.three"
        assert attempt.attributes["wayline.version"] == "1"
        assert attempt.attributes["wayline.attempt"] == 1
        assert attempt.attributes["wayline.idempotency_key"]
        assert attempt.attributes["wayline.outcome"] == "succeeded"
        workers[step] = attempt.attributes["wayline.worker_id"]
    assert workers == {"one": "w-a", "two": "w-b", "three": "w-a"}
    assert all('"n"' not in str(dict(s.attributes or {})) for s in spans.values())  # no input


async def test_an_unknown_outcome_is_marked_on_its_span(traced: Traced) -> None:
    traced.answers["two"] = UnknownOutcome
    await traced.client.start("traced.three", "order-8")

    spans = by_name(await ended(traced.exporter, 5))  # start, 2 attempts, 2 handlers
    unknown = spans["activity two"]
    assert unknown.attributes["wayline.outcome"] == "unknown"
    assert unknown.attributes["wayline.outcome_code"] == "activity-outcome-unknown"
    assert unknown.status.status_code is StatusCode.ERROR
    assert [event.name for event in unknown.events] == ["outcome unknown"]
    assert "activity three" not in spans  # held for an operator, never run


async def test_an_instance_started_without_a_trace_is_still_one_trace(
    traced: Traced, db_store: Store
) -> None:
    await Client(db_store).start("traced.three", "order-9")  # traces off for this caller

    spans = await ended(traced.exporter, 6)  # 3 attempts, 3 handlers: no start span
    assert {f"{span.context.trace_id:032x}" for span in spans} == {trace_id_of("order-9", "")}
    attempts = [s for s in spans if s.name.startswith("activity ")]
    assert len({span.parent.span_id for span in attempts}) == 1  # a parent derived from the id


async def test_an_attempt_redelivered_after_its_worker_died_is_an_unknown_span(
    traced: Traced, db_store: Store
) -> None:
    began, stop = asyncio.Event(), asyncio.Event()

    async def hang(request: ActivityRequest) -> None:
        began.set()
        await asyncio.Event().wait()  # its worker dies first

    doomed = ActivityRegistry()
    doomed.register("traced.zero", hang)
    dying = asyncio.create_task(worker(db_store, doomed, "w-dies", traced.provider).run(stop))
    await traced.client.publish(ZERO_FIRST)
    await traced.client.start("traced.zero", "order-10")
    await asyncio.wait_for(began.wait(), WAIT_SECONDS)
    stop.set()
    await dying  # its owner lock is gone: a live worker's sweep frees its lease at once
    successor = ActivityRegistry()
    successor.register("traced.zero", handler(traced.provider, "zero", lambda: 1 / 0))
    again = asyncio.Event()
    survivor = worker(db_store, successor, "w-survives", traced.provider)
    running = asyncio.create_task(survivor.run(again))
    try:
        spans = [s for s in await ended(traced.exporter, 3) if s.name == "activity zero"]
    finally:
        again.set()
        await running

    died, settled = sorted(spans, key=lambda s: s.start_time)
    assert died.attributes["wayline.worker_id"] == "w-dies"
    assert died.status.description == "CancelledError" and "wayline.outcome" not in died.attributes
    assert settled.attributes["wayline.worker_id"] == "w-survives"
    assert settled.attributes["wayline.outcome"] == "unknown"
    assert (
        settled.attributes["wayline.idempotency_key"] == died.attributes["wayline.idempotency_key"]
    )
    assert [event.name for event in settled.events] == ["outcome unknown"]
    assert survivor.metrics.value("outcomes", kind="unknown", track="activity") == 1
