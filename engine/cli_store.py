"""`wayline migrate`: bring a PostgreSQL schema up to date.

Messages name the schema and the migration file but never echo the DSN or driver text,
since a DSN can carry a password and driver messages can quote it.
"""

from __future__ import annotations

import argparse
import os
import sys

import psycopg
from psycopg.conninfo import conninfo_to_dict

from engine.migrations import DEFAULT_SCHEMA, MigrationError, apply_migrations, validate_schema_name

DSN_ENV = "WAYLINE_DSN"
EXIT_FAILED = 1
EXIT_USAGE = 2


def register(commands: argparse._SubParsersAction) -> None:
    """Add the store subcommands to the parser."""
    migrate = commands.add_parser("migrate", help="apply missing schema migrations")
    migrate.add_argument("--dsn", help=f"PostgreSQL connection string (default: {DSN_ENV})")
    migrate.add_argument(
        "--schema",
        default=DEFAULT_SCHEMA,
        type=_schema_name,
        help=f"schema name (default: {DEFAULT_SCHEMA})",
    )
    migrate.set_defaults(run=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    """Apply the missing migrations and report each file.

    Exit 2 when no usable DSN was given, 1 when migrating failed, each with one clear line.
    """
    dsn = args.dsn or os.environ.get(DSN_ENV)
    if not dsn:
        return _fail(f"no database given: pass --dsn or set {DSN_ENV}", EXIT_USAGE)
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return _fail("the DSN is not a valid PostgreSQL connection string", EXIT_USAGE)
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


def _schema_name(value: str) -> str:
    try:
        return validate_schema_name(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _fail(message: str, status: int = EXIT_FAILED) -> int:
    print(f"wayline migrate: {message}", file=sys.stderr)
    return status
