"""How a code-first run's commands are written into history, and read back.

A command becomes the event the other modes already have for the same thing wherever
one exists: a step is ``activity_scheduled`` (its attempts follow the step lists'
attempt machine, with ``step_id`` values as idempotency keys), a sleep
``timer_scheduled``, a spawn ``child_scheduled``; waits and journaled values have their
own (``wait_started``, ``value_recorded``). The step's options travel in its event's
data, and replay builds from them the ``Step`` that the shared attempt rules check
(``Instance.dynamic_steps``), so a code step has the same retries, timeouts, unknown
outcomes and compensation as a declared one.

Work for a code-first run names its code as ``workflow:<name>@<version>``
(``engine.model.pinned_code``), so only a worker whose app registers that workflow
claims it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine.model.definitions import (
    CompensationSpec,
    DefinitionRef,
    RetryPolicy,
    Step,
    StepKind,
    UnknownPolicy,
)
from engine.model.durations import to_micros
from engine.model.limits import MAX_PAYLOAD_BYTES, MAX_RETRY_DELAY, MAX_STEP_TIMEOUT
from engine.model.pinned_code import WORKFLOW_PREFIX, pinned_target
from engine.modes.code.journal import Command, OnUnknown, StepOptions, Verb

STEP_RESULT_LIMIT = MAX_PAYLOAD_BYTES
"""What a code step's result (or failure detail) and a spawned run's result may weigh."""
NO_TIMEOUT = MAX_STEP_TIMEOUT
"""The engine's own bound on an attempt of a step declared without a timeout."""


def target_of(ref: DefinitionRef) -> str:
    """The work target of a code-first definition: ``workflow:order-saga@1``."""
    return pinned_target(WORKFLOW_PREFIX, ref)


def micros(value: timedelta | None) -> int | None:
    return None if value is None else to_micros(value)


def from_micros(value: Any) -> timedelta | None:
    return None if value is None else timedelta(microseconds=int(value))


def step_data(command: Command) -> dict[str, Any]:
    """The data of a step's ``activity_scheduled``: its name, occurrence and options."""
    options = command.options or StepOptions()
    return {
        "verb": Verb.STEP.value,
        "name": command.name,
        "occurrence": command.occurrence,
        "options": {
            "retries": options.retries,
            "backoff": to_micros(options.backoff),
            "timeout": micros(options.timeout),
            "compensated": options.compensated,
            "on_unknown": options.on_unknown.value,
        },
    }


def options_of(data: dict[str, Any]) -> StepOptions:
    """The options ``step_data`` wrote; KeyError, TypeError or ValueError when malformed."""
    options = data["options"]
    return StepOptions(
        retries=int(options["retries"]),
        backoff=timedelta(microseconds=int(options["backoff"])),
        timeout=from_micros(options["timeout"]),
        compensated=bool(options["compensated"]),
        on_unknown=OnUnknown(options["on_unknown"]),
    )


def step_of(key: str, options: StepOptions, target: str) -> Step:
    """The step the shared attempt rules check a code step's events against."""
    timeout = options.timeout or NO_TIMEOUT
    retry = RetryPolicy(max(options.retries, 1), options.backoff, MAX_RETRY_DELAY)
    compensation = (
        CompensationSpec(target, timeout, STEP_RESULT_LIMIT, retry) if options.compensated else None
    )
    return _journal_step(
        key,
        StepKind.ACTIVITY,
        timeout,
        retry,
        target=target,
        compensation=compensation,
        on_unknown=UnknownPolicy(options.on_unknown.value),
    )


def spawn_step(key: str, ref: DefinitionRef) -> Step:
    """The child step of a spawn: its run starts once (its start is never guessed)."""
    once = RetryPolicy(1, timedelta(seconds=1), MAX_RETRY_DELAY)
    return _journal_step(key, StepKind.CHILD, NO_TIMEOUT, once, child_definition=ref)


def _journal_step(
    key: str, kind: StepKind, timeout: timedelta, retry: RetryPolicy, **fields: Any
) -> Step:
    """A step a journal entry stands for: named by its key, with the limits every
    code-first step has (any payload the journal takes, a step result's limit)."""
    return Step(
        name=key,
        kind=kind,
        timeout=timeout,
        input_limit=MAX_PAYLOAD_BYTES,
        result_limit=STEP_RESULT_LIMIT,
        retry=retry,
        **fields,
    )


def wait_data(command: Command) -> dict[str, Any]:
    """The data of ``wait_started``: the verb, what it awaits and its timeout."""
    on = command.on if command.verb is not Verb.WAIT else (command.name,)
    return {
        "verb": command.verb.value,
        "name": command.name,
        "on": list(on),
        "timeout": micros(command.timeout),
    }
