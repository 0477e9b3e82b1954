"""Migrations against a real PostgreSQL: apply, ledger checks, concurrency, the CLI."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from engine.store.migrations import (
    MIGRATIONS_DIR,
    MigrationError,
    SchemaBehindError,
    apply_migrations,
    check_schema_current,
    check_schema_current_async,
    load_migrations,
)

WAYLINE = Path(sys.executable).parent / "wayline"
CORE_TABLES = {
    "definitions",
    "history",
    "instances",
    "schema_migrations",
    "transitions",
    "work",
    "work_resolutions",
    "workers",
}
FINGERPRINT = "f" * 64


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def _ledger(pg_dsn: str, schema: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT version, name, checksum FROM {} ORDER BY version")
        return conn.execute(query.format(sql.Identifier(schema, "schema_migrations"))).fetchall()


def _tables(pg_dsn: str, schema: str) -> set[str]:
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    return {name for (name,) in rows}


def test_migrations_apply_once_and_then_are_a_no_op(pg_dsn: str, schema_name: str) -> None:
    files = load_migrations()
    assert apply_migrations(pg_dsn, schema_name) == [m.name for m in files]
    assert apply_migrations(pg_dsn, schema_name) == []

    assert _tables(pg_dsn, schema_name) >= CORE_TABLES
    checksum = hashlib.sha256((MIGRATIONS_DIR / "0001_core.sql").read_bytes()).hexdigest()
    assert _ledger(pg_dsn, schema_name)[0] == (1, "0001_core.sql", checksum)
    assert [row[0] for row in _ledger(pg_dsn, schema_name)] == [m.version for m in files]
    check_schema_current(pg_dsn, schema_name)


def test_load_migrations_orders_by_version_and_rejects_bad_names(tmp_path: Path) -> None:
    _write(tmp_path, {"0002_b.sql": "SELECT 2", "0001_a.sql": "SELECT 1", "notes.md": ""})
    assert [m.name for m in load_migrations(tmp_path)] == ["0001_a.sql", "0002_b.sql"]
    _write(tmp_path, {"2_c.sql": "SELECT 3"})
    with pytest.raises(MigrationError, match=r"2_c\.sql is not named NNNN_name\.sql"):
        load_migrations(tmp_path)


def test_a_changed_applied_file_is_an_error_naming_it(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    directory = _write(tmp_path, {"0001_first.sql": "CREATE TABLE first (n int);"})
    apply_migrations(pg_dsn, schema_name, directory=directory)
    _write(directory, {"0001_first.sql": "CREATE TABLE first (n bigint);"})

    with pytest.raises(MigrationError, match=r"migration 0001_first\.sql was changed"):
        apply_migrations(pg_dsn, schema_name, directory=directory)
    with pytest.raises(MigrationError, match=r"0001_first\.sql was changed"):
        check_schema_current(pg_dsn, schema_name, directory=directory)


def test_an_applied_version_without_a_file_is_an_error(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    newer = _write(tmp_path / "newer", {"0001_a.sql": "SELECT 1;", "0002_b.sql": "SELECT 2;"})
    apply_migrations(pg_dsn, schema_name, directory=newer)
    older = _write(tmp_path / "older", {"0001_a.sql": "SELECT 1;"})

    with pytest.raises(MigrationError, match=r"migration 2 \(0002_b\.sql\) applied.*no such file"):
        apply_migrations(pg_dsn, schema_name, directory=older)


def test_a_new_file_numbered_below_an_applied_one_is_an_error(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    directory = _write(tmp_path, {"0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 3;"})
    apply_migrations(pg_dsn, schema_name, directory=directory)
    _write(directory, {"0002_b.sql": "SELECT 2;"})

    with pytest.raises(MigrationError, match=r"0002_b\.sql is numbered below migration 3"):
        apply_migrations(pg_dsn, schema_name, directory=directory)


def test_a_failing_file_is_named_and_leaves_nothing_behind(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    directory = _write(
        tmp_path,
        {
            "0001_good.sql": "CREATE TABLE good (n int);",
            "0002_bad.sql": "CREATE TABLE half (n int);\nSELECT 1 / 0;",
        },
    )
    with pytest.raises(MigrationError, match=r"0002_bad\.sql failed .*SQLSTATE 22012"):
        apply_migrations(pg_dsn, schema_name, directory=directory)

    assert [name for _, name, _ in _ledger(pg_dsn, schema_name)] == ["0001_good.sql"]
    assert _tables(pg_dsn, schema_name) == {"good", "schema_migrations"}


def test_concurrent_migrators_apply_each_file_exactly_once(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    # The first file holds its transaction open, so the migrators overlap for sure.
    directory = _write(
        tmp_path,
        {
            "0001_slow.sql": "CREATE TABLE runs (n int); SELECT pg_sleep(0.3);",
            "0002_fill.sql": "INSERT INTO runs VALUES (1);",
        },
    )
    start = threading.Barrier(4)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        start.wait()
        try:
            results.append(apply_migrations(pg_dsn, schema_name, directory=directory))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(name for applied in results for name in applied) == [
        "0001_slow.sql",
        "0002_fill.sql",
    ]
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema_name, "runs"))
        assert conn.execute(query).fetchone() == (1,)


def test_check_schema_current_says_to_run_wayline_migrate(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    advice = f"schema {schema_name} is behind: run `wayline migrate`"
    with pytest.raises(SchemaBehindError) as missing:
        check_schema_current(pg_dsn, schema_name)
    assert str(missing.value) == (
        f"schema {schema_name} holds no Wayline tables: run `wayline migrate`, or give "
        "--schema the schema your instances are in"
    )

    directory = _write(tmp_path, {"0001_a.sql": "SELECT 1;"})
    apply_migrations(pg_dsn, schema_name, directory=directory)
    check_schema_current(pg_dsn, schema_name, directory=directory)

    _write(directory, {"0002_b.sql": "SELECT 2;"})
    with psycopg.connect(pg_dsn) as conn, pytest.raises(SchemaBehindError) as behind:
        check_schema_current(conn, schema_name, directory=directory)
    assert str(behind.value) == advice


async def test_check_schema_current_async(
    aconn: psycopg.AsyncConnection, schema: str, schema_name: str
) -> None:
    await check_schema_current_async(aconn, schema)
    with pytest.raises(SchemaBehindError, match=r"run `wayline migrate`"):
        await check_schema_current_async(aconn, "t_never_created")
    assert aconn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE


def test_core_schema_rejects_a_retry_resolution_without_times(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO instances VALUES ('i1', 'd', '1', %s, 1, 1, '', now(), now(), NULL)",
        (FINGERPRINT,),
    )
    conn.execute(
        "INSERT INTO history (instance_id, sequence, kind, occurred_at) VALUES ('i1', 1, 1, now())"
    )
    conn.execute(
        "INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline, state)"
        " VALUES ('w1', 1, 'i1', 1, now(), now() + interval '1 hour', 4)"
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO work_resolutions (instance_id, command_id, fingerprint, work_id,"
            " lease_token, action, actor, reason, occurred_at)"
            " VALUES ('i1', 'c1', %s, 'w1', 1, 1, 'ann', 'x', now())",
            (FINGERPRINT,),
        )


def test_core_schema_rejects_a_lease_without_owner(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO instances VALUES ('i1', 'd', '1', %s, 1, 1, '', now(), now(), NULL)",
        (FINGERPRINT,),
    )
    conn.execute(
        "INSERT INTO history (instance_id, sequence, kind, occurred_at) VALUES ('i1', 1, 1, now())"
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline,"
            " state, lease_expires_at) VALUES"
            " ('w1', 1, 'i1', 1, now(), now() + interval '1 hour', 2, now())"
        )


@pytest.mark.parametrize("name", ["Wayline", "1st", "a-b", "a;drop", "", "x" * 64])
def test_a_bad_schema_name_is_rejected_clearly(pg_dsn: str, name: str) -> None:
    with pytest.raises(ValueError, match=r"invalid schema name .*use 1-63 characters"):
        apply_migrations(pg_dsn, name)
    with pytest.raises(ValueError, match="invalid schema name"):
        check_schema_current(pg_dsn, name)


def _wayline(*args: str, dsn_env: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "WAYLINE_DSN"}
    if dsn_env is not None:
        env["WAYLINE_DSN"] = dsn_env
    return subprocess.run(
        [str(WAYLINE), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_cli_migrate_applies_then_reports_up_to_date(pg_dsn: str, schema_name: str) -> None:
    first = _wayline("migrate", "--dsn", pg_dsn, "--schema", schema_name)
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == "".join(
        f"applied {m.name} to schema {schema_name}\n" for m in load_migrations()
    )

    again = _wayline("migrate", "--schema", schema_name, dsn_env=pg_dsn)
    assert (again.returncode, again.stdout) == (0, f"schema {schema_name} is up to date\n")
    check_schema_current(pg_dsn, schema_name)


def test_cli_migrate_without_a_dsn_says_how_to_give_one() -> None:
    result = _wayline("migrate")
    assert result.returncode == 2
    assert "pass --dsn or set WAYLINE_DSN" in result.stderr


def test_cli_migrate_cannot_connect_without_leaking_the_dsn() -> None:
    result = _wayline("migrate", "--dsn", "host=127.0.0.1 port=1 password=hunter2")
    assert result.returncode == 1
    assert result.stderr == (
        "wayline migrate: cannot connect to the database: check --dsn or WAYLINE_DSN\n"
    )
    assert "hunter2" not in result.stdout + result.stderr


def test_cli_migrate_reports_a_ledger_mismatch(
    pg_dsn: str, schema: str, conn: psycopg.Connection
) -> None:
    conn.execute("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'x')")
    result = _wayline("migrate", "--schema", schema, dsn_env=pg_dsn)
    assert result.returncode == 1
    assert "9999_future.sql" in result.stderr
    assert result.stderr.startswith("wayline migrate: schema ")


def test_cli_migrate_rejects_a_bad_schema_name(pg_dsn: str) -> None:
    result = _wayline("migrate", "--dsn", pg_dsn, "--schema", "Bad-Name")
    assert result.returncode == 2
    assert "invalid schema name 'Bad-Name'" in result.stderr


# Shard-ready keys (migration 0027) -----------------------------------------------------

KEYED_BY_THEIR_OWNER = {
    "bulk_command_results",  # one bulk command's outcome per instance: that command's report
    "hold_exemptions",  # the instances one hold released: that hold's list
}
"""Tables with an ``instance_id`` column keyed by the command or hold their rows belong
to, not by instance (migration 0027 says why). Every other such table is keyed by
instance id first, so that instance id can be the shard key (docs/scaling.md)."""
PER_INSTANCE = {"instances", "history", "snapshots", "transitions", "work", "work_resolutions"}
KEY_COLUMNS = """
SELECT c.relname,
       ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY AS u (attnum, n)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum ORDER BY u.n)
