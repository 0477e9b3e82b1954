"""The plans PostgreSQL actually executed for an engine call, as ``auto_explain`` saw them.

We do not copy the engine's SQL into ``EXPLAIN``: the store's statements and parameters
change as the engine evolves. Instead the call runs on a store with one connection on
which ``auto_explain`` (ANALYZE, BUFFERS) reports every statement's plan to the client
as a notice. The call is repeated so that psycopg has prepared the statement and the
server may have switched to a generic plan, as in a long-running worker; the last
execution's plans are kept.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from engine.store.store import Store

EXPLAIN_ON = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_buffers = on",
    "SET auto_explain.log_level = notice",
)
EXPLAIN_OFF = "SET auto_explain.log_min_duration = -1"
PLAN_TOP = re.compile(r"^\S.*\(cost=")
REPEAT = 12
"""Past psycopg's prepare threshold (5) plus PostgreSQL's five custom plans of a prepared
statement, so the plan is the one a long-running worker gets."""


async def executed_plans(
    dsn: str, schema: str, call: Callable[[Store], Awaitable[Any]], repeat: int = REPEAT
) -> list[str]:
    """The plans of the statements of the last of ``repeat`` calls (BEGIN etc. have none)."""
    store = await Store.open(dsn, schema, max_size=1)
    notices: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    try:
        async with store.connection() as conn:
            for statement in EXPLAIN_ON:
                await conn.execute(statement)
            conn.add_notice_handler(keep)
        for _ in range(repeat):
            notices.clear()
            await call(store)
        async with store.connection() as conn:
            conn.remove_notice_handler(keep)
            await conn.execute(EXPLAIN_OFF)
    finally:
        await store.close()
    return [_plan_only(n) for n in notices if "plan:" in n]


def _plan_only(notice: str) -> str:
    """auto_explain prints the query text first; the plan starts at its top node."""
    lines = notice.splitlines()
    top = next((k for k, line in enumerate(lines) if k > 0 and PLAN_TOP.match(line)), 0)
    return "\n".join(lines[top:]).strip()
