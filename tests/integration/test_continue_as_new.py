"""A code-first run continues as new (``ctx.continue_as_new``): it ends, and its
successor starts in the same transaction, against a real PostgreSQL on a manual clock.

Before, ``continued_as_new`` was an event and a status that nothing could produce: a run
that loops for months (a poll, a renewal) had no way to keep its history short."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.api.client import Client
from engine.api.queries import Queries
from engine.cli import main as cli_main
from engine.model.description import describe_instance
from engine.model.errors import InputRefused
from engine.model.instance import InstanceStatus
from engine.modes.code.context import Context as RunContext
from engine.modes.code.continuation import predecessor_of, successor_of
from engine.modes.code.effects import SUCCESSOR_ID_TAKEN
from engine.store.dead_letters import list_dead_letters
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from tests.integration.code_runs import settle

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
S = InstanceStatus
APP = ActivityRegistry()
TICKS: list[int] = []


def _tick(n: int) -> int:
    TICKS.append(n)
    return n


@APP.workflow("renewal", version="1")
async def renewal(ctx: RunContext, state: dict) -> Any:
    n = await ctx.step("tick", lambda: _tick(state["n"]))
    if n < state["until"]:
        try:
            ctx.continue_as_new({"n": n + 1, "until": state["until"]})
        except Exception:  # workflow code's own handler: must not swallow the continuation
            return "swallowed"
    return {"last": n}


@pytest.fixture
def code_app() -> ActivityRegistry:
    return APP


@pytest.fixture(autouse=True)
def _fresh_ticks() -> None:
    TICKS.clear()


async def test_a_run_continues_as_new_until_it_returns(client: Client, ctx: Context) -> None:
    first, _ = await client.start_run("renewal", {"n": 1, "until": 3}, id="r")
    await client.signal(first, "go", "s-0")  # set aside in its inbox: nothing waits for it
    await settle(ctx)
    assert first == "renewal/r"
    chain = [first, "renewal/r+2", "renewal/r+3"]
    states = [await client.inspect(run) for run in chain]
    assert [s.status for s in states] == [S.CONTINUED_AS_NEW, S.CONTINUED_AS_NEW, S.COMPLETED]
    assert [s.successor_id for s in states[:2]] == chain[1:]
    assert states[2].value("input") == {"n": 3, "until": 3}
    assert states[2].result == '{"last":3}'
    assert TICKS == [1, 2, 3], "each run's step ran once, in its own run"
    assert len(states[2].journal) == 1, "the successor's journal starts empty"
    assert "continued as renewal/r+2" in describe_instance(states[0]).splitlines()
    queries = Queries(client.store)
    assert [await queries.predecessor(run) for run in chain] == ["", *chain[:2]]
    with pytest.raises(
        InputRefused, match=r"renewal/r continued as new: its successor renewal/r\+2"
    ):
        await client.signal(first, "go", "s-1")
    again = await client.signal(first, "go", "s-0")  # a retry of one it took: answered
    assert again.status is S.CONTINUED_AS_NEW


async def test_a_successor_id_another_instance_holds_parks_the_run(
    client: Client, ctx: Context, store: Store
) -> None:
    taken, _ = await client.start_run("renewal", {"n": 9, "until": 9}, id="t+2")
    await client.start_run("renewal", {"n": 1, "until": 2}, id="t")
    await settle(ctx)
    run = await client.inspect("renewal/t")
    assert run.status is S.RUNNING, "no successor started, so the run has not ended"
    (letter,) = (await list_dead_letters(store)).items
    assert (letter.instance_id, letter.failure_code) == ("renewal/t", SUCCESSOR_ID_TAKEN)
    assert (await client.inspect(taken)).value("input") == {"n": 9, "until": 9}
    assert await Queries(store).predecessor(taken) == "", "named like a successor, started by hand"


def test_a_successor_id_counts_generations() -> None:
    assert successor_of("renewal/r") == "renewal/r+2"
    assert successor_of("renewal/r+2") == "renewal/r+3"
    assert successor_of("renewal/v1.5") == "renewal/v1.5+2"
    assert successor_of("renewal/a+b") == "renewal/a+b+2"
    assert successor_of("renewal/x+1") == "renewal/x+1+2", "a generation starts at 2"
    for run in ("renewal/r", "renewal/r+2", "renewal/a+b", "renewal/x+1", "renewal/x+01"):
        assert predecessor_of(successor_of(run)) == run
    assert [predecessor_of(r) for r in ("renewal/r", "renewal/r+1", "renewal/a+b")] == [""] * 3


async def test_start_wait_follows_the_run_to_its_last_successor(
    client: Client, ctx: Context, pg_dsn: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``wayline start --wait`` said a run that continued as new "did not complete"
    (exit 1) though its successors went on to complete: it follows them now."""
    await client.start_run("renewal", {"n": 1, "until": 3}, id="w")
    await settle(ctx)
    argv = ["start", "renewal", "--id", "w", "--input", '{"n": 1, "until": 3}', "--wait", "5"]
    argv += ["--dsn", pg_dsn, "--schema", schema]
    assert await asyncio.to_thread(cli_main.main, argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3:] == [
        "renewal/w continued as renewal/w+2",
        "renewal/w+2 continued as renewal/w+3",
        "ended renewal/w+3 (completed)",
    ], lines
    inspect = ["inspect", "renewal/w+2", "--dsn", pg_dsn, "--schema", schema]
    assert await asyncio.to_thread(cli_main.main, inspect) == 0
    described = capsys.readouterr().out.splitlines()
    assert {"continued from renewal/w", "continued as renewal/w+3"} <= set(described), described
