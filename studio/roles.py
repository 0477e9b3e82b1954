"""Roles within a team, and what each may do.

Four roles, each a set of abilities rather than a rank: a viewer reads; an author also
edits drafts and publishes or deprecates versions; an operator also acts on instances,
dead letters and drills; an admin may do everything, including managing the team's
people and API tokens. Authors and operators are deliberately separate: the person who
changes a workflow is not automatically the person who may cancel production runs.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    VIEWER = "viewer"
    AUTHOR = "author"
    OPERATOR = "operator"
    ADMIN = "admin"


class Access(StrEnum):
    """What a route requires; ``public`` routes are open to anyone (sign-in, assets)."""

    PUBLIC = "public"
    PROBE = "probe"
    """Open to anyone like ``public``, and never asks who is asking: an orchestrator's
    health and readiness checks and a scraper's metrics answer while the database,
    where sessions and tokens live, does not."""
    SIGNED_IN = "signed_in"
    """Any signed-in person, even one not in a team yet (their account page)."""
    VIEWER = "viewer"
    AUTHOR = "author"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def open(self) -> bool:
        """Whether anyone may call the route, signed in or not."""
        return self in (Access.PUBLIC, Access.PROBE)


GRANTS: dict[Role, frozenset[Access]] = {
    Role.VIEWER: frozenset({Access.VIEWER}),
    Role.AUTHOR: frozenset({Access.VIEWER, Access.AUTHOR}),
    Role.OPERATOR: frozenset({Access.VIEWER, Access.OPERATOR}),
    Role.ADMIN: frozenset({Access.VIEWER, Access.AUTHOR, Access.OPERATOR, Access.ADMIN}),
}


def allows(role: Role | None, required: Access) -> bool:
    """Whether someone with ``role`` in the current team (None: no team) may proceed."""
    if required.open or required is Access.SIGNED_IN:
        return True
    return role is not None and required in GRANTS[role]
