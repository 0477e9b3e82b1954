"""Audited operator commands, each one transition keyed by its command id.

The caller has already authenticated and authorised the actor; the engine records who
did what and why (``operator_command_recorded``) immediately followed by the effect.
Preconditions are the replay rules themselves: a command the instance's state does
not allow is rejected when its effect is applied to the draft.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from engine.decide.audit import audit_problem
from engine.decide.decisions import schedule_activity_retry, schedule_compensation
from engine.decide.operator_actions import EFFECTS, Action
from engine.model.canonical import canonical_json
from engine.model.definitions import DefinitionRef, Mode
from engine.model.errors import DecisionRejected, InputRefused
from engine.model.events import EventKind, json_data
from engine.model.identifiers import code_problem, id_problem
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.model.transitions import Draft
from engine.replay.lifecycle import LIFECYCLE_EDGES


def record_command(
    draft: Draft, command_id: str, action: Action, actor: str, reason: str, **effect: Any
) -> None:
    """Append the audit record and the effect of ``action`` to ``draft``: the event
    ``EFFECTS`` names, with the fields its builder takes from ``effect``.

    Checked first with ``check_command``, so a bad actor, reason, command id or effect
    field is InputRefused about the input (a ValueError too), not a failure of the event.
    """
    check_command(action, command_id, actor, reason, effect)
    record = {"action": action.value, "actor": actor, "reason": reason}
    draft.add(
        EventKind.OPERATOR_COMMAND_RECORDED, idempotency_key=command_id, data=canonical_json(record)
    )
    kind = EFFECTS[action].kind
    _refuse_if_not_now(draft, action, kind)
    build = _BUILDERS.get(action, _bare)
    build(draft, kind, command_id, **effect)


def check_command(
    action: object, command_id: str, actor: str, reason: str, effect: Mapping[str, Any]
) -> Action:
    """``action`` as an Action, once the command could be recorded at all: InputRefused
    for an action that is none (naming the actions), an audit record the event check
    would refuse (``engine.decide.audit``), a bad command id, or effect fields the
    action does not take or lacks (named, with the fields it takes), which would
    otherwise fail as a TypeError from its builder, or a code that is none
    (``code_problem``), which would fail as the event's check."""
    try:
        action = Action(action)
    except ValueError:
        known = ", ".join(member.value for member in Action)
        raise InputRefused(f"{action!r} is not an operator action: one of {known}") from None
    if problem := id_problem(command_id):
        raise InputRefused(f"command id {problem}")
    if problem := audit_problem({"action": action.value, "actor": actor, "reason": reason}):
        raise InputRefused(problem)
    taken, needed = _effect_fields(action)
    missing = [name for name in needed if name not in effect]
    unknown = sorted(set(effect) - taken)
    if missing or unknown:
        problem = (
            f"lacks {', '.join(missing)}" if missing else f"does not take {', '.join(unknown)}"
        )
        takes = ", ".join(sorted(taken)) or "no fields"
        raise InputRefused(f"{action.value} {problem}: it takes {takes}")
    if "code" in effect and (problem := code_problem(effect["code"])):
        raise InputRefused(f"the code {problem}")
    return action


@functools.cache
def _effect_fields(action: Action) -> tuple[frozenset[str], tuple[str, ...]]:
    """The effect fields ``action``'s builder takes, and those it needs: read from its
    signature once (every command and every preview's dry run is checked with them)."""
    fields = list(inspect.signature(_BUILDERS.get(action, _bare)).parameters.values())[3:]
    needed = tuple(f.name for f in fields if f.default is inspect.Parameter.empty)
    return frozenset(f.name for f in fields), needed


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
