"""The `wayline` command line.

Each subcommand is a thin shell over an engine function: parse arguments, call it,
print the result, and map known errors to a clear message and a non-zero exit. The
failures any command can meet (``CommandFailed`` and ``UsageError`` from
``engine.cli.options``, a database that cannot be reached, an engine error such as a
definition name owned by another team) are printed in ``main``, once, as
``wayline <command>: <message>``, the command named in full as its usage errors name
it (``wayline retention run: ...``).

The engine's own subcommands are registered here; the packages above the engine add
theirs through the ``wayline.commands`` entry points (``studio`` and ``user`` from
``studio.commands``, ``drill`` from ``verification.commands``), each a function that
takes the subparsers and adds its commands, so the engine never imports them. A
plugin that fails to load is reported in one line on stderr and left out; every other
command still works.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from engine.cli import (
    dead_letters,
    definitions,
    holds,
    machines,
    migrate,
    retention,
    runtime,
    version_moves,
)
from engine.cli.options import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandFailed,
    Parser,
    cannot_connect,
    command_label,
)
from engine.model.errors import InputRefused, WaylineError
from engine.model.inputs import check_text
from engine.store.errors import CannotConnect
from engine.store.migrations import MigrationError

COMMANDS_GROUP = "wayline.commands"
"""The entry-point group through which other packages add ``wayline`` subcommands."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = Parser(prog="wayline", description="Durable workflows on PostgreSQL.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    definition_actions = definitions.register(commands)
    runtime.register_definition_actions(definition_actions)
    version_moves.register_edge(definition_actions)
    version_moves.register_deprecate(definition_actions)
    migrate.register(commands)
    runtime.register(commands)
    version_moves.register(commands)
    machines.register(commands)
    retention.register(commands)
    holds.register(commands)
    dead_letters.register(commands)
    _register_plugins(commands)
    return parser


def _register_plugins(commands: argparse._SubParsersAction) -> None:
    """Add the subcommands of every ``wayline.commands`` entry point, in name order.

    A plugin that cannot be imported or fails while registering is named in one line on
    stderr, with the error's type and first line, and left out (no traceback)."""
    for plugin in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            plugin.load()(commands)
        except Exception as error:  # a broken plugin must not take the other commands down
            reason = type(error).__name__
            if first_line := next(iter(str(error).splitlines()), ""):
                reason = f"{reason}: {first_line}"
            print(
                f"wayline: cannot load the {plugin.name} commands ({plugin.value}): {reason}",
                file=sys.stderr,
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `wayline` console script; returns the exit status."""
    _quiet_driver_logs()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_arguments(args)
    except InputRefused as refused:
        return _refuse(args, str(refused), EXIT_USAGE)
    try:
        status = int(args.run(args) or 0)
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_gone()
    except CommandFailed as failed:
        return _refuse(args, str(failed), failed.status)
    except CannotConnect:
        return _refuse(args, cannot_connect(), EXIT_FAILED)
    except (WaylineError, MigrationError) as error:  # worded for people, with no driver text
        return _refuse(args, str(error), EXIT_FAILED)
    return status


def _refuse(args: argparse.Namespace, message: str, status: int) -> int:
    """Print ``message`` as the command's one line on stderr; return ``status``."""
    print(f"{command_label(args)}: {message}", file=sys.stderr)
    return status


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse text arguments that are not UTF-8 (Python hands such bytes over as lone
    surrogates, which fail far later as a codec error) or that hold a NUL."""
    for name, value in vars(args).items():
        if isinstance(value, str):
            check_text(value, f"the {name.replace('_', ' ')}")


def _reader_gone() -> int:
    """The reader of the output went away (``wayline history ID | head -1``): stop
    quietly with status 0 as other Unix tools do, and point stdout at /dev/null so
    that the interpreter's last flush does not report the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _quiet_driver_logs() -> None:
    """Keep driver and pool diagnostics (which quote connection details) off the terminal.

    Commands report failures as one classified line; the engine's own warnings remain.
    """
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)


if __name__ == "__main__":
    sys.exit(main())
