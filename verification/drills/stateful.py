"""D9: a hypothesis state machine over the whole system, with invariants after every rule.

Rules: start an instance, deliver its signal, deliver it again, advance the shared
manual clock (past timers, retries and leases), crash the worker at a random boundary
(it is replaced by one planned to SIGKILL itself there), restart a worker, and replay
every history. After every rule the safety invariants hold (the checker without
liveness); at the end of an example the clock follows real time until every instance
ends, and the full checker runs.

Each example gets its own schema and real worker subprocesses, so examples cost
seconds: the ``ci`` profile runs a handful, ``deep`` many more. The machine runs in a
thread with its own event loop, since hypothesis drives it synchronously.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engine.store import catalog
from engine.worker.faults import Action, Boundary, Fault
from verification import capture, invariants, observations
from verification.clocks import FileClock
from verification.drills.base import Campaign, DrillEnv, DrillSpec
from verification.fault_plan import WORKER_BOUNDARIES
from verification.findings import Findings
from verification.processes import DrillProcess
from verification.workloads import FLOW, SIGNAL_STEP, Planned

T = TypeVar("T")


FAILURE_TEXT_LIMIT = 1500
"""Characters of a failing example's exception kept in the scorecard."""


@dataclass
class Stats:
    """What the property run did, for the scorecard's property-test section."""

    examples: int = 0
    steps: int = 0
    crashes: int = 0
    failing: list[str] = field(default_factory=list)
    schemas: itertools.count = field(default_factory=itertools.count)
    checked: Counter[str] = field(default_factory=Counter)
    """By invariant, what the checks after every rule examined, over all examples."""


async def scenario(env: DrillEnv) -> None:
    stats = Stats()
    try:
        await asyncio.to_thread(_run, env.spec, env.campaign, stats)
    finally:
        env.record.stats["examples"] += stats.examples
        env.record.stats["steps"] += stats.steps
        env.record.env_faults["process_crashes"] += stats.crashes
        env.record.extra["failing_blobs"] = stats.failing
        env.record.checked_apart.update(stats.checked)
        env.record.extra["shrinking"] = not env.campaign.profile.derandomize
    env.expect(not stats.failing, f"hypothesis found a failing example: {stats.failing[:1]}")


def _run(spec: DrillSpec, campaign: Campaign, stats: Stats) -> None:
    profile = campaign.profile
    chosen = settings(
        max_examples=profile.examples,
        stateful_step_count=profile.steps,
        derandomize=profile.derandomize,
        deadline=None,
        print_blob=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate]
        + ([] if profile.derandomize else [Phase.shrink]),
    )

    def factory() -> DrillMachine:
        return DrillMachine(spec, campaign, stats)

    report: list[str] = []
    try:
        with with_reporter(report.append):
            run_state_machine_as_test(seed(spec.seed)(factory), settings=chosen)
    except (AssertionError, HypothesisException, Exception) as exc:
        blobs = [line for line in report if "reproduce_failure" in line]
        stats.failing.append(describe(exc)[:FAILURE_TEXT_LIMIT] + " " + " ".join(blobs))


