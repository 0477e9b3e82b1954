"""The static determinism lint: calls that would not replay the same, with their lines,
in the runtime guard's words; nothing in step bodies, nothing ctx gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.modes.code.lint import lint
from tests.fixtures.journal.bad_clock import app as bad_clock_app
from tests.unit.code_modules import HEADER, declared

CLOCK = "is not available in workflow code; use ctx.now() or call it inside ctx.step"
EFFECT = "is not available in workflow code, perform effects inside ctx.step"
IMPORTS = (
    "import asyncio\nimport random\nimport socket\nimport uuid\n"
    "from datetime import datetime\nfrom time import monotonic as clock\n"
)


def problems(tmp_path: Path, body: str) -> list[str]:
    """The lint's lines for a workflow whose body is ``body`` (its first line is line
    13 of the file)."""
    source = '\n@app.workflow("w", version="1")\nasync def w(ctx, order):\n' + body
    return [str(p) for p in lint(declared(tmp_path, source, IMPORTS + HEADER))]


def test_the_fixture_reads_the_clock_on_line_9() -> None:
    assert [str(p) for p in lint(bad_clock_app.workflows[0])] == [
        f"bad-clock@1 line 9: time.time() {CLOCK}"
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("clock()", f"time.monotonic() {CLOCK}"),
        ("datetime.now()", f"datetime.now() {CLOCK}"),
        (
            "random.choice(order)",
            "random.choice() is not available in workflow code; "
            "use ctx.random() or call it inside ctx.step",
        ),
        (
            "uuid.uuid4()",
            "uuid.uuid4() is not available in workflow code; "
            "use ctx.uuid4() or call it inside ctx.step",
        ),
        (
            "await asyncio.gather()",
            "asyncio.gather() is not available in workflow code; use ctx.all or ctx.race",
        ),
        (
            "await asyncio.sleep(1)",
            "asyncio.sleep() is not available in workflow code; use ctx.sleep()",
        ),
        ("socket.create_connection(order)", f"socket.create_connection() {EFFECT}"),
        ("open('orders.csv')", f"open() {EFFECT}"),
    ],
)
def test_each_refused_call_is_named_as_written_with_its_line(
    tmp_path: Path, call: str, message: str
) -> None:
    assert problems(tmp_path, f"    x = 1\n    return {call}\n") == [f"w@1 line 14: {message}"]


def test_iterating_a_set_is_refused_in_loops_and_comprehensions(tmp_path: Path) -> None:
    body = (
        "    for tag in {'a', 'b'}:\n"
        "        await ctx.step(tag, order.get)\n"
        "    return [t for t in set(order)]\n"
    )
    found = problems(tmp_path, body)
    assert [line.split(": ")[0] for line in found] == ["w@1 line 13", "w@1 line 15"]
    assert all("iterate sorted(...) instead" in line for line in found)


def test_bodies_ctx_and_deterministic_calls_are_allowed(tmp_path: Path) -> None:
    body = (
        "    async def charge():\n"
        "        return time.time(), uuid.uuid4()\n"
        "    await ctx.step('charge', charge)\n"
        "    await ctx.step('stamp', lambda: datetime.now())\n"
        "    when, r, u = ctx.now(), ctx.random(), ctx.uuid4()\n"
        "    return [t for t in sorted(set(order))], len(order), dict(order)\n"
    )
    assert problems(tmp_path, body) == []


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ("on_unknown='retry_same_key'", "retries=1"),
        ("retries=0, on_unknown='retry_same_key'", "retries=0"),
        ("retries=2, on_unknown='retry_same_key'", None),
        ("retries=1, on_unknown='hold'", None),
        ("retries=n, on_unknown='retry_same_key'", None),  # computed: the runtime's to judge
    ],
)
def test_retrying_the_same_key_needs_a_second_attempt(
    tmp_path: Path, options: str, said: str | None
) -> None:
    """The step's default of one attempt leaves no retry for an unknown outcome."""
    body = f"    n = 3\n    return await ctx.step('charge', lambda: 1, {options})\n"
    found = problems(tmp_path, body)
    if said is None:
        assert found == []
    else:
        assert found == [
            f"w@1 line 14: ctx.step(on_unknown='retry_same_key') with {said} never retries: "
            "the run under the same key is a second attempt, so an unknown outcome waits "
            "for an operator; give retries=2 or more"
        ]
