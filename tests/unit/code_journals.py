"""Test helpers for code-first workflows: a tiny history that resolves what the driver
asks for, so a workflow can be played from an empty journal to its end without a
database (the engine's fold does this from real events in integration tests)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.modes.code.driver import Workflow, drive
from engine.modes.code.journal import (
    BLOCKING,
    Advance,
    Command,
    Entry,
    EntryState,
    Verb,
    Waits,
)

RUN_ID = "order-saga/o-42"
MAX_DECISIONS = 1_000


def entry_for(
    command: Command,
    *,
    state: EntryState = EntryState.DONE,
    value: Any = None,
    failure: str = "",
    sequence: int | None = None,
) -> Entry:
    """The entry history would record for ``command`` (values of journaled values are
    the ones the command chose)."""
    if command.verb in (Verb.NOW, Verb.RANDOM, Verb.UUID4):
        value = command.value
    return Entry(
        position=command.position,
        verb=command.verb,
        key=command.key,
        name=command.name,
        sequence=command.position + 1 if sequence is None else sequence,
        state=state,
        value=value,
        failure=failure,
        on=command.on,
        occurrence=command.occurrence,
    )


def default_resolution(command: Command) -> Any:
    """A value for each blocking command: steps return their key, waits a payload."""
    if command.verb is Verb.STEP:
        return f"result of {command.key}"
    if command.verb is Verb.WAIT:
        return {"signal": command.name}
    if command.verb is Verb.RACE:
        return [{"signal": command.on[0]}, command.on[0]]
    if command.verb is Verb.ALL:
        return [{"signal": name} for name in command.on]
    return None


@dataclass
class Played:
    """A workflow played to its end: its journal, every command in order, the end."""

    entries: list[Entry] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    end: Advance | None = None


def play(
    function: Workflow,
    input: Any = None,
    *,
    resolve: Callable[[Command], Any] = default_resolution,
    run_id: str = RUN_ID,
) -> Played:
    """Drive ``function`` decision after decision, recording and resolving each new
    command, until it no longer waits on something new (it returned, raised, or
    diverged): ``entries`` then holds every command, the last decision's too."""
    played = Played()
    for _ in range(MAX_DECISIONS):
        advance = drive(function, input, played.entries, run_id=run_id)
        played.end = advance
        for command in getattr(advance, "new", ()):
            played.commands.append(command)
            blocking = command.verb in BLOCKING
            played.entries.append(entry_for(command, value=resolve(command) if blocking else None))
        if not isinstance(advance, Waits) or not advance.new:
            return played
    raise AssertionError(f"still deciding after {MAX_DECISIONS} decisions")


def keys(commands: list[Command]) -> list[tuple[Verb, str]]:
    return [(command.verb, command.key) for command in commands]
