"""Code-first workflows, the third definition mode (seed 001): an ``async def`` whose
durable verbs are journaled and which is replayed against its journal after every
park, crash or deploy. ``journal`` is the contract between its parts.

A workflow is declared on an app (``ActivityRegistry.workflow``, by ``declaration``);
declaring reads its source (``source``) into an outline (``outline``) and a digest,
which make its definition document (``document``: what the catalog stores, validated
by the reader of every definition). ``lint`` flags, before publishing, calls that
would make a replay take another path.

Running it: ``records`` says how commands become history, ``fold`` replays that history
into the journal the driver replays the code against, ``decide`` and ``waits`` decide
what needs no code (retries, waits, when to run the code, unwinding), ``processor``
replays the code on a worker (DECISION work) and ``commands`` records what it asked
for, ``effects`` runs step bodies as attempts, ``signals`` keeps the inbox, and
``runs`` names and starts runs (``engine.decide.child_cascade`` cancels or terminates
spawned runs with their run, as it does a step list's children).
"""

from __future__ import annotations

from engine.model.definitions import Mode
from engine.modes import DefinitionMode
from engine.modes.code import document

CODE = DefinitionMode(
    name=Mode.CODE,
    fields=document.FIELDS,
    read=document.read,
    check=document.check,
    fold={},
    decide=None,
)
"""The mode as far as declaring and publishing need it: the engine's fold, decisions
and work for it are added by ``running.CODE_RUNNING``, which ``engine`` installs."""

__all__ = ["CODE"]
