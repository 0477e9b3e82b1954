"""Statements of ``engine.store.roles``: acting as a resource's role, and making roles.

Role names are identifiers composed in (``psycopg.sql.Identifier``), never parameters:
PostgreSQL takes no parameters in ``SET ROLE``, ``CREATE ROLE`` or ``GRANT``.
"""

from psycopg import sql

ACT_AS = sql.SQL("SET LOCAL ROLE {role}")
"""Until the transaction ends or ``ACT_AS_SELF``: only ``role``'s privileges apply."""
ACT_AS_SELF = "RESET ROLE"
"""Back to the session's own login, for the engine's own writes."""
CREATE_ROLE = sql.SQL(
    "DO $$ BEGIN CREATE ROLE {role} NOLOGIN; "
    "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
)
"""Create ``role`` unless it exists. Roles are the cluster's, not a database's: another
session may create the same one at the same time, and then one of the two gets
duplicate_object (it saw the other's) or unique_violation (it waited on the other's
insert), which both mean "it exists"."""
GRANT_ROLE = sql.SQL(
    "DO $$ BEGIN GRANT {role} TO {member}; "
    "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
)
"""Make ``member`` a member of ``role`` unless it is (the same race as ``CREATE_ROLE``)."""
