"""What every drill is made of: a spec, an environment, and a result.

A ``DrillSpec`` names a drill (``D4-sigstop``), its family (``D4``), its seed and the
scenario coroutine. The runner gives the scenario a ``DrillEnv``: a fresh schema on the
target server (migrated, with the ledger and audit tables), the harness's own store and
client, a seeded random source, and helpers to start workloads and processes and to
wait for states with deadlines. A scenario has a *fault phase* (it breaks something)
and a *quiet phase* (``env.quiesce``: every instance must end); the checker then runs.
Drill-specific expectations (for example "a stale owner really tried to write") are
recorded with ``env.expect``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from engine import provision_roles
from engine.api.client import Client
from engine.model.errors import WaylineError
from engine.model.instance import TERMINAL_STATUSES
from engine.model.transitions import Draft
from engine.modes import decide
from engine.store import catalog, reads
from engine.store.errors import StoreError
from engine.store.migrations import apply_migrations
from engine.store.rows import WorkState
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.faults import Fault
from verification import (
    drill_app,
    drill_code,
    drill_machine,
    effects,
    lease_audit,
    mutants,
    processes,
)
from verification.clocks import FileClock
from verification.processes import DrillProcess, ProcessEnv
from verification.profiles import Profile
from verification.proxy import DrillProxy
from verification.target import Target
from verification.threads import to_the_end
from verification.workloads import (
    FLOW,
    SIGNAL_STEP,
    CodeRun,
    Execution,
    Planned,
    Workload,
    definitions,
)

POLL_SECONDS = 0.05
OPEN_WORK_COUNT = (
    "SELECT count(*) FROM work "
    f"WHERE state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}, {WorkState.HELD})"
)
"""Work still to do: due, leased, or held by an incident hold."""
TERMINAL = ", ".join(str(int(s)) for s in sorted(TERMINAL_STATUSES))
LIVE_INSTANCES = f"SELECT instance_id FROM instances WHERE status NOT IN ({TERMINAL})"
UNSETTLED = f"""
SELECT (SELECT count(*) FROM instances WHERE status NOT IN ({TERMINAL}))
     + (SELECT count(*) FROM work w
        WHERE w.state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}, {WorkState.HELD})
          AND (w.lease_token > 0 OR NOT EXISTS (
                SELECT 1 FROM instances i
                WHERE i.instance_id = w.instance_id AND i.status IN ({TERMINAL}))))
"""
"""What may still move: instances not ended, and open work but an ended instance's that
no worker ever claimed. An instance's end retires the work nobody holds in its own
transaction, so such a row is an orphan invariant I8 names as soon as the checker runs
(a worker holding the row, or one that held it and put it back, is another matter: it
may still settle it); waiting for the orphan to drain would only wait out the quiet
phase's whole timeout."""


class DrillNotRun(Exception):
    """The drill cannot run here (e.g. it needs a server the harness owns)."""


class DrillFailed(Exception):
    """The scenario cannot go on, for a reason its message says in the user's words (a
    worker that exited before any pin fired): the drill's finding is that message."""


class DrillTimeout(AssertionError):
    """A phase did not reach its state before its deadline; the message says where."""


@dataclass(frozen=True)
class DrillSpec:
    id: str
    family: str
    title: str
    seed: int
    scenario: Callable[[DrillEnv], Awaitable[None]]
    owned_server: bool = False
    """Restarts, pauses or kills the server: only on a cluster the harness owns."""
    exclusive: bool = False
    """Disturbs the whole server: no other drill may run at the same time."""
    params: dict[str, Any] = field(default_factory=dict)
    strands: bool = False
    """Crashes, stops or cuts off a worker: an attempt may be left durably started with
    its handler never run, so the checker excuses unknowns without a handler entry."""
    manual_clock: bool = False
    """Every process of the drill reads a clock the harness moves (``FileClock``): a
    drill plan's machine passes its timers so (``verification.plan_drills``)."""
    servers: Callable[[Path], AbstractAsyncContextManager[Target]] | None = None
    """Builds the servers the drill runs on, in the directory given (F1's primary and
    standby), instead of the campaign's; the runner stops them after the checks."""


@dataclass
class Campaign:
    """What the drills of one campaign share."""

    campaign_id: str
    target: Target
    directory: Path
    profile: Profile
    calibration: Counter[str] = field(default_factory=Counter)
    mutant: str = ""

    @property
    def corpus(self) -> Path:
        return self.directory / "corpus.jsonl"


