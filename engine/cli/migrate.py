"""`wayline migrate`: bring a PostgreSQL schema up to date.

Messages name the schema and the migration file but never echo the DSN or driver text,
since a DSN can carry a password and driver messages can quote it.
"""

from __future__ import annotations

import argparse

import psycopg

from engine.cli.options import CommandFailed, add_store_options, resolve_dsn
from engine.store.migrations import MigrationError, apply_migrations


def register(commands: argparse._SubParsersAction) -> None:
    """Add the store subcommands to the parser."""
    migrate = commands.add_parser("migrate", help="apply missing schema migrations")
    add_store_options(migrate)
    migrate.set_defaults(run=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    """Apply the missing migrations and report each file.

    CommandFailed (exit 1) when migrating failed; ``engine.cli.main`` prints it, as it
    prints a missing DSN (exit 2) and a server that cannot be reached for every command.
    """
    dsn = resolve_dsn(args)
    try:
        applied = apply_migrations(dsn, args.schema)
    except MigrationError as error:
        raise CommandFailed(str(error)) from None
    except psycopg.Error as error:
        sqlstate = error.sqlstate or "unknown"
        raise CommandFailed(f"PostgreSQL refused the request (SQLSTATE {sqlstate})") from None
    for name in applied:
        print(f"applied {name} to schema {args.schema}")
    if not applied:
        print(f"schema {args.schema} is up to date")
    return 0