FROM pg_class c
JOIN pg_namespace s ON s.oid = c.relnamespace
LEFT JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'p'
WHERE s.nspname = %(schema)s AND c.relkind IN ('r', 'p')
  AND EXISTS (SELECT 1 FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attname = 'instance_id' AND NOT a.attisdropped)
"""
"""Each table of the schema with an ``instance_id`` column, and its primary key's
columns in order (NULL: no primary key)."""


def test_every_per_instance_table_is_keyed_by_instance_id_first(
    conn: psycopg.Connection, schema: str
) -> None:
    keys = dict(conn.execute(KEY_COLUMNS, {"schema": schema}).fetchall())
    assert set(keys) >= KEYED_BY_THEIR_OWNER | PER_INSTANCE  # both lists name real tables
    misfits = {
        table: key
        for table, key in keys.items()
        if table not in KEYED_BY_THEIR_OWNER and (not key or key[0] != "instance_id")
    }
    assert misfits == {}, "key these tables by instance_id first, or say why not"
    assert keys["transitions"] == ["instance_id", "transition_id"]
    assert keys["work"] == ["instance_id", "work_id"]
    assert keys["work_resolutions"] == ["instance_id", "command_id"]


SEED_0026 = [
    "INSERT INTO instances VALUES"
    " ('i1', 'd', '1', repeat('f', 64), 1, 2, '', now(), now(), NULL),"
    " ('i2', 'd', '1', repeat('f', 64), 1, 1, '', now(), now(), NULL)",
    "INSERT INTO history (instance_id, sequence, kind, occurred_at)"
    " VALUES ('i1', 1, 1, now()), ('i1', 2, 2, now()), ('i2', 1, 1, now())",
    "INSERT INTO transitions (transition_id, instance_id, fingerprint, expected_sequence,"
    " committed_sequence) VALUES ('i1#start', 'i1', repeat('a', 64), 0, 1),"
    " ('i1#2', 'i1', repeat('b', 64), 1, 2), ('i2#start', 'i2', repeat('c', 64), 0, 1)",
    "INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline, state,"
    " lease_token, completed_at) VALUES"
    " ('i1#2#activity#a', 1, 'i1', 2, now(), now() + interval '1 hour', 4, 1, now()),"
    " ('i2#1#activity#a', 1, 'i2', 1, now(), now() + interval '1 hour', 1, 0, NULL)",
    "INSERT INTO work_resolutions (command_id, fingerprint, work_id, lease_token, action,"
    " actor, reason, occurred_at) VALUES"
    " ('c1', repeat('d', 64), 'i1#2#activity#a', 1, 2, 'ann', 'obsolete', now())",
]
"""Rows of every re-keyed table, written as the schema before migration 0027 took them."""


def test_rekeying_by_instance_keeps_every_row(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    """Migration 0027 on a populated schema: every ledger, work and resolution row is
    still there, each resolution now names its work's instance, and the keys hold."""
    before = tmp_path / "before_0027"
    before.mkdir()
    for migration in load_migrations():
        if migration.version < 27:
            shutil.copy(MIGRATIONS_DIR / migration.name, before / migration.name)
    apply_migrations(pg_dsn, schema_name, directory=before)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema_name)))
        for statement in SEED_0026:
            conn.execute(statement)
        assert apply_migrations(pg_dsn, schema_name)[0] == "0027_keyed_by_instance.sql"

        ledger = conn.execute(
            "SELECT instance_id, transition_id FROM transitions ORDER BY 1, 2"
        ).fetchall()
        assert ledger == [("i1", "i1#2"), ("i1", "i1#start"), ("i2", "i2#start")]
        work = conn.execute("SELECT instance_id, work_id, state FROM work ORDER BY 1").fetchall()
        assert work == [("i1", "i1#2#activity#a", 4), ("i2", "i2#1#activity#a", 1)]
        resolutions = conn.execute(
            "SELECT instance_id, command_id, work_id, lease_token FROM work_resolutions"
        ).fetchall()
        assert resolutions == [("i1", "c1", "i1#2#activity#a", 1)]
        with pytest.raises(psycopg.errors.UniqueViolation, match="work_resolutions_fence_key"):
            conn.execute(
                "INSERT INTO work_resolutions VALUES ('c2', repeat('e', 64), 'i1#2#activity#a',"
                " 1, 2, 'bob', 'again', now(), NULL, NULL, 'i1')"
            )
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="work_resolutions_work_fkey"):
            conn.execute(  # the work of another instance is not this instance's
                "INSERT INTO work_resolutions VALUES ('c3', repeat('e', 64), 'i1#2#activity#a',"
                " 1, 2, 'bob', 'other', now(), NULL, NULL, 'i2')"
            )


