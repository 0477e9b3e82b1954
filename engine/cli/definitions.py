"""`wayline definition …`: work with definition files in the JSON exchange format.

``definition check FILE.json`` validates a file without a database, so authors and CI
can check a definition before anyone publishes it. It prints
``ok <name>@<version> <fingerprint>`` and exits 0, or prints every problem as
``<path>: <message>`` (one per line, on stdout, since the list is the command's answer;
the path of the whole document is ``(document)``) and exits 1. A file that cannot be
read or is not JSON gets one line on stderr and exit 1, never a traceback.

Further actions (``publish``, ``list``) are siblings under ``definition``: register them
in ``register`` next to ``check``; ``engine.model.files.load_definition`` gives
them (and the studio) the same reading and validation, and ``DefinitionFileError`` the
same one-line failures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.model.errors import DefinitionFileError, DefinitionInvalid
from engine.model.files import load_definition


def register(commands: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add ``definition`` and ``check``; return its actions for database-backed siblings."""
    definition = commands.add_parser(
        "definition",
        help="work with workflow definition files",
        description="Work with workflow definitions in the JSON exchange format.",
    )
    actions = definition.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="validate a definition file and print its fingerprint",
        description="Validate a definition file; list every problem with its JSON path.",
    )
    check.add_argument("file", type=Path, metavar="FILE.json")
    check.set_defaults(run=run_check)
    return actions


def run_check(args: argparse.Namespace) -> int:
    """``wayline definition check``: 0 when the file is a valid definition, else 1."""
    try:
        definition = load_definition(args.file)
    except DefinitionFileError as exc:
        print(f"wayline definition check: {exc}", file=sys.stderr)
        return 1
    except DefinitionInvalid as exc:
        for error in exc.errors:
            print(f"{error.path or '(document)'}: {error.message}")
        return 1
    print(f"ok {definition.ref} {definition.fingerprint}")
    return 0
