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
    detail: str
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
        "a worker stopped mid-batch keeps its work rows locked past the idle-transaction limit",
        "engine/store/commits.py _write (cur.executemany for history and work rows)",
        "psycopg's executemany (history and work rows in commits.stage) runs in pipeline "
        "mode, and PostgreSQL arms idle_in_transaction_session_timeout only when it sends "
        "ReadyForQuery (after Sync), so the 5 s limit never fires for such a session; claims "
        "skip locked rows, so no other worker can take the stopped owner's expired lease "
        "until it resumes (seen: a session idle in transaction for 9.6 s after INSERT INTO "
        "history). Fix: write each batch with one statement (INSERT ... SELECT FROM unnest, "
        "or multi-row VALUES) so the session is at ReadyForQuery between statements",
        ("idle in transaction",),
        LIVENESS,
    ),
)
"""EB2 (no client-side deadlines) and EB3 (event times from the worker's wall clock),
found by D14 and D19, were fixed in 363a138 together with the first half of EB1 (the
idle-in-transaction limit), which D4 at boundaries showed was not enough."""


def classify(failures: list[str]) -> str:
    """The known bug explaining every failure line, or '' when any line is unexplained."""
    for bug in KNOWN_BUGS:
        if failures and bug.explains(failures):
            return bug.bug_id
    return ""
