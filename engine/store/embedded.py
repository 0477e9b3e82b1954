"""A private PostgreSQL cluster run from Debian's binaries.

The test suite, the drills and the studio's zero-setup default each need a PostgreSQL
they own: one they can initialise in a scratch directory, restart, SIGKILL and stop,
without touching the machine's own cluster or needing a password. This module is that
launcher, and it copes with what actually happens on our machines:

- PostgreSQL refuses to run as root. As root we run `initdb`/`pg_ctl` inside a user
  namespace where root appears as `nobody` (works for data dirs under 700 parents such
  as `/tmp/pytest-of-root`), fall back to the `postgres` user when user namespaces are
  unavailable (then every parent dir must be traversable by it), and run directly when
  we are not root.
- A process that died without stopping its server leaves it running; the next start
  adopts it (port and socket dir come from `postmaster.pid`).
- After a SIGKILL the postmaster can stay a zombie for seconds when PID 1 reaps slowly,
  and PostgreSQL refuses to start while its pid is visible; we wait the zombie out.
- The free port we pick can be taken before PostgreSQL binds it; we retry on another.
- Unix socket paths are limited to ~107 bytes; long data dirs get a short temp socket dir.

Linux only: process state is read from `/proc`.
"""

from __future__ import annotations

import enum
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Self

from psycopg.conninfo import make_conninfo

PG_ROOT = Path("/usr/lib/postgresql")
SERVER_LOG = "server.log"
WAIT_SECONDS = 30
"""How long pg_ctl waits for a stop or a promotion."""
START_WAIT_SECONDS = 300
"""How long a start may take, and we wait for a starting server. After a crash the
server first syncs every file of its data directory and replays WAL: on a busy shared
disk the sync alone took over 30 s (a D10 restart drill in CI, which then failed)."""

_TOOLS = ("postgres", "initdb", "pg_ctl")
_USERNS = ("unshare", "--user", "--map-user=65534", "--map-group=65534", "--")
_PORT_ATTEMPTS = 5
_SOCKET_PATH_LIMIT = 100
_SOCKET_DIR_PREFIX = "wayline-pg-"
_POLL_SECONDS = 0.05
_WAIT = ("-w", "-t", str(WAIT_SECONDS))
_START_WAIT = ("-w", "-t", str(START_WAIT_SECONDS))
# A postmaster that is still exiting, or its orphaned backends, can hold these briefly.
_RETRYABLE_START = ('lock file "postmaster.pid" already exists', "pre-existing shared memory")


class EmbeddedPostgresError(RuntimeError):
    """The private cluster could not be found, initialised, started, adopted or stopped."""


def find_pg_bin(root: Path = PG_ROOT) -> Path:
    """The `bin` dir of the highest PostgreSQL version installed the Debian way.

    Debian installs each major version side by side under /usr/lib/postgresql/<v>/bin and
    puts none of the server tools on PATH, so we look there instead of trusting PATH.
    """
    found = []
    if root.is_dir():
        for entry in root.iterdir():
            bin_dir = entry / "bin"
            if re.fullmatch(r"\d+(\.\d+)*", entry.name) and all(
                (bin_dir / tool).is_file() for tool in _TOOLS
            ):
                found.append((tuple(int(part) for part in entry.name.split(".")), bin_dir))
    if not found:
        raise EmbeddedPostgresError(
            f"no PostgreSQL server binaries (postgres, initdb, pg_ctl) under {root}/<version>/bin:"
            " install the Debian package `postgresql` (apt-get install postgresql)"
        )
    return max(found)[1]


def install_signal_handlers() -> None:
    """Turn SIGTERM into `sys.exit(128 + SIGTERM)` so `finally:` and `with` blocks run.

    Python's default SIGTERM action ends the process without unwinding, which leaves the
    cluster running; uvicorn also re-raises SIGTERM after its own graceful shutdown. With
    this handler a `finally: server.stop()` around the main loop always runs.
    """
    signal.signal(signal.SIGTERM, _exit_on_signal)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)


@dataclass(frozen=True)
class _RunAs:
    """How to run the PostgreSQL tools so that their refusal to run as root is satisfied."""

    prefix: tuple[str, ...] = ()
    uid: int | None = None
    gid: int | None = None

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run a tool; the time limit only guards against a hung tool, pg_ctl has its own."""
        return subprocess.run(
            [*self.prefix, *argv],
            user=self.uid,
            group=self.gid,
            extra_groups=None if self.uid is None else [],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=START_WAIT_SECONDS + WAIT_SECONDS,
            check=False,
        )

    def own(self, path: Path) -> None:
        """Give a dir we created to the user the server runs as (only needed when switching)."""
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


def _run_as() -> _RunAs:
    if os.geteuid() != 0:
        return _RunAs()
    if _userns_available():
        return _RunAs(prefix=_USERNS)
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise EmbeddedPostgresError(
            "PostgreSQL cannot run as root, user namespaces are unavailable and there is no"
            " `postgres` user: run as a normal user or install the Debian package `postgresql`"
        ) from None
    return _RunAs(uid=user.pw_uid, gid=user.pw_gid)


@cache
def _userns_available() -> bool:
    """Whether `unshare --user` works here (it needs kernel support and no seccomp ban)."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run([*_USERNS, "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


