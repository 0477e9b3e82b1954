"""Could a machine instance move to another version where it stands? The judge.

Migration keeps a machine's progress (its current state, its data, the transitions and
failed attempts used) and swaps its manifest, so the new manifest must give the current
state the same meaning: it exists with the same fields and the same terminal-ness,
every edge out of it still exists, a pending timer is still a timer (and a state that
had none gets none), and what the machine has used is still within the new ceilings.
The first problem is the reason (``state review is current and was removed``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.model.definitions import Definition
from engine.model.instance import Instance
from engine.modes.machines.fold import manifest_of, progress_of
from engine.modes.machines.manifest import MachineManifest


def judge(target: Definition, state: Instance, code: Any = None) -> str:
    """'' when the machine can move to ``target`` in its current state; else why not."""
    assert isinstance(target.manifest, MachineManifest)
    return next(_problems(manifest_of(state), target.manifest, state), "")


def _problems(old: MachineManifest, new: MachineManifest, state: Instance) -> Iterator[str]:
    now = progress_of(state)
    name = now.state
    was, variant = old.variant(name), new.variant(name)
    if variant is None:
        yield f"state {name} is current and was removed"
        return
    if was is not None and variant.fields != was.fields:
        yield f"state {name} is current and its fields changed"
    if old.is_terminal(name) != new.is_terminal(name):
        still = "" if new.is_terminal(name) else "no longer "
        yield f"state {name} is current and is {still}terminal"
    for edge in old.targets(name):
        if edge not in new.targets(name):
            yield f"edge {name} -> {edge} was removed while the machine is in {name}"
    yield from _timer(old, new, name, pending=now.timer_due_at is not None)
    if now.transitions > new.max_transitions:
        yield f"the machine took {now.transitions} transitions and now allows {new.max_transitions}"
    if now.attempts >= new.max_attempts and not new.is_terminal(name):
        yield f"state {name} failed {now.attempts} attempts and now allows {new.max_attempts}"


def _timer(old: MachineManifest, new: MachineManifest, name: str, pending: bool) -> Iterator[str]:
    if pending and new.timer(name) is None:
        yield f"the timer of state {name} is pending and {name} is no longer a timer state"
    if old.timer(name) is None and new.timer(name) is not None:
        yield f"state {name} is current and is now a timer state"
