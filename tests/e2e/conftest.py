"""End-to-end fixtures: real worker processes and the CLI against a real PostgreSQL.

The server and the per-test schema come from the integration fixtures (reused, not
moved). ``e2e`` gives each test a Harness: a store and client on that schema, an
effects file the activity handlers append to, a way to spawn ``wayline worker``
subprocesses (killed at teardown if a test did not stop them), and ``until``, which
polls the database against a deadline, so nothing synchronises on a fixed sleep.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.api.client import Client
from engine.model.definitions import Definition
from engine.model.errors import ReplayRejected
from engine.model.events import Event, EventKind
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.store import reads
from engine.store.store import Store
from examples.orders import EFFECTS_ENV
from tests.e2e.app import read_records
from tests.integration.conftest import pg_dsn, schema, schema_name, schema_pool  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
WAYLINE = str(ROOT / ".venv" / "bin" / "wayline")
APP = "tests.e2e.app:app"
WAIT_SECONDS = 20.0
"""Default deadline of ``until``: generous for a loaded 2-core machine; a passing
condition returns as soon as it holds, so this only bounds how long a failure takes."""
POLL_SECONDS = 0.02
STOP_SECONDS = 40.0
"""A stopping worker drains in-flight work for up to 30 s (WorkerConfig.drain_timeout)."""

T = TypeVar("T")


async def until(
    check: Callable[[], Awaitable[T] | T], timeout: float = WAIT_SECONDS, what: str = ""
) -> T:
    """Poll ``check`` until it returns something truthy, and return that; fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"{what or 'condition'} did not hold within {timeout} s")
        await asyncio.sleep(POLL_SECONDS)


