"""Worker processes the benchmark starts, holds back, releases, stops and kills.

Workers are real processes (so CPU can be read per process and SIGKILL is real). They
speak a tiny line protocol on stdin/stdout: they print ``ready`` once set up, start on
``go``, and on ``stop`` print one JSON line and exit. Their stderr goes to a log file
under ``bench/.data/logs`` for when something goes wrong.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CODE = Path(__file__).resolve().parent.parent
"""Where the engine and benchmark code run from: ``bench/run`` copies the working tree's
``engine/``, ``migrations/`` and ``bench/*.py`` to ``bench/.data/snapshot`` first, so every
process of one run uses the same code even while the checkout is being edited."""
ROOT = Path(os.environ.get("BENCH_HOME", CODE)).resolve()
"""The checkout: virtual environments, ``bench/.data`` and ``bench/RESULTS.md``."""
LOGS = ROOT / "bench" / ".data" / "logs"
WAYLINE_PYTHON = ROOT / ".venv" / "bin" / "python"
DBOS_PYTHON = ROOT / "bench" / ".venv-dbos" / "bin" / "python"
PROCRASTINATE_PYTHON = ROOT / "bench" / ".venv-procrastinate" / "bin" / "python"


class WorkerFailed(RuntimeError):
    """A worker process exited or did not answer in time."""


class Worker:
    """One worker subprocess and a reader thread that collects its stdout lines."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOGS / f"{name}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            argv,
            cwd=CODE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "PYTHONPATH": str(CODE), **(env or {})},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, word: str, timeout: float = 60.0) -> None:
        """Wait for a line equal to ``word`` (e.g. ``ready``)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._next(deadline)
            if line == word:
                return

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerFailed(f"worker {self.name} is gone (log {self.log_path})") from None

    def finish(self, timeout: float = 60.0) -> dict[str, Any]:
        """Send ``stop`` and return the JSON line the worker prints before exiting."""
        self.send("stop")
        return self.result(timeout)

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        """The JSON line the process prints before exiting."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._next(deadline)
            if line.startswith("{"):
                self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                self._log.close()
                return json.loads(line)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing in the process gets to run."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log.close()

    def _next(self, deadline: float) -> str:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.kill()
            raise WorkerFailed(f"worker {self.name} timed out (log {self.log_path})") from None
        if line is None:
            self.proc.wait()
            raise WorkerFailed(
                f"worker {self.name} exited with {self.proc.returncode} (log {self.log_path})"
            )
        return line


def wayline_worker(
    name: str,
    dsn: str,
    schema: str,
    concurrency: int,
    *,
    worker_id: str | None = None,
    profile: Path | None = None,
    marks: bool = False,
    env: dict[str, str] | None = None,
) -> Worker:
    argv = [
        str(WAYLINE_PYTHON),
        "-m",
        "bench.wayline_worker",
        "--dsn",
        dsn,
        "--schema",
        schema,
        "--concurrency",
        str(concurrency),
    ]
    if worker_id:
        argv += ["--worker-id", worker_id]
    if profile:
        argv += ["--profile", str(profile)]
    if marks:
        argv.append("--marks")
    return Worker(name, argv, env)


def dbos(name: str, action: str, *args: str, env: dict[str, str] | None = None) -> Worker:
    """A process running ``bench/dbos_side.py ACTION ...`` in the DBOS environment."""
    return Worker(name, [str(DBOS_PYTHON), "-m", "bench.dbos_side", action, *args], env)


def procrastinate(name: str, action: str, *args: str) -> Worker:
    """A process running ``bench/procrastinate_side.py ACTION ...`` in its environment."""
    argv = [str(PROCRASTINATE_PYTHON), "-m", "bench.procrastinate_side", action, *args]
    return Worker(name, argv)
