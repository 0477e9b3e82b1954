"""``wayline studio`` and ``wayline user create``: run the studio, manage its users.

Without ``WAYLINE_DSN`` the studio keeps its own PostgreSQL cluster in
``.data/studio-pg`` (started on demand, stopped on exit), applies the migrations, and
runs a worker for the example activities in the same process, so one command gives a
studio that can author, publish and run workflows. The very first start creates the
``default`` team and its ``admin`` with a one-time password printed once, and publishes
the example order-fulfillment definition so the studio is not empty.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from engine import (
    ActivityRegistry,
    CannotConnect,
    Client,
    DefinitionConflict,
    EmbeddedPostgres,
    Store,
    apply_migrations,
    install_signal_handlers,
    load_definition,
)
from engine.decide.audit import COMMAND_LINE_ACTOR
from engine.worker import logs, tracing
from studio.accounts import people
from studio.accounts.people import DEFAULT_TEAM, FIRST_ADMIN, PeopleError
from studio.app import create_app
from studio.roles import Role
from studio.settings import StudioSettings

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / ".data" / "studio-pg"
EXAMPLE = ROOT / "examples" / "order_fulfillment.json"
GRACEFUL_SHUTDOWN_SECONDS = 5
"""Live pages hold streams open; on Ctrl+C they are cut after this long."""
T = TypeVar("T")


@contextmanager
def database(dsn: str | None, schema: str, *, keep_running: bool = False) -> Iterator[str]:
    """A migrated database: ``dsn`` when given, else the studio's private cluster.

    The private cluster is stopped on exit unless it was already running before (the
    studio itself may be using it) or ``keep_running`` is set.
    """
    if dsn:
        apply_migrations(dsn, schema)
        yield dsn
        return
    server = EmbeddedPostgres(DATA_DIR)
    already_running = (DATA_DIR / "postmaster.pid").exists()
    started = server.start()
    try:
        apply_migrations(started, schema)
        yield started
    finally:
        if not (already_running or keep_running):
            server.stop()


async def _with_store(dsn: str, schema: str, action: Callable[[Store], Awaitable[T]]) -> T:
    store = await Store.open(dsn, schema)
    try:
        return await action(store)
    finally:
        await store.close()


class ReplicaUnreachable(Exception):
    """The read replica cannot be reached; the command line says which option names it."""


class PortUnavailable(Exception):
    """The studio's address cannot be bound (another process has the port, most often);
    the message says which address and why."""


def _listen(host: str, port: int) -> socket.socket:
    """The studio's listening socket, bound before anything is announced or created: a
    port in use would otherwise end the server after the address and a first admin's
    one-time password were printed. PortUnavailable when it cannot be bound."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        both = family == socket.AF_INET6 and socket.has_dualstack_ipv6()  # "::" takes IPv4 too
        return socket.create_server((host, port), family=family, dualstack_ipv6=both)
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else type(error).__name__
        raise PortUnavailable(f"the port {port} cannot be bound on {host} ({reason})") from None


async def _reach_replica(read_dsn: str, schema: str) -> None:
    """Open the replica's store once, before the studio serves: in the app's startup a
    replica that cannot be reached ends the server with a long ExceptionGroup traceback
    after the address was already printed. ReplicaUnreachable when it cannot be."""
    try:
        replica = await Store.open(read_dsn, schema, read_only=True)
    except CannotConnect:
        raise ReplicaUnreachable from None
    await replica.close()


async def _first_start(store: Store) -> tuple[str | None, list[str]]:
    """Create the first admin (and publish the examples: the order fulfillment and the
    code-first order saga, whose code the studio's worker runs) on an empty studio.

    Returns the admin's one-time password and the examples left out because their
    names already belong to another team (a database where the command line, team '',
    published them first): the announcement says so, or the empty Definitions page
    would contradict it."""
    password = await people.bootstrap_admin(store)
    left_out: list[str] = []
    if password is not None and EXAMPLE.is_file():
        from examples import order_saga

        client = Client(store)
        examples = [
            load_definition(EXAMPLE),
            *(flow.definition for flow in order_saga.app.workflows),
        ]
        for definition in examples:
            try:
                await client.publish(definition, "wayline", DEFAULT_TEAM)
            except DefinitionConflict:  # the name is another team's: leave it there
                left_out.append(definition.name)
    return password, left_out


