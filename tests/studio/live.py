"""A studio served by uvicorn in a thread, on a private schema, and ways to seed it.

Shared by the HTTP tests (tests/studio) and the browser tests (tests/browser): both
talk to a real server over a real socket, as a browser or a script would. Seeding goes
through the studio's own modules on a separate thread with its own event loop, so the
sync tests (and Playwright's sync API) never run inside an event loop.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

import httpx
import psycopg
import uvicorn

from engine.api.client import Client
from engine.decide.lifecycle import start_draft
from engine.decide.operator_actions import Action
from engine.model.events import EventKind
from engine.model.transitions import Draft
from engine.model.validation import parse_definition
from engine.store import catalog, sweeps, workers
from engine.store.migrations import apply_migrations
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import InstanceCache, RegistrySource
from engine.worker.loop import Worker, WorkerConfig
from studio.accounts import people
from studio.accounts.passwords import Argon2Cost
from studio.accounts.signin_limits import SignInLimits
from studio.app import create_app
from studio.roles import Role
from studio.settings import StudioSettings
from tests.integration.schema_pool import drop_schema

PASSWORD = "correct horse battery"
WHEN_HTML = r'<span class="date">\d{4}-\d\d-\d\d</span> \d\d:\d\d:\d\d UTC'
"""A time as a page shows it (``studio.formats.when_markup``), as a regular expression."""
OVERDUE = """
UPDATE work SET available_at = now() - interval '2 days', deadline = now() - interval '1 day'
WHERE instance_id = %(instance)s AND state IN (1, 2)
"""
OVERDUE_SWEPT = """
SELECT state = 4 AND failure_code = %(code)s FROM work WHERE instance_id = %(instance)s
FOR UPDATE
"""
"""Whether each of the instance's work rows is a dead letter of its deadline. Locking
waits for a sweep still holding a row (a worker's), so its verdict is counted too."""
T = TypeVar("T")
ROLES = tuple(Role)
TARGETS = [
    "inventory.reserve",
    "inventory.release",
    "payments.charge",
    "fraud.check",
    "notifications.send",
]


class LiveStudio:
    """The running studio's address and database, and seeding helpers for tests."""

    def __init__(self, url: str, dsn: str, schema: str) -> None:
        self.url = url
        self.dsn = dsn
        self.schema = schema
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._store: Store | None = None

    def run(self, action: Callable[[Store], Awaitable[T]]) -> T:
        """Run ``action`` with a store on this studio's schema (on the seeding loop)."""

        async def with_store() -> T:
            if self._store is None:
                self._store = await Store.open(self.dsn, self.schema, max_size=2)
            return await action(self._store)

        return asyncio.run_coroutine_threadsafe(with_store(), self._loop).result()

    @contextmanager
    def worker(self, activities: ActivityRegistry) -> Iterator[None]:
        """One more worker, for ``activities``, on this studio's schema until the block
        ends: the workers for a target that had none come up."""
        stop = asyncio.Event()

        async def start() -> tuple[Store, asyncio.Task[None]]:
            store = await Store.open(self.dsn, self.schema)
            config = WorkerConfig(worker_id=f"test-{uuid.uuid4().hex[:8]}")
            return store, asyncio.create_task(Worker(store, activities, config).run(stop))

        async def finish(store: Store, task: asyncio.Task[None]) -> None:
            stop.set()
            try:
                await task
            finally:
                await store.close()

        store, task = asyncio.run_coroutine_threadsafe(start(), self._loop).result()
        try:
            yield
        finally:
            asyncio.run_coroutine_threadsafe(finish(store, task), self._loop).result()

    def close(self) -> None:
        if self._store is not None:
            asyncio.run_coroutine_threadsafe(self._store.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def team(self, prefix: str = "team", name: str = "") -> str:
        """A new team (its id is unique; its name defaults to one made from the id)."""
        team_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
        label = name or f"{prefix.title()} {team_id[-4:]}"
        self.run(lambda store: people.ensure_team(store, team_id, label))
        return team_id

    def user(
        self, team: str, role: Role | str, *, must_change: bool = False, display_name: str = ""
    ) -> str:
        """A member of ``team`` with ``role``; returns the username (password: PASSWORD)."""
        username = f"{Role(role).value}-{uuid.uuid4().hex[:8]}"

        async def create(store: Store) -> None:
            user = await people.create_user(
                store,
                username,
                PASSWORD,
                display_name or username.title(),
                must_change_password=must_change,
            )
            await people.set_membership(store, user.user_id, team, Role(role), "seed")

        self.run(create)
        return username

    def publish(self, team: str, document: dict[str, Any]) -> str:
        definition = parse_definition(document)
        self.run(lambda store: catalog.publish(store, definition, "seed", team))
        return definition.fingerprint

    def publish_judged(self, team: str, document: dict[str, Any]) -> str:
        """Publish as the studio and the API do (``Client.publish``): the running
        instances of the name's other versions are judged and the report is kept with
        the version, which is what a migration offers. Returns the fingerprint."""
        definition = parse_definition(document)
        self.run(lambda store: Client(store).publish(definition, "seed", team))
        return definition.fingerprint

    def declare_migration(self, name: str, reason: str) -> None:
        """Declare that instances of ``name`` may move from version 1 to 2 (by ``olga``,
        saying ``reason``), as the version page's form does: what a migration needs."""
        self.run(lambda store: Client(store).declare_migration(name, "1", "2", "olga", reason))

    def publish_new(
        self,
        team: str,
        prefix: str,
        document: Callable[[str], dict[str, Any]] | None = None,
    ) -> str:
        """``document(name)`` (by default the small ``definition`` below) published for
        ``team`` under a name no other test uses, ``PREFIX.xxxxxx``; returns the name."""
        name = f"{prefix}.{uuid.uuid4().hex[:6]}"
        self.publish(team, (document or definition)(name))
        return name

    def advertise(self, targets: list[str] = TARGETS) -> None:
        """Pretend a worker is running and can execute ``targets``."""
        self.run(
            lambda store: workers.heartbeat(
                store, f"test-{uuid.uuid4().hex[:6]}", targets, 4, "test", 1
            )
        )

    def start(
        self, team: str, name: str, instance_id: str = "", input: Any = None, version: str = "1"
    ) -> str:
        """Start an instance of ``name`` for ``team`` through the engine; returns its id."""
        chosen = instance_id or f"{name}-{uuid.uuid4().hex[:8]}"
        self.run(lambda store: Client(store).start(name, chosen, input, version, tenant=team))
        return chosen

    def one_running(self, prefix: str) -> tuple[str, str, str]:
        """A new team with a fresh ``definition`` published and one instance of it
        started: ``(team, name, instance_id)``, what a test of acting on a version a
        running instance is pinned to starts from."""
        team = self.team(prefix)
        name = self.publish_new(team, prefix)
        return team, name, self.start(team, name)

    def start_machine(self, team: str, name: str, input: Any, version: str = "1") -> str:
        """Start an execution of the machine ``name``: its ``instance_started`` alone, as
        a plain start writes it (the machine's advance is the worker's, not here)."""
        chosen = f"{name}-{uuid.uuid4().hex[:8]}"

        async def start(store: Store) -> None:
            registry = await RegistrySource(store).refresh()
            definition = registry.get(name, version)
            assert definition is not None, f"{name}@{version} is not published"
            draft = start_draft(registry, definition, chosen, store.now(), input)
            await store.commit(draft.build("start"), team)

        self.run(start)
        return chosen

    def machine_event(
        self, instance_id: str, kind: EventKind, later: timedelta = timedelta(0), **fields: Any
    ) -> None:
        """Commit one machine event (``state_entered``, ``advance_failed``, a timer's,
        ``completed``) as the machine's runtime will: replay checks it on the way in.
        It happens ``later`` than now (a timer fires when it is due); a ``due_at`` given
        as a timedelta is that long after the event."""

        async def commit(store: Store) -> None:
            registries = RegistrySource(store)
            state = await InstanceCache(store, registries).load(instance_id)
            now = max(store.now(), state.updated_at) + later
            if isinstance(fields.get("due_at"), timedelta):
                fields["due_at"] = now + fields["due_at"]
            draft = Draft(await registries.get(), state, now)
            draft.add(kind, **fields)
            await store.commit(draft.build())

        self.run(commit)

    def command(
        self, instance_id: str, action: Action, reason: str = "test", **effect: Any
    ) -> None:
        self.run(lambda store: Client(store).command(instance_id, action, "seed", reason, **effect))

    def overdue(self, instance_id: str) -> int:
        """Make the instance's open work miss its deadline (as if no worker ran for a day)
        and sweep it into dead letters (``deadline-exceeded``); returns how many of its
        rows are such dead letters now. A running worker sweeps too, and whichever sweep
        comes first takes a row, so this counts the rows, not what its own sweep took."""

        async def expire(store: Store) -> int:
            async with store.connection() as conn:
                await conn.execute(OVERDUE, {"instance": instance_id})
                await conn.commit()
            await sweeps.sweep_expired_deadlines(store)
            params = {"instance": instance_id, "code": sweeps.DEADLINE_EXCEEDED}
            async with store.connection() as conn:
                rows = await (await conn.execute(OVERDUE_SWEPT, params)).fetchall()
                await conn.commit()
            return sum(1 for (dead,) in rows if dead)

        return self.run(expire)

    def client(self, username: str | None = None) -> SignedInClient:
        """An HTTP client, signed in as ``username`` when given."""
        client = SignedInClient(base_url=self.url, follow_redirects=False, timeout=20)
        if username is not None:
            client.sign_in(username)
        return client


class SignedInClient(httpx.Client):
    """An httpx client that signs in through the form and remembers the CSRF token."""

    csrf: str = ""

    def sign_in(self, username: str, password: str = PASSWORD) -> httpx.Response:
        token = login_token(self.get("/login"))
        response = self.post(
            "/login", data={"_login": token, "username": username, "password": password}
        )
        if response.status_code == 303:
            self.csrf = csrf_token(self.get("/account"))
        return response

    def form(self, path: str, data: dict[str, Any] | None = None, **kwargs: Any) -> httpx.Response:
        """POST a form with the session's CSRF token, as the pages do."""
        return self.post(path, data={"_csrf": self.csrf, **(data or {})}, **kwargs)


def login_token(response: httpx.Response) -> str:
    match = re.search(r'name="_login" value="([^"]+)"', response.text)
    assert match, "the sign-in form has no login token"
    return match.group(1)


def csrf_token(response: httpx.Response) -> str:
    match = re.search(r'"X-CSRF-Token": "([^"]+)"', response.text)
    assert match, "the page carries no CSRF token"
    return match.group(1)


def definition(name: str, version: str = "1", timeout: str = "30s") -> dict[str, Any]:
    """A small valid definition: an activity, a parallel of two with its join, a timer."""
    retry = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}
    activity = {
        "kind": "activity",
        "timeout": timeout,
        "input_limit": 1024,
        "result_limit": 1024,
        "retry": retry,
    }
    return {
        "name": name,
        "version": version,
        "mode": "orchestration",
        "steps": [
            {"name": "reserve", "target": "inventory.reserve", **activity},
            {
                "name": "checks",
                "kind": "parallel",
                "branches": ["fraud", "stock"],
                "fan_out_limit": 2,
            },
            {"name": "fraud", "target": "fraud.check", **activity},
            {"name": "stock", "target": "inventory.reserve", **activity},
            {"name": "checks_done", "kind": "join", "branches": ["fraud", "stock"]},
            {"name": "cool_off", "kind": "timer", "timeout": "5m"},
        ],
    }


STARTUP_SECONDS = 60.0
"""Bounds how long a studio that cannot start takes to fail; a good one is ready sooner."""


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that says when its startup has finished, well or not."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()


@contextmanager
def serve_studio(dsn: str, schema: str = "", **settings: Any) -> Iterator[LiveStudio]:
    """A studio on a fresh schema (``schema``, migrated already, when given: a replica
    must have replayed its migrations before the studio opens it), served on a free
    port until the block ends."""
    schema = schema or f"studio_{uuid.uuid4().hex[:12]}"
    apply_migrations(dsn, schema)
    limits = settings.pop("signin_limits", SignInLimits(per_client=100_000, per_user=100_000))
    cost = Argon2Cost(time_cost=1, memory_cost_kib=1024, parallelism=1)  # fast, same code
    app = create_app(
        StudioSettings(dsn, schema, signin_limits=limits, password_cost=cost, **settings)
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5, proxy_headers=False
    )
    server = AnnouncingServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not server.ready.wait(STARTUP_SECONDS) or not server.started:
        raise RuntimeError("the studio did not start")
    live = LiveStudio(f"http://127.0.0.1:{port}", dsn, schema)
    try:
        yield live
    finally:
        live.close()
        server.should_exit = True
        thread.join(15)
        with psycopg.connect(dsn, autocommit=True) as conn:
            drop_schema(conn, schema)
