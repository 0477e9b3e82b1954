"""Acting on an instance: the audited operator commands, a signal a person sends among
them.

They go through the engine Client, so they are idempotent the way the engine makes
them: by their command id (a signal's is its signal id), which every form carries from
the moment it was drawn (posting it twice acts once). A command needs a reason and
records who gave it (a signal sent here too: ``Action.SIGNAL``); a command the state
no longer allows (someone acted first) is refused with the engine's reason. The watcher
is nudged so that pages following the instance show the change at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from engine import CommitUnknown
from engine.decide.operator_actions import Action
from engine.model.definitions import Mode, StepKind
from engine.model.errors import CommandConflict, DecisionRejected, EventInvalid
from engine.model.identifiers import code_problem, id_problem, local_instance_id, name_problem
from engine.model.inputs import json_or_text
from engine.model.instance import Instance
from engine.model.limits import MAX_PAYLOAD_BYTES
from studio.errors import Conflict, Invalid, NotFound, OutcomeUnknown
from studio.instances.action_offers import KINDS, RESOLUTIONS
from studio.instances.detail import replayed
from studio.instances.service import check_size, located, parse_json
from studio.reasons import operator_reason
from studio.runtime import Runtime


def new_id() -> str:
    """A fresh signal or command id (forms carry one so a repeat post acts once)."""
    return uuid.uuid4().hex


def signal_limit(state: Instance, name: str) -> int:
    """How many bytes a signal ``name``'s payload may weigh, if the instance takes it:
    a code-first run takes any signal into its inbox (a wait may ask for it later); a
    step list only a signal its definition names as a signal step."""
    spec = state.spec
    if spec is not None and spec.mode == Mode.CODE:
        return MAX_PAYLOAD_BYTES
    found = spec.step(name) if spec else None
    if found is None or found.kind is not StepKind.SIGNAL:
        raise NotFound(f"{name!r} is not a signal step of this instance")
    return found.input_limit


async def send_signal(
    runtime: Runtime, team: str, actor: str, instance_id: str, signal: CommandForm
) -> Instance:
    """Deliver ``signal`` (its ``step``, ``payload`` and ``reason``) as ``actor``, audited
    like any command: the signal id is its command id, so a repeat acts once."""
    reason = located("reason", operator_reason, signal.reason)
    _check_name(signal.step)
    _check_id("signal_id", signal.command_id)
    row, entry = await replayed(runtime.primary, team, instance_id)
    limit = signal_limit(entry.state, signal.step)
    payload = located("payload", _payload, signal.payload, limit, signal.step)
    return await _run(
        runtime, team, row.instance_id, Action.SIGNAL, actor, reason, signal.command_id,
        "the instance does not take this signal now", step=signal.step, payload=payload,
    )  # fmt: skip


def _check_name(step: str) -> None:
    """A step (a signal's name) that no definition can name, refused at ``step`` as sent,
    not by the event check after the instance was read."""
    if problem := name_problem(step):
        raise Invalid.at("step", f"the step {problem}")


def _check_id(field: str, command_id: str) -> None:
    """A command id (a signal's ``signal_id``) refused at the field that carried it, in
    the caller's name for it; empty is fine: ``_run`` makes one."""
    if command_id and (problem := id_problem(command_id)):
        raise Invalid.at(field, f"the {field} {problem}")


def _payload(text: str, limit: int, step: str) -> Any:
    """A signal's payload read from its JSON and held to the step's limit."""
    payload = parse_json(text, "payload")
    check_size(payload, limit, "payload", step)
    return payload


@dataclass(frozen=True)
class CommandForm:
    """An operator command as a form or the API sends it (a signal sent by a person too)."""

    action: str
    reason: str
    step: str = ""
    command_id: str = ""
    payload: str = ""
    """JSON: an approval's payload."""
    resolution: str = ""
    """succeeded, failed or absent: how an unknown activity outcome is settled."""
    result: str = ""
    """JSON: the result of an outcome settled as succeeded."""
    code: str = ""
    """A code for a compensation settled by hand."""
    evidence: str = ""
    """JSON or text: what shows the compensation settled."""


def parse_action(text: str) -> Action:
    try:
        action = Action(text)
    except ValueError:
        action = None
    if action not in KINDS:
        allowed = ", ".join(a.value for a in KINDS)
        raise Invalid(f"unknown action {text!r}; one of: {allowed}")
    return action


def effect_of(action: Action, form: CommandForm) -> dict[str, Any]:
    """The engine's effect arguments for ``action``, checked; a refusal is said at the
    field it concerns (``payload``, ``resolution``, ``result``, ``code``, ``evidence``),
    so the confirmation form shows it there and the API's problem names it."""
    effect: dict[str, Any] = {}
    if KINDS[action].needs_step:
        if not form.step:
            raise Invalid.at("step", f"{action.value} needs the step it acts on")
        _check_name(form.step)
        effect["step"] = form.step
    if action is Action.APPROVE:
        effect["payload"] = located("payload", parse_json, form.payload, "payload")
    elif action is Action.RESOLVE_ACTIVITY:
        if form.resolution not in RESOLUTIONS:
            raise Invalid.at("resolution", f"choose a resolution: {', '.join(RESOLUTIONS)}")
        effect["resolution"] = form.resolution
        result = located("result", parse_json, form.result, "result")
        if result is not None and form.resolution != "succeeded":
            raise Invalid.at("result", "only an outcome settled as succeeded carries a result")
        effect["result"] = result
    elif action is Action.RESOLVE_COMPENSATION:
        code = form.code.strip()
        if problem := code_problem(code):
            raise Invalid.at("code", f"the code {problem}")
        effect["code"] = code
        effect["evidence"] = located("evidence", json_or_text, form.evidence, "the evidence")
    return effect


def checked(action: Action, form: CommandForm) -> tuple[str, dict[str, Any]]:
    """``form``'s reason and effect, checked together: a form wrong in both (no reason,
    a payload that is not JSON) is refused once, each problem at its own field, rather
    than one now and the other after it is corrected."""
    problems: list[dict[str, str]] = []
    reason, effect = "", {}
    try:
        reason = located("reason", operator_reason, form.reason)
    except Invalid as wrong:
        problems += wrong.problems
    try:
        effect = effect_of(action, form)
    except Invalid as wrong:
        problems += wrong.problems or [{"path": "", "message": str(wrong)}]
    if problems:
        raise Invalid.of(problems)
    return reason, effect


async def command(
    runtime: Runtime, team: str, actor: str, instance_id: str, form: CommandForm
) -> Instance:
    """Run an audited operator command; refused (409) when the state does not allow it."""
    action = parse_action(form.action)
    reason, effect = checked(action, form)
    _check_id("command_id", form.command_id)
    row, _ = await replayed(runtime.primary, team, instance_id)  # the team owns it
    refusal = "the instance does not allow this now"
    return await _run(
        runtime, team, row.instance_id, action, actor, reason, form.command_id, refusal, **effect
    )


async def _run(
    runtime: Runtime,
    team: str,
    instance_id: str,
    action: Action,
    actor: str,
    reason: str,
    command_id: str,
    refusal: str,
    **effect: Any,
) -> Instance:
    """``Client.command`` (a new id unless the form carried one), its refusals in the
    studio's words: ``refusal`` before the engine's reason when the state does not allow
    it (409), a command id used otherwise (409), a value its events cannot carry (422),
    a lost commit answer naming the id to send again (503)."""
    command_id = command_id or new_id()
    try:
        state = await runtime.client.command(
            instance_id, action, actor, reason, command_id, **effect
        )
    except CommitUnknown:
        raise OutcomeUnknown(
            "the outcome is unknown (the answer to the commit was lost): send the same "
            f"command again with command id {command_id} to learn it"
        ) from None
    except DecisionRejected as refused:
        raise Conflict(f"{refusal}: {refused}") from None
    except CommandConflict as clash:  # said with the team's id, as the caller knows it
        shown = local_instance_id(team, instance_id)
        raise Conflict(str(clash).replace(f" on {instance_id}: ", f" on {shown}: ")) from None
    except (ValueError, EventInvalid) as bad:  # a value the command's events cannot carry
        raise Invalid(str(bad)) from None
    runtime.watcher.nudge()
    return state
