"""How a worker runs a step list's work: activity and compensation attempts, timers and
child starts, each by its processor (``engine.worker.processors``)."""

from __future__ import annotations

from engine.model.transitions import WorkKind
from engine.modes import Processor
from engine.worker import processors
from engine.worker.leased_commits import Context
from engine.worker.processors import LeaseHolder


async def _activity(ctx: Context, current: LeaseHolder) -> None:
    await processors.process_attempt(ctx, current.lease, processors.ACTIVITY, current)


async def _compensation(ctx: Context, current: LeaseHolder) -> None:
    await processors.process_attempt(ctx, current.lease, processors.COMPENSATION, current)


async def _timer(ctx: Context, current: LeaseHolder) -> None:
    await processors.process_timer(ctx, current.lease)


async def _child(ctx: Context, current: LeaseHolder) -> None:
    await processors.process_child(ctx, current.lease)


PROCESSORS: dict[int, Processor] = {
    WorkKind.ACTIVITY: _activity,
    WorkKind.COMPENSATION: _compensation,
    WorkKind.TIMER: _timer,
    WorkKind.CHILD: _child,
}
