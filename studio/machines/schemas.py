"""The JSON shapes of machine executions in the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from litestar.openapi.datastructures import ResponseSpec

StatusName = Literal["running", "waiting", "paused", "cancelling", "completed", "cancelled", "dead"]


@dataclass
class SubmitIn:
    parent: str
    """The id of the row the execution works on: one active execution per parent."""
    key: str
    """Idempotency key: the same key, parent, input and version again returns the
    execution (200); with any of them different it is a conflict (409)."""
    input: Any = None
    version: str | None = None
    """Pin a version; the latest active one by default."""


@dataclass
class ExecutionOut:
    id: str
    machine: str
    version: str
    created: bool
    """False when an identical submit had already made the execution."""
    status: StatusName


@dataclass
class StateOut:
    variant: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class StatusOut:
    status: StatusName


@dataclass
class CancelIn:
    reason: str
    command_id: str | None = None
    """Idempotency id of the cancel: the same id again changes nothing."""


RESUBMITTED = {
    200: ResponseSpec(
        data_container=ExecutionOut,
        description="An identical submit had already made the execution: nothing changed "
        "(``created`` is false).",
    )
}
"""The other success of submitting: 201 makes an execution, 200 finds it made."""
