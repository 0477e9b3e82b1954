"""`wayline definition …`: work with definition files in the JSON exchange format.

``definition check FILE.json`` validates a file without a database, so authors and CI
can check a definition before anyone publishes it. It prints
``ok <name>@<version> <fingerprint>`` and exits 0, or prints every problem as
``<path>: <message>`` (one per line, on stdout, since the list is the command's answer;
the path of the whole document is ``(document)``) and exits 1. A file that cannot be
read or is not JSON gets one line on stderr and exit 1, never a traceback.

``definition check --app MODULE:APP`` checks what an app declares instead: the state
machines it registers and its code workflows, whose code is first linted for what
would not replay the same (``engine.modes.code.lint``: one
``<name>@<version> line N: <message>`` per problem, exit 1). It prints the same
``ok`` line for each definition when nothing is wrong. ``definition publish --app``
(``engine.cli.runtime``) publishes them, with ``app_definitions`` and the same lint.

Further actions (``publish``, ``list``) are siblings under ``definition``: register them
in ``register`` next to ``check``; ``engine.model.files.load_definition`` gives
them (and the studio) the same reading and validation, and ``DefinitionFileError`` the
same one-line failures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.options import UsageError, print_invalid
from engine.model.definitions import Definition
from engine.model.errors import (
    ActivityAppNotFound,
    DefinitionFileError,
    DefinitionInvalid,
    WaylineError,
)
from engine.model.files import load_definition
from engine.modes.code.lint import LintProblem, lint
from engine.worker.activities import ActivityRegistry, load_app

APP_HELP = "check what the ActivityRegistry at MODULE:APP declares (machines, code workflows)"


class AppUnusable(WaylineError):
    """An app whose definitions cannot be read: not found, or it declares nothing."""


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
    add_source(check, APP_HELP)
    check.set_defaults(run=run_check)
    return actions


def add_source(parser: argparse.ArgumentParser, app_help: str) -> None:
    """``FILE.json`` or ``--app MODULE:APP``, exactly one of them."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", type=Path, metavar="FILE.json", nargs="?")
    source.add_argument("--app", metavar="MODULE:APP", help=app_help)


def app_from(spec: str) -> ActivityRegistry:
    """The ActivityRegistry ``--app`` names. One rule for every command that takes
    ``--app``: an app that is not ``MODULE:REGISTRY``, does not import or is no
    registry is a wrong command line (UsageError, exit 2), as the worker has always
    said, rather than exit 1 from some commands and 2 from others."""
    try:
        return load_app(spec)
    except ActivityAppNotFound as error:
        raise UsageError(str(error)) from None


def app_definitions(spec: str) -> tuple[list[Definition], list[LintProblem]]:
    """The definitions the app at ``spec`` declares (its machines', then its code
    workflows'), and every lint problem of its code. UsageError when it cannot be
    loaded (``app_from``); AppUnusable when it declares nothing."""
    registry = app_from(spec)
    return _declared(spec, registry), [p for flow in registry.workflows for p in lint(flow)]


def _declared(spec: str, registry: ActivityRegistry) -> list[Definition]:
    machines = [flow.definition for flow in registry.machines]
    definitions = [*machines, *(flow.definition for flow in registry.workflows)]
    if not definitions:
        raise AppUnusable(f"{spec} declares no state machines or code workflows")
    return definitions


def run_check(args: argparse.Namespace) -> int:
    """``wayline definition check``: 0 when the file is a valid definition (or the
    app's definitions are, and its code lints clean), else 1."""
    if args.app is not None:
        return _check_app(args.app)
    try:
        definition = load_definition(args.file)
    except DefinitionFileError as exc:
        print(f"wayline definition check: {exc}", file=sys.stderr)
        return 1
    except DefinitionInvalid as exc:
        print_invalid(exc)
        return 1
    print(f"ok {definition.ref} {definition.fingerprint}")
    return 0


def _check_app(spec: str) -> int:
    definitions, problems = app_definitions(spec)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    for definition in definitions:
        print(f"ok {definition.ref} {definition.fingerprint}")
    return 0
