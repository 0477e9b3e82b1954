"""`wayline migrate`: bring a PostgreSQL schema up to date."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    """Add the store subcommands to the parser."""
    migrate = commands.add_parser("migrate", help="apply missing schema migrations")
    migrate.add_argument("--dsn", help="PostgreSQL connection string (default: WAYLINE_DSN)")
    migrate.add_argument("--schema", default="wayline", help="schema name (default: wayline)")
    migrate.set_defaults(run=_not_ready)


def _not_ready(args: argparse.Namespace) -> int:
    raise SystemExit("wayline migrate: not implemented yet")
