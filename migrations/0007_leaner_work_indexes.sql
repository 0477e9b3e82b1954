-- Every step writes work rows, and every index on work is paid for at each insert and
-- each lease change. Two indexes no statement needs any more:
--
-- work_due_idx (available_at, work_id) WHERE state = 1 covers the same rows as
-- work_tenant_due_idx (0002), which claims use; nothing orders all tenants' due work.
DROP INDEX work_due_idx;

-- work_lease_owner_idx (lease_owner) WHERE state = 2: leased rows are at most the
-- in-flight work (the workers' slots, plus expired leases not yet reclaimed), so the
-- dead-owner sweep and the workers page find an owner's leases in
-- work_lease_expiry_idx, which holds exactly the leased rows.
DROP INDEX work_lease_owner_idx;
