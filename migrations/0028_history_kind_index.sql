-- History keeps one index, its key (instance_id, sequence). The index on
-- (instance_id, kind, sequence) took an entry for every event written (11 for an
-- instance of three steps: 9 % of the WAL a W1 instance writes, bench.compare) and was
-- the table's largest index (835 MiB of 1,553 at 10^7 events, bench/RESULTS.md), for
-- one reader: the studio's history page filtered by kind. That page reads one
-- instance's events in order after a position, which the key serves; a kind filter
-- passes over the other kinds' rows of that one instance on the way (20 ms for a rare
-- kind in an instance of 10^5 events).
DROP INDEX history_kind_idx;
