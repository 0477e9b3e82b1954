"""Incident holds through the command line, with a real worker process running.

``wayline hold place`` parks a definition's work (a start is accepted, its step waits),
``hold list`` shows the backlog, ``hold release --count 1`` lets one instance go and
keeps the hold, a plain release lets the rest go; bad input is one clear line.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from engine.model.instance import InstanceStatus
from tests.e2e import definitions as d
from tests.e2e.test_cli_e2e import argument_error, ok, one_line, publish

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

AUDIT = ("--actor", "ops", "--reason", "incident 9")


async def test_a_hold_parks_starts_and_a_gradual_release_lets_them_go(e2e: Harness) -> None:
    await publish(e2e, d.SINGLE)
    await publish(e2e, d.THREE_STEPS)
    await e2e.spawn()
    placed = await ok(e2e, "hold", "place", "--definition", "e2e.single", *AUDIT)
    hold_id = placed.split()[1]
    assert placed == f"hold {hold_id} placed on e2e.single; backlog 0 instances\n"
    for instance_id in ("held-a", "held-b"):
        await ok(e2e, "start", "e2e.single", "--id", instance_id)
    await ok(e2e, "start", "e2e.three", "--id", "free")
    await e2e.settled("free", InstanceStatus.COMPLETED)
    assert not e2e.calls("held-a") and not e2e.calls("held-b"), "held work is never run"
    listed = await ok(e2e, "hold", "list")
    assert f"{hold_id}  e2e.single  active  backlog 2 instances  ops at " in listed
    assert listed.endswith(": incident 9\n")
    # inspect says why its ready step is not taken (it read as a stuck engine).
    assert (await ok(e2e, "inspect", "held-a")).splitlines()[-1] == (
        f"  held by hold {hold_id} on e2e.single (ops: incident 9): no worker runs its work "
        "until the hold is released (wayline hold release)"
    )

    one = await ok(e2e, "hold", "release", hold_id, "--count", "1", *AUDIT)
    assert one == f"hold {hold_id}: 1 work item due again; backlog 1 instance; in force\n"
    await e2e.settled("held-a", InstanceStatus.COMPLETED)
    rest = await ok(e2e, "hold", "release", hold_id, *AUDIT)
    assert rest == f"hold {hold_id}: 1 work item due again; backlog 0 instances; released\n"
    await e2e.settled("held-b", InstanceStatus.COMPLETED)
    assert len(e2e.calls("held-a")) == len(e2e.calls("held-b")) == 1
    released = await ok(e2e, "hold", "list")
    instant = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"  # as every other command prints one
    assert re.search(f"  released {instant}  backlog 0 instances  ops at {instant}: ", released)
    as_json = json.loads((await ok(e2e, "hold", "list", "--json")).splitlines()[0])
    assert re.fullmatch(instant, as_json["placed_at"]) and re.fullmatch(
        instant, as_json["released_at"]
    )


async def test_bad_hold_input_is_one_clear_line(e2e: Harness) -> None:
    """Bad input exits 2, a refusal of good input 1 (the hold commands said 1 for both)."""
    bad_name = await e2e.cli("hold", "place", "--definition", "no such/name", *AUDIT)
    assert bad_name.code == 2
    assert one_line(bad_name).startswith("wayline hold place: the definition name must be 1 to 200")
    unknown = await e2e.cli("hold", "release", "nope", *AUDIT)
    assert (unknown.code, one_line(unknown)) == (
        1,
        "wayline hold release: no hold nope in this team",
    )
    nameless = await e2e.cli("hold", "release", " ", *AUDIT)
    assert (nameless.code, one_line(nameless)) == (
        2,
        "wayline hold release: the hold's id is empty: "
        "give one that wayline hold list or the Holds page shows",
    )
    placed = await ok(e2e, "hold", "place", "--whole-team", *AUDIT)
    zero = await e2e.cli("hold", "release", placed.split()[1], "--count", "0", *AUDIT)
    assert (
        one_line(zero) == "wayline hold release: the count must be from 1 to 10000 instances, not 0"
    )
    assert zero.code == 2
    blank = await e2e.cli("hold", "place", "--whole-team", "--actor", "ann", "--reason", " ")
    assert blank.code == 2 and "a reason of 1 to 500 characters" in one_line(blank)
    both = await e2e.cli("hold", "release", "x", "--count", "1", "--rate", "2", *AUDIT)
    assert "not allowed with argument" in argument_error(both)
    neither = await e2e.cli("hold", "place", *AUDIT)
    assert "one of the arguments --definition --whole-team is required" in argument_error(neither)
