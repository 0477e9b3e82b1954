"""The instances list sorts by any column and still pages by keyset: across a page
boundary every instance appears once, in order, under every sort and direction; an id
filter matches every id that starts with it."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from studio.instances.list_order import COLUMNS
from studio.instances.service import PAGE_SIZE
from studio.roles import Role
from tests.studio.live import LiveStudio, definition

FIELDS = {"id": "id", "definition": "definition", "events": "sequence", "started": "created_at"}


def listed(client, query: str) -> list[dict]:
    """Every item of the API list for ``query``, following its cursors."""
    items, cursor = [], None
    while True:
        after = f"&after={quote(cursor)}" if cursor else ""
        found = client.get(f"/api/instances?{query}{after}")
        assert found.status_code == 200, found.text
        body = found.json()
        items += body["items"]
        cursor = body["next"]
        if not cursor:
            return items


@pytest.mark.parametrize("sort", [*COLUMNS, *(f"-{c}" for c in COLUMNS)])
def test_every_sort_pages_each_instance_once_in_order(studio: LiveStudio, sort: str) -> None:
    team = studio.team("order")
    names = [f"order.{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for name in names:
        studio.publish(team, definition(name))
    ids = [studio.start(team, names[n % 2], f"{names[0]}-{n:03d}") for n in range(PAGE_SIZE + 3)]
    items = listed(studio.client(studio.user(team, Role.VIEWER)), f"sort={sort}")
    assert sorted(i["id"] for i in items) == sorted(ids)
    key = sort.removeprefix("-")
    if key in FIELDS:
        values = [i[FIELDS[key]] for i in items]
        assert values == sorted(values, reverse=sort.startswith("-"))


def test_an_id_filter_matches_ids_by_their_start(studio: LiveStudio) -> None:
    team = studio.team("prefix")
    name = studio.publish_new(team, "prefix")
    eu1, eu2, us1 = (studio.start(team, name, f"{where}-{name}") for where in ("eu1", "eu2", "us1"))
    client = studio.client(studio.user(team, Role.VIEWER))
    assert [i["id"] for i in listed(client, "instance=eu&sort=id")] == [eu1, eu2]
    assert [i["id"] for i in listed(client, f"instance={us1}")] == [us1]
    assert client.get("/api/instances?sort=colour").status_code == 422
    assert client.get("/api/instances?sort=id&after=nonsense").status_code == 400


def test_a_cursor_pasted_into_a_url_unencoded_still_pages(studio: LiveStudio) -> None:
    """A script that pasted ``next`` into its URL as it is got "the page cursor is not
    valid": the ``+`` of a time's ``+00:00`` arrived as a space."""
    team = studio.team("paste")
    name = f"paste.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    ids = {studio.start(team, name, f"{name}-{n:03d}") for n in range(PAGE_SIZE + 1)}
    client = studio.client(studio.user(team, Role.VIEWER))
    first = client.get(f"/api/instances?definition={name}").json()
    assert "+" not in first["next"]
    pasted = client.get(f"/api/instances?definition={name}&after={first['next']}")
    assert pasted.status_code == 200, pasted.text
    rest = ids - {i["id"] for i in first["items"]}
    assert [i["id"] for i in pasted.json()["items"]] == list(rest)  # the one left
    old_shape = first["next"].replace("Z|", "+00:00|")  # as cursors were written before
    assert client.get(f"/api/instances?definition={name}&after={old_shape}").status_code == 200
