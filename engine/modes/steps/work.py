"""How a worker runs a step list's work: activity and compensation attempts and timers
(``engine.worker.processors``), and child starts (``engine.decide.child_starts``)."""

from __future__ import annotations

from engine.decide.child_starts import process_child
from engine.model.transitions import WorkKind
from engine.modes import Processor
from engine.worker import processors

PROCESSORS: dict[int, Processor] = {
    WorkKind.ACTIVITY: processors.process_activity,
    WorkKind.COMPENSATION: processors.process_compensation,
    WorkKind.TIMER: processors.process_timer,
    WorkKind.CHILD: process_child,
}
