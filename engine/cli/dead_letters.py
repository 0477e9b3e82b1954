"""`wayline dead-letter list|retry|discard`: dead letters without the studio.

A team that runs Wayline from scripts must still see why an instance stopped and
resolve it. Thin shells over the engine: ``list`` reads ``Queries.dead_letters`` (one
keyset page, oldest first), ``retry`` and ``discard`` send
``Client.resolve_dead_letter(make_resolution(...))``, the audited command the studio
sends, with the retry's times from ``retry_window`` (the defaults the studio uses).
A resolution names its dead letter as the list shows it: the stored instance id, the
work id and the fencing token it failed under. A command id is made when none is given
and printed, so a command whose outcome is unknown can be given again with it: the
same command again is a replay, never a second resolution. A refusal (bad input, a
stale token, a command id used for another resolution, an unknown outcome) is one line
on stderr: exit 2 for bad input, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import datetime
from typing import Any

from engine.api.client import Client
from engine.api.queries import Queries
from engine.cli.options import (
    UsageError,
    actor,
    named_instance,
    outcome_unknown,
    reason,
    team,
    whole_number,
)
from engine.cli.runtime import add_command, add_group
from engine.model.canonical import format_instant, parse_instant
from engine.model.limits import MAX_PAGE_ITEMS, MAX_SEQUENCE
from engine.model.transitions import work_label
from engine.store.dead_letters import (
    DeadLetter,
    Resolution,
    ResolutionAction,
    make_resolution,
    retry_window,
)
from engine.store.errors import CommitUnknown
from engine.store.leases import WorkRequestInvalid

DEFAULT_LIST_LIMIT = 50
"""How many dead letters ``list`` shows unless told: a screenful, as a studio page."""
INSTANT_EXAMPLE = "2031-06-07T08:00:00Z"


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``dead-letter`` and its three actions to the ``wayline`` parser."""
    actions = add_group(
        commands,
        "dead-letter",
        "list dead letters; retry or discard them (audited)",
        "Work the engine gave up on (its deadline passed, or a worker refused it): "
        "list it, then retry or discard each one with an audited command.",
    )
    listing = add_command(actions, "list", "list unresolved dead letters, oldest first", _list)
    listing.add_argument("--code", help="only this failure code")
    listing.add_argument(
        "--team", type=team, help="only this team's (default: every team's; '' is the engine's own)"
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per dead letter")
    listing.add_argument(
        "--limit",
        type=list_limit,
        default=DEFAULT_LIST_LIMIT,
        help=f"show at most N (default {DEFAULT_LIST_LIMIT}, at most {MAX_PAGE_ITEMS})",
    )
    retry = add_command(actions, "retry", "readmit a dead letter's work (audited)", _retry)
    _fence(retry)
    retry.add_argument(
        "--at", type=instant, metavar="RFC3339", help="when it is due again (default: now)"
    )
    retry.add_argument(
        "--deadline",
        type=instant,
        metavar="RFC3339",
        help="its new deadline (default: a day after --at)",
    )
    discard = add_command(
        actions, "discard", "resolve a dead letter without running it (audited)", _discard
    )
    _fence(discard)


def _fence(parser: argparse.ArgumentParser) -> None:
    """The dead letter as ``list`` shows it, and the audit every resolution carries."""
    parser.add_argument(
        "instance", metavar="INSTANCE", type=named_instance, help="the instance id as listed"
    )
    parser.add_argument("work_id", metavar="WORK_ID", help="the work id as listed")
    parser.add_argument(
        "--token", required=True, type=fencing_token, help="the fencing token as listed"
    )
    parser.add_argument(
        "--actor", required=True, type=actor, help="who acts (recorded in the audit trail)"
    )
    parser.add_argument(
        "--reason", required=True, type=reason, help="why (recorded in the audit trail)"
    )
    parser.add_argument(
        "--command-id", help="idempotency id (default: a new one, printed to give it again)"
    )


def list_limit(text: str) -> int:
    """argparse type for ``--limit``: 1 to MAX_PAGE_ITEMS, as one page may hold."""
    rule = f"must be a whole number from 1 to {MAX_PAGE_ITEMS} (MAX_PAGE_ITEMS)"
    return whole_number(text, 1, MAX_PAGE_ITEMS, rule)


def fencing_token(text: str) -> int:
    """argparse type for ``--token``: a whole number of at least 1, as ``dead-letter
    list`` prints it (argparse's own refusal said only "invalid int value")."""
    rule = "must be the dead letter's fencing token, a whole number of at least 1"
    return whole_number(text, 1, MAX_SEQUENCE, rule)


def instant(text: str) -> datetime:
    """argparse type for an RFC 3339 instant: with a time zone, never guessed."""
    try:
        return parse_instant(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an RFC 3339 instant with a time zone, e.g. {INSTANT_EXAMPLE}"
        ) from None


async def _list(client: Client, args: argparse.Namespace) -> int:
    page = await Queries(client.store).dead_letters(
        None, args.limit, tenant=args.team, failure_code=args.code
    )
    for letter in page.items:
        print(json.dumps(_as_json(letter), sort_keys=True) if args.json else _line(letter))
    if page.next_cursor is not None:
        more = (
            f"more dead letters than the {args.limit} shown: narrow with --code or --team, "
            f"or resolve these first (--limit shows at most {MAX_PAGE_ITEMS})"
        )
        # a script reading --json gets only objects on stdout
        print(more, file=sys.stderr if args.json else sys.stdout)
    elif not page.items and not args.json:
        print("no dead letters")
    return 0


def _line(letter: DeadLetter) -> str:
    """One dead letter: when, which (what a retry names), what it was and why it failed."""
    detail = f": {letter.failure_detail}" if letter.failure_detail else ""
    what = work_label(letter.kind, letter.step or letter.target)
    return (
        f"{format_instant(letter.failed_at)}  {letter.instance_id}  {letter.work_id}  "
        f"token {letter.token}  {what}  {letter.failure_code}{detail}"
    )


def _as_json(letter: DeadLetter) -> dict[str, Any]:
    """The fields of ``/api/dead-letters``' items, with the stored instance id (which a
    resolution names), the kind, the step and the detail."""
    return {
        "instance_id": letter.instance_id,
        "work_id": letter.work_id,
        "token": letter.token,
        "kind": work_label(letter.kind),
        "step": letter.step,
        "target": letter.target,
        "team": letter.tenant_id,
        "attempts": letter.attempts,
        "failure_code": letter.failure_code,
        "failure_detail": letter.failure_detail,
        "failed_at": format_instant(letter.failed_at),
        "deadline": format_instant(letter.deadline),
    }


async def _retry(client: Client, args: argparse.Namespace) -> int:
    return await _resolve(client, args, ResolutionAction.RETRY)


async def _discard(client: Client, args: argparse.Namespace) -> int:
    return await _resolve(client, args, ResolutionAction.DISCARD)


async def _resolve(client: Client, args: argparse.Namespace, action: ResolutionAction) -> int:
    """Send the audited resolution once; print what stands recorded and its command id."""
    command_id = args.command_id or uuid.uuid4().hex
    now = client.store.now()
    try:
        times = (
            retry_window(now, args.at, args.deadline)
            if action is ResolutionAction.RETRY
            else (None, None)
        )
        command = make_resolution(
            command_id,
            args.instance,
            args.work_id,
            args.token,
            action,
            args.actor,
            args.reason.strip(),
            now,
            *times,
        )
    except WorkRequestInvalid as invalid:
        raise UsageError(str(invalid)) from None
    try:
        result = await client.resolve_dead_letter(command)
    except CommitUnknown:
        raise outcome_unknown(command_id) from None
    print(_recorded(result.recorded or command, result.replayed))
    print(f"command id: {command_id}")
    return 0


def _recorded(resolution: Resolution, replayed: bool) -> str:
    """``retried INSTANCE WORK token N: due ..., deadline ...`` (or ``discarded``), with
    who and why, and ``replayed`` when this command had been recorded before."""
    verb = "retried" if resolution.action is ResolutionAction.RETRY else "discarded"
    times = ""
    if resolution.retry_at is not None and resolution.deadline is not None:
        times = (
            f": due {format_instant(resolution.retry_at)}, "
            f"deadline {format_instant(resolution.deadline)}"
        )
    again = "; replayed: recorded before, nothing changed" if replayed else ""
    return (
        f"{verb} {resolution.instance_id} {resolution.work_id} token {resolution.token}{times}"
        f" (by {resolution.actor}: {resolution.reason}){again}"
    )