@dataclass
class Record:
    """What a drill did, for the scorecard (counts, environment faults, timings)."""

    plan: list[Fault] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    expectations: list[str] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)
    env_faults: Counter[str] = field(default_factory=Counter)
    recovery_seconds: list[float] = field(default_factory=list)
    workload_started: float | None = None
    busy_seconds: float | None = None
    """From the first start to the end of the quiet phase: the workload's wall time."""
    fault_class: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    machines: dict[str, Execution] = field(default_factory=dict)
    """The machine executions the drill started (how each may end: M3)."""
    checked_apart: Counter[str] = field(default_factory=Counter)
    """By invariant, what the drill checked in worlds of its own (D9's examples, each in
    a schema of its own), which the drill's final check of its own schema cannot see."""


class DrillEnv:
    """One drill's world. Create with ``await DrillEnv.open(...)``; always ``close``."""

    def __init__(self, spec: DrillSpec, campaign: Campaign, schema: str) -> None:
        self.spec = spec
        self.campaign = campaign
        self.target = campaign.target
        self.schema = schema
        self.directory = campaign.directory / spec.id
        self.rng = random.Random(spec.seed)
        self.record = Record()
        self.processes: list[DrillProcess] = []
        self.proxies: list[DrillProxy] = []
        self.store: Store
        self.client: Client
        self.fault_at: float | None = None
        self.clock_file = ""
        self.worker_app = ""
        """The app every worker of this drill runs (the drill app when '')."""
        self.variables: dict[str, str] = {}
        """More environment for this drill's processes."""
        self.code: ActivityRegistry = drill_app.app
        """The app whose code-first workflows J3 replays runs of (a drill plan's: the
        team's; the drill app's otherwise)."""
        self._stores: list[Store] = []

    @classmethod
    async def open(
        cls, spec: DrillSpec, campaign: Campaign, schema: str, manual_clock: bool = False
    ) -> DrillEnv:
        """A fresh schema; with ``manual_clock`` every process shares a FileClock."""
        env = cls(spec, campaign, schema)
        env.directory.mkdir(parents=True, exist_ok=True)
        try:
            await to_the_end(apply_migrations, campaign.target.dsn, schema)
            async with await psycopg.AsyncConnection.connect(env.ledger_dsn) as conn:
                await conn.set_autocommit(True)  # roles are the cluster's: see provision_roles
                await provision_roles(conn, [drill_machine.RESOURCE])
                await conn.execute(effects.LEDGER_TABLES.encode())
                await conn.execute(lease_audit.AUDIT_TABLES.encode())
                await conn.execute(drill_machine.MACHINE_TABLES.encode())
                await conn.execute(drill_machine.MACHINE_PRIVILEGES.encode())
                await conn.execute(drill_code.CODE_TABLES.encode())
            clock = None
            if manual_clock:
                clock = FileClock(env.directory / "clock.txt")
                clock.set(datetime.now(UTC))
                env.clock_file = str(clock.path)
            await env.open_store(clock)
        except BaseException:
            await env.close()  # a drill that never started leaves nothing behind
            raise
        return env

    async def open_store(self, clock: Any = None) -> None:
        """The harness's store and client (direct, never through a proxy)."""
        self.store = await Store.open(self.target.dsn, self.schema, clock=clock)
        self.client = Client(self.store)
        for definition in definitions():
            await self.client.publish(definition, "drills")

    @property
    def ledger_dsn(self) -> str:
        return make_conninfo(self.target.dsn, options=f"-c search_path={self.schema}")

    @property
    def process_env(self) -> ProcessEnv:
        return ProcessEnv(
            self.target.dsn,
            self.schema,
            self.directory,
            self.ledger_dsn,
            self.campaign.mutant,
            self.clock_file,
            self.worker_app,
            self.variables,
        )

    async def side_store(self, dsn: str) -> Store:
        """Another store on this drill's schema (e.g. through a proxy); closed with it."""
        store = await Store.open(dsn, self.schema)
        self._stores.append(store)
        return store

    async def client_store(self) -> Store:
        """A store of its own (one connection) for one more client of the engine under
        test, opened as the campaign's build opens a store (a mutant's store seams):
        what such a client does, M2's submits, is the engine's to get right."""
        build = mutants.build_of(self.campaign.mutant, drill_app.app)
        store = await Store.open(
            self.target.dsn,
            self.schema,
            max_size=1,
            statement_filter=build.statement_filter,
            hooks=build.store_hooks,
        )
        self._stores.append(store)
        return store

    async def close(self) -> None:
        """Stop everything this drill started and drop its schema."""
        await asyncio.gather(*(p.stop() for p in self.processes), return_exceptions=True)
        for store in self._stores:
            await store.close()
        if hasattr(self, "store"):
            await self.store.close()
        for proxy in self.proxies:
            await proxy.__aexit__(None, None, None)
        await self._drop_schema()

    async def _drop_schema(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.target.dsn, autocommit=True) as c:
            await c.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    # Expectations ---------------------------------------------------------------------

    def expect(self, condition: bool, failure: str) -> None:
        """Record a drill-specific expectation; a false one fails the drill."""
        if not condition:
            self.record.expectations.append(failure)

    # Workload -------------------------------------------------------------------------

    async def start_workload(self, workload: Workload) -> list[Planned]:
        """Start every instance; each acknowledged start is remembered for I1."""
        planned = workload.instances()
        self.record.workload_started = self.record.workload_started or time.monotonic()
        for item in planned:
            await self.client.start(FLOW, item.instance_id, item.input)
            self.record.acked.append(item.instance_id)
        self.record.stats["started"] += len(planned)
        return planned

    async def start_machines(self, executions: list[Execution]) -> None:
        """Start every execution of ``drill.machine``, remembered for I1 and the checks
        of how machine executions end."""
        self.record.workload_started = self.record.workload_started or time.monotonic()
        for execution in executions:
            start = execution.start_data
            await self.client.start(drill_machine.MACHINE, execution.execution_id, start)
            self.record.acked.append(execution.execution_id)
            self.record.machines[execution.execution_id] = execution
        self.record.stats["machines_started"] += len(executions)

    async def start_runs(self, runs: list[CodeRun]) -> None:
        """Start every run of ``drill.code``, each acknowledged start remembered for I1."""
        self.record.workload_started = self.record.workload_started or time.monotonic()
        for run in runs:
            await self.client.start_run(drill_code.CODE, run.input, id=run.id)
            self.record.acked.append(run.run_id)
        self.record.stats["code_runs_started"] += len(runs)

    async def signal_run(self, run: CodeRun, client: Client | None = None) -> None:
        """Deliver ``run``'s signal (through ``client``, the harness's by default)."""
        await (client or self.client).signal(
            run.run_id, drill_code.SIGNAL, run.signal_id, run.signal_payload
        )
        self.record.stats["signals_sent"] += 1

    async def signal(self, item: Planned) -> None:
        await self.client.signal(item.instance_id, SIGNAL_STEP, item.signal_id, item.signal_payload)
        self.record.stats["signals_sent"] += 1

    # Processes ------------------------------------------------------------------------

    def worker(
        self,
        name: str,
        plan: list[Fault] = (),
        proxy: DrillProxy | None = None,
        worker_id: str = "",
        **options: Any,
    ) -> DrillProcess:
        """Start a worker subprocess (through ``proxy`` when given).

        ``worker_id`` defaults to one derived from ``name``; D16 reuses an id on purpose.
        """
        worker_id = worker_id or self.worker_id(name)
        dsn = proxy.conninfo() if proxy else self.target.dsn
        sever = proxy.control_address if proxy else ""
        self.record.plan.extend(plan)
        process = processes.spawn_worker(
            self.process_env,
            worker_id,
            make_conninfo(dsn, application_name=worker_id),
            plan,
            sever,
            name=self.worker_id(name),
            **options,
        )
        self.processes.append(process)
        return process

    def worker_id(self, name: str) -> str:
        """The worker id (and application name) of this drill's worker ``name``."""
        return f"{self.spec.id}-{name}"

    async def proxy(self) -> DrillProxy:
        proxy = await DrillProxy(self.target.dsn).__aenter__()
        self.proxies.append(proxy)
        return proxy

    async def proxied_client(self) -> tuple[DrillProxy, Client]:
        """A client whose connections pass a proxy of its own, so its COMMITs can be cut."""
        proxy = await self.proxy()
        return proxy, Client(await self.side_store(proxy.conninfo()))

    # Waiting --------------------------------------------------------------------------

    async def until(
        self, condition: Callable[[], Awaitable[bool]], timeout: float, what: str
    ) -> float:
        """Poll ``condition`` until true; DrillTimeout naming ``what`` at the deadline."""
        started = time.monotonic()
        while not await self._holds(condition):
            if time.monotonic() - started > timeout:
                raise DrillTimeout(f"timed out after {timeout:.0f} s waiting for {what}")
            await asyncio.sleep(POLL_SECONDS)
        return time.monotonic() - started

    @staticmethod
    async def _holds(condition: Callable[[], Awaitable[bool]]) -> bool:
        """A condition that cannot be evaluated right now (server restarting) is false."""
        try:
            return await condition()
        except (StoreError, psycopg.Error, OSError):
            return False

    async def scalar(self, statement: str, params: Any = None) -> Any:
        async with self.store.connection() as conn:
            row = await (await conn.execute(statement, params)).fetchone()
        return row[0] if row else None

    async def count_cancel(self, cancel: Awaitable[None]) -> None:
        """Await a cancel that may be refused (its instance is cancelling or has ended
        already): either answer is allowed, and the record counts which it was."""
        try:
            await cancel
            self.record.stats["cancels_accepted"] += 1
        except WaylineError:
            self.record.stats["cancels_refused"] += 1

    def mark_fault(self, fault_class: str) -> None:
        """The fault phase's fault happened now (recovery time is measured from here)."""
        self.fault_at = self.fault_at or time.monotonic()
        self.record.fault_class = self.record.fault_class or fault_class

    async def quiesce(self, timeout: float | None = None) -> None:
        """The quiet phase: wait until every instance ended and no work can move any more
        (``UNSETTLED``)."""
        timeout = timeout or self.campaign.profile.quiet_seconds
        try:
            await self.until(self._quiet, timeout, "every instance to end")
        except DrillTimeout as exc:
            raise DrillTimeout(f"{exc}: {await self.diagnose()}") from None
        if self.fault_at is not None:
            self.record.recovery_seconds.append(time.monotonic() - self.fault_at)
        if self.record.workload_started is not None:
            self.record.busy_seconds = time.monotonic() - self.record.workload_started

    async def _quiet(self) -> bool:
        return await self.scalar(UNSETTLED) == 0

    async def diagnose(self) -> str:
        """Why instances have not ended: each one's decision, and open work."""
        async with self.store.connection() as conn:
            ids = await (await conn.execute(LIVE_INSTANCES)).fetchall()
            work = await (
                await conn.execute(
                    "SELECT work_id, state, lease_owner, lease_token, available_at "
                    f"FROM work WHERE state IN ({WorkState.AVAILABLE}, {WorkState.LEASED}, "
                    f"{WorkState.HELD})"
                )
            ).fetchall()
        registry = await catalog.load_registry(self.store)
        reasons = []
        for (instance,) in ids[:5]:
            state = await reads.inspect(self.store, registry, instance)
            draft = Draft(registry, state, state.updated_at)
            reasons.append(f"{instance} {state.status.label}: {decide(draft).reason}")
        opened = [f"{w} state={s} owner={o or '-'} token={t} at={a}" for w, s, o, t, a in work[:5]]
        return "; ".join(reasons + opened + await self._open_transactions()) or "nothing open"

    async def _open_transactions(self) -> list[str]:
        """Sessions of this drill's workers sitting inside a transaction (holding locks)."""
        async with self.store.connection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT application_name, state, now() - xact_start, "
                    r"regexp_replace(left(query, 60), '\s+', ' ', 'g') FROM pg_stat_activity "
                    "WHERE application_name LIKE %s AND xact_start IS NOT NULL "
                    "AND pid <> pg_backend_pid()",
                    (f"{self.spec.id}-%",),
                )
            ).fetchall()
        return [f"session of {a} {s} in a transaction for {d} after: {q}" for a, s, d, q in rows]

    async def stop_processes(self) -> None:
        """Stop every process (SIGCONT, SIGTERM, then SIGKILL at a deadline)."""
        await asyncio.gather(*(p.stop() for p in self.processes))


@dataclass
class DrillResult:
    """One drill's verdict and everything the scorecard needs from it."""

    spec_id: str
    family: str
    title: str
    seed: int
    verdict: str
    """``passed``, ``failed`` or ``not_run``."""
    seconds: float
    failures: list[str] = field(default_factory=list)
    record: Record = field(default_factory=Record)
    checks: dict[str, tuple[int, list[str]]] = field(default_factory=dict)
    stats: Counter[str] = field(default_factory=Counter)
    reached: dict[str, int] = field(default_factory=dict)
    fired: list[Fault] = field(default_factory=list)
    artifacts: str = ""
    known_bug: str = ""
