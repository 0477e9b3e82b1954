"""The client API: what applications, the CLI and the studio call.

Every mutation is one transition built from the replayed instance plus the decision
that follows it, committed atomically. Optimistic conflicts (another transition moved
the instance first) are retried on the reloaded instance a bounded number of times.

Idempotency, as a caller sees it:
- ``start`` with the same instance id, definition and input returns the existing
  instance (even after it advanced); anything different is StartConflict.
- ``signal`` is deduplicated by signal id: a repeat with the same payload is success,
  another payload is SignalConflict. Never accepted while cancelling or after the end.
- operator commands are deduplicated by command id (found in the audit trail).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from engine import modes
from engine.api import waits
from engine.api.waits import EndListener
from engine.decide import decisions, lifecycle
from engine.decide.audit import actor_problem, reason_problem
from engine.decide.child_outcomes import parent_transitions
from engine.decide.compatibility import judge as judge_move
from engine.decide.migrations import (
    migration_reason,
    migration_target,
    record_migration,
    version_of,
)
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import check_command, record_command
from engine.decide.previews import Preview, standing
from engine.model.canonical import format_instant
from engine.model.compatibility import CompatibilityReport, IncompatibleInstances, Verdict
from engine.model.definitions import Definition, Mode, StepKind
from engine.model.errors import (
    CommandConflict,
    DecisionRejected,
    DefinitionNotFound,
    FieldRefused,
    InputRefused,
    LimitExceeded,
    ReplayRejected,
    SignalConflict,
    WaylineError,
)
from engine.model.events import json_data
from engine.model.holds import HoldScope, ReleaseMode, check_scope, release_amount
from engine.model.identifiers import name_problem, signal_id_problem
from engine.model.inputs import check_size, check_team, check_text, check_value
from engine.model.instance import Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft
from engine.model.words import with_article
from engine.modes import Outcome, decide
from engine.modes.code import runs
from engine.modes.code import signals as code_signals
from engine.modes.machines.manifest import MachineManifest
from engine.store import catalog, compatibility, dead_letters, holds, reads
from engine.store.dead_letters import Resolution, ResolutionResult
from engine.store.errors import (
    DuplicateTransition,
    InstanceExists,
    InstanceNotFound,
    SequenceConflict,
    StartVersionMoved,
)
from engine.store.store import Store
from engine.worker.faults import Boundary, Faults
from engine.worker.instance_cache import InstanceCache, RegistrySource
from engine.worker.tracing import Tracing, started_ns

MAX_CONFLICT_RETRIES = 20
"""Reload-and-retry rounds after optimistic conflicts before giving up with an error."""


class StartConflict(WaylineError):
    """An instance with this id exists with another definition or input."""


class Client:
    """Start, signal, command and read instances on one store."""

    def __init__(
        self,
        store: Store,
        registries: RegistrySource | None = None,
        faults: Faults | None = None,
        tracer_provider: Any = None,
    ) -> None:
        self.store = store
        self.registries = registries or RegistrySource(store)
        self.cache = InstanceCache(store, self.registries)
        self.faults = faults or Faults()
        self.tracing = Tracing.of(provider=tracer_provider)
        """Where its spans go (starts, signals, commands: to ``tracer_provider``, the
        process's OpenTelemetry one unless given); None when traces are off."""
        self._ends = EndListener(store)
        """The LISTEN connection this client's ``wait`` calls share while any waits."""
        self._latest: dict[str, Definition] = {}
        """Per definition name, the version this client last read as the latest active
        one: its next unpinned start is written on it without reading the catalog
        again, and only while it still is the latest (``Transition.latest_only``)."""

    async def publish(
        self,
        definition: Definition,
        actor: str = "",
        team: str = "",
        *,
        require_compatible: bool = False,
        code: Any = None,
    ) -> bool:
        """Publish a version (True when new); refreshes this client's registry.

        ``definition`` is a Definition (``load_definition``, or a code workflow's
        ``flow.definition`` with ``code=flow``); anything else is InputRefused.

        ``team`` owns the name from its first version on: DefinitionConflict when
        another team holds it, ChildDefinitionNotFound for a pinned child the team
        has not published. The running instances of the name's other versions are
        judged first (``check_compatibility``) and the report is stored with a new
        version; with ``require_compatible`` an incompatible instance (or more running
        than can be judged) refuses the publish with IncompatibleInstances, naming them.
        """
        if not isinstance(definition, Definition):
            raise InputRefused(
                f"publish takes a Definition, not {type(definition).__name__}: read a JSON "
                "file with load_definition(path); a code workflow is published as "
                "publish(flow.definition, code=flow) for each flow in app.workflows"
            )
        report = await self.check_compatibility(definition, code)
        if require_compatible and not report.acceptable:
            raise IncompatibleInstances(report.refusal(), report=report)
        created = await catalog.publish(self.store, definition, actor, team, report)
        await self.registries.refresh()
        return created

    async def check_compatibility(
        self, definition: Definition, code: Any = None
    ) -> CompatibilityReport:
        """Could each running or paused instance of another version of the name move to
        ``definition`` where it stands? One verdict each (nothing is written). ``code``
        is the new version's code where its mode runs code (a ``CodeWorkflow``)."""
        registry = await self.registries.refresh()
        return await compatibility.judge_running(self.store, registry, definition, code)

    async def deprecate(self, name: str, version: str, actor: str = "") -> None:
        """Refuse new instances of a version; running ones keep it. ``actor`` is kept
        with the version as who deprecated it, as ``publish`` keeps who published it."""
        await catalog.deprecate(self.store, name, version, actor)

    async def resolve_dead_letter(self, command: Resolution) -> ResolutionResult:
        """Retry or discard a dead letter once, audited; ``command`` comes from
        ``make_resolution``, which has checked every field.

        An exact repeat of a committed command answers ``replayed``; ResolutionConflict
        or StaleLease when another command or a reclaim got there first.
        """
        return await dead_letters.resolve(self.store, command)

    async def place_hold(self, scope: HoldScope, actor: str, reason: str) -> holds.Hold:
        """Hold ``scope`` (a name, a version or a team) for an incident: workers stop
        claiming its work (attempts already leased finish and record), new starts are
        accepted and parked, timers due meanwhile fire after it. Audited: who and why."""
        check_scope(scope)
        check_team(scope.team)
        if problem := actor_problem(actor) or reason_problem(reason):
            raise InputRefused(problem)
        if scope.name:
            await self._require_published(scope)
        return await holds.place(self.store, scope, actor, reason.strip())

    async def _require_published(self, scope: HoldScope) -> None:
        """DefinitionNotFound unless the team has published ``scope``'s name (and
        version): a hold on a mistyped name would hold nothing and say nothing."""
        published = {
            (v.definition.name, v.definition.version)
            for v in await catalog.versions(self.store, scope.team)
        }
        if scope.version and (scope.name, scope.version) not in published:
            raise DefinitionNotFound(f"{scope.name}@{scope.version} is not published in this team")
        if not any(name == scope.name for name, _ in published):
            raise DefinitionNotFound(f"no version of {scope.name} is published in this team")

    async def release_hold(
        self,
        team: str,
        hold_id: str,
        actor: str,
        reason: str,
        *,
        count: int | None = None,
        rate: float | None = None,
    ) -> tuple[holds.Hold, int]:
        """Release the team's hold: all of it, ``count`` instances (the longest-waiting
        first; the hold stays), or ``rate`` instances per second until none is left
        (then it ends). The hold as it is now and how many work items became due.
        HoldNotFound, HoldReleased; InputRefused for a bad amount, actor or reason."""
        check_team(team)
        _check_texts(hold_id=hold_id)
        if not hold_id.strip():
            said = "the hold's id is empty: give one that wayline hold list or the Holds page shows"
            raise FieldRefused("hold_id", said)
        if count is not None and rate is not None:
            raise InputRefused("release by a count or by a rate, not both")
        mode = ReleaseMode.COUNT if count is not None else ReleaseMode.ALL
        mode = ReleaseMode.RATE if rate is not None else mode
        amount = release_amount(mode, count if rate is None else rate)
        if problem := actor_problem(actor) or reason_problem(reason):
            raise InputRefused(problem)
        return await holds.release(self.store, team, hold_id, mode, amount, actor, reason.strip())

    async def start(
        self,
        name: str,
        instance_id: str,
        input: Any = None,
        version: str | None = None,
        tenant: str = "",
        started_by: str = "",
    ) -> Instance:
        """Start an instance of ``name`` (latest active version unless pinned).

        ``tenant`` is the owning team: lists filter by it and claims are fair across it.
        An input larger than the smallest ``input_limit`` of the version's activities is
        refused (LimitExceeded) rather than written as an instance that fails at once.
        ``started_by`` is who starts it, an actor as audit records name one (kept on its
        ``instance_started``: ``Event.started_by``); '' records nobody.
        """
        state, _ = await self.start_or_join(name, instance_id, input, version, tenant, started_by)
        return state

    async def start_or_join(
        self,
        name: str,
        instance_id: str,
        input: Any = None,
        version: str | None = None,
        tenant: str = "",
        started_by: str = "",
    ) -> tuple[Instance, bool]:
        """``start``, and whether this call started it: False when the instance existed
        already with the same input, of ``name`` at ``version`` when one is pinned and
        at any version otherwise (a retried start joins it, also once its version was
        deprecated or a newer one published: who started it is who first did)."""
        _check_texts(name=name, instance_id=instance_id, version=version or "")
        check_team(tenant)
        _check_starter(started_by)
        definition = self._latest.get(name) if version is None else None
        started = None
        if definition is not None:
            # Nothing written when the version moved, or when the input is too large for
            # it (a newer version may take it): read which version is latest, then start.
            with contextlib.suppress(StartVersionMoved, LimitExceeded):
                started = await self.start_once(
                    definition, instance_id, input, tenant, True, started_by
                )
        if started is None:
            try:
                definition = await self.startable(name, version)
            except DefinitionNotFound:  # deprecated, or no active version: a retry joins
                if (joined := await self._started_as(instance_id, name, version, input)) is None:
                    raise
                return joined, False
            if version is None:
                self._latest[name] = definition
            started = await self.start_once(
                definition, instance_id, input, tenant, started_by=started_by
            )
        state, created = started
        if not created and not _started_by(state, name, version, input):
            raise StartConflict(
                f"instance {instance_id} already exists with another definition or input"
            )
        return state, created

    async def _started_as(
        self, instance_id: str, name: str, version: str | None, input: Any
    ) -> Instance | None:
        """The instance ``instance_id`` if a start of ``name`` (at ``version``) with
        ``input`` made it, else None."""
        try:
            state = await self.inspect(instance_id)
        except InstanceNotFound:
            return None
        return state if _started_by(state, name, version, input) else None

    async def start_run(
        self,
        name: str,
        input: Any = None,
        *,
        id: str,
        version: str | None = None,
        tenant: str = "",
        started_by: str = "",
    ) -> tuple[str, bool]:
        """Start run ``id`` of code-first workflow ``name`` (its latest active version
        unless ``version`` pins one):
        the run's id, ``<name>/<id>``, and whether this call started it (seed 001: the id
        is the run's identity, so a retried start joins the run, whatever its input).
        InputRefused with the seed's text for an id that is empty or holds ``/``."""
        _check_texts(name=name, id=id if isinstance(id, str) else "")
        check_team(tenant)
        _check_starter(started_by)
        instance_id = runs.run_id(name, id)
        try:
            definition = await self.startable(name, version)
        except DefinitionNotFound:  # deprecated, or no active version: a retry joins
            if await self._started_as(instance_id, name, version, ANY_INPUT) is None:
                raise
            return instance_id, False
        if definition.mode != Mode.CODE:
            kind = with_article(definition.mode)
            raise InputRefused(f"{definition.ref} is {kind} definition: use start")
        state, created = await self.start_once(
            definition, instance_id, input, tenant, started_by=started_by
        )
        return state.instance_id, created

    async def wait(self, instance_id: str, timeout: timedelta) -> Instance:
        """The replayed instance once it has ended (completed, failed, cancelled,
        terminated or continued as new), at once when it already has.

        Woken by the end's own notification (``engine.store.channels``), not by polling;
        concurrent waits of this client share one listening connection, borrowed from
        the store's pool only while one waits (``waits.EndListener``). WaitTimedOut
        when ``timeout`` passes first; InputRefused for a timeout that is not more than
        0 and at most MAX_WAIT_TIMEOUT (one day); InstanceNotFound for an id that names
        no instance."""
        _check_texts(instance_id=instance_id)
        waits.check_timeout(timeout)
        return await waits.until_ended(self._ends, self.inspect, instance_id, timeout)

    @property
    def listening(self) -> bool:
        """Whether this client holds a pooled connection listening for instance ends:
        only while a ``wait`` runs."""
        return self._ends.open

    async def status(self, instance_id: str) -> dict[str, Any]:
        """``{kind, seq, at}`` of the newest event of an instance (seed 001's
        ``run:status()``): what happened last, its position and when."""
        _check_texts(instance_id=instance_id)
        row = await reads.get_instance(self.store, instance_id)
        page = await reads.history_page(self.store, instance_id, after=row.sequence - 1, limit=1)
        (event,) = page.events
        at = format_instant(event.occurred_at)
        return {"kind": event.kind.label, "seq": event.sequence, "at": at}

    async def startable(self, name: str, version: str | None = None) -> Definition:
        """The version of ``name`` a start gets: the latest active one unless pinned."""
        ref = await catalog.resolve_for_start(self.store, name, version)
        registry = await self.registries.get()
        definition = registry.get(ref.name, ref.version)
        if definition is None or definition.ref != ref:
            registry = await self.registries.refresh()
            definition = registry.get(ref.name, ref.version)
        if definition is None or definition.ref != ref:  # versions are immutable: never
            raise DefinitionNotFound(f"{ref} is not published")
        return definition

    async def start_once(
        self,
        definition: Definition,
        instance_id: str,
        input: Any,
        tenant: str = "",
        latest_only: bool = False,
        started_by: str = "",
    ) -> tuple[Instance, bool]:
        """Start ``instance_id`` on ``definition`` unless it exists: the instance, and
        whether this call created it (an existing one is returned as it is, whatever it
        started with and whoever started it: the caller compares). ``started_by``: who
        starts it (see ``start``). ActiveExecutionExists when another active
        instance holds the start's key (a machine's parent). ``latest_only``: written
        only while ``definition`` is its name's latest active version (StartVersionMoved
        otherwise, with nothing written). A code workflow's ``instance_id`` must be a
        run's, ``<name>/<id>`` (``runs.check_run_instance``), as ``start_run`` makes it."""
        if definition.mode == Mode.CODE:
            runs.check_run_instance(definition.name, instance_id)
        check_value(input, "the input")
        lifecycle.check_start_input(definition, input)
        _check_starter(started_by)
        if self.tracing is None:
            return await self._start(
                definition, instance_id, input, tenant, "", latest_only, started_by
            )
        ref = definition.ref
        with self.tracing.start(ref.name, ref.version, instance_id) as trace_context:
            return await self._start(
                definition, instance_id, input, tenant, trace_context, latest_only, started_by
            )

    async def _start(
        self,
        definition: Definition,
        instance_id: str,
        input: Any,
        tenant: str,
        trace_context: str,
        latest_only: bool,
        started_by: str = "",
    ) -> tuple[Instance, bool]:
        registry = await self.registries.get()
        now = self.store.now()
        draft = lifecycle.start_draft(
            registry,
            definition,
            instance_id,
            now,
            input,
            trace_context=trace_context,
            started_by=started_by,
        )
        decide(draft)
        transition = draft.build("start")
        if latest_only:
            transition = replace(transition, latest_only=True)
        try:
            result = await self.store.commit(transition, tenant)
        except (InstanceExists, DuplicateTransition):
            return await self.inspect(instance_id), False
        if result.replayed:  # this very start, committed before
            return await self.inspect(instance_id), False
        assert draft.state is not None
        self.cache.put(draft.state)
        return draft.state, True

    async def signal(
        self, instance_id: str, step: str, signal_id: str, payload: Any = None
    ) -> Instance:
        """Deliver a signal once; acknowledge (return) only after it is durable.

        InputRefused for a signal id or name the signal's event could not carry, before
        the instance is read: judged against the step's state, an empty id would be taken
        for another signal than the one the step holds, and a code run's inbox takes any
        name, so a name no event can carry would only fail as the event is made."""
        _check_texts(instance_id=instance_id, step=step, signal_id=signal_id)
        if problem := signal_id_problem(signal_id):
            raise InputRefused(f"the signal id {problem}")
        if problem := name_problem(step):
            raise InputRefused(f"the signal name {problem}")
        check_value(payload, "the payload")

        def build(draft: Draft) -> tuple[str, ...] | None:
            accept = modes.of(draft.state.spec).accept_signal or _accept_step_signal
            try:
                return accept(draft, step, signal_id, payload)
            except ReplayRejected:  # a new signal for an instance that ended
                if successor := draft.state.successor_id:
                    raise InputRefused(
                        f"instance {draft.instance_id} continued as new: its successor "
                        f"{successor} takes its signals now"
                    ) from None
                raise

        began = started_ns()
        state = await self._mutate(instance_id, build)
        if self.tracing is not None:
            self.tracing.record(f"signal {step}", state, began, **{"wayline.step": step})
        self.faults.reach(Boundary.BEFORE_SIGNAL_ACK, step)
        return state

    async def command(
        self,
        instance_id: str,
        action: Action,
        actor: str,
        reason: str,
        command_id: str | None = None,
        **effect: Any,
    ) -> Instance:
        """An audited operator command (pause, resume, cancel, terminate, retry, ...).

        ``action`` is an Action or its value (``"pause"``); anything else, a bad actor,
        reason or command id, or effect fields the action does not take or lacks
        (``step`` for ``retry_activity``) is refused (InputRefused, saying what is
        allowed) before the instance is read.

        A ``step`` the instance's definition does not have is refused (InputRefused)
        before anything is built: the command could never apply, whatever the state.
        """
        command_id = command_id or uuid.uuid4().hex
        _check_texts(instance_id=instance_id, actor=actor, reason=reason, command_id=command_id)
        for field, value in effect.items():
            check_value(value, f"the {field}")
        action = check_command(action, command_id, actor, reason, effect)
        repeated = False

        def build(draft: Draft) -> tuple[str, ...] | None:
            nonlocal repeated
            repeated = _recorded(draft.state, command_id, action, actor, reason)
            if repeated:
                if action in (Action.SIGNAL, Action.APPROVE):
                    _same_answer(draft.state, command_id, action, effect)
                return None
            if "step" in effect:
                _require_step(draft.state, effect["step"], action)
            if "payload" in effect:  # an approval's
                _check_payload(draft.state, effect["step"], effect["payload"])
            record_command(draft, command_id, action, actor, reason, **effect)
            return ("command", command_id)

        began = started_ns()
        state = await self._mutate(instance_id, build)
        if repeated and "step" in effect and action not in (Action.SIGNAL, Action.APPROVE):
            await self._same_step(state, command_id, action, effect["step"])
        if self.tracing is not None:
            step = {"wayline.step": effect["step"]} if "step" in effect else {}
            name = f"command {action.value}"
            self.tracing.record(name, state, began, **step, **{"wayline.command_id": command_id})
        return state

    async def _same_step(self, state: Instance, command_id: str, action: Action, step: str) -> None:
        """A step's command repeated (its id recorded) repeats it only on the same step;
        on another it is CommandConflict, not reported as done while nothing happened.
        The audit record holds no step: the event recorded with it (the next one) does."""
        entry = next(a for a in state.audit if a.command_id == command_id)
        after = entry.sequence
        page = await reads.history_page(self.store, state.instance_id, after=after, limit=1)
        done = page.events[0].step if page.events else ""
        if done and done != step:
            raise CommandConflict(
                f"command id {command_id} was already used for {action.value} of step {done}"
                f" on {state.instance_id}: a new command needs a new id"
            )

    async def awaiting(self, state: Instance) -> str:
        """What the instance waits for now, in words, as its mode would decide on its
        state (a dry run: nothing is written); '' when it has ended or its mode does not
        decide. ``wayline inspect`` shows it, so that an instance at an approval says so."""
        try:
            decision = standing(state, await self.registries.get(), self.store.now())
        except WaylineError:  # a mode that does not decide, or a state no decision fits
            return ""
        return decision.reason if decision.outcome in (Outcome.WAITING, Outcome.SCHEDULED) else ""

    async def declare_migration(
        self, name: str, from_version: str, to_version: str, actor: str, reason: str
    ) -> bool:
        """Declare an edge from ``name@from_version`` to ``name@to_version`` (True when
        new; a repeat keeps the first declaration): instances may then be migrated
        along it (``migrate``). A declared edge has no code: it keeps the instance's
        input and progress as they are. DefinitionNotFound for an unpublished version;
        InputRefused for an edge to the same version or a bad actor or reason."""
        _check_texts(name=name, from_version=from_version, to_version=to_version)
        if problem := actor_problem(actor) or reason_problem(reason):
            raise InputRefused(problem)
        if from_version == to_version:
            raise InputRefused("a migration edge must lead to another version")
        registry = await self.registries.refresh()
        for version in (from_version, to_version):
            if registry.get(name, version) is None:
                raise DefinitionNotFound(f"{name}@{version} is not published")
        created = await catalog.declare_edge(
            self.store, name, from_version, to_version, actor, reason.strip()
        )
        await self.registries.refresh()
        return created

    async def judge(self, instance_id: str, to_version: str, code: Any = None) -> Verdict:
        """Could the instance move to ``to_version`` of its name now, where it stands?
        (The verdict a migration would act on, judged on its current state.)"""
        state = await self.inspect(instance_id)
        target = version_of(await self.registries.refresh(), state, to_version)
        return judge_move(target, state, code)

    async def migrate(
        self,
        instance_id: str,
        to_version: str,
        actor: str,
        reason: str,
        *,
        code: Any = None,
        command_id: str | None = None,
    ) -> Instance:
        """Move an instance to ``to_version`` of its name along a declared edge: pause
        it if it runs, migrate it, resume it, each an audited command whose reason also
        names the versions and fingerprints (``migration_reason``).

        The judge (``engine.decide.compatibility``) decides on the state each step is
        built on, never on an earlier verdict: an instance it calls incompatible is
        never migrated (IncompatibleInstances, and one this call paused is resumed).
        DecisionRejected when no edge is declared; a repeat of ``command_id`` after it
        succeeded returns the instance as it is."""
        command_id = command_id or uuid.uuid4().hex
        _check_texts(instance_id=instance_id, to_version=to_version, command_id=command_id)
        state = await self.inspect(instance_id)
        ids = {step: f"{command_id}.{step}" for step in ("pause", "migrate", "resume")}
        try:
            if all(a.command_id != ids["migrate"] for a in state.audit):
                await self._migrate(state, to_version, actor, reason, code, ids)
        finally:
            state = await self._resume(instance_id, actor, ids)
        return state

    async def _resume(self, instance_id: str, actor: str, ids: dict[str, str]) -> Instance:
        """Resume what this migration paused (migrated or refused), with the pause's
        reason; a repeat after a crash resumes too (commands are idempotent by id)."""
        state = await self.inspect(instance_id)
        pause = next((a for a in state.audit if a.command_id == ids["pause"]), None)
        if pause is None:
            return state
        return await self.command(instance_id, Action.RESUME, actor, pause.reason, ids["resume"])

    async def _migrate(
        self,
        state: Instance,
        to_version: str,
        actor: str,
        reason: str,
        code: Any,
        ids: dict[str, str],
    ) -> Instance:
        """Judge, pause when running, and migrate (judged again on the paused state)."""
        registry = await self.registries.refresh()
        target, verdict = migration_target(registry, state, to_version, code)
        if not verdict.compatible:
            raise IncompatibleInstances.not_migrated(verdict, target.ref)
        why = migration_reason(reason, state.definition, target.ref)
        if state.status is InstanceStatus.RUNNING:
            await self.command(state.instance_id, Action.PAUSE, actor, why, ids["pause"])

        def build(draft: Draft) -> tuple[str, ...]:
            record_migration(draft, ids["migrate"], target, actor, why, code)
            return ("command", ids["migrate"])

        return await self._mutate(state.instance_id, build)

    async def judged_command(
        self,
        instance_id: str,
        judge: Callable[[Instance, Registry, datetime], Preview],
        actor: str,
        reason: str,
        command_id: str,
    ) -> tuple[Preview | None, Instance]:
        """An audited operator command recorded only if ``judge`` says it applies to the
        instance as it is when the command commits; the verdict and the state after.

        ``judge`` is asked on the very state the command is built on (again after an
        optimistic conflict), so an instance that moved since an earlier preview is
        judged afresh, never acted on by an old verdict. The verdict is None when this
        ``command_id`` is already in the instance's audit trail (recorded before).
        """
        _check_texts(instance_id=instance_id, actor=actor, reason=reason, command_id=command_id)
        verdict: Preview | None = None

        def build(draft: Draft) -> tuple[str, ...] | None:
            nonlocal verdict
            verdict = None
            if any(a.command_id == command_id for a in draft.state.audit):
                return None
            verdict = judge(draft.state, draft.registry, draft.now)
            if not verdict.applies:
                return None
            request = verdict.request
            effect = {**request.effect, **({"step": request.step} if request.step else {})}
            record_command(draft, command_id, request.action, actor, reason, **effect)
            return ("command", command_id)

        state = await self._mutate(instance_id, build)
        return verdict, state

    async def _mutate(
        self, instance_id: str, build: Callable[[Draft], tuple[str, ...] | None]
    ) -> Instance:
        """Build (on the latest state) and commit, retrying optimistic conflicts."""
        for _ in range(MAX_CONFLICT_RETRIES):
            state = await self.cache.load(instance_id)
            draft = Draft(await self.registries.get(), state, self._now(state))
            try:
                id_parts = build(draft)
                if id_parts is None:
                    return state
                decide(draft)
            except ReplayRejected as exc:
                raise DecisionRejected(exc.reason) from None
            propagate = modes.of(draft.state.spec).propagate
            spawned = await propagate(self.cache, self.registries, draft) if propagate else []
            transitions = [
                draft.build(*id_parts),
                *spawned,
                *await parent_transitions(self.cache, self.registries, draft),
            ]
            try:
                await self.store.commit_all(transitions)
            except (SequenceConflict, DuplicateTransition):
                for transition in transitions:
                    self.cache.forget(transition.instance_id)
                continue
            assert draft.state is not None
            self.cache.put(draft.state)
            return draft.state
        raise SequenceConflict(f"instance {instance_id} kept changing; try again")

    def _now(self, state: Instance) -> datetime:
        """The store's clock, never before the instance's last event."""
        return max(self.store.now(), state.updated_at)

    async def inspect(self, instance_id: str) -> Instance:
        """The replayed instance (bounded; see reads.inspect)."""
        _check_texts(instance_id=instance_id)
        try:
            return await reads.inspect(self.store, await self.registries.get(), instance_id)
        except ReplayRejected:  # a version or edge another process published since
            return await reads.inspect(self.store, await self.registries.refresh(), instance_id)


ANY_INPUT = object()
"""A start that joins whatever input made the instance: a code run's (seed 001)."""


def _started_by(state: Instance, name: str, version: str | None, input: Any) -> bool:
    """Whether a start of ``name`` (pinned at ``version``, or the latest when None) with
    ``input`` is the one that made ``state``: the same name, input and pinned version."""
    pinned = state.definition
    same_version = version is None or pinned.version == version
    same_input = input is ANY_INPUT or state.input == json_data(input)
    return pinned.name == name and same_version and same_input


def _check_starter(started_by: str) -> None:
    """Refuse (InputRefused) a ``started_by`` no audit record could name as an actor
    ('' is allowed: nobody recorded)."""
    if started_by and (problem := actor_problem(started_by)):
        raise InputRefused(f"who starts it: {problem}")


def _check_texts(**texts: str) -> None:
    """Refuse arguments PostgreSQL cannot store (a NUL character) before any query
    sends them, so the caller gets InputRefused naming the argument, not driver text."""
    for name, text in texts.items():
        check_text(text, f"the {name.replace('_', ' ')}")


def _accept_step_signal(
    draft: Draft, step: str, signal_id: str, payload: Any
) -> tuple[str, ...] | None:
    """A step list's signal: its signal step takes one, and a repeat is recognised."""
    existing = draft.state.signals.get(step)
    if existing is not None:
        if existing.signal_id == signal_id and existing.data == json_data(payload):
            return None
        raise SignalConflict(
            f"step {step} already received signal {existing.signal_id}"
            if existing.signal_id != signal_id
            else f"signal {signal_id} carried another payload"
        )
    _check_payload(draft.state, step, payload)
    decisions.accept_signal(draft, step, signal_id, payload)
    return ("signal", signal_id)


def _check_payload(state: Instance, step: str, payload: Any) -> None:
    """LimitExceeded for a signal's or an approval's payload larger than its step's
    ``input_limit``: said as a size, where the fold's refusal of the event it would
    make reads as a conflict with the instance's state."""
    found = state.step(step)
    if found is not None:
        check_size(payload, found.input_limit, "the payload", step)


def _recorded(state: Instance, command_id: str, action: Action, actor: str, reason: str) -> bool:
    """Whether ``command_id`` is already recorded on the instance (a repeat acts once);
    CommandConflict when it was recorded for another action, actor or reason, which a
    repeat would otherwise report as done although nothing it asked for happened."""
    for entry in state.audit:
        if entry.command_id != command_id:
            continue
        if (entry.action, entry.actor, entry.reason) != (action.value, actor, reason):
            raise CommandConflict(
                f"command id {command_id} was already used for {entry.action} by"
                f" {entry.actor} on {state.instance_id}: a new command needs a new id"
            )
        return True
    return False


def _same_answer(state: Instance, command_id: str, action: Action, effect: Any) -> None:
    """A signal or approval sent again (its command id recorded) repeats it only with
    the same step and payload; another is CommandConflict rather than reported as
    delivered, as ``signal`` refuses a signal id that carried another payload. A code
    run's signal is compared with its inbox's, which keeps signals by id, not by step."""
    if state.spec is None:
        return
    step = effect["step"]
    if state.spec.mode == Mode.CODE:
        try:
            code_signals.already_received(state, step, command_id, effect.get("payload"))
        except SignalConflict as exc:
            raise CommandConflict(f"{exc}: a new {action.value} needs a new id") from None
        return
    named = f"signal {command_id}" if action is Action.SIGNAL else f"command id {command_id}"
    existing = state.signals.get(step)
    if existing is not None and existing.signal_id == command_id:
        if existing.data == json_data(effect.get("payload")):
            return
        raise CommandConflict(
            f"{named} already answered {step} with another payload: a new {action.value}"
            " needs a new id"
        )
    raise CommandConflict(
        f"{named} was already used for another step than {step}: a new {action.value}"
        " needs a new id"
    )


def _require_step(state: Instance, step: Any, action: Action) -> None:
    """Refuse a command's step that is not a valid name or not a step of the definition,
    and an approve or a signal of a step of another kind: a code-first run's fold would
    otherwise take an approve as a signal of that name, and say the approve was recorded.
    A signal to a code-first run may have any name: its inbox takes what its waits await."""
    problem = name_problem(step)
    if problem:
        raise InputRefused(f"the step {problem}")
    if action is Action.SIGNAL and state.spec is not None and state.spec.mode == Mode.CODE:
        return
    if state.spec is not None and isinstance(state.spec.manifest, MachineManifest):
        named = "a state" if state.spec.manifest.variant(step) else "not a step"
        raise InputRefused(
            f"{step!r} is {named} of {state.definition}: a state machine has no steps,"
            " so its commands take none"
        )
    found = state.step(step)
    if found is None and state.spec is not None and state.spec.mode == Mode.CODE:
        called = ", ".join(sorted(state.activities)[:10]) or "none yet"
        raise InputRefused(
            f"{step!r} is not a step of {state.instance_id}: a code run's steps are named by"
            f" call, NAME.N for its Nth call of ctx.step(NAME) (steps called: {called})"
        )
    if found is None:
        raise InputRefused(f"{step!r} is not a step of {state.definition}")
    answered = ANSWERED_STEPS.get(action)
    if answered is not None and found.kind is not answered:
        raise InputRefused(
            f"step {step!r} is {with_article(found.kind)} step: "
            f"{action.value} only answers {answered.value} steps"
        )


ANSWERED_STEPS = {Action.APPROVE: StepKind.APPROVAL, Action.SIGNAL: StepKind.SIGNAL}
"""The one kind of step each command that answers a step may answer."""
