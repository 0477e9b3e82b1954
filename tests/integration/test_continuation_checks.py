"""J5 and the chains the harness follows (``verification.continuations``), against runs
that really continued as new on a real PostgreSQL (manual clock, no drill).

A drill whose run continued as new used to count its first run's end as the run's end:
a successor lost, started twice, apart from the end, or one that no continuation named,
went unseen. The drills and plans prove J5 under faults and broken builds; here each of
its rules meets the history that breaks it."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from psycopg.conninfo import make_conninfo

from engine.api.client import Client
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from tests.fixtures.continuations.renewals import app
from tests.integration.code_runs import settle
from verification import continuations
from verification.effects import LEDGER_DSN_ENV
from verification.findings import Check, Findings
from verification.mutants import MUTANTS

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)


@pytest.fixture
def code_app() -> ActivityRegistry:
    return app


async def _j5(store: Store) -> Check:
    findings = Findings()
    async with store.connection() as conn:
        await continuations.check(conn, findings)
    return findings.checks["J5"]


async def test_a_chain_of_runs_holds_j5_and_is_followed_to_its_last_run(
    client: Client, ctx: Context, store: Store
) -> None:
    await client.start_run("renewal", {"period": 1, "until": 3}, id="r")
    await settle(ctx)
    check = await _j5(store)
    assert (check.checked, check.violations) == (4, []), "two continuations, two successors"
    chain = await continuations.live_chain(store, "renewal/r")
    ids = [run.instance_id for run in chain]
    assert ids == ["renewal/r", "renewal/r+2", "renewal/r+3"]
    assert continuations.chain({s.instance_id: s for s in chain}, "renewal/r") == ids
    assert continuations.chain({s.instance_id: s for s in chain[:2]}, "renewal/r") == ids, (
        "a successor that is missing is named, so the start is judged lost there"
    )


async def test_a_run_named_as_the_successor_of_a_run_that_did_not_continue_is_caught(
    client: Client, ctx: Context, store: Store
) -> None:
    await client.start_run("renewal", {"period": 1, "until": 1}, id="t")
    await client.start_run("renewal", {"period": 9, "until": 9}, id="t+2")
    await settle(ctx)
    assert (await _j5(store)).violations == [
        "renewal/t+2 exists as the successor of renewal/t, which did not continue"
    ]


async def test_a_continuation_without_its_successor_is_caught(
    client: Client, ctx: Context, store: Store
) -> None:
    """The broken build ``successor-dropped`` (its worker hooks) commits the end alone."""
    dropping = replace(ctx, hooks=MUTANTS["successor-dropped"].build(app).worker_hooks)
    await client.start_run("renewal", {"period": 1, "until": 2}, id="d")
    await settle(dropping)
    assert (await _j5(store)).violations == [
        "renewal/d continued as new as renewal/d+2, which does not exist: nothing carries "
        "the run on"
    ]
    assert [run.instance_id for run in await continuations.live_chain(store, "renewal/d")] == [
        "renewal/d"
    ]


async def test_a_successor_started_apart_from_its_runs_end_is_caught(
    client: Client, ctx: Context, store: Store, pg_dsn: str, schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The broken build ``successor-started-apart`` starts it once the end committed, in
    a transaction of its own (on a store of its own, opened from the drill ledger's DSN)."""
    monkeypatch.setenv(LEDGER_DSN_ENV, make_conninfo(pg_dsn, options=f"-c search_path={schema}"))
    apart = replace(ctx, hooks=MUTANTS["successor-started-apart"].build(app).worker_hooks)
    await client.start_run("renewal", {"period": 1, "until": 2}, id="a")
    await settle(apart)
    (violation,) = (await _j5(store)).violations
    assert re.fullmatch(
        r"renewal/a continued as new as renewal/a\+2, started by transaction \d+, not by \d+ "
        "that ended the run: apart from it",
        violation,
    ), violation
