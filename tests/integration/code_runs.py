"""Helpers for code-first runs against a real PostgreSQL: publish an app's workflows, a
worker context on a manual clock, and short reads of a run's journal and history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.api.client import Client
from engine.model.events import Event, EventKind
from engine.model.instance import Instance
from engine.modes.code.fold import entries
from engine.modes.code.journal import Entry
from engine.store import reads
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.instance_cache import RegistrySource
from engine.worker.leased_commits import Context
from tests.integration.factories import run_due


async def published(store: Store, app: ActivityRegistry) -> Client:
    """A client of ``store`` once every code workflow ``app`` declares is published."""
    client = Client(store)
    for flow in app.workflows:
        await client.publish(flow.definition, "tests")
    return client


def worker_context(store: Store, app: ActivityRegistry) -> Context:
    """What a worker that has ``app``'s code runs due work with, reading the catalog."""
    return Context(store, app, RegistrySource(store))


async def settle(ctx: Context) -> int:
    """Run everything due now, with a fresh view of the catalog first."""
    await ctx.registries.refresh()
    return await run_due(ctx)


async def journal(client: Client, run: str) -> tuple[Entry, ...]:
    return entries(await client.inspect(run))


async def history(store: Store, run: str) -> list[Event]:
    return [event async for event in reads.export_history(store, run)]


async def kinds(store: Store, run: str, *wanted: EventKind) -> list[Event]:
    return [e for e in await history(store, run) if e.kind in wanted]


def effects(path: Path) -> list[dict[str, Any]]:
    """The effects the example's steps recorded, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def keys(state: Instance) -> list[str]:
    """The run's journal keys, in order."""
    return [record.key for record in state.journal]
