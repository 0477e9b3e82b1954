"""Provisioning the database roles that machines' advances act as (issue 19).

Each resource a machine names has a read and a write role, and machines without grants
act as a role with no privileges (``engine.modes.machines.grants``). Roles belong to
the PostgreSQL cluster: they are made once per cluster, by someone allowed to create
roles, and the worker's login must be a member of each (it switches to them). That is
what ``provision_roles`` runs and ``provisioning_sql`` prints (``wayline machine roles``);
what each role may do with the application's tables is the team's to grant, e.g.
``GRANT SELECT ON documents TO wayline_documents_read`` and ``GRANT INSERT, UPDATE ON
documents TO wayline_documents_write``, with ``USAGE`` on the tables' schema.
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg import sql

from engine.model.definitions import Definition
from engine.modes.machines.grants import ResourceRoles, provisioned, roles_of
from engine.modes.machines.manifest import MachineManifest
from engine.store import roles

__all__ = ["ResourceRoles", "provision_roles", "provisioning_sql", "resources_of", "roles_of"]


def resources_of(definitions: Iterable[Definition]) -> list[str]:
    """The resources the machines among ``definitions`` name, each once, sorted."""
    return sorted(
        {d.manifest.resource for d in definitions if isinstance(d.manifest, MachineManifest)}
    )


def _member(login: str | None) -> sql.Composable:
    return roles.CURRENT_USER if login is None else sql.Identifier(login)


def provisioning_sql(resources: Iterable[str], login: str | None = None) -> str:
    """The SQL that makes the roles of ``resources`` and the role without grants, and
    makes ``login`` (by default whoever runs it) a member of each: one statement a line,
    each safe to run again and from many sessions at once."""
    statements = roles.provisioning(provisioned(resources), _member(login))
    return "".join(f"{statement.as_string()};\n" for statement in statements)


async def provision_roles(
    conn: psycopg.AsyncConnection, resources: Iterable[str], login: str | None = None
) -> None:
    """Run ``provisioning_sql`` on ``conn`` (best in autocommit: each statement then
    commits on its own)."""
    await roles.provision(conn, provisioned(resources), _member(login))
