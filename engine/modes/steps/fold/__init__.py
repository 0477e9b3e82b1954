"""How replay folds a step list's events: attempts, children, timers, signals and races.

Each step kind's events are checked against the pinned definition's step of that kind;
the lifecycle events every mode shares are in ``engine.replay.lifecycle``.
"""

from engine.model.events import EventKind
from engine.modes import FoldRule
from engine.modes.steps.fold import activities, children, waits

RULES: dict[EventKind, FoldRule] = {**activities.RULES, **waits.RULES, **children.RULES}
