"""The host operations of state machines: submit, state, status and cancel (seed 000).

``Executions`` is what the command line, the studio and applications call; it builds
on ``Client``, so a submit is a start and a cancel the audited operator cancel.

- ``submit`` starts an execution whose id the caller's team, actor and idempotency key
  derive (``start_data.execution_id``): the identical submit again returns the
  existing execution (``created`` False), even after it advanced or ended; the same
  key with another input, parent, version or scope is a SubmitConflict saying which.
  Only one execution of a machine per parent is active at a time, which PostgreSQL
  enforces (ActiveExecutionExists names the active one).
- ``state``, ``status`` and ``cancel`` are for the submitter only: possessing an id
  grants nothing. Another team's execution is ExecutionNotFound, as one that does not
  exist; another actor of the team is refused (AccessRefused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.definitions import Definition, Mode
from engine.model.errors import FieldRefused, InputRefused, ReplayRejected, WaylineError
from engine.model.events import json_data
from engine.model.inputs import check_team, check_text
from engine.model.instance import Instance
from engine.model.words import with_article
from engine.modes.machines.declaration import Machine
from engine.modes.machines.manifest import MachineManifest
from engine.modes.machines.standing import StateValue, as_variant, state_value, status_of
from engine.modes.machines.start_data import StartData, execution_id, key_digest
from engine.modes.machines.states import MachineState
from engine.store import reads
from engine.store.errors import InstanceNotFound
from engine.store.principals import COVERS, Standing, principal_standing

MAX_KEY_CHARACTERS = 200
"""An idempotency key is the caller's text; its digest, never the key, is stored."""


def submit_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a submit's idempotency key, or None when it can: one rule,
    which ``submit`` refuses with and the command line checks before it connects."""
    if not key.strip():
        return "must be non-empty text"
    if len(key) > MAX_KEY_CHARACTERS:
        return f"has at most {MAX_KEY_CHARACTERS} characters"
    return None


class SubmitConflict(WaylineError):
    """The key was used before with another input, parent, version or scope."""


class ExecutionNotFound(WaylineError):
    """No execution of that id in the caller's team (another team's looks the same)."""


class AccessRefused(WaylineError):
    """The caller is not the actor who submitted the execution, or may not submit."""


@dataclass(frozen=True)
class Submitted:
    """A submit's answer: the execution, and whether this submit created it."""

    execution_id: str
    created: bool
    instance: Instance


