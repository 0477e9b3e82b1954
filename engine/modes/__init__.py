"""Definition modes: the one place that says what each kind of workflow does its own way.

A definition's ``mode`` names how it is written and advanced: step lists (an
``orchestration`` the engine walks step by step, or a ``choreography`` that outside
events advance), state machines (``machine``) and code-first journals (``code``), each
a package here (``steps``, ``machines``, ``code``). Everything else (the
store, transitions, leases, fencing, lifecycle, operator commands) is shared. What a
mode does its own way is a ``DefinitionMode``: how its document is validated, which
fold rules replay its events, the decision that follows an event, and how a worker
runs its work. Callers ask this module for the part they need (``find`` and ``of``
by mode, ``decide``/``follow`` for a draft, ``processor`` for a work kind), so adding
a mode adds its package and one ``install`` rather than branches in existing modules.
The studio's drawing of a mode is the studio's part (the engine never imports the
studio); it is looked up there by the same mode name.

The modes a process runs are installed when ``engine`` is imported (see
``engine/__init__.py``): this module sits below the replay, decisions and worker that
consult it, so it cannot import the modes' parts itself without an import cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.model.canonical import format_instant
from engine.model.definitions import Definition
from engine.model.errors import DecisionRejected, WaylineError
from engine.model.events import Event, EventKind
from engine.model.instance import AuditEntry, Instance
from engine.model.registry import Registry
from engine.model.spec_reader import SpecReader
from engine.model.words import with_article

FoldRule = Callable[[Instance, Event, Registry, AuditEntry | None], Instance]
"""Replays one event of the mode onto the instance (ReplayRejected when illegal)."""
Processor = Callable[[Any, Any], Awaitable[None]]
"""Runs one leased work item: called with the worker's context and the lease holder."""


class Outcome(StrEnum):
    """Where an instance stands after a decision, in every mode."""

    SCHEDULED = "scheduled"
    """Work was created; the instance waits for it."""
    WAITING = "waiting"
    """Nothing to do until an outcome, a signal, a timer or an operator arrives."""
    RECORDED = "recorded"
    """A control-flow decision without work (a race winner, beginning to unwind)."""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ENDED = "ended"
    """The instance had already ended; nothing was added."""


Said = tuple[str | datetime, ...]
"""Words with the instants they name kept as instants: each reader writes those its own
way (``wayline inspect`` in RFC 3339, the studio as its tables do)."""


def say(parts: Said, instant: Callable[[datetime], str] = format_instant) -> str:
    """``parts`` as text, each instant written by ``instant``."""
    return "".join(p if isinstance(p, str) else instant(p) for p in parts)


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str = ""
    said: Said = ()
    """``reason`` with its instants kept as instants (empty when it names none)."""

    @classmethod
    def waiting(cls, *parts: str | datetime) -> Decision:
        """A WAITING decision whose reason names instants (a timer's due time)."""
        return cls(Outcome.WAITING, say(parts), parts)

    def reason_in(self, instant: Callable[[datetime], str]) -> str:
        """The reason with each instant it names written by ``instant``."""
        return say(self.said, instant) if self.said else self.reason


class ModeNotSupported(WaylineError):
    """A definition names a mode this engine does not run."""


