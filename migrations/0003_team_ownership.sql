-- Teams own definitions; instances already carry their team in instances.tenant_id (and
-- their work rows in work.tenant_id, which claims use for fairness). A name belongs to
-- the team that first published it; '' is the team of engine-level callers (CLI, tests).

ALTER TABLE definitions ADD COLUMN team_id text NOT NULL DEFAULT '';
CREATE INDEX definitions_team_idx ON definitions (team_id, name, version);
CREATE INDEX instances_tenant_idx ON instances (tenant_id, created_at, instance_id);
