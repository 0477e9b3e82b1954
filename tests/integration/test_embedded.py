"""The embedded PostgreSQL launcher against real clusters: start, adopt, crash, signals."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from engine.store import embedded
from engine.store.embedded import EmbeddedPostgres, EmbeddedPostgresError, find_pg_bin

try:
    find_pg_bin()
except EmbeddedPostgresError:
    if os.environ.get("WAYLINE_TEST_DSN"):
        pytest.skip("PostgreSQL binaries are not installed here", allow_module_level=True)

START_AND_LEAVE = """
import sys
from pathlib import Path
from engine.store.embedded import EmbeddedPostgres
print(EmbeddedPostgres(Path(sys.argv[1])).start(), flush=True)
"""

OWN_UNTIL_SIGTERM = """
import signal, sys
from pathlib import Path
from engine.store.embedded import EmbeddedPostgres, install_signal_handlers
install_signal_handlers()
with EmbeddedPostgres(Path(sys.argv[1])) as server:
    print(server.dsn, flush=True)
    signal.pause()
"""


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped cluster made by the launcher once; tests copy it instead of re-running initdb."""
    data_dir = tmp_path_factory.mktemp("template") / "data"
    with EmbeddedPostgres(data_dir):
        pass
    return data_dir


@pytest.fixture
def data_dir(initialised: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the initialised cluster, stopped again after the test."""
    copy = tmp_path / "data"
    shutil.copytree(initialised, copy, symlinks=True)
    yield copy
    _stop_leftover(copy)


def _stop_leftover(data_dir: Path) -> None:
    """Stop a server a test left behind (e.g. after a failed assertion)."""
    server = EmbeddedPostgres(data_dir)
    if (data_dir / "postmaster.pid").exists():
        server.start()
        server.stop()


def _query(dsn: str, query: str) -> object:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def _wait_until_gone(pid: int, data_dir: Path) -> None:
    """The pid file goes a moment before the process; poll until the process goes too."""
    deadline = time.monotonic() + 10
    while embedded._process(pid, data_dir) is embedded._Process.POSTMASTER:
        assert time.monotonic() < deadline, f"postmaster {pid} is still running"
        time.sleep(0.01)


def _run_script(script: str, data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_first_start_initialises_and_answers_over_tcp_and_unix_socket(tmp_path: Path) -> None:
    data_dir = tmp_path / "a dir with spaces" / "data"
    with EmbeddedPostgres(data_dir) as server:
        assert _query(server.dsn, "SELECT host(inet_server_addr())") == "127.0.0.1"
        assert _query(server.socket_dsn, "SELECT inet_server_addr()") is None
        assert Path(server.socket_dir) == data_dir
        assert _query(server.dsn, "SHOW server_encoding") == "UTF8"
    assert (data_dir / "PG_VERSION").is_file()
    assert (data_dir / "server.log").stat().st_size > 0
    assert not (data_dir / "postmaster.pid").exists()


def test_start_twice_adopts_and_stop_twice_is_harmless(data_dir: Path) -> None:
    server = EmbeddedPostgres(data_dir)
    dsn = server.start()
    pid = _postmaster_pid(data_dir)
    assert server.start() == dsn
    assert _postmaster_pid(data_dir) == pid
    server.stop()
    server.stop()
    assert not (data_dir / "postmaster.pid").exists()


def test_adopts_a_server_left_running_by_a_process_that_exited(data_dir: Path) -> None:
    owner = _run_script(START_AND_LEAVE, data_dir)
    out, _ = owner.communicate(timeout=60)
    assert owner.returncode == 0
    left_dsn, left_pid = out.strip(), _postmaster_pid(data_dir)

    server = EmbeddedPostgres(data_dir)
    assert server.start() == left_dsn
    assert _postmaster_pid(data_dir) == left_pid
    assert _query(server.dsn, "SELECT 1") == 1
    server.stop()
    assert not (data_dir / "postmaster.pid").exists()


def test_restarts_on_the_same_port_after_the_postmaster_is_killed(data_dir: Path) -> None:
    first = EmbeddedPostgres(data_dir)
    dsn = first.start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE survived (n int); INSERT INTO survived VALUES (42)")
    killed = _postmaster_pid(data_dir)
    os.kill(killed, signal.SIGKILL)

    second = EmbeddedPostgres(data_dir)
    assert second.start() == dsn
    assert _postmaster_pid(data_dir) != killed
    assert _query(dsn, "SELECT n FROM survived") == 42
    second.stop()


def test_sigterm_to_the_owning_process_stops_the_server(data_dir: Path) -> None:
    owner = _run_script(OWN_UNTIL_SIGTERM, data_dir)
    assert owner.stdout is not None
    dsn = owner.stdout.readline().strip()
    assert _query(dsn, "SELECT 1") == 1
    pid = _postmaster_pid(data_dir)

    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=60) == 128 + signal.SIGTERM
    assert not (data_dir / "postmaster.pid").exists()
    _wait_until_gone(pid, data_dir)


def test_a_taken_port_is_replaced_by_a_free_one(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with EmbeddedPostgres(data_dir, port=port) as server:
            assert f"port={port}" not in server.dsn
            assert _query(server.dsn, "SELECT 1") == 1


def test_a_long_data_dir_gets_a_short_socket_dir(initialised: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / ("a long directory name " * 5) / "data"
    shutil.copytree(initialised, data_dir, symlinks=True)
    assert len(str(data_dir)) > 110
    with EmbeddedPostgres(data_dir) as server:
        socket_dir = Path(server.socket_dir)
        assert socket_dir != data_dir
        assert _query(server.socket_dsn, "SELECT inet_server_addr()") is None
    assert not socket_dir.exists()


def test_a_pid_file_naming_another_process_is_replaced(data_dir: Path) -> None:
    stale = f"{os.getpid()}\n{data_dir}\n0\n5432\n{data_dir}\n127.0.0.1\n0 0\nready\n"
    (data_dir / "postmaster.pid").write_text(stale)
    with EmbeddedPostgres(data_dir) as server:
        assert _query(server.dsn, "SELECT 1") == 1
        assert _postmaster_pid(data_dir) != os.getpid()


def test_refuses_a_non_empty_directory_that_is_not_a_cluster(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(EmbeddedPostgresError, match="neither empty nor a PostgreSQL"):
        EmbeddedPostgres(tmp_path).start()


def test_dsn_before_start_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedPostgresError, match=r"not running: call start\(\)"):
        _ = EmbeddedPostgres(tmp_path / "data").dsn


def test_find_pg_bin_picks_the_highest_version(tmp_path: Path) -> None:
    for version in ("9.6", "15", "16", "notaversion"):
        bin_dir = tmp_path / version / "bin"
        bin_dir.mkdir(parents=True)
        for tool in ("postgres", "initdb", "pg_ctl"):
            (bin_dir / tool).touch()
    (tmp_path / "17" / "bin").mkdir(parents=True)  # a version without server tools
    assert find_pg_bin(tmp_path) == tmp_path / "16" / "bin"


def test_find_pg_bin_names_the_debian_package_when_absent(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedPostgresError, match="Debian package `postgresql`"):
        find_pg_bin(tmp_path / "missing")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to the postgres user needs root")
def test_as_root_without_user_namespaces_runs_as_the_postgres_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    try:
        postgres = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user on this machine")
    monkeypatch.setattr(embedded, "_userns_available", lambda: False)
    # The postgres user must be able to traverse every parent, which pytest's 700 tmp is not.
    parent = Path(tempfile.mkdtemp(prefix="wayline-test-"))
    try:
        parent.chmod(0o755)
        with EmbeddedPostgres(parent / "data") as server:
            assert _query(server.dsn, "SELECT 1") == 1
            assert (parent / "data").stat().st_uid == postgres.pw_uid
    finally:
        shutil.rmtree(parent)
