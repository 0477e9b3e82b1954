"""`wayline hold place|release|list`: incident holds from the command line.

Thin shells over ``Client.place_hold``, ``Client.release_hold`` and ``Queries.holds``.
A hold covers ``--definition NAME[@VERSION]`` or, with ``--whole-team``, everything of
the team (``--team``, default the engine's own team ''). A release lets everything go,
or ``--count N`` instances, or ``--rate R`` instances per second; each answer shows the
backlog left. ``list`` shows each hold's releases under it, with who, when and why.
Bad input prints one line on stderr and exits 2; a refusal exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

from engine.api.client import Client
from engine.api.queries import Queries
from engine.cli.options import UsageError, actor, reason, team
from engine.cli.runtime import add_command
from engine.model.canonical import format_instant
from engine.model.errors import InputRefused
from engine.model.holds import ReleaseMode, parse_scope
from engine.model.words import counted
from engine.store.holds import Hold, HoldRelease


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``hold`` and its three actions to the ``wayline`` parser."""
    hold = commands.add_parser(
        "hold",
        help="hold a definition, a version or a team for an incident; release it gradually",
        description="Incident holds: workers run none of the held work until it is released.",
    )
    actions = hold.add_subparsers(dest="action", required=True, metavar="ACTION")
    place = add_command(actions, "place", "place a hold (audited)", _place)
    scope = place.add_mutually_exclusive_group(required=True)
    scope.add_argument("--definition", metavar="NAME[@VERSION]", help="hold a name or a version")
    scope.add_argument("--whole-team", action="store_true", help="hold everything of the team")
    _audited(place)
    release = add_command(actions, "release", "release a hold, or part of it", _release)
    release.add_argument("hold_id", metavar="ID")
    amount = release.add_mutually_exclusive_group()
    amount.add_argument("--count", type=int, help="resume this many instances; the hold stays")
    amount.add_argument("--rate", type=float, help="resume this many instances per second")
    _audited(release)
    listing = add_command(actions, "list", "list holds and their backlogs", _list)
    listing.add_argument("--active", action="store_true", help="only holds still in force")
    listing.add_argument("--json", action="store_true", help="one JSON object per hold")
    for parser in (place, release, listing):
        parser.add_argument(
            "--team", default="", type=team, help="the team (default: the engine's own, '')"
        )


def _audited(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--actor", required=True, type=actor, help="who acts (kept with the hold)")
    parser.add_argument("--reason", required=True, type=reason, help="why (kept with the hold)")


async def _place(client: Client, args: argparse.Namespace) -> int:
    with _bad_input_is_usage():
        scope = parse_scope(args.team, None if args.whole_team else args.definition)
        hold = await client.place_hold(scope, args.actor, args.reason)
    print(f"hold {hold.hold_id} placed on {scope.label}; {hold.left}")
    return 0


async def _release(client: Client, args: argparse.Namespace) -> int:
    with _bad_input_is_usage():
        hold, due = await client.release_hold(
            args.team, args.hold_id, args.actor, args.reason, count=args.count, rate=args.rate
        )
    print(f"hold {hold.hold_id}: {hold.released_answer(due)}")
    return 0


async def _list(client: Client, args: argparse.Namespace) -> int:
    holds = await Queries(client.store).holds(args.team, active_only=args.active)
    for hold in holds:
        if args.json:
            print(json.dumps(_as_json(hold)))
            continue
        print(_line(hold))
        for release in hold.releases:
            print(f"  {_release_line(release)}")
    if not holds and not args.json:
        print("no holds")
    return 0


@contextlib.contextmanager
def _bad_input_is_usage() -> Iterator[None]:
    """Bad input (a count of 0, a blank reason, a malformed name) exits 2, as the
    module says; a refusal of good input (no such hold, one released already) exits 1."""
    try:
        yield
    except InputRefused as bad:
        raise UsageError(str(bad)) from None


def _line(hold: Hold) -> str:
    state = "active" if hold.active else f"released {format_instant(hold.released_at)}"
    placed = f"{hold.actor} at {format_instant(hold.placed_at)}"
    return f"{hold.hold_id}  {hold.scope.label}  {state}  {hold.left}  {placed}: {hold.reason}"


def _release_line(release: HoldRelease) -> str:
    """One release under its hold: how much it let go, who, when and why (without
    them the list could not say who ended an incident's hold)."""
    how_much = {
        ReleaseMode.ALL: "everything",
        ReleaseMode.COUNT: counted(int(release.amount), "instance"),
        ReleaseMode.RATE: f"{release.amount:g}/s",
    }[release.mode]
    when = format_instant(release.released_at)
    return f"released {how_much} by {release.actor} at {when}: {release.reason}"


def _as_json(hold: Hold) -> dict:
    return {
        "id": hold.hold_id,
        "team": hold.scope.team,
        "name": hold.scope.name,
        "version": hold.scope.version,
        "placed_by": hold.actor,
        "reason": hold.reason,
        "placed_at": format_instant(hold.placed_at),
        "released_at": format_instant(hold.released_at) if hold.released_at else None,
        "drain_rate": hold.drain_rate,
        "backlog": hold.backlog,
        "releases": [
            {
                "mode": release.mode.value,
                "amount": release.amount,
                "released_by": release.actor,
                "reason": release.reason,
                "released_at": format_instant(release.released_at),
            }
            for release in hold.releases
        ],
    }
