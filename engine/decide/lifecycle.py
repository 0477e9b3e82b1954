"""Lifecycle decisions: start, complete, fail, cancel, continue as new.

Pause, resume, cancel requests, termination and migration are operator commands
(``engine.decide.operator_commands``); these are the ones the engine itself makes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine import modes
from engine.model.definitions import Definition, DefinitionRef, StepKind
from engine.model.events import EventKind, json_data
from engine.model.identifiers import require_id
from engine.model.inputs import check_size
from engine.model.limits import MAX_PAYLOAD_BYTES
from engine.model.registry import Registry
from engine.model.transitions import Draft

K = EventKind


def start_draft(
    registry: Registry,
    definition: Definition,
    instance_id: str,
    now: datetime,
    input: Any = None,
    parent: tuple[str, str] = ("", ""),
    trace_context: str = "",
    started_by: str = "",
) -> Draft:
    """A draft whose first event starts the instance; decide() can add its first step.

    A child instance names ``parent`` = (parent instance id, the parent's child step), so
    its outcome can be reported back and the studio can link both ways. The mode checks
    ``input`` first (InputRefused) and names the key the start holds while the instance
    is active (``DefinitionMode.admit``: a machine's parent). ``trace_context`` is the
    starting caller's ``traceparent`` (``Event.trace_context``), or '' for none;
    ``started_by`` who starts it (``Event.started_by``), or '' for nobody recorded.
    """
    require_id(instance_id, "instance id")
    admit = modes.of(definition).admit
    draft = Draft(registry, None, now, instance_id)
    draft.parent_key = admit(definition, input) if admit else ""
    draft.add(
        K.INSTANCE_STARTED,
        definition=definition.ref,
        data=json_data(input),
        successor_id=parent[0],
        step=parent[1],
        trace_context=trace_context,
        started_by=started_by,
    )
    return draft


def start_input_limit(definition: Definition) -> tuple[int, str]:
    """The largest instance input every activity of ``definition`` accepts, and the step
    that sets it (``MAX_PAYLOAD_BYTES`` and no step without activities).

    Each activity receives the instance input, so a larger one would fail the instance
    with ``input-too-large`` at its first activity: starts from outside (the client, the
    command line, the studio) refuse it before anything is written.
    """
    limits = [(s.input_limit, s.name) for s in definition.steps if s.kind is StepKind.ACTIVITY]
    return min(limits) if limits else (MAX_PAYLOAD_BYTES, "")


def check_start_input(definition: Definition, input: Any) -> None:
    """Raise LimitExceeded when ``input`` is larger than ``start_input_limit`` allows."""
    limit, step = start_input_limit(definition)
    check_size(input, limit, "the input", step)


def complete(draft: Draft, result: Any = None) -> None:
    draft.add(K.COMPLETED, data=json_data(result))


def fail(draft: Draft, step: str, code: str, data: str | None = None) -> None:
    draft.add(K.FAILED, step=step, code=code, data=data)


def begin_failing(draft: Draft, step: str, code: str) -> None:
    """A terminal failure with completed work to compensate: unwind, then fail."""
    draft.add(K.INSTANCE_FAILING, step=step, code=code)


def cancelled(draft: Draft) -> None:
    draft.add(K.CANCELLED)


def continue_as_new(
    draft: Draft, successor_id: str, definition: DefinitionRef, input: Any = None
) -> None:
    """End this instance in favour of ``successor_id`` on ``definition``, started with
    ``input`` by a transition of its own in the same PostgreSQL transaction
    (``engine.modes.code.continuation``)."""
    require_id(successor_id, "successor id")
    draft.add(
        K.CONTINUED_AS_NEW, successor_id=successor_id, definition=definition, data=json_data(input)
    )