def _pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` is still pending for process ``pid`` (Linux /proc; False once
    it is delivered or the process is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = [line.split()[1] for line in status.splitlines() if line[:6] in ("SigPnd", "ShdPnd")]
    return any(int(mask, 16) & (1 << (signum - 1)) for mask in masks)


@dataclass
class WorkerProcess:
    """One ``wayline worker`` subprocess; its output goes to files (never a full pipe)."""

    worker_id: str
    process: asyncio.subprocess.Process
    stdout: Path
    stderr: Path

    def output(self) -> str:
        """Everything the worker printed, to explain a failure."""
        return self.stdout.read_text() + self.stderr.read_text()

    async def ready(self) -> None:
        """Wait for the 'running' line, printed just before the worker's loop starts."""

        def started() -> bool:
            if self.process.returncode is not None:
                raise AssertionError(f"worker {self.worker_id} exited: {self.output()}")
            return "running" in self.stdout.read_text()

        await until(started, what=f"worker {self.worker_id} start")

    async def terminate(self) -> None:
        """Send SIGTERM and wait until the kernel has delivered it (no longer pending).

        From then on the worker's event loop has the wake-up in hand, so whatever the
        test does next happens after the worker was told to stop.
        """
        self.process.send_signal(signal.SIGTERM)
        await until(lambda: not _pending(self.process.pid, signal.SIGTERM), what="SIGTERM")

    async def stop(self) -> None:
        """SIGTERM: the worker drains, prints 'stopped' and exits 0."""
        await self.terminate()
        await self.exited()

    async def exited(self) -> None:
        """Wait for a clean exit after SIGTERM: status 0 and the 'stopped' line."""
        code = await asyncio.wait_for(self.process.wait(), STOP_SECONDS)
        assert code == 0, f"worker {self.worker_id} exited {code}: {self.output()}"
        assert f"worker {self.worker_id} stopped" in self.stdout.read_text()

    async def kill(self) -> None:
        """SIGKILL: a crash, no drain, no goodbye."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


@dataclass
class CliResult:
    """What a person at a terminal sees of one command."""

    code: int
    stdout: str
    stderr: str


class Harness:
    """Everything an end-to-end test drives: store, client, workers, effects, waits."""

    def __init__(self, dsn: str, db_schema: str, store: Store, tmp: Path) -> None:
        self.dsn = dsn
        self.schema = db_schema
        self.store = store
        self.client = Client(store)
        self.tmp = tmp
        self.effects = tmp / "effects.jsonl"
        self.workers: list[WorkerProcess] = []
        self._published: set[str] = set()

    # Definitions and instances --------------------------------------------------------

    async def publish(self, *definitions: Definition) -> None:
        """Publish each definition once per test (children before their parents)."""
        for definition in definitions:
            if definition.fingerprint not in self._published:
                await self.client.publish(definition, "e2e")
                self._published.add(definition.fingerprint)

    async def start(self, definition: Definition, instance_id: str, input: Any = None) -> Instance:
        await self.publish(definition)
        return await self.client.start(definition.name, instance_id, input)

    async def state(self, instance_id: str) -> Instance:
        """The instance replayed from the database now (not from a cache)."""
        try:
            return await self.client.inspect(instance_id)
        except ReplayRejected:  # a version published by another process (the CLI)
            await self.client.registries.refresh()
            return await self.client.inspect(instance_id)

    async def settled(self, instance_id: str, *statuses: InstanceStatus) -> Instance:
        """Wait until the instance is in one of ``statuses``; fail fast if it ends elsewhere."""

        async def check() -> Instance | None:
            state = await self.state(instance_id)
            if state.status in statuses:
                return state
            if state.status.terminal:
                raise AssertionError(f"{instance_id} ended {state.status.label}, not {statuses}")
            return None

        return await self.until(check, what=f"{instance_id} reaching {statuses}")

    async def activity_reaches(
        self, instance_id: str, step: str, status: AttemptStatus
    ) -> Instance:
        """Wait until ``step``'s activity is in ``status``; the instance at that point."""

        async def check() -> Instance | None:
            state = await self.state(instance_id)
            progress = state.activities.get(step)
            return state if progress is not None and progress.status is status else None

        return await self.until(check, what=f"{instance_id} {step} {status.label}")

    async def history(self, instance_id: str) -> list[Event]:
        return [event async for event in reads.export_history(self.store, instance_id)]

    async def kinds(self, instance_id: str, *kinds: EventKind) -> list[Event]:
        """The instance's events of ``kinds``, in order."""
        return [e for e in await self.history(instance_id) if e.kind in kinds]

    async def query(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple]:
        """Read with SQL in the test's schema, on the store's pool: polling with a fresh
        connection each time would fork a server process per poll on a busy machine."""
        async with self.store.connection() as conn:
            rows = await (await conn.execute(statement, params or {})).fetchall()
            await conn.rollback()
        return rows

    # Effects --------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """Every line the handlers wrote so far."""
        return read_records(self.effects)

    def calls(self, instance: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """Handler calls (not cancellation notes), optionally of one instance and fields."""
        return [
            r
            for r in self.records()
            if r.get("event", "call") == "call"
            and (instance is None or r["instance"] == instance)
            and all(r[k] == v for k, v in match.items())
        ]

    def release(self, name: str) -> None:
        """Create the file a blocked handler waits for."""
        (self.tmp / name).touch()

    def gate(self, name: str) -> str:
        """The path of a release file, for ``Behaviour(block=...)``."""
        return str(self.tmp / name)

    # Workers and the CLI -------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment of subprocesses: this one, plus the effects file, minus a DSN
        default (every command gets --dsn explicitly, or tests that none is given)."""
        env = {k: v for k, v in os.environ.items() if k != "WAYLINE_DSN"}
        env[EFFECTS_ENV] = str(self.effects)
        return env

    async def spawn(
        self,
        count: int = 1,
        *,
        concurrency: int = 4,
        lease: float = 5.0,
        app: str = APP,
        options: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> list[WorkerProcess]:
        """Start ``count`` worker processes and wait until each runs its loop
        (``options``: more command-line options; ``env``: more environment)."""
        started = [self._launch(concurrency, lease, app, options, env) for _ in range(count)]
        processes = list(await asyncio.gather(*started))
        await asyncio.gather(*(p.ready() for p in processes))
        return processes

    async def _launch(
        self,
        concurrency: int,
        lease: float,
        app: str,
        options: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        worker_id = f"worker-{uuid.uuid4().hex[:8]}"
        stdout, stderr = self.tmp / f"{worker_id}.out", self.tmp / f"{worker_id}.err"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                WAYLINE,
                "worker",
                *("--app", app, "--dsn", self.dsn, "--schema", self.schema),
                *("--concurrency", str(concurrency), "--lease-seconds", str(lease)),
                *("--poll-seconds", "0.1", "--worker-id", worker_id),
                *options,
                cwd=ROOT,
                env={**self.env(), **(env or {})},
                stdout=out,
                stderr=err,
            )
        worker = WorkerProcess(worker_id, process, stdout, stderr)
        self.workers.append(worker)
        return worker

    async def cli(
        self, *args: str, store: bool = True, env: dict[str, str] | None = None
    ) -> CliResult:
        """Run ``wayline ARGS`` (with this test's --dsn and --schema unless ``store``
        is False; ``env`` added to its environment) and capture its exit status and
        output."""
        options = ("--dsn", self.dsn, "--schema", self.schema) if store else ()
        process = await asyncio.create_subprocess_exec(
            WAYLINE,
            *args,
            *options,
            cwd=ROOT,
            env={**self.env(), **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), WAIT_SECONDS)
        assert process.returncode is not None
        return CliResult(process.returncode, out.decode(), err.decode())

    async def until(
        self, check: Callable[[], Awaitable[T] | T], timeout: float = WAIT_SECONDS, what: str = ""
    ) -> T:
        """``until``, with the workers' stderr attached to a failure to explain it."""
        try:
            return await until(check, timeout, what)
        except AssertionError as failure:
            logs = "\n".join(f"--- {w.worker_id}\n{w.output()}" for w in self.workers)
            raise AssertionError(f"{failure}\n{logs}") from None

    async def close(self) -> None:
        """Kill whatever workers a test left running (before its schema is dropped)."""
        await asyncio.gather(*(w.kill() for w in self.workers))
        await self.store.close()


@pytest.fixture
async def e2e(
    pg_dsn: str,  # noqa: F811 (the imported fixture, requested by name)
    schema: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Harness]:
    """A harness on a fresh schema; in-process handlers write the same effects file."""
    harness = Harness(pg_dsn, schema, await Store.open(pg_dsn, schema), tmp_path)
    monkeypatch.setenv(EFFECTS_ENV, str(harness.effects))
    try:
        yield harness
    finally:
        await harness.close()
