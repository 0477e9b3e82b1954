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

An execution starts with the data ``start_data`` checks (the input and the parent,
and who submitted it); the mode's ``admit`` gives the store the parent, of which one
execution per machine is active at a time (a unique index). ``standing`` says what
the host operations ``state`` and ``status`` report; ``engine.executions`` runs them
(with submit and cancel) on a client. Until the worker side exists, an execution only
waits in its initial state, and a cancel leaves it ``cancelling``.

What is here is the pure core. Still to come, in later steps:

- the worker side: a DECISION work kind whose processor runs ``advance`` inside the
  PostgreSQL transaction that commits its ``state_entered`` (retry ``transactional``),
  re-checks the submitting principal (``engine.store.principals.principal_standing``)
  and the grants, backs off after a failure and
  ends the execution dead (a ``failed`` event with a ``dead-*`` code and no data) when
  attempts, transitions, authority or the state's encoding run out; until then the
  mode's ``decide`` only waits (``waits``) and it has no ``work``;
- cancellation fencing an advance in flight and running the declared compensation
  (replay admits machine events only while running today);
- the studio's state diagram, the example and the drills.
"""

from __future__ import annotations

from engine.model.definitions import Mode
from engine.modes import Decision, DefinitionMode, Outcome
from engine.modes.machines import fold, start_data, validation
from engine.modes.machines.declaration import Machine, machine
from engine.modes.machines.states import MachineState, variant


def waits(draft: object) -> Decision:
    """A machine's decision until the worker side exists: nothing to add, it waits (a
    start or a cancel is recorded, and the execution stays where it is)."""
    return Decision(Outcome.WAITING, "a machine advances only by its worker")


MACHINE = DefinitionMode(
    name=Mode.MACHINE,
    fields=validation.FIELDS,
    read=validation.read,
    check=validation.check,
    fold=fold.RULES,
    decide=waits,
    admit=start_data.admit,
)

__all__ = ["MACHINE", "Machine", "MachineState", "machine", "variant"]
