"""State machines, the second definition mode (seed 000): bounded, persistent state
machines whose application code owns the business transitions, one ``advance`` over a
sealed state space, while the runtime owns persistence, authority, timers, retries,
cancellation and compensation.

A machine is declared in Python (``states``: a sealed family of frozen-dataclass
variants; ``declaration``: ``machine(...)`` and ``@flow.advance``) or as a JSON
manifest in a definition document of mode ``machine``; both are read and validated by
``validation`` into a ``manifest.MachineManifest`` and have the same fingerprint.
Replay folds the machine's events by ``fold``: states entered along allowed edges
(``state_entered``), failed advances (``advance_failed``), timers, and completion only
in a terminal state; an instance's ``machine`` progress holds its current state.

After each event ``decide`` adds what the runtime does next (the advance's work, a
timer, completion, a dead end, the compensation), and a worker whose app registers the
machine (``ActivityRegistry.machine``) runs its code by ``advances``: each advance
inside the PostgreSQL transaction that records the state it returns (``calls`` has what
the code is given).

An execution starts with the data ``start_data`` checks (the input and the parent,
and who submitted it); the mode's ``admit`` gives the store the parent, of which one
execution per machine is active at a time (a unique index). ``standing`` says what
the host operations ``state`` and ``status`` report; ``engine.api.executions`` runs them
(with submit and cancel) on a client.

Each advance first re-checks, in its transaction, that whoever submitted the execution
still stands (``engine.store.principals``), then runs its code as the database role
its declared grants name (``grants``; ``engine.store.roles`` switches to it and back,
``provisioning`` provisions the roles), so PostgreSQL refuses what the grants
do not allow. Still to come: the seed's parent policy.
"""

from __future__ import annotations

from typing import Any

from engine.model.definitions import Mode
from engine.model.errors import InputRefused
from engine.model.transitions import WorkKind
from engine.modes import DefinitionMode
from engine.modes.machines import compatibility, fold, start_data, validation
from engine.modes.machines.advances import process_advance
from engine.modes.machines.calls import MachineCall
from engine.modes.machines.decide import decide
from engine.modes.machines.declaration import Machine, machine
from engine.modes.machines.states import MachineState, variant


def refuse_signal(draft: Any, name: str, signal_id: str, payload: Any) -> None:
    """A machine waits for no signal (the mode's ``accept_signal``): one sent anyway is
    refused in the machine's words, before any event is made (InputRefused)."""
    ref = draft.state.definition
    raise InputRefused(
        f"{ref.name}@{ref.version} is a state machine, which takes no signals: its advance "
        "reads what it decides on from the database when it runs"
    )


MACHINE = DefinitionMode(
    name=Mode.MACHINE,
    fields=validation.FIELDS,
    read=validation.read,
    check=validation.check,
    fold=fold.RULES,
    decide=decide,
    work={WorkKind.ADVANCE: process_advance},
    admit=start_data.admit,
    judge=compatibility.judge,
    accept_signal=refuse_signal,
)

__all__ = ["MACHINE", "Machine", "MachineCall", "MachineState", "machine", "variant"]
