"""Options every database-backed command shares (where the store is, and its schema),
and the failures every command reports the same way.

A DSN may carry a password, so no message ever echoes it (or driver text quoting it).
A command raises ``CommandFailed`` (or ``UsageError``) with a message that says what
was wrong; ``engine.cli.main`` prints it as ``wayline <command>: <message>`` and exits
with its status, as it does for a database that cannot be reached (``cannot_connect``).
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from engine.decide.audit import actor_problem, reason_problem
from engine.model.errors import DefinitionInvalid
from engine.model.identifiers import (
    code_problem,
    id_problem,
    key_problem,
    name_problem,
    signal_id_problem,
    team_problem,
)
from engine.store.migrations import DEFAULT_SCHEMA, validate_schema_name

T = TypeVar("T")

DSN_ENV = "WAYLINE_DSN"
EXIT_FAILED = 1
EXIT_USAGE = 2
MIN_PORT = 1
MAX_PORT = 65_535
"""The TCP ports a server of ours listens on. Port 0 would have the system choose one,
which no message could then name; a larger number would wrap around (99999 is 34463)."""
NO_PORT = 0
"""``--metrics-port 0``: serve no metrics (as when the option is not given)."""


NEGATIVE_VALUE = re.compile(r"^-\d")
"""An argument argparse should read as a (negative) value: a minus, then a digit."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusal is the one line ``wayline <command>: error:
    <what was wrong>`` on stderr, exit EXIT_USAGE: argparse's default puts the whole
    usage synopsis (seven lines for ``wayline command``) above that line, burying it.
    ``--help`` still shows the synopsis. Subcommands' parsers are of this class too
    (``add_subparsers`` makes them of their parent's class).

    A value that begins with a minus and a digit is a value, not an option: argparse
    takes only plain numbers so (``-5``), and answered ``--keep -1d`` or
    ``--drain-seconds -1e3`` with "expected one argument" instead of saying what a keep
    or a drain may be. No option of ``wayline`` begins with a digit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE
        # The innermost parser's default wins (argparse copies a subcommand's namespace
        # over its parent's), so a command's own failures carry the prog its usage
        # errors do: ``wayline retention run``, not ``wayline retention``.
        self.set_defaults(label=self.prog)

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """A command's own parser (one without subcommands) refuses what it does not
        know, so the line names the command (``wayline retention set: error:
        unrecognized arguments: --bogus``); argparse left that to the top parser, whose
        line said only ``wayline``."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self._subparsers is None:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


class CommandFailed(Exception):
    """The command could not do what it was asked; the message says why."""

    status = EXIT_FAILED


class UsageError(CommandFailed):
    """The command line itself is wrong; the message says how to fix it."""

    status = EXIT_USAGE


def outcome_unknown(command_id: str) -> CommandFailed:
    """An audited command whose commit's answer was lost (``CommitUnknown``): it may
    stand recorded or not, and the same command again with the same id is the one safe
    way to learn which (a new id could record it twice)."""
    return CommandFailed(
        f"the outcome is unknown (the answer to the commit was lost): give the same "
        f"command again with --command-id {command_id} to learn it"
    )


def command_label(args: argparse.Namespace) -> str:
    """How a command's messages begin: the prog of the parser that parsed its action
    (``wayline retention run``), as its usage errors begin (``Parser``)."""
    return str(args.label)


def print_invalid(invalid: DefinitionInvalid, file: TextIO | None = None) -> None:
    """Each problem of an invalid definition on a line of its own, where it is first
    (``(document)`` for the whole document), as every command that reads a definition
    file says them (``file``: standard output when None)."""
    for problem in invalid.errors:
        print(f"{problem.path or '(document)'}: {problem.message}", file=file)


def cannot_connect(what: str = "the database", option: str = "--dsn", env: str = DSN_ENV) -> str:
    """The one message for a database that cannot be reached, whatever the reason (a
    wrong address, user, password or database name, or a server that is down): the
    driver's text would say which, but it can quote the host and the user. ``env`` is
    empty for a command that takes its server only from ``option``."""
    return f"cannot connect to {what}: check {' or '.join(filter(None, (option, env)))}"


@contextmanager
def writing(path: Path, what: str) -> Iterator[None]:
    """Whatever writes ``path`` in the block: an OSError (a missing directory, a
    directory where a file was meant, no permission, a full disk) becomes CommandFailed
    naming ``what`` and the path, with the system's reason, instead of a traceback."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise CommandFailed(f"{what} {path} cannot be written ({reason})") from None


def check_writable(path: Path, what: str) -> None:
    """Refuse, before a long run, a file that ``writing`` would refuse after it: a
    directory, a missing directory around it, or one this process may not write."""
    with writing(path, what):
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not path.parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
        if not os.access(path if path.exists() else path.parent, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


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
    dsn = optional_dsn(args)
    if dsn is None:
        raise UsageError(f"no database given: pass --dsn or set {DSN_ENV}")
    return dsn


def optional_dsn(args: argparse.Namespace) -> str | None:
    """The DSN from --dsn or WAYLINE_DSN (UsageError when malformed), or None when
    neither is set: the command then runs on a private cluster."""
    dsn = args.dsn or os.environ.get(DSN_ENV)
    return checked_dsn(dsn) if dsn else None


def dsn_origin(args: argparse.Namespace) -> str:
    """Which of --dsn and WAYLINE_DSN gave the DSN: what to show of it, since the DSN
    itself may hold a password."""
    return "--dsn" if args.dsn else DSN_ENV


def checked_dsn(dsn: str, what: str = "the DSN") -> str:
    """``dsn`` if it parses as a PostgreSQL connection string; else UsageError naming
    ``what`` (never the text, which may hold a password)."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise UsageError(f"{what} is not a valid PostgreSQL connection string") from None
    return dsn


def port(text: str) -> int:
    """argparse type for a port to listen on: MIN_PORT to MAX_PORT."""
    return _port(text, MIN_PORT)


def port_or_none(text: str) -> int:
    """argparse type for a port to listen on, or NO_PORT for no listening at all."""
    return _port(text, NO_PORT)


def _port(text: str, lowest: int) -> int:
    none = f", or {NO_PORT} for none" if lowest == NO_PORT else ""
    return whole_number(
        text, lowest, MAX_PORT, f"must be a port number from {MIN_PORT} to {MAX_PORT}{none}"
    )


def whole_number(text: str, lowest: int, highest: int, rule: str) -> int:
    """``text`` as a whole number from ``lowest`` to ``highest``, for an argparse type;
    anything else (not a number, or out of range) is refused saying ``rule``."""
    try:
        number = int(text)
    except ValueError:
        number = lowest - 1
    if not lowest <= number <= highest:
        raise argparse.ArgumentTypeError(rule)
    return number


def schema_name(value: str) -> str:
    """argparse type for --schema."""
    try:
        return validate_schema_name(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def checked_by(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    """An argparse type refusing text for which ``problem`` says why it is not allowed,
    so a bad value is a usage error (exit EXIT_USAGE) naming its option, before
    anything is written, rather than a failure of the command."""

    def check(text: str) -> str:
        if found := problem(text):
            raise argparse.ArgumentTypeError(found)
        return text

    return check


def converted_by(convert: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type that is ``convert``, whose ValueError (saying what is allowed)
    becomes the option's refusal."""

    def check(text: str) -> T:
        try:
            return convert(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return check


team = checked_by(team_problem)
"""argparse type for ``--team``: a team id as the studio makes them, or '' (the
engine's own team)."""
actor = checked_by(actor_problem)
"""argparse type for who acts (``--actor``, ``--as``): an id, as every audit records."""
reason = checked_by(reason_problem)
"""argparse type for ``--reason``: text that says something, of at most
MAX_REASON_LENGTH characters."""
instance_id = checked_by(id_problem)
"""argparse type for a new instance's ``--id``."""
named_instance = checked_by(lambda text: (found := key_problem(text)) and f"an instance id {found}")
"""argparse type for the instance a command names: an id, or a child's id derived from
its parent's (up to MAX_KEY_LENGTH); refused before connecting, so an empty or spaced id
is said to be one rather than looked up."""
version = checked_by(lambda text: (found := name_problem(text)) and f"the version {found}")
"""argparse type for a version a command names (``instance migrate --to``, the target
of ``definition declare-edge``): a name, as every published version is."""
signal_name = checked_by(name_problem)
"""argparse type for the name of a signal ``wayline signal`` delivers."""
outcome_code = checked_by(lambda text: (found := code_problem(text)) and f"the code {found}")
"""argparse type for ``--code`` (a compensation settled by hand): what its event takes."""
signal_id = checked_by(signal_id_problem)
"""argparse type for ``--signal-id``: what the engine would refuse after connecting."""