def run_studio(
    host: str,
    port: int,
    dsn: str | None,
    schema: str,
    secure_cookies: bool = False,
    live_interval: float = 1.0,
    trusted_proxies: tuple[str, ...] = (),
    log_format: str = "text",
    read_dsn: str = "",
    dsn_from: str = "WAYLINE_DSN",
) -> int:
    """Serve the studio until interrupted; returns the exit status. ``log_format``:
    text, or JSON lines (``engine.worker.logs``), uvicorn's records included;
    ``read_dsn``: a replica the read pages read from (``studio.reads``); ``dsn_from``:
    what gave ``dsn`` (an option or a variable), which the announcement names in
    place of the DSN and its password."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from examples import order_saga, orders

    install_signal_handlers()
    logs.use_format(log_format)
    tracing.configure("wayline-studio")
    with _listen(host, port) as listening, database(dsn, schema) as ready:
        if read_dsn:  # before the first start, whose one-time password is shown only once
            asyncio.run(_reach_replica(read_dsn, schema))
        password, left_out = asyncio.run(_with_store(ready, schema, _first_start))
        where = f"a private PostgreSQL in {DATA_DIR}" if dsn is None else f"given by {dsn_from}"
        _announce(host, port, where, password, bool(read_dsn), left_out)
        settings = StudioSettings(
            ready,
            schema,
            read_dsn=read_dsn,
            secure_cookies=secure_cookies,
            worker_activities=ActivityRegistry.combined(orders.app, order_saga.app),
            live_interval=timedelta(seconds=live_interval),
            trusted_proxies=trusted_proxies,
        )
        config = uvicorn.Config(
            create_app(settings),
            host=host,
            port=port,
            log_level="warning",
            log_config=None if log_format == "json" else LOGGING_CONFIG,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            proxy_headers=False,  # the studio reads X-Forwarded-For itself, from trusted proxies
        )
        uvicorn.Server(config).run(sockets=[listening])
    return 0


def _announce(
    host: str,
    port: int,
    where: str,
    password: str | None,
    replica: bool = False,
    left_out: Sequence[str] = (),
) -> None:
    """What the studio serves and from where (``where``: the database, in words), and
    which examples its first start could not publish for its team (``left_out``)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    lines = [
        f"Wayline studio: http://{shown}:{port}/",
        f"  database: {where}; a worker runs the example activities (examples/orders.py)",
    ]
    if replica:
        lines.append("  reads: list, instance, history and drill-report pages read the replica")
    if left_out:
        lines.append(
            f"  examples not published in team {DEFAULT_TEAM}: {', '.join(left_out)} "
            "(another team, such as the command line's, published those names first)"
        )
    if password:
        lines += [
            f"  sign in as {FIRST_ADMIN} with this one-time password: {password}",
            "  (shown only now; you choose your own password at the first sign-in)",
        ]
    else:
        lines.append(
            "  sign in with your account; add one with: "
            "wayline user create NAME --team TEAM --role ROLE"
        )
    lines.append("  stop with Ctrl+C")
    print("\n".join(lines), flush=True)


def create_user(
    dsn: str | None,
    schema: str,
    username: str,
    team: str,
    role: str,
    display_name: str,
    password: str | None,
) -> int:
    """Create (or add to a team) a studio user; prints a one-time password when generated.

    A given password (even an empty one: the caller asked to set one) must pass the
    studio's rules, checked before anything is written."""
    from studio.accounts.password_policy import PasswordRejected, check_new_password
    from studio.accounts.passwords import generate_password

    generated = password is None
    secret = generate_password() if password is None else password

    async def action(store: Store) -> str:
        await people.ensure_team(store, team, team)
        user = await people.create_user(
            store, username, secret, display_name, must_change_password=generated
        )
        await people.set_membership(store, user.user_id, team, Role(role), COMMAND_LINE_ACTOR)
        return user.username

    try:
        check_new_password(secret, username)
        with database(dsn, schema) as ready:
            name = asyncio.run(_with_store(ready, schema, action))
    except (PeopleError, PasswordRejected) as refused:
        print(f"wayline user create: {refused}", file=sys.stderr)
        return 1
    print(f"created {name}: {role} in team {team}")
    if generated:
        print(f"one-time password: {secret} (to be changed at the first sign-in)")
    return 0
