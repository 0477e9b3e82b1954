"""Drill subprocesses: start, kill, stop, continue, and wait for them without sleeping blind.

Each process runs ``verification.process_main`` with the environment a drill gives it
(fault plan, report and observation files, ledger DSN, mutant, clock jump). Its output
goes to a log file in the drill's directory, which is an artifact of a failed drill.
Waits poll the process (or ``/proc``) against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.worker.faults import FAULT_PLAN_ENV, FAULT_REPORT_ENV, FAULT_SEVER_ENV
from verification.clocks import CLOCK_JUMP_ENV
from verification.drill_code import DEPLOY_ENV
from verification.effects import LEDGER_DSN_ENV
from verification.fault_plan import Fault, plan_json
from verification.mutants import MUTANT_ENV
from verification.observations import OBSERVATIONS_ENV

ROOT = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.02
WORKER_LEASE_SECONDS = 1.5
"""A drill worker's lease: short, so that a drill's recoveries take seconds."""
WORKER_CONCURRENCY = 4
WORKER_POLL_SECONDS = 0.1
"""How often an idle drill worker claims when no wake-up came."""


class ProcessTimeout(RuntimeError):
    """A drill process did not reach the awaited state before its deadline."""


@dataclass
class ProcessEnv:
    """What every subprocess of one drill shares."""

    dsn: str
    schema: str
    directory: Path
    ledger_dsn: str
    mutant: str = ""
    clock_file: str = ""
    app: str = ""
    """The worker app (``MODULE:APP``; the drill app when '')."""
    variables: dict[str, str] = field(default_factory=dict)
    """More environment for every process (a drill plan's stub file)."""

    @property
    def report(self) -> Path:
        return self.directory / "boundaries.jsonl"

    @property
    def observations(self) -> Path:
        return self.directory / "observations.jsonl"


@dataclass
class DrillProcess:
    """One running subprocess."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    worker_id: str = ""
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def signal(self, signum: int) -> None:
        if self.alive:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    @property
    def paused(self) -> bool:
        """Stopped by a signal (its own SIGSTOP included), per /proc."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat[stat.rindex(")") + 2] in "Tt"

    async def wait_exit(self, timeout: float) -> int:
        await _until(lambda: not self.alive, timeout, f"{self.name} to exit")
        return self.popen.returncode

    async def wait_paused(self, timeout: float) -> None:
        await _until(lambda: self.paused or not self.alive, timeout, f"{self.name} to stop")

    async def stop(self, timeout: float = 10.0) -> int:
        """SIGCONT (in case it is stopped), SIGTERM, and SIGKILL if it will not go."""
        self.resume()
        self.signal(signal.SIGTERM)
        try:
            return await self.wait_exit(timeout)
        except ProcessTimeout:
            self.kill()
            return await self.wait_exit(timeout)


async def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ProcessTimeout(f"timed out after {timeout:.1f} s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


def _import_roots() -> list[str]:
    """The project, then the directory the harness was started in: a drill process runs
    in the project, and a plan's ``app`` (``myapp:app``) is found where the user ran
    ``wayline drill run``, as ``load_app`` finds it for the harness itself."""
    return list(dict.fromkeys([str(ROOT), os.getcwd()]))


def _environment(
    env: ProcessEnv, plan: list[Fault], sever: str, clock_jump: str, deployment: str = ""
) -> dict[str, str]:
    values = dict(os.environ)
    for name in (FAULT_PLAN_ENV, FAULT_SEVER_ENV, MUTANT_ENV, CLOCK_JUMP_ENV, DEPLOY_ENV):
        values.pop(name, None)
    values.update(
        {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [*_import_roots(), os.environ.get("PYTHONPATH")])
            ),
            FAULT_REPORT_ENV: str(env.report),
            OBSERVATIONS_ENV: str(env.observations),
            LEDGER_DSN_ENV: env.ledger_dsn,
        }
    )
    optional = {
        FAULT_PLAN_ENV: plan_json(plan) if plan else "",
        FAULT_SEVER_ENV: sever,
        MUTANT_ENV: env.mutant,
        CLOCK_JUMP_ENV: clock_jump,
        DEPLOY_ENV: deployment,
    }
    values.update({name: value for name, value in optional.items() if value})
    values.update(env.variables)
    return values


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
"""Loaded in the parent: a forked child must not dlopen (another thread may hold the
loader's lock at fork time)."""


def _die_with_parent() -> None:
    """In the child: SIGKILL it when the harness dies, so no drill worker outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    env: ProcessEnv,
    name: str,
    command: list[str],
    dsn: str | None = None,
    plan: list[Fault] = (),
    sever: str = "",
    clock_jump: str = "",
    deployment: str = "",
) -> DrillProcess:
    """Start ``python -m verification.process_main COMMAND ...`` for this drill
    (``deployment``: the code it runs, see ``verification.drill_code``)."""
    argv = [sys.executable, "-m", "verification.process_main", command[0]]
    argv += ["--dsn", dsn or env.dsn, "--schema", env.schema, *command[1:]]
    if env.clock_file:
        argv += ["--clock-file", env.clock_file]
    log = env.directory / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=_environment(env, list(plan), sever, clock_jump, deployment),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return DrillProcess(name, popen, log)


def spawn_worker(
    env: ProcessEnv,
    worker_id: str,
    dsn: str | None = None,
    plan: list[Fault] = (),
    sever: str = "",
    clock_jump: str = "",
    lease_seconds: float = WORKER_LEASE_SECONDS,
    concurrency: int = WORKER_CONCURRENCY,
    name: str = "",
    deployment: str = "",
    poll_seconds: float = WORKER_POLL_SECONDS,
) -> DrillProcess:
    """A drill worker; ``name`` (default: the worker id) names its log."""
    command = [
        "worker",
        "--worker-id",
        worker_id,
        "--lease-seconds",
        str(lease_seconds),
        "--concurrency",
        str(concurrency),
        "--poll-seconds",
        str(poll_seconds),
        *(["--app", env.app] if env.app else []),
    ]
    process = spawn(env, name or worker_id, command, dsn, plan, sever, clock_jump, deployment)
    process.worker_id = worker_id
    return process
