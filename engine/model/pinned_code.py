"""Work that runs a definition version's own code names that version.

An activity is found by its target alone: any worker that registers ``charge-card``
runs it, whatever version of the step list scheduled it. A code workflow's code and a
state machine's advance and compensation are part of the definition version itself
(seed 000 binds an execution to its implementation version), so their work names the
version too, ``workflow:order-saga@1`` or ``machine:document_flow@2``, and only a worker
that declares that version claims it. Such a target holds ``:`` and ``@``, which no
activity's name can (``engine.model.identifiers``). Migrating an instance moves its
open work of this kind to the new pin in the migration's own transaction
(``engine.store.commits``), so the new version's workers claim it.
"""

from __future__ import annotations

from engine.model.definitions import DefinitionRef

WORKFLOW_PREFIX = "workflow:"
MACHINE_PREFIX = "machine:"
PREFIXES = (WORKFLOW_PREFIX, MACHINE_PREFIX)


def pinned_target(prefix: str, ref: DefinitionRef) -> str:
    """The work target of ``ref``'s own code: ``<prefix><name>@<version>``."""
    return f"{prefix}{ref.name}@{ref.version}"


def parse_pinned(target: str, prefix: str) -> tuple[str, str] | None:
    """The name and version a ``prefix`` target names; None for any other target."""
    name, at, version = target.removeprefix(prefix).partition("@")
    if not target.startswith(prefix) or not at:
        return None
    return name, version


def pinned_targets(ref: DefinitionRef) -> list[str]:
    """Every target work pinned to ``ref`` can name (what a migration moves)."""
    return [pinned_target(prefix, ref) for prefix in PREFIXES]
