"""Why an instance moves no further, in words: what its timers, waits and children say
once it has ended or unwinds (``engine.model.description``, ``engine.model.fan_out``)."""

from __future__ import annotations

from engine.model.instance import Instance, InstanceStatus

S = InstanceStatus
ENDINGS = {
    S.COMPLETED: "the instance completed",
    S.FAILED: "the instance failed",
    S.CANCELLED: "the instance was cancelled",
    S.TERMINATED: "the instance was terminated",
    S.CONTINUED_AS_NEW: "the instance continued as new",
    S.CANCELLING: "the instance is being cancelled",
    S.FAILING: "the instance is failing",
}
"""Why nothing more happens, by status: every status but running and paused."""


def ending(instance: Instance) -> str:
    """Why the instance moves no further ('' while it is running or paused)."""
    return ENDINGS.get(instance.status, "")
