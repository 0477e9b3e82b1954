-- Indexes for claiming and sweeping work (see engine/store/work.py for the statements).

-- Tenant-fair claims walk the tenants that have available work (a skip scan over the
-- leading column) and read each tenant's oldest due rows in claim order, so a claim
-- costs (tenants x claim limit) index reads instead of a scan of the whole backlog.
-- The predicate is written `state < 2` (the same rows as `state = 1`, by the CHECK on
-- state) and so are the claim's per-tenant scans: then only this index matches them,
-- and the planner cannot scan the global due index filtering by tenant instead.
CREATE INDEX work_tenant_due_idx ON work (tenant_id, available_at, work_id)
    WHERE state < 2;

-- The deadline sweep finds open work whose deadline has passed, so that it becomes a
-- visible dead letter instead of waiting forever.
CREATE INDEX work_open_deadline_idx ON work (deadline, work_id)
    WHERE state IN (1, 2);
