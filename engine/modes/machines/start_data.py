"""What an execution of a machine starts with, and the id a submit gives it.

An execution is an instance of a ``machine`` definition whose ``instance_started``
data is an object (``/work/wt/MACHINES.md``, the contract with the worker and the
studio): ``input``, the advance's input, of the manifest's ``input`` type; ``parent``,
the id of the row the execution works on; and, set by ``submit``, the ``owner`` and
``team`` who submitted it, the ``scope`` (their role then) and the ``key`` (the digest
of their idempotency key). A plain start (``wayline start``, ``Client.start``) gives
at least ``input`` and ``parent``.

The start is checked here, before anything is written, so that neither the store nor
the worker ever meets an execution without a parent or with an input of another type;
its parent is what the store keeps one active execution per machine for
(``Transition.parent_key``).

A submit's id is ``<machine>/<first 24 hex digits of sha256(team NUL actor NUL key)>``:
the same caller with the same key always names the same execution, another team or
actor never does, and the key itself is not readable from the id.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from engine.model.definitions import Definition
from engine.model.errors import FieldRefused, InputRefused
from engine.model.identifiers import id_problem
from engine.modes.machines.field_types import value_problem
from engine.modes.machines.manifest import MachineManifest

REQUIRED = ("input", "parent")
SUBMITTED = ("owner", "team", "scope", "key")
"""Who submitted the execution: set by ``submit`` from its caller, never by a start."""
FIELDS = (*REQUIRED, *SUBMITTED)
ID_DIGITS = 24


@dataclass(frozen=True)
class StartData:
    """The data of an execution's ``instance_started`` (see the module's docstring)."""

    input: Any
    parent: str
    owner: str = ""
    team: str = ""
    scope: str = ""
    key: str = ""

    def document(self) -> dict[str, Any]:
        """The JSON object a start records: the submit's fields only when set."""
        return {k: v for k, v in asdict(self).items() if k in REQUIRED or v}


def read_start_data(manifest: MachineManifest, value: Any) -> StartData:
    """The start data of an execution of ``manifest``'s machine; InputRefused saying
    what is wrong when ``value`` is not such data."""
    if not isinstance(value, dict):
        raise InputRefused(
            'a machine starts with an object {"input": ..., "parent": "<parent id>"}'
        )
    if unknown := sorted(set(value) - set(FIELDS)):
        raise InputRefused(f"a machine's start data has no {', '.join(unknown)}")
    if missing := [name for name in REQUIRED if name not in value]:
        raise InputRefused(f"a machine's start data needs {' and '.join(missing)}")
    if problem := id_problem(value["parent"]):
        raise FieldRefused("parent", f"the parent {problem}")
    if problem := value_problem(manifest.input, value["input"]):
        raise FieldRefused(
            "input", f"the input {problem} (the machine's input is {manifest.input})"
        )
    for name in SUBMITTED:
        if not isinstance(value.get(name, ""), str):
            raise InputRefused(f"the start data's {name} must be text")
    return StartData(**value)


def admit(definition: Definition, value: Any) -> str:
    """Check a start of ``definition`` with ``value``; the parent it holds (the mode's
    ``admit``: one active execution per machine and parent)."""
    assert isinstance(definition.manifest, MachineManifest)
    return read_start_data(definition.manifest, value).parent


def execution_id(machine: str, team: str, actor: str, key: str) -> str:
    """The id a submit of ``machine`` by ``actor`` of ``team`` with ``key`` gives."""
    digest = hashlib.sha256(f"{team}\0{actor}\0{key}".encode()).hexdigest()
    return f"{machine}/{digest[:ID_DIGITS]}"


def key_digest(key: str) -> str:
    """What the start data records of an idempotency key: its sha256, never the key."""
    return hashlib.sha256(key.encode()).hexdigest()
