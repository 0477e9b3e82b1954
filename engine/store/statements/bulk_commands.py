"""Statements that keep bulk operator actions and their results: see
``engine.store.bulk_commands``."""

from __future__ import annotations

from engine.store.clock import NOW_SQL

INSERT_BULK = f"""
INSERT INTO bulk_commands (bulk_id, tenant_id, action, step_name, arguments, actor, reason,
                           instance_ids, fingerprint, created_at)
VALUES (%(bulk)s, %(tenant)s, %(action)s, %(step)s, %(arguments)s, %(actor)s, %(reason)s,
        %(instances)s, %(fingerprint)s, {NOW_SQL})
ON CONFLICT (bulk_id) DO NOTHING
"""

BULK_COLUMNS = """
SELECT bulk_id, tenant_id, action, step_name, arguments, actor, reason, instance_ids,
       fingerprint, created_at
FROM bulk_commands
"""

BULK_BY_ID = BULK_COLUMNS + "WHERE bulk_id = %(bulk)s"

RECENT_BULKS = (
    BULK_COLUMNS
    + "WHERE tenant_id = %(tenant)s ORDER BY created_at DESC, bulk_id DESC LIMIT %(limit)s"
)
"""A team's newest bulk actions (``bulk_commands_recent_idx``)."""

INSERT_RESULT = f"""
INSERT INTO bulk_command_results (bulk_id, instance_id, outcome, detail, command_id,
                                  status_before, status_after, recorded_at)
VALUES (%(bulk)s, %(instance)s, %(outcome)s, %(detail)s, %(command)s, %(before)s, %(after)s,
        {NOW_SQL})
ON CONFLICT (bulk_id, instance_id) DO NOTHING
"""

RESULTS = """
SELECT instance_id, outcome, detail, command_id, status_before, status_after, recorded_at
FROM bulk_command_results
WHERE bulk_id = %(bulk)s
ORDER BY instance_id
"""