class _Process(enum.Enum):
    ABSENT = "absent"
    DYING = "dying"
    POSTMASTER = "postmaster"
    OTHER = "other"


_PF_EXITING = 0x4
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _process(pid: int, data_dir: Path) -> _Process:
    """What `pid` is now: our data dir's postmaster, a dying postgres, gone, or reused.

    "Dying" covers a zombie waiting to be reaped, a process already exiting, and one with
    a SIGKILL queued but not yet acted on (so a start right after `kill -9` restarts
    instead of adopting a corpse). A postmaster chdirs into its data dir, so its cwd tells
    it apart from another cluster's process that happens to have been given the same pid.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return _Process.ABSENT
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    if name != "postgres":
        return _Process.OTHER
    if fields[0] in "ZX" or int(fields[6]) & _PF_EXITING or _sigkill_pending(status):
        return _Process.DYING
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return _Process.POSTMASTER
    return _Process.POSTMASTER if cwd == data_dir else _Process.OTHER


def _sigkill_pending(status: str) -> bool:
    pending = 0
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd"):
            pending |= int(value, 16)
    return bool(pending & _SIGKILL_BIT)


@dataclass(frozen=True)
class _PidFile:
    """The lines of `postmaster.pid` we use (PostgreSQL writes them as it starts up)."""

    pid: int
    port: int
    socket_dir: str
    listen: str
    status: str


def _read_pid_file(data_dir: Path) -> _PidFile | None:
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    lines += [""] * (8 - len(lines))
    pid, port = lines[0].strip(), lines[3].strip()
    return _PidFile(
        pid=int(pid) if pid.isdigit() else 0,
        port=int(port) if port.isdigit() else 0,
        socket_dir=lines[4].strip(),
        listen=lines[5].strip(),
        status=lines[7].strip(),
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


class EmbeddedPostgres:
    """A PostgreSQL cluster in `data_dir`, created on first start and owned by its caller.

    `start()` returns a DSN (user `postgres`, trust auth, TCP on 127.0.0.1); the server
    also listens on a Unix socket in the data dir (see `socket_dsn`). `port` is a
    preference: if it is taken, another free port is used and the DSN says which. Without
    it, a restart reuses the port of the previous server in the data dir when free. The
    server log is `<data_dir>/server.log`. Use it as a context manager, or call `stop()`
    in a `finally:` (and `install_signal_handlers()` so SIGTERM reaches that `finally:`).
    """

    def __init__(self, data_dir: Path, *, port: int | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self._port_wanted = port
        self._bin = find_pg_bin()
        self._run_as = _run_as()
        self._running: _PidFile | None = None

    @property
    def dsn(self) -> str:
        """The TCP conninfo of the running server."""
        return self._conninfo("127.0.0.1" if self._pid_file().listen else self.socket_dir)

    @property
    def socket_dsn(self) -> str:
        """The Unix-socket conninfo of the running server (no TCP overhead)."""
        return self._conninfo(self.socket_dir)

    @property
    def socket_dir(self) -> str:
        """Where the server's Unix socket is: the data dir, or a short temp dir."""
        return self._pid_file().socket_dir

    @property
    def log_path(self) -> Path:
        """The server log, kept in the data dir so it travels with the cluster."""
        return self.data_dir / SERVER_LOG

    def start(self) -> str:
        """Make sure the cluster runs and return its DSN: adopt, initialise, start or restart.

        Safe to call again: a server that is already running (ours, or one left behind by
        a process that died) is adopted rather than started twice.
        """
        self._initdb_if_empty()
        deadline = time.monotonic() + START_WAIT_SECONDS
        port = self._port_wanted or self._previous_port() or _free_port()
        port_attempts, failure = 1, ""
        while True:
            running = self._settle(deadline)
            if running is not None:
                self._running = running
                return self.dsn
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL in {self.data_dir} did not start within {START_WAIT_SECONDS}s"
                    f" (log {self.log_path}): {_tail(failure)}"
                )
            failure = self._launch(port) or ""
            if "Address already in use" in failure and port_attempts < _PORT_ATTEMPTS:
                port, port_attempts = _free_port(), port_attempts + 1
            elif failure and not any(hint in failure for hint in _RETRYABLE_START):
                raise EmbeddedPostgresError(
                    f"PostgreSQL did not start in {self.data_dir} (log {self.log_path}):"
                    f" {_tail(failure)}"
                )

    def stop(self) -> None:
        """Stop the cluster (fast shutdown: sessions are ended, nothing committed is lost).

        A no-op when this handle never started it or it is already gone.
        """
        if self._running is None:
            return
        current = _read_pid_file(self.data_dir)
        if current and _process(current.pid, self.data_dir) is _Process.POSTMASTER:
            result = self._tool("pg_ctl", "-m", "fast", *_WAIT, "stop")
            still_running = _process(current.pid, self.data_dir) is _Process.POSTMASTER
            if result.returncode != 0 and still_running:
                raise EmbeddedPostgresError(
                    f"PostgreSQL in {self.data_dir} did not stop: {_tail(result.stderr)}"
                )
        self._remove_temp_socket_dir(Path(self._running.socket_dir))
        self._running = None

    def clone(self, source_dsn: str, slot: str) -> None:
        """Make this (not yet created) cluster a standby of the server at ``source_dsn``.

        ``pg_basebackup -R`` copies the running server and writes the standby's
        ``primary_conninfo``; ``slot`` (a physical replication slot on the source) keeps
        the source's WAL until the standby has it. ``start()`` then runs it as a standby.
        """
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(f"{self.data_dir} is not empty: cannot clone into it")
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._run_as.own(self.data_dir)
        result = self._tool("pg_basebackup", "-d", source_dsn, "-R", "-X", "stream", "-S", slot)
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"pg_basebackup into {self.data_dir} failed: {_tail(result.stderr)}"
            )

    def promote(self) -> None:
        """End recovery on this standby (``pg_ctl promote``) and wait until it is a primary."""
        result = self._tool("pg_ctl", *_WAIT, "promote")
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"PostgreSQL in {self.data_dir} was not promoted: {_tail(result.stderr)}"
            )

    def kill(self) -> int:
        """SIGKILL the postmaster (a crash: its backends lose their parent and end); its pid.

        ``start()`` afterwards waits out the corpse and starts the cluster again."""
        pid = self._pid_file().pid
        os.kill(pid, signal.SIGKILL)
        return pid

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _pid_file(self) -> _PidFile:
        if self._running is None:
            raise EmbeddedPostgresError("the embedded PostgreSQL is not running: call start()")
        return self._running

    def _conninfo(self, host: str) -> str:
        port = self._pid_file().port
        return make_conninfo("", host=host, port=port, user="postgres", dbname="postgres")

    def _previous_port(self) -> int:
        """The port of the last server in this data dir, or 0 if unknown.

        Reusing it means a restart after a crash keeps the DSN that clients already hold.
        """
        previous = self._running or _read_pid_file(self.data_dir)
        return previous.port if previous else 0

    def _tool(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run_as.run([str(self._bin / name), "-D", str(self.data_dir), *args])

    def _initdb_if_empty(self) -> None:
        if (self.data_dir / "PG_VERSION").is_file():
            return
        if self.data_dir.is_dir() and any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data_dir} is neither empty nor a PostgreSQL data directory;"
                " refusing to initialise a cluster there"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._run_as.own(self.data_dir)
        result = self._tool(
            "initdb", "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8"
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"initdb failed for {self.data_dir}: {_tail(result.stderr or result.stdout)}"
            )

    def _settle(self, deadline: float) -> _PidFile | None:
        """Wait until the data dir has either a ready postmaster (returned) or none (None).

        A pid file whose pid is gone is left for PostgreSQL itself: it replaces the file
        only after checking that no orphaned backend still uses the old shared memory.
        A pid file whose pid now belongs to some other process is removed, because
        PostgreSQL would take that process for a running server and refuse to start.
        """
        while True:
            current = _read_pid_file(self.data_dir)
            if current is None:
                return None
            state = _process(current.pid, self.data_dir) if current.pid else None
            if state is _Process.ABSENT:
                return None
            if state is _Process.OTHER:
                (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
                return None
            if state is _Process.POSTMASTER and current.status == "ready":
                return current
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL in {self.data_dir} (pid {current.pid}) did not become ready"
                    f" or exit within {START_WAIT_SECONDS}s"
                )
            time.sleep(_POLL_SECONDS)

    def _launch(self, port: int) -> str | None:
        """Run `pg_ctl start` once; None on success, else the output of this attempt."""
        socket_dir = self._new_socket_dir()
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        options = f"-p {port} -k {shlex.quote(str(socket_dir))} -c listen_addresses=127.0.0.1"
        log_path = str(self.log_path)
        result = self._tool("pg_ctl", "-l", log_path, *_START_WAIT, "-o", options, "start")
        if result.returncode == 0:
            return None
        self._remove_temp_socket_dir(socket_dir)
        return self._log_since(offset) + result.stdout + result.stderr

    def _log_since(self, offset: int) -> str:
        try:
            with self.log_path.open(errors="replace") as log:
                log.seek(offset)
                return log.read()
        except FileNotFoundError:
            return ""

    def _new_socket_dir(self) -> Path:
        """The data dir, unless `<dir>/.s.PGSQL.<port>` would be too long for a socket."""
        longest = self.data_dir / ".s.PGSQL.65535"
        if len(os.fsencode(longest)) <= _SOCKET_PATH_LIMIT:
            return self.data_dir
        socket_dir = Path(tempfile.mkdtemp(prefix=_SOCKET_DIR_PREFIX))
        self._run_as.own(socket_dir)
        return socket_dir

    def _remove_temp_socket_dir(self, socket_dir: Path) -> None:
        """Remove a short socket dir we made; PostgreSQL removed the socket inside it."""
        if socket_dir != self.data_dir and socket_dir.name.startswith(_SOCKET_DIR_PREFIX):
            shutil.rmtree(socket_dir, ignore_errors=True)
