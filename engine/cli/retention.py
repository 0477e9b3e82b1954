"""`wayline retention set|unset|list|run`: how long teams keep ended instances, and pruning.

``set --team T --keep 90d --as WHO`` records a team's policy (a keep from
MIN_RETENTION_KEEP to MAX_RETENTION_KEEP); ``unset --team T`` removes it (a team with
none is refused, exit 1), so the team keeps everything again; ``list`` prints every
policy; ``run --export-dir DIR [--team T] [--batch N]`` exports and removes, team by
team, the ended instances past their team's keep (``engine.store.retention``), writing
``DIR/<team>-<UTC time>.jsonl`` (``_engine-<UTC time>.jsonl`` for the engine's own team;
one line per instance: the array of its events, each as ``wayline history --json``
prints it) and printing what it did. Meant for a scheduler (cron, a Kubernetes
CronJob): a run takes short batches and never waits on a worker, so it can run at any
time, and a run that dies half way is simply run again; a run that starts while another
works on a team skips that team and says so.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from engine.api.client import Client
from engine.cli.options import (
    CommandFailed,
    UsageError,
    actor,
    converted_by,
    team,
    whole_number,
    writing,
)
from engine.cli.runtime import add_command, add_group
from engine.model.canonical import format_instant
from engine.model.durations import format_duration, parse_duration
from engine.model.inputs import check_team
from engine.store import retention
from engine.store.retention import MAX_PRUNE_BATCH, Policy

NO_TEAM = "(no team)"
"""How the engine's own team, '', is printed."""
ENGINE_EXPORT = "_engine"
"""The engine's own team's name in an export's file name: a team id never begins with
'_', so no team's exports land in its file (a team may be called ``engine``)."""


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``retention`` and its actions to the ``wayline`` parser."""
    actions = add_group(
        commands,
        "retention",
        "how long teams keep ended instances; export and remove those past it",
        "Bounded history: per-team retention of ended instances.",
    )
    chosen = add_command(actions, "set", "set how long a team keeps ended instances", _set)
    chosen.add_argument(
        "--team", default="", type=team, help="the team (default: the engine's own, '')"
    )
    chosen.add_argument("--keep", required=True, type=_keep, help="e.g. 90d or 72h")
    chosen.add_argument(
        "--as", dest="actor", required=True, type=actor, metavar="ACTOR", help="who sets it"
    )
    unset = add_command(
        actions, "unset", "remove a team's policy: it keeps every ended instance", _unset
    )
    unset.add_argument(
        "--team", default="", type=team, help="the team (default: the engine's own, '')"
    )
    add_command(actions, "list", "print every team's retention policy", _list)
    run = add_command(actions, "run", "export and remove ended instances past their keep", _run)
    run.add_argument("--export-dir", required=True, type=_export_dir, help="where the exports go")
    run.add_argument("--team", type=team, help="only this team (default: every team with a policy)")
    run.add_argument(
        "--batch",
        type=lambda text: whole_number(
            text, 1, MAX_PRUNE_BATCH, f"must be a whole number from 1 to {MAX_PRUNE_BATCH}"
        ),
        default=MAX_PRUNE_BATCH,
        help=f"instances per transaction (1 to {MAX_PRUNE_BATCH}, the default)",
    )


def _named_directory(text: str) -> Path:
    """``--export-dir`` as a path; an empty one is refused, since ``Path('')`` is the
    working directory and a run would write its exports wherever it was started."""
    if not text:
        raise ValueError("an empty name is no directory: name the directory the exports go to")
    return Path(text)


_export_dir = converted_by(_named_directory)
"""argparse type for ``--export-dir``: a path that names something."""
_keep = converted_by(lambda text: retention.check_keep(parse_duration(text)))
"""argparse type for ``--keep``: a duration the policy may hold, so a bad one is a usage
error before anything is written."""


async def _set(client: Client, args: argparse.Namespace) -> int:
    policy = await retention.set_policy(client.store, args.team, args.keep, args.actor)
    print(f"team {_team(policy.tenant_id)} keeps ended instances {format_duration(policy.keep)}")
    return 0


async def _unset(client: Client, args: argparse.Namespace) -> int:
    removed = await retention.remove_policy(client.store, args.team)
    if removed is None:
        raise CommandFailed(
            f"team {_team(args.team)} has no retention policy, so there is none to unset "
            "(`wayline retention list` shows every policy)"
        )
    print(
        f"team {_team(removed.tenant_id)} keeps every ended instance again (its policy kept "
        f"them {format_duration(removed.keep)}, {_who(removed)})"
    )
    return 0


async def _list(client: Client, args: argparse.Namespace) -> int:
    found = await retention.policies(client.store)
    if not found:
        print("no retention policy: every ended instance is kept")
    for policy in found:
        print(f"{_team(policy.tenant_id)}\tkeep {format_duration(policy.keep)}\t{_who(policy)}")
    return 0


def _is_directory(path: Path) -> bool:
    """Whether ``path`` names a directory; a name the system refuses to look up (longer
    than a file name may be) names none, as a missing one does."""
    try:
        return path.is_dir()
    except OSError:
        return False


async def _run(client: Client, args: argparse.Namespace) -> int:
    if not _is_directory(args.export_dir):
        raise UsageError(f"--export-dir {args.export_dir} is not a directory")
    found = await retention.policies(client.store)
    chosen = [p for p in found if args.team is None or p.tenant_id == args.team]
    if args.team is not None and not chosen:
        raise UsageError(f"team {_team(args.team)} has no retention policy (set one first)")
    for policy in chosen:
        async with retention.exclusive(client.store, policy.tenant_id) as mine:
            if not mine:
                print(
                    f"team {_team(policy.tenant_id)}: skipped, another retention run is "
                    "under way (it exports and removes what this one would)"
                )
                continue
            done, path = await _prune(client, policy, args)
        if not done.exported:  # no empty file every run
            print(f"team {_team(policy.tenant_id)}: nothing past its keep, no export written")
            continue
        print(
            f"team {_team(policy.tenant_id)}: exported {done.exported} to {path}, "
            f"removed {done.removed}, left {done.skipped} in use for a later run"
        )
    return 0


async def _prune(
    client: Client, policy: Policy, args: argparse.Namespace
) -> tuple[retention.Pruned, Path]:
    """Export and remove one team's instances past its keep into its file (a run earlier
    in the same second appends to it); the file is removed again when nothing went in.
    An export that cannot be written stops the run before its batch is removed."""
    path = _export_path(args.export_dir, policy.tenant_id)
    with (
        writing(args.export_dir, "the export directory"),
        retention.ExportFile(path) as export,
    ):
        done = await retention.prune(
            client.store, policy.tenant_id, policy.keep, export, args.batch
        )
    return done, path


def _export_path(directory: Path, tenant: str) -> Path:
    """``directory/<team>-<UTC time>.jsonl``; a policy stored before team ids were
    checked may name no team (``../x``), and its export must not land outside
    ``directory``, so such a team is refused here too."""
    check_team(tenant)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return directory / f"{tenant or ENGINE_EXPORT}-{stamp}.jsonl"


def _team(tenant: str) -> str:
    return repr(tenant) if tenant else NO_TEAM


def _who(policy: Policy) -> str:
    return f"set by {policy.set_by} at {format_instant(policy.set_at)}"
