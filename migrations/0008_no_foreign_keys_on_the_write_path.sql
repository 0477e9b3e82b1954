-- Every transition is one statement that writes its ledger row, its history rows and its
-- work rows only when it holds the lock of its instance row (see engine/store/commits.py,
-- the ``ok`` gate): a row of these tables cannot exist without its instance, and no
-- statement deletes instances. The foreign keys re-checked that at the end of every
-- transition, one lookup per inserted row (about 4 per step). W1 (bench/w1.py) run
-- with and without them on one private cluster, 1x16, 2+2 runs: the step statement's
-- mean time 956 -> 821 us, server CPU per instance 5.61 -> 5.12 ms (-9 %).
-- The drills check the same integrity after every drill instead (I6: every history,
-- ledger and work row belongs to its instance and event, verification/sql_checks.py).
ALTER TABLE history DROP CONSTRAINT history_instance_id_fkey;
ALTER TABLE transitions DROP CONSTRAINT transitions_instance_id_fkey;
ALTER TABLE work DROP CONSTRAINT work_instance_id_sequence_fkey;
