"""Drive instances the way workers and operators do, to get histories the engine writes.

Hand-assembled event lists can be wrong in ways replay does not notice, so the unit
tests build histories through the engine's own builders instead. ``Run`` drives one
instance: every change is a Draft on the replayed state, a worker calls ``decide``
after each outcome (the next decision rides with the outcome), operators go through
``record_command``, attempts start from the dispatch in the work row that scheduled
them, and each Draft is committed with ``build()`` exactly as a store would receive it.

``drive`` turns a list of random choices into a legal history by picking, at every
point, one of the moves a worker or operator could make then (weighted so that
histories usually get deep into the definition instead of being cancelled early);
``legal_runs`` is the hypothesis strategy over it. ``rejection`` is the check the
rule tests share: an event that replay must refuse, both appended incrementally and
in a full replay.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from engine.decide import decisions, lifecycle
from engine.decide.operator_actions import Action
from engine.decide.operator_commands import record_command
from engine.model.definitions import Definition, StepKind
from engine.model.errors import ReplayRejected
from engine.model.events import Event, EventKind, make_event
from engine.model.instance import AttemptProgress, AttemptStatus, Instance, InstanceStatus
from engine.model.registry import Registry
from engine.model.transitions import Draft, Transition, WorkItem, WorkKind
from engine.model.validation import parse_definition
from engine.modes import Decision, decide
from engine.replay.fold import apply, replay

A = AttemptStatus
K = EventKind
S = InstanceStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ACTOR = "alice"


# Definitions ---------------------------------------------------------------------------


def activity_doc(
    name: str,
    *,
    attempts: int = 3,
    initial: str = "1s",
    maximum: str = "4s",
    timeout: str = "10s",
    compensation: bool = False,
    compensation_attempts: int = 2,
    on_unknown: str = "hold",
) -> dict[str, Any]:
    """An activity step document; compensated activities get a small undo activity."""
    doc: dict[str, Any] = {
        "name": name,
        "kind": "activity",
        "target": f"do.{name}",
        "timeout": timeout,
        "input_limit": 1000,
        "result_limit": 1000,
        "retry": {"max_attempts": attempts, "initial_delay": initial, "max_delay": maximum},
        "on_unknown": on_unknown,
    }
    if compensation:
        doc["compensation"] = {
            "target": f"undo.{name}",
            "timeout": "5s",
            "result_limit": 100,
            "retry": {
                "max_attempts": compensation_attempts,
                "initial_delay": "1s",
                "max_delay": "2s",
            },
        }
    return doc


def signal_doc(name: str, kind: str = "signal") -> dict[str, Any]:
    """A signal (or approval) step accepting payloads of up to 100 bytes."""
    return {"name": name, "kind": kind, "target": f"on.{name}", "timeout": "1h", "input_limit": 100}


def timer_doc(name: str, timeout: str) -> dict[str, Any]:
    return {"name": name, "kind": "timer", "timeout": timeout}


def fan_out_doc(name: str, kind: str, branches: Sequence[str]) -> dict[str, Any]:
    """A parallel or race step over ``branches``."""
    return {"name": name, "kind": kind, "branches": list(branches), "fan_out_limit": len(branches)}


def join_doc(name: str, branches: Sequence[str]) -> dict[str, Any]:
    return {"name": name, "kind": "join", "branches": list(branches)}


def definition(
    steps: Sequence[dict[str, Any]],
    *,
    name: str = "rich",
    version: str = "1",
    mode: str = "orchestration",
) -> Definition:
    """Parse a definition from step documents (validation runs, as for a user's file)."""
    return parse_definition({"name": name, "version": version, "mode": mode, "steps": list(steps)})


RICH_STEPS = (
    activity_doc("a", compensation=True),
    activity_doc("b", compensation=True, on_unknown="retry_same_key"),
    fan_out_doc("p", "parallel", ["x", "y"]),
    activity_doc("x", compensation=True),
    activity_doc("y", attempts=2),
    join_doc("j", ["x", "y"]),
    fan_out_doc("r", "race", ["sig", "tmo"]),
    signal_doc("sig"),
    timer_doc("tmo", "1m"),
    signal_doc("ap", "approval"),
    timer_doc("t", "30s"),
    activity_doc("c", attempts=2),
)
RICH = definition(RICH_STEPS)
"""Every orchestration feature in one definition: compensated activities under both
unknown-outcome policies, a parallel with its join, a race of a signal against a timer,
an approval, a plain timer and a final activity with few attempts."""


# Driving one instance ------------------------------------------------------------------

OUTCOMES: dict[str, tuple[EventKind, EventKind, str, bool]] = {
    # how -> (activity event, compensation event, code, retryable)
    "succeeded": (K.ATTEMPT_SUCCEEDED, K.COMPENSATION_SUCCEEDED, "", False),
    "failed": (K.ATTEMPT_FAILED, K.COMPENSATION_FAILED, "boom", True),
    "fatal": (K.ATTEMPT_FAILED, K.COMPENSATION_FAILED, "fatal", False),
    "unknown": (
        K.ATTEMPT_UNKNOWN,
        K.COMPENSATION_UNKNOWN,
        decisions.ACTIVITY_OUTCOME_UNKNOWN,
        False,
    ),
}


class Run:
    """One instance, driven through the engine's builders and committed transition by
    transition. ``state`` is always the Draft-applied (incrementally replayed) state."""

    def __init__(
        self,
        spec: Definition = RICH,
        *,
        registry: Registry | None = None,
        instance_id: str = "i1",
        now: datetime = T0,
    ) -> None:
        self.spec = spec
        self.registry = registry or Registry([spec])
        self.instance_id = instance_id
        self.now = now
        self.history: list[Event] = []
        self.transitions: list[Transition] = []
        self.decisions: list[Decision] = []
        self.work: dict[tuple[WorkKind, str], WorkItem] = {}
        self.log: list[str] = []
        self._state: Instance | None = None
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"Run({self.log})"

    @property
    def state(self) -> Instance:
        assert self._state is not None, "start the run first"
        return self._state

    # Committing -------------------------------------------------------------------------

    def draft(self) -> Draft:
        """A Draft on the current state at the current time."""
        return Draft(self.registry, self._state, self.now)

    def commit(self, draft: Draft, *id_parts: object, advance: bool = True) -> Decision | None:
        """Optionally let the engine decide what follows, then build and commit."""
        decision = None
        if advance and draft.state is not None:
            decision = decide(draft)
            self.decisions.append(decision)
        if draft.events:
            transition = draft.build(*id_parts)
            self.transitions.append(transition)
            self.history.extend(transition.events)
            for item in transition.work:
                payload = json.loads(item.payload) if item.payload else {}
                self.work[(item.kind, payload.get("step", ""))] = item
            self._state = draft.state
        return decision

    def start(self, input: Any = None) -> Decision:
        draft = lifecycle.start_draft(self.registry, self.spec, self.instance_id, self.now, input)
        decision = self.commit(draft, "start")
        assert decision is not None
        return decision

    def advance(self, delta: timedelta | float) -> None:
        """Move the clock on (seconds, or a timedelta)."""
        self.now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)

    # Activities and compensations -------------------------------------------------------

    def progress(self, step: str, compensation: bool = False) -> AttemptProgress:
        track = self.state.compensations if compensation else self.state.activities
        return track[step]

    def dispatch(self, step: str, compensation: bool = False) -> dict[str, Any]:
        """The dispatch payload of the latest work row for ``step`` (what a worker reads)."""
        kind = WorkKind.COMPENSATION if compensation else WorkKind.ACTIVITY
        item = self.work[(kind, step)]
        assert item.payload is not None
        return json.loads(item.payload)

    def start_attempt(self, step: str, compensation: bool = False) -> Event:
        """A worker claims the step's work once it is available and records the start."""
        kind = WorkKind.COMPENSATION if compensation else WorkKind.ACTIVITY
        self.now = max(self.now, self.work[(kind, step)].available_at)
        dispatch = self.dispatch(step, compensation)
        builder = (
            decisions.start_compensation_attempt
            if compensation
            else decisions.start_activity_attempt
        )
        draft = self.draft()
        event = builder(draft, step, dispatch["attempt"], dispatch["key"])
        self.commit(draft, advance=False)
        return event

    def finish(
        self,
        step: str,
        how: str = "succeeded",
        result: Any = None,
        compensation: bool = False,
        decide: bool = True,
    ) -> Decision | None:
        """Record the outcome of the attempt in flight; the worker then decides (unless a
        test wants the bare outcome, to check what replay allows next)."""
        activity_kind, compensation_kind, code, retryable = OUTCOMES[how]
        if compensation and how == "unknown":
            code = decisions.COMPENSATION_OUTCOME_UNKNOWN
        progress = self.progress(step, compensation)
        if how == "succeeded" and result is None:
            result = {"done": step}
        draft = self.draft()
        decisions.record_outcome(
            draft,
            step,
            progress.attempt,
            compensation_kind if compensation else activity_kind,
            result=result if how == "succeeded" else None,
            code=code,
            retryable=retryable,
        )
        return self.commit(draft, advance=decide)

    def run_activity(
        self, step: str, how: str = "succeeded", result: Any = None, compensation: bool = False
    ) -> Decision | None:
        """Start the next attempt of ``step`` and record its outcome."""
        self.start_attempt(step, compensation)
        return self.finish(step, how, result, compensation)

    # Waits and operators ----------------------------------------------------------------

    def signal(
        self, step: str, payload: Any = None, signal_id: str = "", decide: bool = True
    ) -> Decision | None:
        """An inbound signal; its transition id is derived from the signal id."""
        signal_id = signal_id or f"sig-{next(self._ids)}"
        draft = self.draft()
        decisions.accept_signal(draft, step, signal_id, payload)
        return self.commit(draft, "signal", signal_id, advance=decide)

    def fire(self, timer: str, decide: bool = True) -> Decision | None:
        """The timer's work runs when due (the clock moves there if it is not yet)."""
        self.now = max(self.now, self.state.timers[timer].due_at)
        draft = self.draft()
        decisions.fire_timer(draft, timer)
        return self.commit(draft, advance=decide)

    def command(self, action: Action, **effect: Any) -> Decision | None:
        """An audited operator command; the engine decides right after it."""
        command_id = f"cmd-{next(self._ids)}"
        draft = self.draft()
        record_command(draft, command_id, action, ACTOR, f"{action.value} by test", **effect)
        return self.commit(draft, "command", command_id)

    # Rule checks ------------------------------------------------------------------------

    def event(self, kind: EventKind, offset: int = 0, **fields: Any) -> Event:
        """An event ``offset`` positions after the next one, at the current time (not
        applied); offsets let a test append several events in a row."""
        return make_event(
            sequence=self.state.sequence + 1 + offset,
            instance_id=self.instance_id,
            kind=kind,
            occurred_at=self.now,
            **fields,
        )


