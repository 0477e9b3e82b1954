"""The long drill runs (the ``ci`` campaign, the self-test) start when the test session
starts and are judged at its end.

They are ``wayline drill`` subprocesses that spend most of their minutes waiting (for
leases to expire, for quiet phases, for servers to restart), each on a private cluster of
its own, so the campaign overlaps the rest of the suite instead of adding to it. A test
that judges one is marked ``background_drills(NAME)``: ``tests/conftest.py`` moves it to
the end of the session and starts, before the first test runs, every run the session's
tests name that may share the machine; ``result`` then waits for it. The self-test may
not: its control must pass drills bound to time (U3's handler timeouts, the leases U2
and U4 keep while a cut write is written again), which two drill runs and the suite at
once on two cores can starve, so it starts when its test asks for it, the session's
last, with nothing else running.
Output goes to files, never to a pipe nobody reads.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.drills.drill_command import ROOT

SEED = "0x5EED01"
MARKER = "background_drills"


@dataclass(frozen=True)
class Run:
    """A ``wayline drill`` command and how long it may take from its start."""

    args: tuple[str, ...]
    budget_seconds: float


def campaign_args(directory: Path) -> tuple[str, ...]:
    """The ci profile, writing its JSON scorecard and JUnit file into ``directory``."""
    return (
        "run", "--profile", "ci", "--seed", SEED,
        "--json", str(directory / "scorecard.json"), "--junit", str(directory / "junit.xml"),
        "--artifacts", str(directory),
    )  # fmt: skip


RUNS = {
    "campaign": lambda directory: Run(campaign_args(directory), 1200.0),
    "self-test": lambda directory: Run(("self-test", "--profile", "ci", "--seed", SEED), 900.0),
}
"""Each background run by name, made for the directory it writes into."""
WITH_THE_SESSION = frozenset({"campaign"})
"""The runs started with the session; the others start when their test asks."""


class Started:
    """One background run: its process, where its output goes, and its deadline."""

    def __init__(self, name: str, directory: Path) -> None:
        self.directory = directory
        self.run = RUNS[name](directory)
        self._out = (directory / "stdout.txt").open("w")
        self._err = (directory / "stderr.txt").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", "drill", *self.run.args],
            cwd=ROOT,
            stdout=self._out,
            stderr=self._err,
            text=True,
        )
        self.deadline = time.monotonic() + self.run.budget_seconds

    def result(self) -> subprocess.CompletedProcess[str]:
        """Wait for the run (until its deadline; past it, it is killed and the wait fails
        with ``subprocess.TimeoutExpired``) and return what it printed."""
        try:
            self.process.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        self._close()
        return subprocess.CompletedProcess(
            self.process.args,
            self.process.returncode,
            (self.directory / "stdout.txt").read_text(),
            (self.directory / "stderr.txt").read_text(),
        )

    def stop(self) -> None:
        """Kill the run if it still runs (the session ended without judging it)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close()

    def _close(self) -> None:
        self._out.close()
        self._err.close()


_started: dict[str, Started] = {}
_base = Path()
"""Where this session's runs write (set by ``start``)."""


def start(names: set[str], base: Path) -> None:
    """Start every named run that goes with the session, each writing under
    ``base / NAME``; the others start when ``get`` asks for them."""
    global _base
    _base = base
    for name in sorted((names & WITH_THE_SESSION) - _started.keys()):
        _begin(name)


def get(name: str) -> Started:
    """The session's run of this name, started now if it waits for its test."""
    if name not in _started:
        _begin(name)
    return _started[name]


def _begin(name: str) -> None:
    directory = _base / name
    directory.mkdir(parents=True, exist_ok=True)
    _started[name] = Started(name, directory)


def stop_all() -> None:
    for started in _started.values():
        started.stop()
    _started.clear()
