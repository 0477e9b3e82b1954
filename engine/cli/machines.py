"""`wayline machine submit|state|status|cancel`: the host operations of state machines
(and ``roles``, the database roles their advances act as: ``machine_roles``).

Thin shells over ``engine.Executions``: ``submit`` prints ``submitted <id> (new)`` or
``(existing)`` for an identical repeat; ``state`` the variant and its fields as JSON
(``--json``: one object); ``status`` one of the seven words; ``cancel`` records the
audited cancel. The caller is ``--as`` (with ``--team``, default the engine's own team
''), and only the submitter may read or cancel an execution. A refusal or conflict
prints ``wayline machine <action>: <message>`` on stderr and exits 1; so does a submit
for a team the actor is not a member of (with a role covering ``--scope``), which the
engine would accept only for the execution to end dead at its first advance.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.api.client import Client
from engine.api.executions import Executions, submit_key_problem
from engine.cli import machine_roles
from engine.cli.options import actor, checked_by, converted_by, reason, team
from engine.cli.runtime import add_command, add_group, json_arg, require_owned, unserved_lines
from engine.model.identifiers import id_problem, name_problem, split_pin
from engine.modes.machines.standing import StateValue, status_of
from engine.store import work_views
from engine.store.principals import COVERS

DEFAULT_SCOPE = "operator"
"""The scope a command-line submit records: the role that starts instances."""

_pin = converted_by(split_pin)
"""``NAME[@VERSION]``: a name that is none, or an '@' with nothing after it, is a usage
error (exit 2) before anything is read, as every other malformed option is."""
_name = checked_by(lambda text: (found := name_problem(text)) and f"the machine's name {found}")
_key = checked_by(lambda text: (found := submit_key_problem(text)) and f"the key {found}")
_id = checked_by(lambda text: (found := id_problem(text)) and f"an execution id {found}")


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``machine`` and its four actions to the ``wayline`` parser."""
    actions = add_group(
        commands,
        "machine",
        "submit, inspect and cancel state-machine executions; provision their roles",
        "The host operations of state machines.",
    )
    submit = add_command(actions, "submit", "submit an execution of NAME[@VERSION]", _submit)
    submit.add_argument("machine", metavar="NAME[@VERSION]", type=_pin)
    submit.add_argument(
        "--parent", required=True, type=checked_by(id_problem), help="id of the parent row"
    )
    submit.add_argument("--input", required=True, type=json_arg, help="the input, as JSON")
    submit.add_argument("--key", required=True, type=_key, help="idempotency key of this submit")
    submit.add_argument(
        "--scope",
        default=DEFAULT_SCOPE,
        choices=tuple(COVERS),
        help=f"the submitter's role (default {DEFAULT_SCOPE})",
    )
    _caller(submit)
    for name, help, run in (
        ("state", "print an execution's current state", _state),
        ("status", "print an execution's status", _status),
        ("cancel", "cancel an execution (audited)", _cancel),
    ):
        action = add_command(actions, name, help, run)
        action.add_argument("machine", metavar="NAME", type=_name)
        action.add_argument("execution", metavar="ID", type=_id)
        _caller(action)
    actions.choices["state"].add_argument("--json", action="store_true", help="as one object")
    actions.choices["cancel"].add_argument(
        "--reason", required=True, type=reason, help="why (audited)"
    )
    actions.choices["cancel"].add_argument("--command-id", help="idempotency id of the cancel")
    machine_roles.register(actions)


def _caller(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as", dest="actor", required=True, type=actor, metavar="ACTOR", help="who acts"
    )
    parser.add_argument("--team", default="", type=team, help="the actor's team (default: none)")


async def _submit(client: Client, args: argparse.Namespace) -> int:
    name, version = args.machine
    await require_owned(client, name, args.team, "submits its own machines")
    executions = Executions(client)
    await executions.require_standing(args.actor, args.team, args.scope)
    submitted = await executions.submit(
        name,
        parent=args.parent,
        input=args.input,
        key=args.key,
        actor=args.actor,
        team=args.team,
        scope=args.scope,
        version=version,
    )
    print(f"submitted {submitted.execution_id} ({'new' if submitted.created else 'existing'})")
    return 0


async def _state(client: Client, args: argparse.Namespace) -> int:
    value = await Executions(client).state(
        args.execution, args.actor, args.team, machine=args.machine
    )
    assert isinstance(value, StateValue)
    if args.json:
        print(json.dumps({"variant": value.variant, "fields": value.fields}, sort_keys=True))
    else:
        fields = f" {json.dumps(value.fields, sort_keys=True)}" if value.fields else ""
        print(f"{value.variant}{fields}")
    return 0


async def _status(client: Client, args: argparse.Namespace) -> int:
    """The status word (the seed's answer, alone on stdout), and on stderr a line per
    target of its open work that no running worker runs, as ``inspect`` says it: a
    ``running`` execution whose version's workers were all stopped moves no further."""
    state = await Executions(client).owned(args.execution, args.actor, args.team, args.machine)
    print(status_of(state, client.store.now()))
    rows = await work_views.instance_work(client.store, state.instance_id)
    for line in await unserved_lines(client.store, state, rows):
        print(line, file=sys.stderr)
    return 0


async def _cancel(client: Client, args: argparse.Namespace) -> int:
    status = await Executions(client).cancel(
        args.execution,
        args.actor,
        args.team,
        args.reason.strip(),
        args.command_id,
        machine=args.machine,
    )
    print(f"cancel recorded on {args.execution} ({status})")
    return 0
