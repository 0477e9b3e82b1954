"""D7: replay every history the campaign produced, and prove replay can fail.

The corpus is what the other drills captured (``corpus.jsonl`` in the campaign
directory). When it lacks what some mutation needs (run alone, it is empty), D7 first
produces histories with a scripted failure, a retry and a crash mid-attempt. Clean
replay against the current definitions must find no nondeterminism at all, and folding
from a snapshot at the end of any transition must reach the full replay's digest. Then
every mutation of ``verification.mutations`` is applied to the histories it applies to
(up to a sample per mutation), plus decision code that draws randomness before an id;
each mutated history must be rejected by replay, its decision checks and (for a
code-first run) its journal replayed against the code, never by the ledger a doctored
history lacks. The kill rate must be 100 %.
"""

from __future__ import annotations

from engine.model.registry import Registry
from engine.modes import decide
from engine.worker.faults import Action, Boundary, Fault
from verification import capture, drill_app, journal_replay, replay_check
from verification.drills.base import DrillEnv
from verification.mutations import MUTATIONS, STEP_LISTS, Mutation, random_keys
from verification.replay_check import History
from verification.workloads import CodeWorkload, Workload, definitions

SAMPLE = 12
"""Histories per mutation (chosen by the drill's seed)."""


async def scenario(env: DrillEnv) -> None:
    corpus = [h for _, h in capture.load(env.campaign.corpus)]
    if any(not _applies(m, corpus, env) for m in MUTATIONS):
        corpus += await _produce(env)  # a corpus that exercises every mutation
    registry = _current()
    clean = 0
    for history in corpus:
        verdict = replay_check.verify(registry, history)
        env.record.stats["corpus_events"] += verdict.events
        env.record.stats["snapshot_paths_checked"] += verdict.snapshots
        for problem in verdict.problems:
            clean += 1
            env.expect(False, f"nondeterminism in clean replay of {history.instance_id}: {problem}")
    env.record.stats["corpus_histories"] += len(corpus)
    env.record.stats["clean_nondeterminism"] += clean
    _negative_controls(env, corpus)


def _applies(mutation: Mutation, corpus: list[History], env: DrillEnv) -> bool:
    return any(mutation.apply(h, env.rng) is not None for h in corpus)


async def _produce(env: DrillEnv) -> list[History]:
    """Histories with a clean failure, a retry, a crash mid-attempt and its unknown, of
    the flow and of code-first runs (each mode's mutations need its own histories)."""
    for item in await env.start_workload(Workload(env.spec.id)):
        await env.signal(item)
    runs = CodeWorkload(env.spec.id, count=2).runs()
    await env.start_runs(runs)
    for run in runs:
        await env.signal_run(run)
    crash = Fault(Boundary.AFTER_ATTEMPT_START, 2, Action.KILL)
    a = env.worker("a", plan=[crash])
    await a.wait_exit(30.0)
    env.worker("b")
    await env.quiesce()
    await env.stop_processes()
    return await capture.capture(env.store)


def _negative_controls(env: DrillEnv, corpus: list[History]) -> None:
    for mutation in MUTATIONS:
        cases = [m for h in corpus if (m := mutation.apply(h, env.rng)) is not None]
        cases = env.rng.sample(cases, min(SAMPLE, len(cases)))
        env.expect(bool(cases), f"mutation '{mutation.name}' applied to no history")
        for registry, mutated in cases:
            _expect_caught(env, mutation.name, registry, mutated)
    registry = _current()
    keyed = [h for h in corpus if _draws_keys(registry, h)]
    sample = env.rng.sample(keyed, min(SAMPLE, len(keyed)))  # ids to draw afresh
    drifting = random_keys(env.rng)
    for history in sample:
        plain = History(history.instance_id, history.events, [], history.work)
        _expect_caught(env, "code: randomness before an id", registry, plain, drifting)


def _expect_caught(
    env: DrillEnv,
    name: str,
    registry: Registry,
    history: History,
    decision: replay_check.Decide = decide,
) -> None:
    env.record.stats["mutants_injected"] += 1
    caught = _caught(registry, history, decision)
    env.record.stats["mutants_detected"] += caught
    env.expect(caught, f"mutant '{name}' of {history.instance_id} replayed without detection")


def _caught(registry: Registry, history: History, decision: replay_check.Decide) -> bool:
    """Replay (without the ledger a doctored history lacks) rejects ``history``, or its
    journal does not replay against the drill app's code."""
    verdict = replay_check.verify(registry, history, decision, chain=False)
    if verdict.problems or verdict.state is None:
        return True
    return bool(journal_replay.problem_of(history.instance_id, verdict.state, drill_app.app))


def _draws_keys(registry: Registry, history: History) -> bool:
    """A step list's history with a key its decisions handed out: what decision code
    drawing randomness changes. (A code-first run's keys are what its code asked for,
    checked against the code by its journal; a state machine's decisions hand out none.)"""
    return replay_check.mode_of(registry, history) in STEP_LISTS and any(
        e.idempotency_key and e.kind in replay_check.DECISION_KINDS for e in history.events
    )


def _current() -> Registry:
    return Registry(definitions())