def rejection(run: Run, *events: Event) -> str:
    """Why replay refuses ``events`` after the run's history, checked twice: folded onto
    the cached state and in a full replay, which must agree on the reason."""
    state = run.state
    try:
        for event in events:
            state = apply(run.registry, state, event)
    except ReplayRejected as incremental:
        reason = incremental.reason
    else:
        raise AssertionError(f"replay accepted {[e.kind.label for e in events]}")
    try:
        replay(run.registry, [*run.history, *events])
    except ReplayRejected as full:
        assert full.reason == reason
        return reason
    raise AssertionError("full replay accepted what the incremental fold refused")


# Random legal histories ----------------------------------------------------------------

DELAYS = (
    timedelta(0),
    timedelta(microseconds=1),
    timedelta(seconds=1),
    timedelta(seconds=3),
    timedelta(seconds=30),
    timedelta(minutes=2),
)
HOW = ("succeeded",) * 8 + ("failed", "fatal", "unknown")
RESOLUTIONS = ("succeeded", "failed", "absent")
COMPENSATING = frozenset({S.RUNNING, S.CANCELLING, S.FAILING})
RECEIVING = frozenset({S.RUNNING, S.PAUSED})


@dataclass(frozen=True)
class Move:
    """One thing a worker or an operator could do now; ``act`` takes a free parameter."""

    weight: int
    label: str
    act: Callable[[int], object]


