"""Code-first runs in real worker processes: the example order saga driven from the
command line (publish, start, signal, status, and a replay check of renamed code), and
a worker killed with SIGKILL in the middle of a step, whose effect is then neither lost
nor done twice: the next attempt runs under the same step_id and the body recognises it."""

from __future__ import annotations

import json

from engine.model.events import EventKind
from engine.model.instance import InstanceStatus
from engine.modes.code.runs import RUN_ID_RULE
from engine.store.errors import InstanceNotFound
from tests.e2e import code_app
from tests.e2e.conftest import Harness
from tests.e2e.test_cli_e2e import ok, one_line

SAGA_APP = "examples.order_saga:app"
CRASHY_APP = "tests.e2e.code_app:app"
RENAMED_APP = "tests.fixtures.journal.renamed:app"
S = InstanceStatus


async def test_the_order_saga_runs_from_the_command_line(e2e: Harness) -> None:
    published = await ok(e2e, "definition", "publish", "--app", SAGA_APP)
    assert [line.split()[1] for line in published.splitlines()] == ["order-saga@1", "shipping@1"]
    await e2e.spawn(app=SAGA_APP)
    order = json.dumps({"sku": "mug", "amount": 1200})
    assert await ok(e2e, "start", "order-saga", "--id", "o-42", "--input", order) == (
        "run: order-saga/o-42\nstarted: true\n"
    )
    assert await ok(e2e, "start", "order-saga", "--id", "o-42", "--input", order) == (
        "run: order-saga/o-42\nstarted: false\n"
    )
    refused = await e2e.cli("start", "order-saga", "--id", "a/b")
    assert refused.code == 2, "a wrong --id is a usage error, even one only a code run refuses"
    rule = RUN_ID_RULE[0].lower() + RUN_ID_RULE[1:]
    assert one_line(refused) == (
        "wayline start: argument --id: order-saga is a code workflow, whose runs are "
        f"order-saga/ID: {rule}"
    )

    await e2e.until(lambda: _waits(e2e, "order-saga/o-42", "race.1"), what="the race")
    paid = ("--signal-id", "pay-1", "--payload", '{"by": "ada"}')
    await ok(e2e, "signal", "order-saga/o-42", "paid", *paid)
    child = "order-saga/o-42/spawn.1"
    await e2e.until(lambda: _waits(e2e, child, "await.picked-up.1"), what="the child's wait")
    await ok(e2e, "signal", child, "picked-up", "--signal-id", "pick-1", "--payload", '"van 3"')
    received = ("--signal-id", "recv-1", "--payload", '"thanks"')
    await ok(e2e, "signal", "order-saga/o-42", "received", *received)
    await e2e.until(lambda: _recorded(e2e, "order-saga/o-42", "sleep.1"), what="the sleep")
    status = json.loads(await ok(e2e, "status", "order-saga/o-42"))
    assert status["kind"] == "timer_scheduled" and set(status) == {"kind", "seq", "at"}
    assert (await e2e.state(child)).status is S.COMPLETED

    check = await e2e.cli("definition", "replay-check", "--app", RENAMED_APP)
    assert check.code == 1, check.stderr
    assert check.stdout.splitlines() == [
        "order-saga@2: 1 running checked: 0 compatible, 1 incompatible",
        "incompatible order-saga/o-42 (v1): journal divergence: expected step 'charge' at "
        "position 2 (event 8), code reached step 'capture'",
    ]
    gated = await e2e.cli("definition", "publish", "--app", RENAMED_APP, "--require-compatible")
    assert gated.code == 1
    assert gated.stdout.splitlines()[0] == check.stdout.splitlines()[0]
    assert gated.stderr.startswith(
        "wayline definition publish: order-saga@2 was not published: 1 running instance "
        "cannot move to it: order-saga/o-42: journal divergence: "
    )
    assert "order-saga@2" not in await ok(e2e, "definition", "list")


async def test_a_worker_killed_mid_step_leaves_one_effect_under_one_step_id(
    e2e: Harness,
) -> None:
    """step_id row: across a crash between the effect and its recorded result the id
    stays the same, so the repeat is recognised; nothing is done twice."""
    await e2e.publish(code_app.app.workflows[0].definition)
    (first,) = await e2e.spawn(app=CRASHY_APP, lease=1.0)
    gate = e2e.gate("released")
    run, created = await e2e.client.start_run("crashy", {"block": gate}, id="c1")
    assert created
    await e2e.until(lambda: _effects(e2e, "effect"), what="the effect")
    await first.kill()
    e2e.release("released")
    await e2e.spawn(app=CRASHY_APP, lease=1.0)
    state = await e2e.settled(run, S.COMPLETED)

    key = "crashy/c1/charge#1.1"
    assert [r["key"] for r in _effects(e2e, "effect")] == [key]
    assert [r["key"] for r in _effects(e2e, "call")] == [key, key]
    assert state.value("result") == key
    progress = state.activities["charge.1"]
    assert (progress.attempt, progress.idempotency_key) == (2, key)
    (unknown,) = await e2e.kinds(run, EventKind.ATTEMPT_UNKNOWN)
    assert unknown.attempt == 1, "the killed attempt is recorded unknown, never guessed"


def _effects(e2e: Harness, event: str) -> list[dict]:
    return [r for r in e2e.records() if r.get("event") == event]


async def _recorded(e2e: Harness, run: str, key: str) -> bool:
    try:
        return any(r.key == key for r in (await e2e.state(run)).journal)
    except InstanceNotFound:  # not started yet
        return False


async def _waits(e2e: Harness, run: str, key: str) -> bool:
    try:
        wait = (await e2e.state(run)).waits.get(key)
    except InstanceNotFound:  # not started yet
        return False
    return wait is not None and not wait.done


async def test_a_worker_refuses_code_that_differs_from_the_published_version(
    e2e: Harness,
) -> None:
    """Versions: the same version with other code is refused by the worker as by
    publishing, so it never replays runs against code they were not pinned to."""
    await ok(e2e, "definition", "publish", "--app", SAGA_APP)
    refused = await e2e.cli("worker", "--app", "tests.fixtures.journal.changed_saga:app")
    assert refused.code == 1
    assert one_line(refused).startswith("wayline worker: order-saga@1 is published with")
    assert one_line(refused).endswith(": publish a new version")