MACHINE_VERSIONS = "0034_machine_work_names_its_version.sql"


def test_a_machine_s_unfinished_work_made_before_0034_names_its_execution_s_version(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    before = tmp_path / "before"
    before.mkdir()
    for path in MIGRATIONS_DIR.glob("*.sql"):
        if path.name < MACHINE_VERSIONS:
            shutil.copy(path, before / path.name)
    apply_migrations(pg_dsn, schema_name, directory=before)
    rows = [  # work id, kind, target, state: machine advances (7) and an activity (1)
        ("due", 7, "documents.advance", 1),
        ("dead", 7, "documents.compensate", 4),
        ("done", 7, "documents.advance", 3),
        ("step", 1, "charge-card", 1),
    ]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema_name)))
        conn.execute(
            "INSERT INTO instances (instance_id, definition_name, definition_version,"
            " definition_fingerprint, status, sequence, created_at, updated_at)"
            " VALUES ('document_approval/doc-1', 'document_approval', '3', %s, 1, 2, now(), now())",
            [FINGERPRINT],
        )
        for work_id, kind, target, state in rows:
            conn.execute(
                "INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline,"
                " target, state, completed_at)"
                " VALUES (%s, %s, 'document_approval/doc-1', 1, now(), now() + interval '1h',"
                " %s, %s, CASE WHEN %s IN (3, 4) THEN now() END)",
                [work_id, kind, target, state, state],
            )
    assert apply_migrations(pg_dsn, schema_name) == [
        m.name for m in load_migrations() if m.name >= MACHINE_VERSIONS
    ]
    with psycopg.connect(pg_dsn) as conn:
        query = sql.SQL("SELECT work_id, target FROM {} ORDER BY work_id")
        found = dict(conn.execute(query.format(sql.Identifier(schema_name, "work"))).fetchall())
    assert found == {
        "due": "machine:document_approval@3",
        "dead": "machine:document_approval@3",
        "done": "documents.advance",
        "step": "charge-card",
    }
