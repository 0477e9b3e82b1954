"""O1: an incident: a hold, and a bulk action whose COMMITs are cut while workers die.

An incident is when operators act on many instances at once, and incidents are when
connections drop and workers die. The harness is the operator here: while a worker runs
the instances, it holds their definition (``Client.place_hold``), then cancels them as
one bulk (``BulkCommands``) through a proxy that cuts the answer of every other write
COMMIT the bulk makes (its record, each instance's audited command, each kept result),
after and before the server got it in turn; after each error it takes the same bulk
again, as an operator would, so each take gets at least one write further, and after
the first two the running worker is SIGKILLed and another takes over. Once a take gets
through, the bulk is taken once more through a clean connection, and the hold is
released gradually (one instance, then a rate) so the cancellations run.

What must hold, beside every invariant: each answer the engine gave for a cut COMMIT is
true of what the server did (``unknown`` is true of both); the last take acts on no
instance (it was all done); no work was leased while the hold held it; every selected
instance has exactly one kept result, and exactly one audited command of the bulk in
its history when that result is ``done``, none otherwise.
"""

from __future__ import annotations

from itertools import cycle, islice

from engine import HoldScope, Queries
from engine.api.bulk_commands import BulkCommand, BulkCommands, BulkOutcome, command_id
from engine.api.client import Client
from engine.store.errors import CommitOutcome, StoreError
from verification.drills.base import DrillEnv
from verification.drills.holds import ACTOR, NOW, RELEASE_RATE, nothing_claimed_while_held
from verification.drills.leases import wait_running
from verification.processes import DrillProcess
from verification.proxy import AmbiguousCommit, Cut, DrillProxy, Truth
from verification.workloads import FLOW, Planned, Workload

SELECTED = 6
"""Instances the bulk cancels: half signalled before (racing to complete), half waiting."""
MAX_CUTS = 4 * SELECTED
"""COMMITs cut at most: more than the bulk's writes (1 + at most 2 per instance)."""
MAX_TAKES = 2 * MAX_CUTS
KILLED_AT = {0: "b", 1: "c"}
"""After which take the running worker is SIGKILLed, and the name of its successor."""
CUTS = (Cut.SEVER_AFTER_COMMIT, None, Cut.SEVER_BEFORE_COMMIT, None)
"""Every other write loses its answer, after and before the server got it in turn: each
take after a lost answer gets one write further."""
TRUE_ANSWERS = {
    Truth.COMMITTED: {"success", CommitOutcome.UNKNOWN.value},
    Truth.ABORTED: {CommitOutcome.NOT_COMMITTED.value, CommitOutcome.UNKNOWN.value},
}
"""What the engine may answer for a COMMIT the server committed, or did not."""


async def bulk_under_hold(env: DrillEnv) -> None:
    """O1 (see the module)."""
    planned = await env.start_workload(Workload(env.spec.id, count=SELECTED))
    for item in planned[: SELECTED // 2]:
        await env.signal(item)
    bulk = _cancel_all(env, planned)
    proxy, client = await env.proxied_client()
    worker = env.worker("a")
    await wait_running(env, worker.worker_id)  # the hold and the bulk land on work in flight
    hold = await env.client.place_hold(HoldScope("", FLOW), ACTOR, "incident: cancel the batch")
    held_at = await env.scalar(NOW)
    await _take_with_cuts(env, proxy, BulkCommands(client), bulk, worker)
    outcome = await BulkCommands(env.client).act(bulk)
    env.expect(outcome.replayed, "taking the finished bulk again acted on an instance again")
    held = await Queries(env.store).hold("", hold.hold_id)
    env.record.extra["backlog"] = backlog = held.backlog if held else 0
    env.expect(backlog > 0, "no cancellation's work was held: the hold was not exercised")
    await env.client.release_hold("", hold.hold_id, ACTOR, "one first", count=1)
    await env.client.release_hold("", hold.hold_id, ACTOR, "the rest", rate=RELEASE_RATE)
    await env.quiesce()
    await env.stop_processes()
    await nothing_claimed_while_held(env, hold.hold_id, held_at)
    await _one_result_each(env, env.client, bulk, outcome)


def _cancel_all(env: DrillEnv, planned: list[Planned]) -> BulkCommand:
    return BulkCommand(
        bulk_id=f"{env.spec.id}-cancel",
        tenant_id="",
        action="cancel",
        step="",
        arguments={},
        actor=ACTOR,
        reason="incident drill: cancel the batch",
        instance_ids=tuple(item.instance_id for item in planned),
    )


async def _take_with_cuts(
    env: DrillEnv, proxy: DrillProxy, bulks: BulkCommands, bulk: BulkCommand, worker: DrillProcess
) -> None:
    """Take ``bulk`` with every write's COMMIT cut (after, then before the server got it,
    in turn) until a take finishes; kill the running ``worker`` after the takes
    ``KILLED_AT`` names. A take that fails answers for the last COMMIT it lost."""
    proxy.arm_series(islice(cycle(CUTS), 2 * MAX_CUTS), "write")
    for take in range(MAX_TAKES):
        answer = await _answer(bulks, bulk)
        await proxy.settled(10.0)
        if answer == "success":
            break
        _judge_answer(env, proxy.ambiguous[-1], answer)
        if take in KILLED_AT:
            worker.kill()
            env.mark_fault("worker SIGKILLed during a bulk action")
            worker = env.worker(KILLED_AT[take])
    cuts = len(proxy.ambiguous)
    env.record.stats["bulk_commits_cut"] += cuts
    env.expect(answer == "success", f"the bulk still failed after {MAX_TAKES} takes")
    env.expect(take > max(KILLED_AT), f"the bulk was done after {take + 1} takes, before the kills")


async def _answer(bulks: BulkCommands, bulk: BulkCommand) -> str:
    """What taking ``bulk`` answered: success, or the outcome of the COMMIT it lost."""
    try:
        await bulks.act(bulk)
    except StoreError as exc:
        return exc.outcome.value
    return "success"


def _judge_answer(env: DrillEnv, cut: AmbiguousCommit, answer: str) -> None:
    env.record.env_faults[cut.cut.value] += 1
    env.mark_fault(cut.cut.value)
    env.expect(
        answer in TRUE_ANSWERS.get(cut.truth, set()),
        f"{cut.cut.value}: the server {cut.truth.value} a bulk's COMMIT "
        f"but the engine answered {answer}",
    )


async def _one_result_each(
    env: DrillEnv, client: Client, bulk: BulkCommand, outcome: BulkOutcome
) -> None:
    results = [r.instance_id for r in outcome.results]
    env.expect(
        sorted(results) == sorted(bulk.instance_ids),
        f"the bulk kept results for {results}, not one for each of {list(bulk.instance_ids)}",
    )
    for result in outcome.results:
        state = await client.cache.load(result.instance_id)
        audited = [
            a for a in state.audit if a.command_id == command_id(bulk.bulk_id, result.instance_id)
        ]
        wanted = 1 if result.outcome == "done" else 0
        env.expect(
            len(audited) == wanted,
            f"{result.instance_id}: result {result.outcome} but {len(audited)} audited commands",
        )
        env.record.stats[f"bulk_{result.outcome}"] += 1