def describe(exc: BaseException) -> str:
    """An exception with the ones it groups: hypothesis's FlakyFailure says only that the
    replay differed; what failed the first time is in its sub-exceptions."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, BaseExceptionGroup):
        text += "".join(f" <- {describe(sub)}" for sub in exc.exceptions)
    return text


class DrillMachine(RuleBasedStateMachine):
    def __init__(self, spec: DrillSpec, campaign: Campaign, stats: Stats) -> None:
        super().__init__()
        self.stats = stats
        stats.examples += 1
        self.loop = asyncio.new_event_loop()
        n = next(stats.schemas)
        example = DrillSpec(f"{spec.id}-e{n}", spec.family, spec.title, spec.seed, spec.scenario)
        schema = f"drill_{campaign.campaign_id}_d9_{n}"
        self.env = self._do(DrillEnv.open(example, campaign, schema, manual_clock=True))
        self.clock = FileClock(self.env.clock_file)
        self.worker: DrillProcess = self.env.worker("w0")
        self.started: list[Planned] = []
        self.signalled: list[Planned] = []
        self.names = itertools.count(1)

    def _do(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one coroutine on this example's loop (hypothesis drives us synchronously)."""
        return self.loop.run_until_complete(coroutine)

    def _step(self) -> None:
        self.stats.steps += 1

    @rule(fail=st.integers(0, 1), slow=st.sampled_from([0.0, 0.3]))
    def start(self, fail: int, slow: float) -> None:
        self._step()
        n = len(self.started)
        item = Planned(
            f"{self.env.spec.id}-{n}",
            {"slow": {"work": slow}, "fail": {"reserve": fail}},
            f"{self.env.spec.id}-{n}-go",
        )
        self._do(self.env.client.start(FLOW, item.instance_id, item.input))
        self.env.record.acked.append(item.instance_id)
        self.started.append(item)

    @precondition(lambda self: self.started)
    @rule(data=st.data())
    def signal(self, data: st.DataObject) -> None:
        self._step()
        item = data.draw(st.sampled_from(self.started))
        self._deliver(item)
        self.signalled.append(item)

    @precondition(lambda self: self.signalled)
    @rule(data=st.data())
    def duplicate_signal(self, data: st.DataObject) -> None:
        self._step()
        self._deliver(data.draw(st.sampled_from(self.signalled)))

    def _deliver(self, item: Planned) -> None:
        client = self.env.client
        self._do(client.signal(item.instance_id, SIGNAL_STEP, item.signal_id, item.signal_payload))

    @rule(seconds=st.sampled_from([0.2, 0.5, 1.0, 2.0, 5.0]))
    def advance_clock(self, seconds: float) -> None:
        self._step()
        self.clock.advance(timedelta(seconds=seconds))

    @rule(boundary=st.sampled_from(WORKER_BOUNDARIES))
    def crash(self, boundary: Boundary) -> None:
        """Kill the worker now; its replacement kills itself at ``boundary``."""
        self._step()
        self.worker.kill()
        self.stats.crashes += 1
        plan = [Fault(boundary, 1, Action.KILL)]
        self.worker = self.env.worker(f"w{next(self.names)}", plan=plan)
        self.env.record.plan.clear()  # may never be reached: the workload may be done

    @rule()
    def restart(self) -> None:
        self._step()
        if not self.worker.alive:
            self.worker = self.env.worker(f"w{next(self.names)}")

    @rule()
    def replay(self) -> None:
        self._step()
        self._check(quiet=False)

    @invariant()
    def safe(self) -> None:
        self._check(quiet=False)

    def teardown(self) -> None:
        try:
            # the harness restarts a worker for the quiet phase: whatever the last one
            # was planned to do, a plain one must be there
            self.worker = self.env.worker(f"w{next(self.names)}")
            for item in self.started:
                if item not in self.signalled:
                    self._deliver(item)
            self._do(self._quiesce_in_real_time())
            self._do(self.env.stop_processes())
            self._check(quiet=True)
        finally:
            self._do(self.env.close())
            self.loop.close()

    async def _quiesce_in_real_time(self) -> None:
        """Let the manual clock follow real time until every instance has ended."""
        done = asyncio.Event()

        async def drive() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.05)
                now = time.monotonic()
                self.clock.advance(timedelta(seconds=now - last))
                last = now

        driver = asyncio.create_task(drive())
        try:
            await self.env.quiesce()
        finally:
            done.set()
            await driver

    def _check(self, quiet: bool) -> None:
        findings = self._do(self._findings(quiet))
        self.stats.checked.update({k: c.checked for k, c in findings.checks.items()})
        assert not findings.violations, findings.violations[:3]

    async def _findings(self, quiet: bool) -> Findings:
        env = self.env
        return await invariants.check(
            invariants.CheckContext(
                store=env.store,
                registry=await catalog.load_registry(env.store),
                acked=env.record.acked,
                quiet=quiet,
                db_clock=False,
                live_owners=frozenset(p.worker_id for p in env.processes if p.alive),
                observations=list(observations.read(env.process_env.observations)),
                histories=await capture.capture(env.store),
                strands=True,  # it crashes workers
            )
        )
