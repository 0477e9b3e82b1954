"""Audited operator commands, each one transition keyed by its command id.

The caller has already authenticated and authorised the actor; the engine records who
did what and why (``operator_command_recorded``) immediately followed by the effect.
Preconditions are the replay rules themselves: a command the instance's state does
not allow is rejected when its effect is applied to the draft.
"""

from __future__ import annotations

from typing import Any

from engine.decide.audit import audit_problem
from engine.decide.decisions import schedule_activity_retry, schedule_compensation
from engine.decide.operator_actions import EFFECTS, Action
from engine.model.canonical import canonical_json
from engine.model.definitions import DefinitionRef, Mode
from engine.model.errors import DecisionRejected
from engine.model.events import EventKind, json_data
from engine.model.identifiers import require_id
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.transitions import Draft
from engine.replay.lifecycle import LIFECYCLE_EDGES


def record_command(
    draft: Draft, command_id: str, action: Action, actor: str, reason: str, **effect: Any
) -> None:
    """Append the audit record and the effect of ``action`` to ``draft``: the event
    ``EFFECTS`` names, with the fields its builder takes from ``effect``.

    The record is checked by the same rule as the event check (``engine.decide.audit``), first,
    so a bad actor or reason is a ValueError about the input, like a bad command id.
    """
    require_id(command_id, "command id")
    record = {"action": action.value, "actor": actor, "reason": reason}
    if problem := audit_problem(record):
        raise ValueError(problem)
    draft.add(
        EventKind.OPERATOR_COMMAND_RECORDED, idempotency_key=command_id, data=canonical_json(record)
    )
    kind = EFFECTS[action].kind
    _refuse_if_not_now(draft, action, kind)
    build = _BUILDERS.get(action, _bare)
    build(draft, kind, command_id, **effect)


def _refuse_if_not_now(draft: Draft, action: Action, kind: EventKind) -> None:
    """A lifecycle action the instance's status does not allow, refused in words a
    person knows before any event is made (the replay rule names events:
    ``cancellation_requested is not allowed while completed``)."""
    edge = LIFECYCLE_EDGES.get(kind)
    state = draft.state
    if edge is None or state is None or state.status in edge[0]:
        return
    spec = state.spec
    noun = "execution" if spec is not None and spec.mode == Mode.MACHINE else "instance"
    if action is Action.CANCEL and state.status is InstanceStatus.CANCELLING:
        raise DecisionRejected(f"the {noun} is already being cancelled; nothing was done")
    allowed = " or ".join(sorted(s.label for s in edge[0]))
    raise DecisionRejected(
        f"the {noun} is {state.status.label}: {action.value} applies to a {allowed} {noun} "
        "only; nothing was done"
    )


def _bare(draft: Draft, kind: EventKind, command_id: str) -> None:
    """A lifecycle effect (pause, resume, cancel, terminate): the event alone."""
    draft.add(kind)


def _retry_activity(draft: Draft, kind: EventKind, command_id: str, step: str) -> None:
    """The engine's own retry decision (it adds ``kind``), due now."""
    progress = _activity(draft, step)
    schedule_activity_retry(
        draft, progress, same_key=progress.status is AttemptStatus.UNKNOWN, operator=True
    )


def _compensate(draft: Draft, kind: EventKind, command_id: str, step: str) -> None:
    """The engine's own compensation decision (it adds ``kind``). A step that declares
    no compensation is refused here, in words: the decision needs the compensation's
    timeout before the replay rule that would say so ever sees the event."""
    assert draft.state is not None
    declared = draft.state.step(step)
    if declared is None or declared.compensation is None:
        raise DecisionRejected(
            f"activity {step!r} declares no compensation, so there is nothing to run; "
            "nothing was done"
        )
    schedule_compensation(draft, step)


def _resolve_compensation(
    draft: Draft, kind: EventKind, command_id: str, step: str, code: str, evidence: Any = None
) -> None:
    draft.add(kind, step=step, code=code, data=json_data(evidence))


def _deliver(
    draft: Draft, kind: EventKind, command_id: str, step: str, payload: Any = None
) -> None:
    """An approval, or a signal a person sends (the studio's send form): the signal's
    event, keyed by the command id, so the audit record names who sent it and why."""
    draft.add(kind, step=step, idempotency_key=command_id, data=json_data(payload))


def _resolve_activity(
    draft: Draft, kind: EventKind, command_id: str, step: str, resolution: str, result: Any = None
) -> None:
    """Settle an unknown outcome as ``succeeded`` (with result), ``failed`` or ``absent``."""
    progress = _activity(draft, step)
    if progress.status is not AttemptStatus.UNKNOWN:
        raise DecisionRejected(
            f"activity {step!r} is {progress.status.label}: only an outcome in doubt "
            "(unknown) is resolved by hand; nothing was done"
        )
    draft.add(
        kind,
        step=step,
        attempt=progress.attempt,
        code=resolution,
        data=json_data(result),
    )


def _migrate(
    draft: Draft, kind: EventKind, command_id: str, target: DefinitionRef, input: Any = None
) -> None:
    """Move a paused instance along a registered edge; ``input`` is the migrated state.

    The caller computes ``input`` with the edge's apply function before building the
    transition; replay only checks the edge exists and never calls it.
    """
    draft.add(kind, definition=target, data=json_data(input))


def _activity(draft: Draft, step: str):
    assert draft.state is not None
    progress = draft.state.activities.get(step)
    if progress is None:
        raise DecisionRejected(f"activity {step!r} has not been scheduled")
    return progress


_BUILDERS = {
    Action.RETRY_ACTIVITY: _retry_activity,
    Action.COMPENSATE: _compensate,
    Action.RESOLVE_COMPENSATION: _resolve_compensation,
    Action.APPROVE: _deliver,
    Action.SIGNAL: _deliver,
    Action.RESOLVE_ACTIVITY: _resolve_activity,
    Action.MIGRATE: _migrate,
}
"""How an action's arguments become its effect's fields; an action without arguments
is ``_bare``. Which event it is comes from ``EFFECTS`` alone."""