class Executions:
    """The host operations on one client's store."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def submit(
        self,
        machine: str,
        *,
        parent: str,
        input: Any,
        key: str,
        actor: str,
        team: str,
        scope: str,
        version: str | None = None,
    ) -> Submitted:
        """Submit an execution of ``machine`` (its latest active version unless pinned).

        ``scope`` is what the caller may do at submit (their role or their token's); the
        worker re-checks it before every advance. InputRefused for a bad argument.
        """
        _require_texts(key=key, actor=actor, scope=scope)
        check_team(team)
        if scope not in COVERS:  # no role covers it: every advance would be refused
            raise InputRefused(f"the scope is a role: one of {', '.join(COVERS)}")
        if problem := submit_key_problem(key):
            raise FieldRefused("key", f"the key {problem}")
        definition = await self.client.startable(machine, version)
        if definition.mode != Mode.MACHINE:
            kind = with_article(definition.mode)
            raise InputRefused(f"{machine} is {kind} definition, not a machine")
        wanted = StartData(input, parent, actor, team, scope, key_digest(key))
        instance_id = execution_id(machine, team, actor, key)
        state, created = await self.client.start_once(
            definition, instance_id, wanted.document(), team, started_by=actor
        )
        if not created and (differs := _differences(state, definition, wanted)):
            raise SubmitConflict(
                f"key {key} was already used with another {_listed(differs)} "
                f"(execution {instance_id})"
            )
        return Submitted(instance_id, created, state)

    async def require_standing(self, actor: str, team: str, scope: str) -> None:
        """Refuse (AccessRefused) a submit for a team ``actor`` does not stand in with
        ``scope``: every advance re-checks the submitter, so ``submit`` would accept it
        only for the execution to end ``dead-authorization`` before its first step. The
        command line's submit and ``wayline demo --machine`` call it before they write."""
        if team == "" or scope not in COVERS:  # the engine's own team, or submit's refusal
            return
        standing = await principal_standing(self.client.store, actor, team, scope)
        if standing is Standing.GONE:
            raise AccessRefused(f"{actor} is not a member of team {team}: only a member may submit")
        if standing is Standing.NARROWED:
            raise AccessRefused(f"{actor}'s role in team {team} does not cover the scope {scope}")

    async def state(
        self,
        execution: str,
        actor: str,
        team: str,
        family: type[MachineState] | Machine | None = None,
        *,
        machine: str = "",
    ) -> StateValue | MachineState:
        """The execution's current state: a StateValue, or given the machine's Python
        declaration (``Machine`` or its state family), an instance of the variant.
        ``machine``, when given, is the name the caller expects the execution to run."""
        value = state_value(await self.owned(execution, actor, team, machine))
        if isinstance(family, Machine):
            family = family.family
        return value if family is None else as_variant(value, family)

    async def status(self, execution: str, actor: str, team: str, *, machine: str = "") -> str:
        """One of running, waiting, paused, cancelling, completed, cancelled, dead."""
        state = await self.owned(execution, actor, team, machine)
        return status_of(state, self.client.store.now())

    async def cancel(
        self,
        execution: str,
        actor: str,
        team: str,
        reason: str,
        command_id: str | None = None,
        *,
        machine: str = "",
    ) -> str:
        """Cancel the execution through the audited operator cancel; its status after.

        ``command_id`` makes a repeat a no-op (the default: a new command each time)."""
        await self.owned(execution, actor, team, machine)
        state = await self.client.command(execution, Action.CANCEL, actor, reason, command_id)
        return status_of(state, self.client.store.now())

    async def owned(self, execution: str, actor: str, team: str, machine: str = "") -> Instance:
        """The replayed execution (of ``machine`` when given), when ``actor`` of ``team``
        submitted it."""
        _require_texts(execution=execution, actor=actor)
        check_team(team)
        try:
            row = await reads.get_instance(self.client.store, execution)
        except InstanceNotFound:
            row = None
        if row is None or row.tenant_id != team:
            raise ExecutionNotFound(f"no execution {execution} in this team")
        try:
            state = await self.client.inspect(execution)
        except ReplayRejected:  # a version published since this client read the catalog
            await self.client.registries.refresh()
            state = await self.client.inspect(execution)
        if state.spec is None or not isinstance(state.spec.manifest, MachineManifest):
            raise ExecutionNotFound(f"{execution} is not an execution of a machine")
        if machine and state.definition.name != machine:
            raise ExecutionNotFound(f"{execution} is not an execution of {machine}")
        data = _start_data(state)
        if data is None or (data.owner, data.team) != (actor, team):
            raise AccessRefused(
                f"{actor} may not see or cancel {execution}: only the actor who submitted it may"
            )
        return state


def _require_texts(**texts: str) -> None:
    for name, text in texts.items():
        if not isinstance(text, str) or not text.strip():
            raise FieldRefused(name, f"the {name} must be non-empty text")
        try:
            check_text(text, f"the {name}")
        except InputRefused as refused:
            raise FieldRefused(name, str(refused)) from None


def _start_data(state: Instance) -> StartData | None:
    """What the execution started with, when a submit started it (an owner is set)."""
    value = state.value("input")
    if not isinstance(value, dict) or not value.get("owner"):
        return None
    return StartData(**value)


def _differences(existing: Instance, definition: Definition, wanted: StartData) -> list[str]:
    """What of ``wanted`` differs from the existing execution's start, by name."""
    had = _start_data(existing)
    if had is None or (had.owner, had.team) != (wanted.owner, wanted.team):
        return ["owner"]
    differs = []
    if json_data(had.input) != json_data(wanted.input):
        differs.append("input")
    if had.parent != wanted.parent:
        differs.append("parent")
    if existing.definition != definition.ref:
        differs.append("version")
    if had.scope != wanted.scope:
        differs.append("scope")
    return differs


def _listed(names: list[str]) -> str:
    """``input``, ``input and parent``, ``input, parent and scope``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
