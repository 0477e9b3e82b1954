"""Options every database-backed command shares: where the store is, and its schema.

A DSN may carry a password, so no message ever echoes it (or driver text quoting it).
"""

from __future__ import annotations

import argparse
import os

import psycopg
from psycopg.conninfo import conninfo_to_dict

from engine.store.migrations import DEFAULT_SCHEMA, validate_schema_name

DSN_ENV = "WAYLINE_DSN"


class UsageError(Exception):
    """The command line itself is wrong; the message says how to fix it."""


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", help=f"PostgreSQL connection string (default: {DSN_ENV})")
    parser.add_argument(
        "--schema",
        default=DEFAULT_SCHEMA,
        type=schema_name,
        help=f"schema name (default: {DEFAULT_SCHEMA})",
    )


def resolve_dsn(args: argparse.Namespace) -> str:
    """The DSN from --dsn or WAYLINE_DSN; UsageError when absent or malformed."""
    dsn = args.dsn or os.environ.get(DSN_ENV)
    if not dsn:
        raise UsageError(f"no database given: pass --dsn or set {DSN_ENV}")
    return checked_dsn(dsn)


def checked_dsn(dsn: str, what: str = "the DSN") -> str:
    """``dsn`` if it parses as a PostgreSQL connection string; else UsageError naming
    ``what`` (never the text, which may hold a password)."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise UsageError(f"{what} is not a valid PostgreSQL connection string") from None
    return dsn


def schema_name(value: str) -> str:
    """argparse type for --schema."""
    try:
        return validate_schema_name(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
