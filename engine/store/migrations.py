"""Ordered, immutable, checksummed SQL migrations for one Wayline schema.

Every schema object lives in one schema (default `wayline`) and is created by the files
`migrations/NNNN_name.sql`, applied in version order. The SQL is written unqualified: the
runner sets `search_path` to the target schema for each file, so the files read plainly
and the same files build any schema (tests use one schema per test).

A ledger table `<schema>.schema_migrations` records each applied file with the sha256 of
its bytes. A file that changed after it was applied, a ledger version with no file, or a
new file numbered below one already applied is an error, never silently (re-)run: the
schema would no longer be what the files say. Workers and the studio call
`check_schema_current` and refuse to start against a schema that is behind.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from engine.model.errors import InputRefused, WaylineError
from engine.store.errors import CannotConnect
from engine.store.statements import migrations as statements

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
DEFAULT_SCHEMA = "wayline"

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_FILE_NAME = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


class MigrationError(WaylineError):
    """The migration files and a schema's ledger disagree, or a file failed to apply.

    A WaylineError, so an embedding service's one ``except WaylineError`` also catches
    ``Store.open`` on a schema that is behind (SchemaBehindError)."""


class SchemaBehindError(MigrationError):
    """The schema lacks migrations this version of Wayline needs."""

    def __init__(self, schema: str, empty: bool = False) -> None:
        advice = "run `wayline migrate`"
        if empty:  # most often a mistyped --schema, not a database to migrate
            advice += ", or give --schema the schema your instances are in"
        super().__init__(
            f"schema {schema} {'holds no Wayline tables' if empty else 'is behind'}: {advice}"
        )
        self.schema = schema


@dataclass(frozen=True)
class Migration:
    """One SQL file: its version (the NNNN prefix), file name, text and checksum."""

    version: int
    name: str
    sql: str
    checksum: str


def validate_schema_name(schema: str) -> str:
    """Return `schema` if it is a plain lower-case identifier, else raise InputRefused
    (a ValueError) saying what a schema name may hold.

    Plain names need no quoting anywhere (psql, logs, DSN options) and cannot smuggle SQL.
    """
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise InputRefused(
            f"invalid schema name {schema!r}: use 1-63 characters from a-z, 0-9 and _,"
            " starting with a letter or _"
        )
    return schema


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Read every `NNNN_name.sql` file in `directory`, ordered by version.

    A `.sql` file with another name, or two files with one version, is an error rather
    than something to skip, because either would make the order ambiguous.
    """
    migrations: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            raise MigrationError(f"migration file {path.name} is not named NNNN_name.sql")
        version = int(match.group(1))
        if version in migrations:
            raise MigrationError(
                f"migration files {migrations[version].name} and {path.name} share a version"
            )
        body = path.read_bytes()
        checksum = hashlib.sha256(body).hexdigest()
        migrations[version] = Migration(version, path.name, body.decode("utf-8"), checksum)
    return [migrations[version] for version in sorted(migrations)]


def apply_migrations(
    conninfo: str, schema: str = DEFAULT_SCHEMA, *, directory: Path = MIGRATIONS_DIR
) -> list[str]:
    """Create `schema` if missing and apply its missing migrations; return their file names.

    Each file runs in its own transaction together with its ledger row, so a failure
    leaves the schema at the last complete file. Every transaction first takes an
    advisory lock named by the schema and re-reads the ledger, so concurrent migrators
    (several workers starting at once) serialize and each file is applied exactly once.
    A server that cannot be reached raises `CannotConnect`; the driver's other errors
    propagate.
    """
    validate_schema_name(schema)
    migrations = load_migrations(directory)
    applied: list[str] = []
    with _connect(conninfo) as conn:
        while (name := _apply_next(conn, schema, migrations)) is not None:
            applied.append(name)
    return applied


def check_conninfo(conninfo: object) -> None:
    """InputRefused for a conninfo that is not text, naming only its type (the value
    may hold a password), before the driver fails on it with an AttributeError."""
    if not isinstance(conninfo, str):
        raise InputRefused(
            "the conninfo must be a str (a postgresql:// URL or key=value pairs), "
            f"not {type(conninfo).__name__}"
        )


def _connect(conninfo: str) -> psycopg.Connection:
    """An autocommit connection; CannotConnect when none can be opened, so a caller can
    say so without the driver's text (which can quote the address and the user)."""
    check_conninfo(conninfo)
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise CannotConnect from exc


