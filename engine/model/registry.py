"""A registry of definition versions, resolved once and then only read.

Replay and decisions look definitions up here by exact (name, version, fingerprint),
so a worker that lacks a version, or holds another definition under the same name and
version, refuses to replay instead of reinterpreting history. Child pins are resolved
when the registry is built, and migrations between versions are explicit edges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition, DefinitionRef, StepKind
from engine.model.errors import DefinitionNotFound, FingerprintMismatch, RegistryError

MigrationApply = Callable[[Any], Any]
"""Maps an instance's input (a JSON value) under the old version to the new version's."""


def keep_input(value: Any) -> Any:
    """The apply of a declared edge (one an operator declared, stored in the catalog):
    it has no code, so the instance's input moves as it is, and replay keeps its
    per-step progress (or a machine's state, or a run's journal) by name."""
    return value


@dataclass(frozen=True)
class MigrationEdge:
    """An explicit, directed way to move a paused instance between two versions."""

    name: str
    from_version: str
    to_version: str
    apply: MigrationApply


class Registry:
    """Immutable set of definition versions and migration edges."""

    def __init__(
        self, definitions: Iterable[Definition], migrations: Iterable[MigrationEdge] = ()
    ) -> None:
        self._versions: dict[tuple[str, str], Definition] = {}
        for definition in definitions:
            key = (definition.name, definition.version)
            if key in self._versions:
                raise RegistryError(f"{definition.ref} is registered twice")
            self._versions[key] = definition
        self._edges: dict[tuple[str, str, str], MigrationEdge] = {}
        for edge in migrations:
            self._add_edge(edge)
        for definition in self._versions.values():
            self._check_children(definition)

    def _add_edge(self, edge: MigrationEdge) -> None:
        key = (edge.name, edge.from_version, edge.to_version)
        if not callable(edge.apply):
            raise RegistryError(
                f"migration {edge.name} {edge.from_version}->{edge.to_version} "
                "has no apply function"
            )
        if edge.from_version == edge.to_version:
            raise RegistryError(f"migration of {edge.name} must change the version")
        for version in (edge.from_version, edge.to_version):
            if (edge.name, version) not in self._versions:
                raise DefinitionNotFound(
                    f"migration names {edge.name}@{version}, which is not registered"
                )
        if key in self._edges:
            raise RegistryError(
                f"migration {edge.name} {edge.from_version}->{edge.to_version} is registered twice"
            )
        self._edges[key] = edge

    def _check_children(self, definition: Definition) -> None:
        for step in definition.steps:
            if step.kind is StepKind.CHILD and step.child_definition is not None:
                self.resolve(step.child_definition)

    def resolve(self, ref: DefinitionRef) -> Definition:
        """The definition pinned by ``ref``; not-found or mismatch errors otherwise."""
        definition = self._versions.get((ref.name, ref.version))
        if definition is None:
            raise DefinitionNotFound(f"{ref} is not registered")
        if definition.fingerprint != ref.fingerprint:
            raise FingerprintMismatch(
                f"{ref} is registered with fingerprint {definition.fingerprint[:12]}…, "
                f"not {ref.fingerprint[:12]}…"
            )
        return definition

    def get(self, name: str, version: str) -> Definition | None:
        return self._versions.get((name, version))

    def versions(self, name: str) -> list[Definition]:
        """Every registered version of ``name``, in registration order."""
        return [d for (n, _), d in self._versions.items() if n == name]

    def migration(self, name: str, from_version: str, to_version: str) -> MigrationEdge:
        """The registered edge, or RegistryError saying there is none."""
        edge = self._edges.get((name, from_version, to_version))
        if edge is None:
            raise RegistryError(f"no migration of {name} from {from_version} to {to_version}")
        return edge

    @property
    def definitions(self) -> Mapping[tuple[str, str], Definition]:
        return dict(self._versions)
