"""The read API (``Queries``) refuses arguments of the wrong type in words, as the
client does (InputRefused naming the argument), before any query sends them.

An int as an instance id used to surface PostgreSQL's text (``operator does not exist:
text = smallint``), a str as a list of ids was read as its characters, and a datetime
without a time zone was taken as if it were in the server's zone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine import InputRefused
from engine.api.client import Client
from engine.api.queries import Queries, WorkState
from engine.model.events import EventKind

NAIVE = datetime(2026, 1, 1, 12, 0)

WRONG: dict[str, tuple[Callable[[Queries], Any], str]] = {
    "int instance id": (lambda q: q.history_page(42), "the instance id must be a str, not int"),
    "str page position": (
        lambda q: q.history_page("running", after="3"),
        "the after must be an int, not str",
    ),
    "bool limit": (
        lambda q: q.instance_work("running", True),
        "the limit must be an int, not bool",
    ),
    "int team": (lambda q: q.versions(5), "the team must be a str, not int"),
    "NUL in a name": (
        lambda q: q.name_owner("a\x00b"),
        r"the name contains a NUL character \(\\u0000\), which is not allowed",
    ),
    "str as ids": (
        lambda q: q.instance_rows("running"),
        r"the instance ids must be a collection \(a list, a tuple or a set\), not str",
    ),
    "int among ids": (
        lambda q: q.parents(["running", 7]),
        "each of the instance ids must be a str",
    ),
    "unknown view": (
        lambda q: q.instances(view="everything"),
        r"the view must be an InstanceView or one of its values \('active', 'archived', 'all'\)",
    ),
    "unknown status": (
        lambda q: q.instances(status=99),
        "the status must be an InstanceStatus or None or one of its values",
    ),
    "str as event kinds": (
        lambda q: q.history_page("running", kinds=["paused"]),
        "^each of the kinds must be an EventKind or one of its values$",
    ),
    "cursor of one part": (
        lambda q: q.instances(after=(datetime.now(UTC),)),
        r"the after must be a tuple of 2 \(any value, str\) or None, not tuple",
    ),
    "naive list bound": (
        lambda q: q.instances(started_from=NAIVE),
        r"^the started from must be a timezone-aware datetime .*, not a naive one$",
    ),
    "naive cursor time": (
        lambda q: q.instances(after=(NAIVE, "running")),
        "^item 1 of the after must be a timezone-aware datetime",
    ),
    "naive since": (
        lambda q: q.advertised_targets(NAIVE),
        "^the since must be a timezone-aware datetime",
    ),
    "dict as a dead-letter cursor": (
        lambda q: q.dead_letters({"failed_at": NAIVE}),
        "the after must be a DeadLetterCursor or None, not dict",
    ),
    "int hold id": (lambda q: q.hold("", 12), "the hold id must be a str, not int"),
}


@pytest.mark.parametrize(("call", "message"), WRONG.values(), ids=WRONG.keys())
async def test_a_read_with_an_argument_of_the_wrong_type_is_refused_naming_it(
    single_client: Client, call: Callable[[Queries], Any], message: str
) -> None:
    with pytest.raises(InputRefused, match=message):
        await call(Queries(single_client.store))


async def test_the_history_stream_refuses_an_id_that_is_not_a_str_as_it_is_called(
    single_client: Client,
) -> None:
    with pytest.raises(InputRefused, match=r"^the instance id must be a str, not int$"):
        Queries(single_client.store).history(42)


async def test_reads_with_arguments_of_their_types_answer(single_client: Client) -> None:
    queries = Queries(single_client.store)
    now = datetime.now(UTC)
    page = await queries.history_page("running", 0, 10, kinds=[EventKind.INSTANCE_STARTED])
    assert [event.kind for event in page.events] == [EventKind.INSTANCE_STARTED]
    assert [e.sequence async for e in queries.history("running")][:1] == [1]
    assert set(await queries.instance_rows({"running"})) == {"running"}
    assert set(await queries.instance_rows(("running", "absent"))) == {"running"}
    found = await queries.instances(started_from=now - timedelta(hours=1), status=None)
    assert [row.instance_id for row in found.rows] == ["running"]
    later = await queries.instances(started_from=now + timedelta(hours=1))
    assert later.rows == ()
    assert await queries.advertised_targets(now - timedelta(minutes=1)) == []
    assert [row.instance_id for row in (await queries.instances(view="active", status=1)).rows] == [
        "running"
    ]
    by_id = await queries.instances(sort="id", after=("a", "a"))
    assert [row.instance_id for row in by_id.rows] == ["running"]
    work = await queries.instance_work("running")
    assert all(isinstance(row.state, WorkState) for row in work)
