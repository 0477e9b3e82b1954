"""Can new code take over running runs? Replay their journals against it and see.

Before a new version of a code workflow is published (or its runs migrated), each
active run of its other versions is replayed against the new code exactly as a worker
would replay it (``driver.drive`` over the run's journal): a run whose journal the new
code reaches command for command is *compatible*; one it departs from is *divergent*,
with the driver's message saying where (``journal divergence: expected step 'charge'
at position 3 (event 12), code reached step 'capture'``). Nothing is recorded and no
body runs: bodies are never run by replay, and the code's own commands past the
journal are only looked at. Changed options (retries, timeouts) are not divergence:
history already says what happened.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from engine.model.instance import Instance
from engine.model.registry import Registry
from engine.modes.code.declaration import CodeWorkflow
from engine.modes.code.driver import drive
from engine.modes.code.fold import entries
from engine.modes.code.journal import Diverged
from engine.store import reads
from engine.store.reads import InstanceView
from engine.store.store import Store


@dataclass(frozen=True)
class Verdict:
    """One run checked: compatible when ``divergence`` is empty."""

    run: str
    version: str
    divergence: str = ""


def verdict(flow: CodeWorkflow, state: Instance) -> Verdict:
    """Replay ``state``'s journal against ``flow``'s code (see the module)."""
    advance = drive(flow.function, state.value("input"), entries(state), run_id=state.instance_id)
    message = advance.message if isinstance(advance, Diverged) else ""
    return Verdict(state.instance_id, state.definition.version, message)


async def check(store: Store, registry: Registry, flow: CodeWorkflow) -> list[Verdict]:
    """The verdict on every active run of ``flow``'s name pinned to another version."""
    return [verdict(flow, state) async for state in _other_versions(store, registry, flow)]


async def _other_versions(
    store: Store, registry: Registry, flow: CodeWorkflow
) -> AsyncIterator[Instance]:
    after = None
    while True:
        page = await reads.list_instances(
            store, InstanceView.ACTIVE, after=after, definition_name=flow.name
        )
        for row in page.rows:
            if row.definition.version != flow.version:
                yield await reads.inspect(store, registry, row.instance_id)
        if page.next_cursor is None:
            return
        after = page.next_cursor


def summary(flow: CodeWorkflow, verdicts: list[Verdict]) -> list[str]:
    """``order-saga@2: 14 running checked: 13 compatible, 1 divergent``, then one line
    per divergent run."""
    divergent = [v for v in verdicts if v.divergence]
    lines = [
        f"{flow}: {len(verdicts)} running checked: "
        f"{len(verdicts) - len(divergent)} compatible, {len(divergent)} divergent"
    ]
    lines += [f"divergent {v.run} (v{v.version}): {v.divergence}" for v in divergent]
    return lines
