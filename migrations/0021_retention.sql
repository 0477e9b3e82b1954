-- Bounded history (issue 25): how long each team keeps its ended instances. An ended
-- instance older than its team's keep is exported and removed with its history, ledger
-- and work by `wayline retention run`; a team without a policy keeps everything.
CREATE TABLE retention_policies (
    tenant_id text PRIMARY KEY,
    keep      interval NOT NULL CHECK (keep > interval '0'),
    set_by    text NOT NULL CHECK (set_by <> ''),
    set_at    timestamptz NOT NULL
);
COMMENT ON TABLE retention_policies IS
    'Per team: ended instances archived longer ago than keep may be exported and removed.';

-- the oldest ended instances first, per team
CREATE INDEX instances_archived_tenant_idx ON instances (tenant_id, archived_at, instance_id)
    WHERE archived_at IS NOT NULL;
