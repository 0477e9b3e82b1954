"""Bulk operator actions: preview an action on many instances, then take it once.

A bulk is an operator action (``engine.decide.bulk_actions.BULK_ACTIONS``) on a chosen
list of at most MAX_BULK_INSTANCES instances. Its preview judges every instance from its
replayed state (``engine.decide.previews``). Acting records the bulk under the caller's
bulk id (``engine.store.bulk_commands``), then gives each instance its own audited
operator command, whose id is derived from the bulk id and the instance, judged again
on the state it commits against: an instance that moved since the preview is judged
afresh, and one the action no longer fits records nothing and is reported unchanged or
refused with the reason. Each instance's result is kept with the bulk. Taking the same
bulk again acts on no instance twice: the derived command ids are already in their
audit trails, and the kept results are answered.

A migration is the one bulk action that is several commands per instance (pause if it
runs, migrate, resume): it goes through ``Client.migrate`` itself, under the derived
command id, which judges the instance again on the state it migrates. A code run's
journal is replayed against the target version's code, so a migration of code runs
needs that code: the ``CodeWorkflow``s given to ``BulkCommands`` (the command line's
``--app``), one of the run's name and the target version, are used both by the preview
and when acting; without one the judge refuses the run (its code is not loaded here).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.api.client import Client
from engine.decide.bulk_actions import bulk_request, judge
from engine.decide.operator_actions import Action
from engine.decide.previews import ActionRequest, Preview, Verdict
from engine.model.canonical import digest
from engine.model.compatibility import IncompatibleInstances
from engine.model.errors import DecisionRejected, DefinitionNotFound, InputRefused
from engine.model.identifiers import require_id
from engine.model.inputs import check_team
from engine.model.limits import MAX_BULK_INSTANCES
from engine.modes.code.declaration import CodeWorkflow
from engine.store import bulk_commands as kept
from engine.store.bulk_commands import BulkCommand, BulkConflict, BulkResult
from engine.store.errors import SequenceConflict

__all__ = ["BulkCommand", "BulkCommands", "BulkConflict", "BulkOutcome", "BulkResult"]


@dataclass(frozen=True)
class BulkOutcome:
    """A bulk as recorded and its results, one per instance so far."""

    bulk: BulkCommand
    results: tuple[BulkResult, ...]
    replayed: bool = False
    """True when this call acted on no instance: the bulk had been taken before."""


def check_selection(instance_ids: Sequence[str], limit: int = MAX_BULK_INSTANCES) -> list[str]:
    """The selection without repeats; ValueError past ``limit`` (a bulk's, or a
    smaller one a caller keeps, such as a version page's migration) or when empty."""
    chosen = list(dict.fromkeys(instance_ids))
    if not chosen:
        raise ValueError("choose at least one instance")
    if len(chosen) > limit:
        raise ValueError(
            f"{len(chosen)} instances chosen; at most {limit} per request "
            "(narrow the selection, or act in parts)"
        )
    return chosen


def command_id(bulk_id: str, instance_id: str) -> str:
    """The audited command a bulk records on one instance: the bulk id, then a digest
    of the instance id (any instance id fits; the audit trail shows the bulk id)."""
    return f"{bulk_id}.{digest(instance_id)[:16]}"


class BulkCommands:
    """Preview and take bulk operator actions through one ``Client``."""

    def __init__(self, client: Client, code: Iterable[CodeWorkflow] = ()) -> None:
        self.client = client
        self.code = {(flow.name, flow.version): flow for flow in code}
        """The code workflows a migration of code runs replays journals against."""

    def code_for(self, name: str, request: ActionRequest) -> CodeWorkflow | None:
        """The code a migration of an instance of ``name`` is judged with: the given
        workflow of that name at the target version (the judge checks it is the
        published code); None for another action, or when none was given."""
        if request.action is not Action.MIGRATE:
            return None
        return self.code.get((name, request.effect["version"]))

    async def preview(self, instance_ids: Sequence[str], request: ActionRequest) -> list[Preview]:
        """Each instance's preview of ``request`` (from ``bulk_request``), in order."""
        chosen = check_selection(instance_ids)
        now = self.client.store.now()
        registry = await self.client.registries.refresh()  # edges declared elsewhere too
        found = []
        for instance_id in chosen:
            state = await self.client.cache.load(instance_id)
            code = self.code_for(state.definition.name, request)
            found.append(judge(state, registry, max(now, state.updated_at), request, code))
        return found

    async def act(self, bulk: BulkCommand) -> BulkOutcome:
        """Take ``bulk`` once (see the module); BulkConflict when its id was used for
        another bulk (action, selection, actor or reason), ValueError for a request no
        instance could take."""
        require_id(bulk.bulk_id, "bulk id")
        check_team(bulk.tenant_id)
        check_selection(bulk.instance_ids)
        request = bulk_request(bulk.action, bulk.step, bulk.arguments)
        store = self.client.store
        stored = await kept.record_bulk(store, bulk)
        found = await kept.find_bulk(store, bulk.bulk_id)
        done = {r.instance_id for r in found[1]} if found else set()
        pending = [i for i in stored.instance_ids if i not in done]
        for instance_id in pending:
            result = await self._act_on(stored, request, instance_id)
            await kept.record_result(store, stored.bulk_id, result)
        found = await kept.find_bulk(store, bulk.bulk_id)
        assert found is not None
        return BulkOutcome(found[0], tuple(found[1]), replayed=not pending)

    async def _act_on(
        self, bulk: BulkCommand, request: ActionRequest, instance_id: str
    ) -> BulkResult:
        command = command_id(bulk.bulk_id, instance_id)
        if request.action is Action.MIGRATE:
            return await self._migrate(bulk, request, instance_id, command)
        try:
            verdict, state = await self.client.judged_command(
                instance_id,
                lambda s, registry, now: judge(s, registry, now, request),
                bulk.actor,
                bulk.reason,
                command,
            )
        except (DecisionRejected, SequenceConflict) as refused:
            state = await self.client.cache.load(instance_id)
            return BulkResult(instance_id, "refused", str(refused), "", state.status, state.status)
        if verdict is None:
            detail = "recorded earlier under this bulk command"
            return BulkResult(instance_id, "done", detail, command, state.status, state.status)
        if verdict.verdict is Verdict.APPLIES:
            detail = f"recorded {', '.join(verdict.records)}"
            return BulkResult(instance_id, "done", detail, command, verdict.status, state.status)
        return BulkResult(
            instance_id, verdict.verdict.value, verdict.reason, "", verdict.status, state.status
        )

    async def _migrate(
        self, bulk: BulkCommand, request: ActionRequest, instance_id: str, command: str
    ) -> BulkResult:
        """Migrate one instance through ``Client.migrate`` (see the module)."""
        version = request.effect["version"]
        before = await self.client.inspect(instance_id)
        if any(a.command_id == f"{command}.migrate" for a in before.audit):
            detail = "migrated earlier under this bulk command"
            return BulkResult(instance_id, "done", detail, command, before.status, before.status)
        if before.definition.version == version:
            detail = f"it already runs {before.definition}"
            return BulkResult(instance_id, "unchanged", detail, "", before.status, before.status)
        try:
            after = await self.client.migrate(
                instance_id,
                version,
                bulk.actor,
                bulk.reason,
                code=self.code_for(before.definition.name, request),
                command_id=command,
            )
        except MIGRATION_REFUSALS as refused:
            state = await self.client.inspect(instance_id)
            why = refused.reason if isinstance(refused, IncompatibleInstances) else str(refused)
            return BulkResult(instance_id, "refused", why, "", before.status, state.status)
        detail = f"migrated from {before.definition} to {after.definition}"
        return BulkResult(instance_id, "done", detail, command, before.status, after.status)


MIGRATION_REFUSALS = (
    IncompatibleInstances,
    DecisionRejected,
    DefinitionNotFound,
    InputRefused,
    SequenceConflict,
)
"""Why ``Client.migrate`` leaves an instance where it was: incompatible now, no edge,
no such version, a reason too long to name the versions too, or it kept changing."""
