"""Where replay stands: the commands the code reached, matched against the journal.

The ``Context`` asks the cursor for each verb it is given; the cursor numbers the
command (its position, its occurrence among commands of the same verb and name, its
key), matches it against the entry at the same position by ``(verb, key)`` and says
what the verb does next: return a recorded entry, take a new command, or stop. Why the
code must stop is kept here (``stop``), not only raised, so workflow code that catches
exceptions cannot hide a divergence or a refusal from the driver.

Matching by position and ``(verb, key)`` means changed options (retries, timeouts, the
signals a race awaits) are not divergence: history already says what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from engine.modes.code.failures import divergence_text
from engine.modes.code.journal import BLOCKING, Command, Entry, Verb
from engine.modes.code.step_ids import step_key

MAX_JOURNAL_COMMANDS = 10_000
"""Commands one run may reach: replay is linear in the journal and runs every decision."""


NAMED_KEYS = frozenset({Verb.STEP, Verb.WAIT})
"""Verbs whose key holds their name, so their occurrences count per name (``charge.2``,
``await.paid.2``); the others count per verb (``spawn.2`` is the run's second spawn,
whatever it spawned), so every key stays unique within a run."""


class StopKind(StrEnum):
    BLOCKED = "blocked"
    """On an open entry or on a new blocking command: the normal stop."""
    FOUND = "found"
    """``find_command`` reached the command it looks for."""
    DIVERGED = "journal-divergence"
    REFUSED = "not-deterministic"
    FULL = "journal-full"


@dataclass(frozen=True)
class Stop:
    kind: StopKind
    message: str = ""


def command_key(verb: Verb, name: str, occurrence: int) -> str:
    """A command's key in history: ``charge.1``, ``await.paid.1``, ``race.2``..."""
    if verb is Verb.STEP:
        return step_key(name, occurrence)
    if verb is Verb.WAIT:
        return f"await.{name}.{occurrence}"
    return f"{verb.value}.{occurrence}"


def describe(verb: Verb, name: str, on: Sequence[str] = ()) -> str:
    """A command or entry as messages name it: ``step 'charge'``, ``race('a', 'b')``."""
    if verb in (Verb.STEP, Verb.SPAWN):
        return f"{verb.value} '{name}'"
    if verb is Verb.WAIT:
        return f"wait_signal '{name}'"
    if verb in (Verb.RACE, Verb.ALL):
        return f"{verb.value}({', '.join(repr(item) for item in on)})"
    if verb is Verb.SLEEP:
        return "sleep"
    return f"{verb.value}()"


class Cursor:
    """The replay of one run's code against its entries (one decision's worth)."""

    def __init__(self, entries: Sequence[Entry], *, looking_for: str | None = None) -> None:
        for index, entry in enumerate(entries):
            if entry.position != index:
                raise ValueError(
                    f"journal entries must be in position order from 0: entry {index} "
                    f"has position {entry.position}"
                )
        self.entries = entries
        self.looking_for = looking_for
        self.new: list[Command] = []
        self.stop: Stop | None = None
        self.found: Command | None = None
        self._occurrences: dict[tuple[Verb, str], int] = {}
        self._count = 0
        """Commands reached so far: the position the next one takes."""
        self.closing = False
        """The driver is closing the coroutine: verbs in ``finally`` blocks refuse."""

    def reach(self, verb: Verb, name: str = "", **fields: Any) -> tuple[Command, Entry | None]:
        """Number the command the code reached and match it; raise nothing: the caller
        checks ``stop`` (a divergence or a full journal is recorded there)."""
        counted = (verb, name if verb in NAMED_KEYS else "")
        occurrence = self._occurrences.get(counted, 0) + 1
        self._occurrences[counted] = occurrence
        command = Command(
            position=self._count,
            verb=verb,
            key=command_key(verb, name, occurrence),
            name=name,
            occurrence=occurrence,
            **fields,
        )
        self._count += 1
        if command.position >= MAX_JOURNAL_COMMANDS:
            self.halt(
                StopKind.FULL,
                f"a run reaches at most {MAX_JOURNAL_COMMANDS} commands; "
                f"{describe(verb, name, command.on)} would be one more",
            )
            return command, None
        entry = self.entries[command.position] if command.position < len(self.entries) else None
        if entry is not None and (entry.verb, entry.key) != (command.verb, command.key):
            self.halt(
                StopKind.DIVERGED,
                divergence_text(
                    describe(entry.verb, entry.name, entry.on),
                    entry.position,
                    entry.sequence,
                    f"code reached {describe(verb, name, command.on)}",
                ),
            )
        if self.looking_for is not None and command.key == self.looking_for:
            self.found = command
            self.halt(StopKind.FOUND)
        return command, entry

    def take_new(self, command: Command, value: Any = None) -> None:
        """Record a command past the journal (with the value chosen for it, if any); a
        blocking one stops the code."""
        if value is not None:
            command = replace(command, value=value)
        self.new.append(command)
        if command.verb in BLOCKING:
            self.block()

    def block(self) -> None:
        """The code waits (on a new blocking command or an open entry)."""
        self.halt(StopKind.BLOCKED)

    def halt(self, kind: StopKind, message: str = "") -> None:
        """Record why the code must stop; the first reason wins."""
        if self.stop is None:
            self.stop = Stop(kind, message)

    def refuse(self, message: str) -> None:
        """A determinism refusal (from the guard or an awaited foreign object)."""
        self.halt(StopKind.REFUSED, message)

    def unconsumed(self) -> Entry | None:
        """The first entry the code has not reached, when it ended early."""
        return self.entries[self._count] if self._count < len(self.entries) else None
