"""``wayline studio`` and ``wayline user create``: thin shells over ``studio.server``.

The studio registers these subcommands itself, through the ``wayline.commands`` entry
point in ``pyproject.toml``, so the engine's command line never imports the studio.
The studio (and its web libraries) is imported inside the commands only, so every
other ``wayline`` command starts without loading a web framework.
"""

from __future__ import annotations

import argparse
import os
import sys

from engine.cli.options import (
    CommandFailed,
    UsageError,
    add_store_options,
    cannot_connect,
    checked_dsn,
    dsn_origin,
    optional_dsn,
    port,
)
from engine.worker import logs
from studio.roles import Role

ROLES = tuple(role.value for role in Role)
READ_DSN_ENV = "WAYLINE_READ_DSN"


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``studio`` and ``user`` to the ``wayline`` parser (the entry point)."""
    studio = commands.add_parser(
        "studio",
        help="run the web studio",
        description="Serve the studio. Uses WAYLINE_DSN when set, else a private PostgreSQL "
        "in .data/studio-pg; runs a worker for the example activities.",
    )
    add_store_options(studio)
    studio.add_argument(
        "--read-dsn",
        help=f"a streaming replica that the instance list, instance pages, histories and "
        f"drill reports read from, each saying how far behind it is; actions always act "
        f"on the primary (default: {READ_DSN_ENV}; none: everything reads the primary)",
    )
    studio.add_argument("--host", default="127.0.0.1", help="address to listen on")
    studio.add_argument("--port", type=port, default=8080, help="port to listen on")
    studio.add_argument(
        "--secure-cookies",
        action="store_true",
        help="served over HTTPS: mark cookies Secure and send Strict-Transport-Security",
    )
    studio.add_argument(
        "--live-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often live instance pages look for change (0 turns live updates off)",
    )
    studio.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a reverse proxy (address or network) whose X-Forwarded-For names the client "
        "for sign-in limits; repeat for several (default: none, the header is ignored)",
    )
    logs.add_option(studio)
    studio.set_defaults(run=_studio)

    user = commands.add_parser("user", help="manage studio users")
    actions = user.add_subparsers(dest="user_action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create a studio user in a team",
        description="Create a user and make them a member of TEAM (created when missing). "
        "Without --password-stdin a one-time password is generated and printed.",
    )
    add_store_options(create)
    create.add_argument("username")
    create.add_argument("--team", default="default", help="team id (default: default)")
    create.add_argument("--role", choices=ROLES, default="viewer")
    create.add_argument("--display-name", default="")
    create.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    create.set_defaults(run=_user_create)


def _studio(args: argparse.Namespace) -> int:
    """Serve the studio, once every option is checked (UsageError saying which is not)."""
    from studio.accounts.signin_limits import trusted_networks
    from studio.server import PortUnavailable, ReplicaUnreachable, run_studio
    from studio.trace_links import TRACE_URL_ENV, trace_url_problem

    try:
        trusted_networks(args.trusted_proxy)
    except ValueError as bad:
        raise UsageError(str(bad)) from None
    if problem := trace_url_problem(os.environ.get(TRACE_URL_ENV, "")):
        raise UsageError(problem)  # before the studio announces itself as serving
    read_dsn = _read_dsn(args)
    try:
        return run_studio(
            args.host,
            args.port,
            optional_dsn(args),
            args.schema,
            args.secure_cookies,
            live_interval=max(args.live_interval, 0.0),
            trusted_proxies=tuple(args.trusted_proxy),
            log_format=args.log_format,
            read_dsn=read_dsn,
            dsn_from=dsn_origin(args),
        )
    except ReplicaUnreachable:
        raise CommandFailed(
            cannot_connect("the read replica", "--read-dsn", READ_DSN_ENV)
        ) from None
    except PortUnavailable as taken:
        raise CommandFailed(str(taken)) from None


def _read_dsn(args: argparse.Namespace) -> str:
    """The replica's DSN from --read-dsn or WAYLINE_READ_DSN ('' for none)."""
    given = args.read_dsn or os.environ.get(READ_DSN_ENV) or ""
    return checked_dsn(given, "the read DSN") if given else ""


def _user_create(args: argparse.Namespace) -> int:
    from studio.server import create_user

    password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
    return create_user(
        optional_dsn(args),
        args.schema,
        args.username,
        args.team,
        args.role,
        args.display_name,
        password,
    )
