"""Properties of the code-first driver over random programs of verbs (issue 20).

A program is a list of operations over every verb (``step``, ``sleep``, ``wait``,
``race``, ``all``, ``spawn``, ``now``, ``random``, ``uuid4``) and loops around them,
interpreted by one workflow function; ``play`` drives it from an empty journal to its
end. Then:

- every command's key is unique within its run;
- replay reproduces the commands: every prefix of the journal asks for exactly the
  commands that followed it, and the whole journal returns without running a body;
- any rename, insertion, deletion or swap diverges at the first position where the
  mutated program's commands differ (or ``code returned`` when it ends early, or goes
  on with new commands when it only adds some at the end);
- ``try`` changes only on recorded known failures and ``occurrence`` only per pass;
- duplicate signals change nothing: the driver sees the journal, and the journal is
  the same however often a signal was delivered.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.modes.code.context import Context
from engine.modes.code.driver import drive, find_command
from engine.modes.code.journal import BLOCKING, Diverged, Returned, Verb, Waits
from engine.modes.code.step_ids import parse_step_id, step_id, step_id_after
from tests.unit.code_journals import RUN_ID, keys, play

Op = tuple[Any, ...]
STEP_NAMES = ("a", "b", "c")
SIGNALS = ("paid", "shipped")
BODY_RUNS: list[str] = []


def _record_run(name: str) -> Any:
    async def body() -> str:
        BODY_RUNS.append(name)
        return name

    return body


async def run_ops(ctx: Context, ops: list[Op]) -> None:
    for op in ops:
        verb = op[0]
        if verb == "step":
            await ctx.step(op[1], _record_run(op[1]))
        elif verb == "sleep":
            await ctx.sleep("1s")
        elif verb == "wait":
            await ctx.wait_signal(op[1], timeout="1h")
        elif verb == "race":
            await ctx.race(*op[1], timeout="1h")
        elif verb == "all":
            await ctx.all(*op[1])
        elif verb == "spawn":
            ctx.spawn(op[1], {"n": 1})
        elif verb == "loop":
            for _ in range(op[1]):
                await run_ops(ctx, op[2])
        else:
            getattr(ctx, verb)()


def workflow_of(program: list[Op]) -> Any:
    async def workflow(ctx: Context, input: Any) -> str:
        await run_ops(ctx, program)
        return "done"

    return workflow


def simple_ops() -> st.SearchStrategy[Op]:
    signals = st.sampled_from(SIGNALS)
    return st.one_of(
        st.tuples(st.just("step"), st.sampled_from(STEP_NAMES)),
        st.tuples(st.just("sleep")),
        st.tuples(st.just("wait"), signals),
        st.tuples(st.just("race"), st.lists(signals, min_size=1, max_size=2).map(tuple)),
        st.tuples(st.just("all"), st.lists(signals, min_size=1, max_size=2).map(tuple)),
        st.tuples(st.just("spawn"), st.just("shipping")),
        st.tuples(st.sampled_from(("now", "random", "uuid4"))),
    )


def programs() -> st.SearchStrategy[list[Op]]:
    loop = st.tuples(st.just("loop"), st.integers(1, 3), st.lists(simple_ops(), max_size=3))
    return st.lists(st.one_of(simple_ops(), loop), max_size=8)


@settings(max_examples=60, deadline=None)
@given(programs())
def test_replay_reproduces_the_commands_and_never_runs_a_recorded_body(program: list[Op]) -> None:
    workflow = workflow_of(program)
    played = play(workflow)
    assert isinstance(played.end, Returned)
    assert len({command.key for command in played.commands}) == len(played.commands)
    BODY_RUNS.clear()
    for cut in range(len(played.entries) + 1):
        advance = drive(workflow, None, played.entries[:cut], run_id=RUN_ID)
        after = keys(played.commands[cut : cut + len(advance.new)])
        assert keys(list(advance.new)) == after
        if isinstance(advance, Returned):
            assert cut + len(advance.new) == len(played.entries)
        else:
            assert isinstance(advance, Waits) and advance.new[-1].verb in BLOCKING
    assert advance == Returned((), "done")
    assert BODY_RUNS == []


@settings(max_examples=30, deadline=None)
@given(programs())
def test_find_command_reaches_every_command_with_its_position(program: list[Op]) -> None:
    workflow = workflow_of(program)
    played = play(workflow)
    for command in played.commands:
        found = find_command(workflow, None, played.entries, run_id=RUN_ID, key=command.key)
        assert found is not None
        assert (found.position, found.verb, found.key) == (
            command.position,
            command.verb,
            command.key,
        )
        assert (found.body is not None) == (command.verb is Verb.STEP)


def mutations(program: list[Op]) -> st.SearchStrategy[list[Op]]:
    """A rename, an insertion, a deletion or a swap of adjacent operations."""
    size = len(program)
    index = st.integers(0, max(size - 1, 0))
    rename = index.map(lambda i: _replace_step(program, i, "renamed"))
    insert = st.integers(0, size).map(lambda i: [*program[:i], ("step", "inserted"), *program[i:]])
    delete = index.map(lambda i: program[:i] + program[i + 1 :])
    swap = index.map(lambda i: _swap(program, i))
    return st.one_of(rename, insert, delete, swap) if size else insert


def _replace_step(program: list[Op], i: int, name: str) -> list[Op]:
    """Operation ``i`` becomes a step named ``name`` (a rename when it was a step)."""
    return [*program[:i], ("step", name), *program[i + 1 :]]


def _swap(program: list[Op], i: int) -> list[Op]:
    if i + 1 >= len(program):
        return list(program)
    return [*program[:i], program[i + 1], program[i], *program[i + 2 :]]


def first_difference(left: list[tuple[Verb, str]], right: list[tuple[Verb, str]]) -> int:
    for position, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return position
    return min(len(left), len(right))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_rename_insert_delete_or_swap_diverges_at_the_first_differing_position(
    data: st.DataObject,
) -> None:
    program = data.draw(programs(), label="program")
    mutated = data.draw(mutations(program), label="mutated")
    original, changed = play(workflow_of(program)), play(workflow_of(mutated))
    before, after = keys(original.commands), keys(changed.commands)
    position = first_difference(before, after)
    advance = drive(workflow_of(mutated), None, original.entries, run_id=RUN_ID)
    if position < len(before) and position < len(after):
        assert isinstance(advance, Diverged)
        assert advance.message.startswith("journal divergence: expected ")
        assert f" at position {position} (event {position + 1}), code reached " in advance.message
    elif position < len(before):
        assert advance == Diverged(advance.message)
        assert advance.message.endswith(
            f"at position {position} (event {position + 1}), code returned"
        )
    else:
        assert not isinstance(advance, Diverged)
        assert keys(list(advance.new)) == after[position : position + len(advance.new)]


@given(
    st.lists(st.booleans(), max_size=12),
    st.integers(1, 50),
    st.integers(0, 5),
)
def test_try_changes_only_on_recorded_known_failures(
    known: list[bool], occurrence: int, unknowns: int
) -> None:
    """``known`` is one flag per earlier attempt: True a known failure, False unknown."""
    text = step_id_after(RUN_ID, "charge", occurrence, known)
    parsed = parse_step_id(text)
    assert (parsed.run_id, parsed.step, parsed.occurrence) == (RUN_ID, "charge", occurrence)
    assert parsed.attempt_try == 1 + sum(known)
    assert step_id_after(RUN_ID, "charge", occurrence, [*known, *[False] * unknowns]) == text
    assert step_id_after(RUN_ID, "charge", occurrence, [*known, True]) != text


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.lists(simple_ops(), max_size=3))
def test_occurrence_changes_only_per_loop_pass(passes: int, between: list[Op]) -> None:
    program: list[Op] = [("loop", passes, [("step", "charge"), *between])]
    played = play(workflow_of(program))
    charges = [command for command in played.commands if command.name == "charge"]
    assert [command.occurrence for command in charges] == list(range(1, passes + 1))
    assert [step_id(RUN_ID, "charge", command.occurrence) for command in charges] == [
        f"{RUN_ID}/charge#{n}.1" for n in range(1, passes + 1)
    ]


def deliver(deliveries: list[tuple[str, str]]) -> dict[str, list[str]]:
    """An inbox as the engine keeps it: signal ids deduplicated, in arrival order."""
    inbox: dict[str, list[str]] = {}
    seen: set[str] = set()
    for signal_id, name in deliveries:
        if signal_id not in seen:
            seen.add(signal_id)
            inbox.setdefault(name, []).append(signal_id)
    return inbox


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.just("wait"), st.sampled_from(SIGNALS)), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(0, 9).map(str), st.sampled_from(SIGNALS)), max_size=12),
    st.data(),
)
def test_duplicate_signals_change_nothing(
    waits: list[Op], deliveries: list[tuple[str, str]], data: st.DataObject
) -> None:
    again = data.draw(st.lists(st.sampled_from(deliveries))) if deliveries else []
    duplicated = deliveries + again
    workflow = workflow_of(waits)

    def resolver(deliveries: list[tuple[str, str]]) -> Any:
        inbox = deliver(deliveries)

        def resolve(command: Any) -> Any:
            queue = inbox.get(command.name, [])
            return {"signal_id": queue.pop(0)} if queue else None

        return resolve

    once = play(workflow, resolve=resolver(deliveries))
    twice = play(workflow, resolve=resolver(duplicated))
    assert twice.entries == once.entries
    assert twice.end == once.end