def check_schema_current(
    conn_or_conninfo: psycopg.Connection | str,
    schema: str = DEFAULT_SCHEMA,
    *,
    directory: Path = MIGRATIONS_DIR,
) -> None:
    """Raise `SchemaBehindError` unless every migration file is applied to `schema`.

    Also raises `MigrationError` when the ledger disagrees with the files (a changed file,
    or a version this code does not know: the schema is newer than this Wayline). Runs in
    a transaction block (a savepoint inside the caller's transaction), so it leaves the
    caller's connection as it found it.
    """
    validate_schema_name(schema)
    if isinstance(conn_or_conninfo, str):
        with psycopg.connect(conn_or_conninfo, autocommit=True) as conn:
            check_schema_current(conn, schema, directory=directory)
        return
    with conn_or_conninfo.transaction(), conn_or_conninfo.cursor() as cur:
        (exists,) = cur.execute(statements.LEDGER_EXISTS, (schema,)).fetchone() or (False,)
        read = _ledger_sql(statements.READ_LEDGER, schema)
        ledger = cur.execute(read).fetchall() if exists else None
    _require_current(schema, ledger, load_migrations(directory))


async def check_schema_current_async(
    conn: psycopg.AsyncConnection, schema: str = DEFAULT_SCHEMA, *, directory: Path = MIGRATIONS_DIR
) -> None:
    """`check_schema_current` for an async connection (the studio and async workers)."""
    validate_schema_name(schema)
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(statements.LEDGER_EXISTS, (schema,))
        (exists,) = await cur.fetchone() or (False,)
        ledger = None
        if exists:
            await cur.execute(_ledger_sql(statements.READ_LEDGER, schema))
            ledger = await cur.fetchall()
    _require_current(schema, ledger, load_migrations(directory))


def _apply_next(conn: psycopg.Connection, schema: str, migrations: list[Migration]) -> str | None:
    """Apply the first missing migration in one locked transaction; None when none is missing."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema),))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(_ledger_sql(statements.CREATE_LEDGER, schema))
        ledger = conn.execute(_ledger_sql(statements.READ_LEDGER, schema)).fetchall()
        pending = _pending(schema, ledger, migrations)
        if not pending:
            return None
        migration = pending[0]
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        try:
            # Without parameters psycopg uses the simple query protocol, which runs a
            # whole file of statements in one call.
            conn.execute(migration.sql.encode())
        except psycopg.Error as error:
            raise MigrationError(
                f"migration {migration.name} failed on schema {schema}"
                f" (SQLSTATE {error.sqlstate or 'unknown'}); nothing from it was applied"
            ) from error
        record = (migration.version, migration.name, migration.checksum)
        conn.execute(_ledger_sql(statements.RECORD, schema), record)
    return migration.name


def _pending(
    schema: str, ledger: Iterable[tuple[int, str, str]], migrations: list[Migration]
) -> list[Migration]:
    """The migrations not in the ledger, after checking that the ledger matches the files."""
    by_version = {migration.version: migration for migration in migrations}
    applied = set()
    for version, name, checksum in ledger:
        migration = by_version.get(version)
        if migration is None:
            raise MigrationError(
                f"schema {schema} has migration {version} ({name}) applied, but there is no"
                " such file: this Wayline is older than the schema"
            )
        if migration.name != name:
            raise MigrationError(
                f"migration {version} was applied to schema {schema} as {name}, but the file"
                f" is now named {migration.name}: applied migrations are immutable"
            )
        if migration.checksum != checksum:
            raise MigrationError(
                f"migration {name} was changed after it was applied to schema {schema}:"
                " applied migrations are immutable, add a new file instead"
            )
        applied.add(version)
    pending = [migration for migration in migrations if migration.version not in applied]
    if pending and applied and pending[0].version < max(applied):
        raise MigrationError(
            f"migration {pending[0].name} is numbered below migration {max(applied)}, which"
            f" schema {schema} already has: renumber it after the last applied file"
        )
    return pending


def _require_current(
    schema: str, ledger: list[tuple[int, str, str]] | None, migrations: list[Migration]
) -> None:
    if ledger is None or _pending(schema, ledger, migrations):
        raise SchemaBehindError(schema, empty=not ledger)


def _ledger_sql(template: str, schema: str) -> sql.Composed:
    ledger = sql.Identifier(schema, "schema_migrations")
    return sql.SQL(template).format(ledger=ledger)


def _lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory lock key for migrating `schema`."""
    digest = hashlib.sha256(f"wayline migrate {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
