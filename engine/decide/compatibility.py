"""The one judge of whether a running instance could move to another version.

``judge`` is what publishing (the compatibility report stored with a version) and
migrating (which re-judges the instance it is about to move, at that moment) both
call. What is shared is checked here: only a running or paused instance of another
version of the same name, in the same mode, can move; the rest is the mode's own
judgement (``DefinitionMode.judge``), so no mode's rules are branches in this module.
"""

from __future__ import annotations

from typing import Any

from engine import modes
from engine.model.compatibility import Verdict
from engine.model.definitions import Definition
from engine.model.instance import Instance, InstanceStatus
from engine.model.words import with_article

MOVABLE = frozenset({InstanceStatus.RUNNING, InstanceStatus.PAUSED})
"""The statuses an instance can move to another version from (pausing it first)."""


def judge(target: Definition, state: Instance, code: Any = None) -> Verdict:
    """The verdict on moving ``state`` (replayed on its own version) to ``target``;
    ``code`` is the new version's code where its mode runs code (a code workflow)."""
    pin = state.definition
    return Verdict(state.instance_id, pin.version, pin.fingerprint, _reason(target, state, code))


def _reason(target: Definition, state: Instance, code: Any) -> str:
    assert state.spec is not None
    if state.status not in MOVABLE:
        return f"it is {state.status.label}: only a running or paused instance can move"
    if state.definition.name != target.name:
        return f"it runs {state.definition.name}, not {target.name}"
    if state.definition == target.ref:
        return f"it already runs {target.ref}"
    if state.spec.mode != target.mode:
        mode, target_mode = with_article(state.spec.mode), with_article(target.mode)
        return f"it is {mode} instance and {target.ref} is {target_mode} definition"
    judge_mode = modes.of(target).judge
    if judge_mode is None:
        return f"{target.mode} instances cannot be judged, so none may move"
    return judge_mode(target, state, code)
