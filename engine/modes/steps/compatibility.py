"""Could a step-list instance move to another version where it stands? The judge.

Migration keeps an instance's per-step progress by step name and swaps its definition
(``engine.replay.lifecycle``), so the new version must give every name the instance
has progress under the same meaning, and must not put work before where it stands:

- every step with progress (an activity's attempts and compensation, a timer, a
  received signal or approval, a child, a race's winner) exists with the same kind and
  under the same parallel or race;
- what is in flight maps one to one: an activity's attempt runs the same target with
  its attempt number still allowed, a compensation under way has the same target, a
  child still pins the same version, the fan-out the instance waits in has the same
  branches;
- the step it stands at exists with the same kind, and every step the new version puts
  before it has already run (nothing is inserted or moved into the instance's past).

The first problem found is the verdict's reason, in words an operator can act on:
``step charge is in flight and was removed``. Pure: no I/O, nothing is changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.model.definitions import Definition, Step, StepKind
from engine.model.instance import AttemptStatus, ChildStatus, Instance
from engine.modes.steps import step_kinds

A = AttemptStatus


def judge(target: Definition, state: Instance, code: Any = None) -> str:
    """'' when ``state`` can move to ``target`` where it stands; else why not."""
    return next(_problems(target, state), "")


def _problems(target: Definition, state: Instance) -> Iterator[str]:
    old = state.spec
    assert old is not None
    for name, phase, in_flight in _touched(state):
        yield from _kept(old, target, name, phase)
        if in_flight:
            yield from _maps(state, old.step(name), target.step(name))  # type: ignore[arg-type]
    yield from _compensations(state, target)
    yield from _position(state, target)


def _touched(state: Instance) -> Iterator[tuple[str, str, bool]]:
    """Every step with progress: its name, how the instance stands in it (for the
    reason) and whether work or a wait is still under way there."""
    for name, progress in state.activities.items():
        done = progress.status is A.SUCCEEDED
        yield name, "completed" if done else "is in flight", not done
    for name, timer in state.timers.items():
        yield name, "fired" if timer.fired_at else "is pending", timer.fired_at is None
    for name in state.signals:
        yield name, "was received", False
    for name, child in state.children.items():
        done = child.status in (ChildStatus.SUCCEEDED, ChildStatus.FAILED)
        yield name, "completed" if done else "is in flight", not done
    for name in state.race_winners:
        yield name, "has a winner", False


def _kept(old: Definition, new: Definition, name: str, phase: str) -> Iterator[str]:
    was, now = old.step(name), new.step(name)
    assert was is not None
    if now is None:
        yield f"step {name} {phase} and was removed"
    elif now.kind is not was.kind:
        yield f"step {name} {phase} and changed kind from {was.kind} to {now.kind}"
    elif old.owners.get(name) != new.owners.get(name):
        yield (f"step {name} {phase} and moved from {_place(old, name)} to {_place(new, name)}")


def _place(definition: Definition, name: str) -> str:
    owner = definition.owners.get(name)
    return f"a branch of {owner}" if owner else "the top level"


def _maps(state: Instance, was: Step, now: Step) -> Iterator[str]:
    """Work under way keeps running as it was started."""
    name = was.name
    if was.kind is StepKind.ACTIVITY:
        assert now.retry is not None
        if now.target != was.target:
            yield f"activity {name} is in flight on {was.target} and now runs {now.target}"
        progress = state.activities[name]
        waiting = progress.status is AttemptStatus.RETRY_WAITING  # its next attempt is due
        attempt = progress.attempt + 1 if waiting else progress.attempt
        if attempt > max(now.retry.max_attempts, progress.granted_attempt):
            yield (
                f"activity {name} is on attempt {attempt} and now allows {now.retry.max_attempts}"
            )
    if was.kind is StepKind.CHILD and now.child_definition != was.child_definition:
        pins = f"{was.child_definition} and now pins {now.child_definition}"
        yield f"child {name} is in flight on {pins}"


def _compensations(state: Instance, target: Definition) -> Iterator[str]:
    for name, progress in state.compensations.items():
        if progress.status in (A.SUCCEEDED, A.MANUALLY_RESOLVED):
            continue
        was = state.spec.step(name).compensation  # type: ignore[union-attr]
        step = target.step(name)
        now = step.compensation if step is not None else None
        if now is None:
            yield f"compensation of {name} is in flight and {name} declares none now"
        elif was is not None and now.target != was.target:
            yield (f"compensation of {name} is in flight on {was.target} and now runs {now.target}")


def _position(state: Instance, target: Definition) -> Iterator[str]:
    """The step the instance stands at keeps its meaning, and nothing new is before it."""
    old = state.spec
    assert old is not None
    at = _standing(state, old)
    if at is not None:
        now = target.step(at.name)
        if now is None:
            yield f"the instance waits at step {at.name}, which was removed"
        elif now.kind is not at.kind or now.branches != at.branches:
            change = f"changed from {_shape(at)} to {_shape(now)}"
            yield f"the instance waits at step {at.name}, which {change}"
    for step in _top_level(target):
        if at is not None and step.name == at.name:
            return
        if not _FINISHED[step.kind](state, step):
            where = f"before step {at.name}" if at is not None else "after the end"
            yield f"step {step.name} is {where}, where the instance stands, and has not run"


def _shape(step: Step) -> str:
    return f"{step.kind}" + (f" of {', '.join(step.branches)}" if step.branches else "")


def _top_level(definition: Definition) -> Iterator[Step]:
    """The steps the walk visits in order (branches are their fan-out's part)."""
    return (s for s in definition.steps if s.name not in definition.owners)


def _standing(state: Instance, definition: Definition) -> Step | None:
    """The first step in walk order that has not finished: where the instance stands
    (None when every step has finished)."""
    return next((s for s in _top_level(definition) if not _FINISHED[s.kind](state, s)), None)


def _activity_done(state: Instance, step: Step) -> bool:
    progress = state.activities.get(step.name)
    return progress is not None and progress.status is A.SUCCEEDED


def _timer_done(state: Instance, step: Step) -> bool:
    timer = state.timers.get(step.name)
    return timer is not None and timer.fired_at is not None


def _wait_done(state: Instance, step: Step) -> bool:
    return step.name in state.signals


def _child_done(state: Instance, step: Step) -> bool:
    child = state.children.get(step.name)
    return child is not None and child.status is ChildStatus.SUCCEEDED


def _parallel_done(state: Instance, step: Step) -> bool:
    """A parallel is passed once its branches are admitted: its join waits for them."""
    return any(b in state.activities for b in step.branches)


def _join_done(state: Instance, step: Step) -> bool:
    return all(_activity_done(state, Step(b, StepKind.ACTIVITY)) for b in step.branches)


def _race_done(state: Instance, step: Step) -> bool:
    return step.name in state.race_winners


_FINISHED = step_kinds.table(
    activity=_activity_done, timer=_timer_done, wait=_wait_done, child=_child_done,
    parallel=_parallel_done, join=_join_done, race=_race_done,
)  # fmt: skip
"""Whether the walk has passed a step of each kind (``orchestration`` decides the same)."""
