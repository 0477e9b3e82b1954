"""Millions of ended instances, as retention finds them, written by bulk SQL.

Issue 25 asks whether claims and the studio's reads stay the same with 10^7 history rows
of ended instances in the store. Committing that many through the engine would take
hours, so one instance is committed through the engine (``template``: a definition of
``STEPS`` activities, each scheduled, started and succeeded, the shape of
``bench.histories.build_history``) and then copied by ``INSERT ... SELECT`` over
``generate_series``: every row of the template in ``instances``, ``history``,
``transitions`` (the ledger) and ``work`` (completed work rows stay until retention
removes them), with the template's id replaced by the copy's in every text and bytea
column (work ids, transition ids, idempotency keys, payloads) and every time shifted so
that the copies were created evenly over ``SPAN_MONTHS`` whole calendar months ending a
month ago, oldest first. So every copy replays, and retention sees ended instances
long past any keep.

The statements are built from the catalog's column list, so a column a later migration
adds is copied too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime

import psycopg

from bench.cluster import PROBE

TEMPLATE_ID = "ended-template"
"""The engine-committed instance every ended instance is copied from."""
PREFIX = "ended-"
ID_DIGITS = 9
"""Copies are ``ended-000000001``...: fixed width, so their order is their number's."""
STEPS = 10
"""Activities per ended instance: 32 events, 21 ledger rows and 10 work rows each."""
SPAN_MONTHS = 12
"""The copies were created over this many calendar months, ending a month ago."""
TABLES = ("instances", "history", "transitions", "work")
"""Every per-instance table an ended instance of this shape has rows in, parents first."""
CHUNK_INSTANCES = 20_000
"""Instances written per transaction: about 640,000 history rows."""


@dataclass(frozen=True)
class Shape:
    """How many ended instances make ``events`` history rows, and their other rows."""

    instances: int
    events_per_instance: int
    ledger_per_instance: int
    work_per_instance: int

    @property
    def events(self) -> int:
        return self.instances * self.events_per_instance

    @property
    def ledger(self) -> int:
        return self.instances * self.ledger_per_instance

    @property
    def work(self) -> int:
        return self.instances * self.work_per_instance


def shape(events: int, template_rows: dict[str, int]) -> Shape:
    """The fewest copies of the template that make at least ``events`` history rows;
    ``template_rows`` counts the template's rows per table."""
    if events < 0:
        raise ValueError(f"events is {events}; it must be 0 or more")
    per = template_rows["history"]
    if per < 1:
        raise ValueError("the template has no history rows")
    return Shape(math.ceil(events / per), per, template_rows["transitions"], template_rows["work"])


def copy_expression(column: str, data_type: str) -> str:
    """What a copy writes into ``column`` of the template's row ``t`` for copy ``k``."""
    new_id = "%(prefix)s || lpad(k::text, %(digits)s, '0')"
    if data_type == "text":
        return f"replace(t.{column}, %(template)s, {new_id})"
    if data_type == "bytea":
        return (
            f"convert_to(replace(convert_from(t.{column}, 'UTF8'), %(template)s, {new_id}), 'UTF8')"
        )
    if data_type == "timestamp with time zone":
        return f"t.{column} + %(first)s::interval + k * %(spacing)s::interval"
    return f"t.{column}"


def copy_statement(schema: str, table: str, columns: list[tuple[str, str]]) -> str:
    """One INSERT writing copies ``start`` to ``stop - 1`` of the template's rows of
    ``table``; ``columns`` are (name, data type) as ``information_schema`` says."""
    names = ", ".join(name for name, _ in columns)
    values = ",\n       ".join(copy_expression(name, kind) for name, kind in columns)
    return (
        f"{PROBE} INSERT INTO {schema}.{table} ({names})\n"
        f"SELECT {values}\n"
        f"FROM {schema}.{table} t CROSS JOIN generate_series(%(start)s::bigint, "
        "%(stop)s::bigint - 1) k\n"
        "WHERE t.instance_id = %(template)s\n"
        "ORDER BY k"
    )


def columns(conn: psycopg.Connection, schema: str, table: str) -> list[tuple[str, str]]:
    """``table``'s columns and their types, in order (generated columns left out)."""
    return conn.execute(
        f"{PROBE} SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s AND is_generated = 'NEVER' "
        "ORDER BY ordinal_position",
        [schema, table],
    ).fetchall()


def template_rows(conn: psycopg.Connection, schema: str) -> dict[str, int]:
    return {
        table: conn.execute(
            f"{PROBE} SELECT count(*) FROM {schema}.{table} WHERE instance_id = %s",
            [TEMPLATE_ID],
        ).fetchone()[0]
        for table in TABLES
    }


def span(conn: psycopg.Connection) -> tuple[datetime, datetime]:
    """The first and the end of the months the copies were created in."""
    return conn.execute(
        f"{PROBE} SELECT date_trunc('month', now()) - %(months)s * interval '1 month', "
        "date_trunc('month', now()) - interval '1 month'",
        {"months": SPAN_MONTHS + 1},
    ).fetchone()


def add_ended(conn: psycopg.Connection, schema: str, count: int) -> float:
    """Write ``count`` copies of the template, oldest first, in chunks; seconds taken."""
    statements = {
        table: copy_statement(schema, table, columns(conn, schema, table)) for table in TABLES
    }
    first, end = span(conn)
    created = conn.execute(
        f"{PROBE} SELECT created_at FROM {schema}.instances WHERE instance_id = %s", [TEMPLATE_ID]
    ).fetchone()[0]
    params = {
        "prefix": PREFIX,
        "digits": ID_DIGITS,
        "template": TEMPLATE_ID,
        "first": first - created,
        "spacing": (end - first) / max(count, 1),
    }
    began = time.perf_counter()
    for start in range(0, count, CHUNK_INSTANCES):
        with conn.transaction():
            for table in TABLES:
                conn.execute(
                    statements[table],
                    {**params, "start": start, "stop": min(count, start + CHUNK_INSTANCES)},
                )
    return time.perf_counter() - began
