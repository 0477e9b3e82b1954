"""`wayline drill list|run|self-test`: the verification harness from the command line.

``run`` prints the scorecard (its last line ``drills: N passed, N failed``) and exits 1
when any drill failed; on a terminal it shows a progress bar on stderr, elsewhere one
line per finished drill. Without ``--dsn`` it starts a private PostgreSQL cluster so the
drills that restart or pause the server can run; with ``--dsn`` they are reported as
not run. The harness registers ``drill`` itself, through the ``wayline.commands``
entry point in ``pyproject.toml``, so the engine's command line never imports it; the
harness proper is imported only when a drill command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from engine.store.embedded import install_signal_handlers
from engine.store.migrations import DEFAULT_SCHEMA

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``drill`` and its actions to the ``wayline`` parser (the entry point)."""
    drill = commands.add_parser("drill", help="fault-injection drills that verify the engine")
    actions = drill.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list the drills of a profile")
    listing.add_argument("--profile", choices=("ci", "deep"), default="ci")
    _workload_option(listing)
    listing.set_defaults(run=_list)
    run = actions.add_parser("run", help="run drills and print the scorecard")
    _campaign_options(run)
    run.add_argument("--drill", help="comma-separated ids or families, e.g. D1,D3,D4-sigstop")
    _workload_option(run)
    run.add_argument("--json", type=Path, metavar="FILE", help="write the scorecard as JSON")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML")
    run.add_argument("--hit", type=int, help="boundary hit number (to reproduce a drill)")
    run.add_argument("--artifacts", type=Path, help="where drill logs and the corpus go")
    run.set_defaults(run=_run)
    selftest = actions.add_parser("self-test", help="run the drills against broken engines")
    _campaign_options(selftest)
    selftest.set_defaults(run=_self_test)


def _campaign_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=("ci", "deep"), default="ci")
    parser.add_argument("--seed", type=_seed, help="master seed (decimal or 0x hex)")
    parser.add_argument("--dsn", help="run on this PostgreSQL (default: a private cluster)")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="where runs are recorded")


def _workload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload",
        choices=("flow", "machine", "code"),
        help="only the drills of activity flows, state machines or code-first workflows",
    )


def _seed(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("must be an integer (decimal or 0x hex)") from None


def _list(args: argparse.Namespace) -> int:
    from verification.drills.catalogue import catalogue
    from verification.profiles import PROFILES

    for spec in catalogue(PROFILES[args.profile], 0, args.workload or ""):
        flags = " [owned server]" if spec.owned_server else ""
        print(f"{spec.id:<44} {spec.family:<4} {spec.title}{flags}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from verification.campaigns import run_drills

    install_signal_handlers()  # SIGTERM unwinds: workers stopped, schemas and cluster gone
    wanted = [d.strip() for d in (args.drill or "").split(",") if d.strip()]
    try:
        outcome = asyncio.run(
            run_drills(
                args.dsn,
                wanted,
                args.profile,
                args.seed,
                _Bar() if sys.stderr.isatty() else _lines,
                schema=args.schema,
                artifacts=args.artifacts,
                hit=args.hit,
                workload=args.workload or "",
            )
        )
    except ValueError as error:
        print(f"wayline drill run: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        args.json.write_text(json.dumps(outcome.card, indent=2, default=str))
    if args.junit:
        args.junit.write_text(outcome.junit())
    print(outcome.text)
    return EXIT_FAILED if outcome.failed else 0


def _lines(done: int, total: int, drill: dict[str, Any]) -> None:
    print(f"[{done}/{total}] {drill['id']} {drill['verdict']} {drill['seconds']}s", file=sys.stderr)


class _Bar:
    """A one-line progress bar on a terminal."""

    def __call__(self, done: int, total: int, drill: dict[str, Any]) -> None:
        width = 30
        filled = width * done // max(total, 1)
        line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {drill['id'][:40]:<40}"
        sys.stderr.write(line + ("\n" if done == total else ""))
        sys.stderr.flush()


def _self_test(args: argparse.Namespace) -> int:
    from verification.self_test import self_test

    install_signal_handlers()
    result = asyncio.run(
        self_test(args.dsn, args.profile, args.seed, progress=lambda m: print(m, file=sys.stderr))
    )
    print(result.text())
    return 0 if result.passed else EXIT_FAILED