@dataclass(frozen=True)
class DefinitionMode:
    """One mode's parts. ``name`` is the value of the definition's ``mode`` field."""

    name: str
    fields: frozenset[str]
    """The document's top-level fields beside the shared name, version, mode, deprecated."""
    read: Callable[[SpecReader, dict[str, Any]], dict[str, Any] | None]
    """Reads those fields, recording every error; the Definition's keyword arguments,
    or None when they are unusable."""
    check: Callable[[SpecReader, Definition], None]
    """Records the rules across the read definition (structure, order, references)."""
    fold: Mapping[EventKind, FoldRule]
    """The replay rules of the mode's events. Lifecycle events are shared; a mode's rule
    for one of them replaces the shared one (and may call it after its own checks)."""
    decide: Callable[[Any], Decision] | None
    """Appends to a Draft what the instance does next; None when the engine never
    decides for the mode (events supplied from outside advance it)."""
    work: Mapping[int, Processor] = field(default_factory=dict)
    """How a worker runs the mode's work, by work kind."""
    admit: Callable[[Definition, Any], str] | None = None
    """Checks a start's input (InputRefused) and returns the key at most one active
    instance of the definition may hold at a time ('' for none: any number may run);
    None when the mode takes any input and runs instances side by side."""
    effect: Callable[[Any, Instance, str, bool], Awaitable[Any]] | None = None
    """Runs the effect of a started attempt of a step (or, True, of its compensation)
    and returns its outcome, when the mode's steps are its own code (code-first runs);
    None when they are activity handlers, run by target."""
    propagate: Callable[[Any, Any, Any], Awaitable[list[Any]]] | None = None
    """The transitions (built, not committed) that carry a client's change of an
    instance to the instances it started, committed with it: a cancel or terminate of a
    step list or a code-first run cancels or terminates the children it started. Called
    with the client's cache, registries and draft."""
    accept_signal: Callable[[Any, str, str, Any], tuple[str, ...] | None] | None = None
    """Records a signal in a draft the mode's own way (a code-first run's inbox): the
    transition id's parts, or None for an exact repeat (SignalConflict when it
    conflicts); None when signals fill signal steps, one each."""
    judge: Callable[[Definition, Instance, Any], str] | None = None
    """Why a running instance of another version of the name could not move to this
    definition where it stands ('' when it could): called with the new definition,
    the instance replayed on its own, and the new version's code when the mode runs
    code (a code-first workflow); None when the mode cannot judge, so no instance of
    it is ever called compatible (``engine.decide.compatibility``)."""


_INSTALLED: dict[str, DefinitionMode] = {}
_PROCESSORS: dict[int, Processor] = {}


def install(*modes: DefinitionMode) -> None:
    """Make modes available; a work kind is run by one processor, whichever mode made it."""
    for mode in modes:
        for kind, run in mode.work.items():
            if _PROCESSORS.get(kind, run) is not run:
                raise ValueError(f"work kind {kind} already has another processor")
        _PROCESSORS.update(mode.work)
        _INSTALLED[mode.name] = mode


def uninstall(mode: DefinitionMode) -> None:
    """Remove a mode and the processors only it brought (tests install fakes for a while)."""
    del _INSTALLED[mode.name]
    kept = {id(run) for other in _INSTALLED.values() for run in other.work.values()}
    for kind, run in mode.work.items():
        if id(run) not in kept:
            del _PROCESSORS[kind]


def installed() -> Mapping[str, DefinitionMode]:
    """Every installed mode by name, in installation order (the first is the default)."""
    return _INSTALLED


def find(name: object) -> DefinitionMode | None:
    """The mode called ``name``, or None (anything but an installed mode's name)."""
    return _INSTALLED.get(name) if isinstance(name, str) else None


def of(definition: Definition) -> DefinitionMode:
    """The parts of ``definition``'s mode."""
    mode = find(definition.mode)
    if mode is None:
        names = ", ".join(_INSTALLED)
        raise ModeNotSupported(
            f"definition mode '{definition.mode}' is not supported here (supported: {names})"
        )
    return mode


def decide(draft: Any) -> Decision:
    """Append to ``draft`` what its instance does next, as its mode decides.

    DecisionRejected when the instance has not started or its mode never decides."""
    state = draft.state
    if state is None or state.spec is None:
        raise DecisionRejected("an instance must be started before it can advance")
    mode = of(state.spec)
    if mode.decide is None:
        raise DecisionRejected(f"{state.definition} is {with_article(mode.name)} definition")
    return mode.decide(draft)


def follow(draft: Any) -> None:
    """After an event, append the decision that follows it, in a mode that decides."""
    run = of(draft.state.spec).decide
    if run is not None:
        run(draft)


def processor(kind: int) -> Processor | None:
    """How a worker runs work of ``kind``; None when no installed mode makes it."""
    return _PROCESSORS.get(kind)
