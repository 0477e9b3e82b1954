-- The studio lists one team's dead letters at a time, oldest failure first (keyset on
-- (completed_at, work_id)); with this index a team's page is an index range instead of
-- a walk over every team's dead letters filtered by tenant.
CREATE INDEX work_tenant_dead_letter_idx ON work (tenant_id, completed_at, work_id)
    WHERE state = 4;

-- Recent dead-letter resolutions (the audit shown beside the list), newest first.
CREATE INDEX work_resolutions_time_idx ON work_resolutions (occurred_at, command_id);
