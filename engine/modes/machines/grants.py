"""The database role an advance acts as: how a machine's declared grants are enforced.

A machine names a ``resource`` and the grants its code needs on it, ``DbRead<R>`` and
``DbWrite<R>`` (``names``). PostgreSQL enforces them, not Wayline: each resource has two
NOLOGIN roles, ``wayline_<resource>_read`` and ``wayline_<resource>_write`` (the
resource lower-cased, as PostgreSQL folds unquoted names), and the write role is a
member of the read role, since an ``UPDATE ... WHERE`` reads too. The team grants table
privileges to those roles; ``engine.store.roles`` creates them and switches to them.

Each advance (and compensation) runs as the strongest role its grants name: the write
role with ``DbWrite``, the read role with ``DbRead`` alone, and ``wayline_no_grants``,
a role with no privileges at all, with none. So a statement the grants do not allow is
refused by the database itself (``insufficient_privilege``), and the execution ends
dead (``dead-grant-denied``). One role at a time is why a machine's grants all name its
own resource (``validation``). Roles stop accidents, not malice: code that runs
``RESET ROLE`` itself acts as the worker's login.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.modes.machines.manifest import MachineManifest
from engine.modes.machines.names import GRANT

ROLE_PREFIX = "wayline_"
READ_SUFFIX = "_read"
WRITE_SUFFIX = "_write"
NO_GRANTS_ROLE = f"{ROLE_PREFIX}no_grants"
"""The role of a machine that declares no grants: it may touch no table at all. It
cannot clash with a resource's roles, which all end in ``_read`` or ``_write``."""
POSTGRES_NAME_BYTES = 63
"""The longest name PostgreSQL keeps (NAMEDATALEN - 1); a longer one is cut short."""
MAX_RESOURCE_LENGTH = POSTGRES_NAME_BYTES - len(ROLE_PREFIX) - len(WRITE_SUFFIX)
"""A resource's roles must keep their whole names, or two resources could share one."""


@dataclass(frozen=True)
class ResourceRoles:
    """The two roles of one resource."""

    resource: str
    read: str
    write: str


def roles_of(resource: str) -> ResourceRoles:
    """The roles of ``resource`` (a type-like name of at most ``MAX_RESOURCE_LENGTH``)."""
    base = f"{ROLE_PREFIX}{resource.lower()}"
    return ResourceRoles(resource, f"{base}{READ_SUFFIX}", f"{base}{WRITE_SUFFIX}")


def role_of(manifest: MachineManifest) -> str:
    """The role the machine's code acts as: the strongest its grants name."""
    kinds = {match.group(1) for grant in manifest.grants if (match := GRANT.fullmatch(grant))}
    roles = roles_of(manifest.resource)
    if "DbWrite" in kinds:
        return roles.write
    return roles.read if "DbRead" in kinds else NO_GRANTS_ROLE


def provisioned(resources: Iterable[str]) -> list[tuple[str, ...]]:
    """Every role machines of ``resources`` may act as, in chains for
    ``engine.store.roles.provisioning``: the role without grants, and each resource's
    read role followed by its write role, which is a member of it."""
    chains = {(roles.read, roles.write) for roles in map(roles_of, resources)}
    return [(NO_GRANTS_ROLE,), *sorted(chains)]


def resource_problem(resource: str) -> str | None:
    """Why ``resource`` (a type-like name) cannot name roles, or None when it can."""
    if len(resource) > MAX_RESOURCE_LENGTH:
        return (
            f"must be at most {MAX_RESOURCE_LENGTH} characters: its database roles "
            f"({ROLE_PREFIX}<resource>{WRITE_SUFFIX} and {READ_SUFFIX}) must fit "
            f"PostgreSQL's {POSTGRES_NAME_BYTES}-byte names"
        )
    return None


def foreign_grant_problem(grant: str, resource: str) -> str | None:
    """Why ``grant`` (a valid grant) may not be declared by a machine of ``resource``,
    or None when it may: an advance acts as one role, its own resource's."""
    match = GRANT.fullmatch(grant)
    if match is None or match.group(2) == resource:
        return None
    return (
        f"names {match.group(2)}: a machine's grants name its own resource, {resource} "
        "(its advance acts as that resource's database role)"
    )