def moves(run: Run) -> list[Move]:
    """Every move that is legal in the run's current state, with its weight."""
    state = run.state
    status = state.status
    out = [Move(4, "advance", lambda p: run.advance(DELAYS[p % len(DELAYS)]))]
    out += _attempt_moves(run, state.activities, False, status is S.RUNNING)
    out += _attempt_moves(run, state.compensations, True, status in COMPENSATING)
    assert state.spec is not None
    for step in state.spec.steps:
        out += _wait_moves(run, step.name, step.kind)
    out += _operator_moves(run)
    return out


def _attempt_moves(
    run: Run, track: Mapping[str, AttemptProgress], compensation: bool, may_start: bool
) -> list[Move]:
    out = []
    where = "compensation " if compensation else ""
    for name, progress in track.items():
        if may_start and progress.status in (A.READY, A.RETRY_WAITING):
            out.append(
                Move(
                    24,
                    f"start {where}{name}",
                    lambda p, n=name: run.start_attempt(n, compensation),
                )
            )
        if progress.status is A.RUNNING:
            out.append(
                Move(
                    32,
                    f"finish {where}{name}",
                    lambda p, n=name: run.finish(n, HOW[p % len(HOW)], compensation=compensation),
                )
            )
    return out


def _wait_moves(run: Run, name: str, kind: StepKind) -> list[Move]:
    state = run.state
    if kind is StepKind.SIGNAL and name not in state.signals and state.status in RECEIVING:
        return [Move(4, f"signal {name}", lambda p: run.signal(name, {"n": p % 7}))]
    if kind is StepKind.APPROVAL and name not in state.signals and state.status in RECEIVING:
        return [Move(4, f"approve {name}", lambda p: run.command(Action.APPROVE, step=name))]
    timer = state.timers.get(name)
    if timer is not None and timer.fired_at is None and state.status is S.RUNNING:
        return [Move(16, f"fire {name}", lambda p: run.fire(name))]
    return []


