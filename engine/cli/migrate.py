"""`wayline migrate`: bring a PostgreSQL schema up to date.

Messages name the schema and the migration file but never echo the DSN or driver text,
since a DSN can carry a password and driver messages can quote it.
"""

from __future__ import annotations

import argparse
import sys

import psycopg

from engine.cli.options import DSN_ENV, UsageError, add_store_options, resolve_dsn
from engine.store.migrations import MigrationError, apply_migrations

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(commands: argparse._SubParsersAction) -> None:
    """Add the store subcommands to the parser."""
    migrate = commands.add_parser("migrate", help="apply missing schema migrations")
    add_store_options(migrate)
    migrate.set_defaults(run=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    """Apply the missing migrations and report each file.

    Exit 2 when no usable DSN was given, 1 when migrating failed, each with one clear line.
    """
    try:
        dsn = resolve_dsn(args)
    except UsageError as error:
        return _fail(str(error), EXIT_USAGE)
    try:
        applied = apply_migrations(dsn, args.schema)
    except MigrationError as error:
        return _fail(str(error))
    except psycopg.OperationalError:
        return _fail(f"could not connect to PostgreSQL (check --dsn or {DSN_ENV})")
    except psycopg.Error as error:
        return _fail(f"PostgreSQL refused the request (SQLSTATE {error.sqlstate or 'unknown'})")
    for name in applied:
        print(f"applied {name} to schema {args.schema}")
    if not applied:
        print(f"schema {args.schema} is up to date")
    return 0


def _fail(message: str, status: int = EXIT_FAILED) -> int:
    print(f"wayline migrate: {message}", file=sys.stderr)
    return status
