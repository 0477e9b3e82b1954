-- A state machine's work names the version whose code runs it (machine:<name>@<version>,
-- engine/model/pinned_code.py) instead of the manifest's function name: a worker found a
-- machine's code by that name alone, so a worker with an older version's code claimed
-- executions pinned to a newer version and ran its own advance under the newer edges.
-- Work made before this migration (kind 7, an advance or compensation) gets the target
-- of its execution's pin; finished work keeps the name it ran under.
UPDATE work w
SET target = 'machine:' || i.definition_name || '@' || i.definition_version
FROM instances i
WHERE w.instance_id = i.instance_id
  AND w.kind = 7
  AND w.state <> 3
  AND strpos(w.target, ':') = 0;
