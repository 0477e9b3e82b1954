"""Named fault boundaries: every persistence step of the worker, in one list.

The worker and processors call ``faults.reach(Boundary.X)`` at each boundary. Unarmed,
that is a counter increment and a dictionary lookup. A FaultPlan (from the drill
harness, or the ``WAYLINE_FAULT_PLAN`` environment variable as JSON) arms a boundary
at its n-th hit (or at the n-th hit *for one step*, when the fault names a step: a
drill plan pins faults on a team's own steps) with an action: kill the process
(SIGKILL), exit, raise a connection error before COMMIT is sent, pause the process
(SIGSTOP), or ask a proxy to sever the connection around the next COMMIT. Every
boundary counts how often it was reached, armed or not, so a drill can prove it
exercised what it planned to.

Two more variables serve drills that run workers as subprocesses:
``WAYLINE_FAULT_REPORT`` names a file to which every hit is appended as one JSON line
(before its action, so a SIGKILLed process still leaves the proof that its boundary was
reached), and ``WAYLINE_FAULT_SEVER`` is the ``host:port`` of a proxy's control
channel that the ``sever_*`` actions tell to cut the connection at the next COMMIT.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

FAULT_PLAN_ENV = "WAYLINE_FAULT_PLAN"
FAULT_REPORT_ENV = "WAYLINE_FAULT_REPORT"
FAULT_SEVER_ENV = "WAYLINE_FAULT_SEVER"
SEVER_TIMEOUT_SECONDS = 5.0
EXIT_STATUS = 86
"""Exit status of the ``exit`` action, so a drill can tell it from a real crash."""


class Boundary(StrEnum):
    BEFORE_COMMIT = "before_commit"
    AFTER_COMMIT = "after_commit"
    AFTER_CLAIM = "after_claim"
    AFTER_ATTEMPT_START = "after_attempt_start"
    AFTER_HANDLER = "after_handler"
    AFTER_TIMER_FIRE = "after_timer_fire"
    BEFORE_SIGNAL_ACK = "before_signal_ack"
    IN_LEASE_RENEWAL = "in_lease_renewal"
    IN_RECOVERY = "in_recovery"


class Action(StrEnum):
    KILL = "kill"
    EXIT = "exit"
    RAISE = "raise"
    PAUSE = "pause"
    SEVER_BEFORE_COMMIT = "sever_before_commit"
    SEVER_AFTER_COMMIT = "sever_after_commit"


class InjectedFault(ConnectionError):
    """Raised by the ``raise`` action: looks like a connection lost before COMMIT."""


@dataclass(frozen=True)
class Fault:
    boundary: Boundary
    hit: int
    action: Action
    step: str = ""
    """When set, ``hit`` counts only this step's hits of ``boundary``."""


class Faults:
    """Counts boundary hits and fires the planned faults. One per process."""

    def __init__(
        self,
        plan: list[Fault] = (),
        sever: Callable[[Action], None] | None = None,
        report: str | None = None,
    ) -> None:
        self._armed = {(f.boundary, f.step, f.hit): f.action for f in plan}
        self._sever = sever
        self._report = report
        self.counts: Counter[str] = Counter()
        self.step_counts: Counter[tuple[str, str]] = Counter()

    @classmethod
    def from_env(cls) -> Faults:
        """The plan in WAYLINE_FAULT_PLAN (a JSON list of {boundary, hit, action[, step]})."""
        text = os.environ.get(FAULT_PLAN_ENV, "")
        try:
            items = json.loads(text) if text else []
            plan = [
                Fault(
                    Boundary(i["boundary"]), int(i["hit"]), Action(i["action"]), i.get("step", "")
                )
                for i in items
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{FAULT_PLAN_ENV} must be a JSON list of objects with boundary, hit and action"
            ) from exc
        sever = os.environ.get(FAULT_SEVER_ENV, "")
        report = os.environ.get(FAULT_REPORT_ENV) or None
        return cls(plan, sever=proxy_severer(sever) if sever else None, report=report)

    def reach(self, boundary: Boundary, step: str = "") -> None:
        """Count a hit at ``boundary`` (on behalf of ``step``, when the caller knows
        which step's work it does) and act when the plan says so."""
        name = boundary.value
        self.counts[name] += 1
        key = (boundary, "", self.counts[name])
        if step:
            self.step_counts[(name, step)] += 1
            stepped = (boundary, step, self.step_counts[(name, step)])
            key = key if key in self._armed else stepped
        action = self._armed.get(key)
        self._write_report(boundary, action, key[1], key[2])
        if action is not None:
            self._act(boundary, action)

    def _write_report(self, boundary: Boundary, action: Action | None, step: str, hit: int) -> None:
        """Append this hit to the report file in one write, which survives a SIGKILL."""
        if not self._report:
            return
        record = {
            "boundary": boundary.value,
            "hit": hit,
            "action": action.value if action else None,
            "pid": os.getpid(),
        }
        if step:
            record["step"] = step
        fd = os.open(self._report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)

    def _act(self, boundary: Boundary, action: Action) -> None:
        if action is Action.KILL:
            os.kill(os.getpid(), signal.SIGKILL)
        elif action is Action.EXIT:
            os._exit(EXIT_STATUS)
        elif action is Action.RAISE:
            raise InjectedFault(f"fault injected at {boundary.value}")
        elif action is Action.PAUSE:
            os.kill(os.getpid(), signal.SIGSTOP)
        elif self._sever is not None:
            self._sever(action)


def proxy_severer(address: str) -> Callable[[Action], None]:
    """A ``sever`` callback that arms the proxy listening for commands at ``host:port``.

    It blocks until the proxy confirms, so the very next COMMIT is the one cut.
    """
    host, _, port = address.rpartition(":")

    def sever(action: Action) -> None:
        with socket.create_connection((host, int(port)), timeout=SEVER_TIMEOUT_SECONDS) as conn:
            conn.sendall(f"{action.value}\n".encode())
            conn.recv(16)

    return sever