def _operator_moves(run: Run) -> list[Move]:
    state = run.state
    status = state.status
    assert state.spec is not None
    out = [Move(1, "terminate", lambda p: run.command(Action.TERMINATE))]
    if status is S.RUNNING:
        out.append(Move(2, "pause", lambda p: run.command(Action.PAUSE)))
    if status is S.PAUSED:
        out.append(Move(12, "resume", lambda p: run.command(Action.RESUME)))
    if status in RECEIVING:
        out.append(Move(1, "cancel", lambda p: run.command(Action.CANCEL)))
    for name, progress in state.activities.items():
        if progress.status is A.UNKNOWN:
            out.append(
                Move(
                    12,
                    f"resolve {name}",
                    lambda p, n=name: run.command(
                        Action.RESOLVE_ACTIVITY,
                        step=n,
                        resolution=RESOLUTIONS[p % 3],
                        result={"resolved": n} if p % 3 == 0 else None,
                    ),
                )
            )
        if progress.status in (A.FAILED, A.UNKNOWN) and status is S.RUNNING:
            out.append(
                Move(
                    6,
                    f"retry {name}",
                    lambda p, n=name: run.command(Action.RETRY_ACTIVITY, step=n),
                )
            )
        compensable = state.spec.step(name).compensation is not None  # type: ignore[union-attr]
        if (
            compensable
            and progress.status is A.SUCCEEDED
            and name not in state.compensations
            and status in COMPENSATING
        ):
            out.append(
                Move(
                    1,
                    f"compensate {name}",
                    lambda p, n=name: run.command(Action.COMPENSATE, step=n),
                )
            )
    for name, progress in state.compensations.items():
        if progress.status in (A.FAILED, A.UNKNOWN):
            out.append(
                Move(
                    12,
                    f"resolve compensation {name}",
                    lambda p, n=name: run.command(
                        Action.RESOLVE_COMPENSATION, step=n, code="undone-by-hand"
                    ),
                )
            )
    return out


Choice = tuple[int, int]
"""(which move, the move's free parameter)."""


SETTLING = ("resume", "finish", "resolve", "start", "signal", "approve", "fire")
"""Moves that make progress, in the order ``settle`` prefers them."""


def settle(run: Run, limit: int = 200) -> None:
    """Let workers and operators see the instance through: every attempt succeeds,
    signals and approvals arrive, timers fire, unknowns and failed compensations are
    resolved, a paused instance is resumed. Ends the instance unless ``limit`` is hit."""
    for _ in range(limit):
        if run.state.status.terminal:
            return
        options = {m.label.split()[0]: m for m in reversed(moves(run))}
        move = next((options[name] for name in SETTLING if name in options), None)
        if move is None:
            return
        run.log.append(f"settle: {move.label}")
        move.act(0)


def drive(choices: Sequence[Choice], spec: Definition = RICH, finish: bool = False) -> Run:
    """Start an instance and make the chosen legal moves until the choices run out or
    the instance ends, then (``finish``) settle it. Any exception is an engine bug: only
    legal moves are offered."""
    run = Run(spec)
    run.start({"order": 1})
    for pick, param in choices:
        if run.state.status.terminal:
            break
        options = moves(run)
        point = pick % sum(m.weight for m in options)
        for move in options:
            if point < move.weight:
                run.log.append(move.label)
                move.act(param)
                break
            point -= move.weight
    if finish:
        settle(run)
    return run


def legal_runs(max_moves: int = 60) -> st.SearchStrategy[Run]:
    """Runs of random legal histories of RICH, half of them seen through to their end.

    Choices come from a hypothesis-controlled Random: hypothesis' own integers favour
    0, 1 and the bounds, which would pick the same few moves over and over. A failing
    example still replays exactly, and ``Run``'s repr lists the moves that were made.
    """

    def choices(rng: random.Random) -> list[Choice]:
        count = rng.randint(max_moves // 4, max_moves)
        return [(rng.randrange(1 << 16), rng.randrange(1 << 16)) for _ in range(count)]

    return st.builds(drive, st.randoms(use_true_random=False).map(choices), finish=st.booleans())
