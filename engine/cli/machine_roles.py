"""`wayline machine roles`: the database roles machines' advances act as (issue 19).

Prints the idempotent SQL that creates the roles of every resource the machines name,
and the role without grants, and makes the worker's login a member of each (``--to``;
by default whoever runs the SQL); ``--apply`` runs it instead. The machines are those an
app registers (``--app MODULE:APP``), those of manifest files (``FILE.json``), or, with
neither, every machine published in the store. Printing from an app or files needs no
database. What the roles may do with the application's tables is the team's to grant:
the SQL ends with a reminder, as comments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psycopg

from engine.cli.definitions import app_from
from engine.cli.options import (
    EXIT_FAILED,
    CommandFailed,
    UsageError,
    add_store_options,
    cannot_connect,
    print_invalid,
    resolve_dsn,
)
from engine.model.definitions import Definition
from engine.model.errors import DefinitionInvalid
from engine.model.files import load_definition
from engine.modes.machines.provisioning import (
    provision_roles,
    provisioning_sql,
    resources_of,
    roles_of,
)
from engine.store import catalog
from engine.store.store import Store
from engine.worker import runner


def register(actions: argparse._SubParsersAction) -> None:
    """Add ``roles`` to ``wayline machine``."""
    help = "print (or --apply) the SQL that makes the database roles machines act as"
    roles = actions.add_parser("roles", help=help, description=help[0].upper() + help[1:] + ".")
    add_store_options(roles)
    roles.add_argument("files", nargs="*", type=Path, metavar="FILE.json", help="manifests")
    roles.add_argument("--app", metavar="MODULE:APP", help="the machines this app registers")
    roles.add_argument("--to", metavar="LOGIN", help="the worker's login (default: CURRENT_USER)")
    roles.add_argument("--apply", action="store_true", help="run the SQL on --dsn")
    roles.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    """The roles' SQL; ``engine.cli.main`` prints the failures every command meets, and
    a refusal of the database is said here in words (never the driver's text)."""
    try:
        return runner.run(_roles(args))
    except DefinitionInvalid as invalid:
        print_invalid(invalid, sys.stderr)
        return EXIT_FAILED
    except psycopg.Error as error:
        raise CommandFailed(_refusal(error, args.to)) from None


def _refusal(error: psycopg.Error, login: str | None) -> str:
    """Why the database refused, in words (never the driver's text)."""
    if isinstance(error, psycopg.errors.InsufficientPrivilege):
        return "this login may not create or grant roles (CREATEROLE)"
    if isinstance(error, psycopg.errors.UndefinedObject) and login:
        return f"there is no login {login} to make a member of the roles"  # all else is made
    if isinstance(error, psycopg.OperationalError):
        return cannot_connect()
    return "the database refused the roles' SQL"


async def _roles(args: argparse.Namespace) -> int:
    resources = resources_of(await _definitions(args))
    if (args.app or args.files) and not resources:  # a file or app of another kind
        raise UsageError("the app and files given declare no state machine")
    if not args.apply:
        print(provisioning_sql(resources, args.to) + _reminder(resources), end="")
        return 0
    async with await psycopg.AsyncConnection.connect(resolve_dsn(args), autocommit=True) as conn:
        await provision_roles(conn, resources, args.to)
    named = ", ".join(resources) or "no resources"
    print(f"provisioned the roles of {named} and the role without grants")
    return 0


async def _definitions(args: argparse.Namespace) -> list[Definition]:
    """The definitions whose machines need roles (see the module)."""
    if args.app or args.files:
        flows = app_from(args.app).machines if args.app else []
        return [flow.definition for flow in flows] + [load_definition(f) for f in args.files]
    store = await Store.open(resolve_dsn(args), args.schema)
    try:
        return [version.definition for version in await catalog.versions(store)]
    finally:
        await store.close()


def _reminder(resources: list[str]) -> str:
    """What the team grants next, as SQL comments."""
    lines = ["-- Then grant each role what its machines may do with your tables, e.g.:"]
    for resource in resources:
        roles = roles_of(resource)
        lines.append(f"--   GRANT USAGE ON SCHEMA <schema> TO {roles.read};")
        lines.append(f"--   GRANT SELECT ON <tables> TO {roles.read};")
        lines.append(f"--   GRANT INSERT, UPDATE, DELETE ON <tables> TO {roles.write};")
    return "".join(f"{line}\n" for line in lines)
