"""Engine bugs the drills found and that are not fixed yet: failing, but marked.

A drill that fails because the engine is wrong keeps failing until the engine is fixed;
the scorecard counts it as failed. What this list adds is a name: a failure whose every
line matches one known bug's signature is tagged with it, so a reader sees "known
engine bug EB2" next to the drill, and the test suite can tell a known failure from a
new one. When a bug is fixed, its drills pass and the entry should be deleted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    bug_id: str
    title: str
    where: str
    signatures: tuple[str, ...]
    """A failure line naming the bug itself; at least one must be present."""
    consequences: tuple[str, ...] = ()
    """Lines the bug goes on to cause (a stranded lease, an instance that never ends)."""

    def explains(self, failures: list[str]) -> bool:
        named = any(s in line for line in failures for s in self.signatures)
        known = self.signatures + self.consequences
        return named and all(any(s in line for s in known) for line in failures)


LIVENESS = ("I1 no lost work", "I10 ownership", "I11 conservation", "every instance to end")

KNOWN_BUGS = (
    KnownBug(
        "EB1",
        "a worker stopped inside a transaction keeps its work row locked: no other worker "
        "can take its expired lease (claims skip locked rows) until it resumes",
        "engine/store/store.py (sessions have no idle_in_transaction_session_timeout); "
        "engine/store/work.py CLAIM (FOR UPDATE SKIP LOCKED)",
        ("idle in transaction",),
        LIVENESS,
    ),
    KnownBug(
        "EB2",
        "engine waits without a client-side deadline: on a paused server, commits, claims "
        "and reads over open connections block until it resumes (statement_timeout runs "
        "on the stopped server), and Store.open can outlast its own 10 s connect timeout",
        "engine/store/store.py, engine/store/work.py, engine/store/reads.py (no "
        "asyncio.timeout around statements; no connect_timeout on pooled connections)",
        ("engine wait without a client-side deadline",),
    ),
    KnownBug(
        "EB3",
        "event times follow the worker's wall clock: DatabaseClock measures its offset to "
        "the server once, at open, so a clock jump after that shifts every event and "
        "every due time it schedules",
        "engine/store/clock.py (DatabaseClock.now uses datetime.now + a fixed offset)",
        ("follow the worker's wall clock",),
        (*LIVENESS, "timeout"),
    ),
)


def classify(failures: list[str]) -> str:
    """The known bug explaining every failure line, or '' when any line is unexplained."""
    for bug in KNOWN_BUGS:
        if failures and bug.explains(failures):
            return bug.bug_id
    return ""
