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


KNOWN_BUGS: tuple[KnownBug, ...] = ()
"""None open. Found by the drills and fixed since:

- EB1 (D4 at boundaries): a worker stopped inside a transaction kept its work rows
  locked, and claims skip locked rows, so nobody could take its expired lease. Fixed by
  an idle-in-transaction limit (363a138) and, because psycopg's pipelined executemany
  escaped that limit (PostgreSQL arms it only at ReadyForQuery), one statement per
  batch (7f8b959).
- EB2 (D14): engine waits had no client-side deadline on a paused server (363a138).
- EB3 (D19): event times followed the worker's wall clock after a jump (363a138).
"""


def classify(failures: list[str], bugs: tuple[KnownBug, ...] = KNOWN_BUGS) -> str:
    """The known bug explaining every failure line, or '' when any line is unexplained."""
    for bug in bugs:
        if failures and bug.explains(failures):
            return bug.bug_id
    return ""
