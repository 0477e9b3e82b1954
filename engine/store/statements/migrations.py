"""Statements on the migrations ledger (``schema_migrations``), see
``engine.store.migrations``; ``{ledger}`` is filled in as the ledger's qualified name."""

from __future__ import annotations

CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS {ledger} (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

READ_LEDGER = "SELECT version, name, checksum FROM {ledger} ORDER BY version"

RECORD = "INSERT INTO {ledger} (version, name, checksum) VALUES (%s, %s, %s)"

LEDGER_EXISTS = "SELECT to_regclass(format('%%I.schema_migrations', %s::text)) IS NOT NULL"
