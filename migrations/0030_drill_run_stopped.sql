-- A drill run stopped before it finished (from the studio's Stop, or Ctrl-C on
-- `wayline drill run`) is recorded as such, not as an error: the drills it finished
-- are kept, and nothing broke.
ALTER TABLE drill_runs DROP CONSTRAINT drill_runs_status_check;
ALTER TABLE drill_runs ADD CONSTRAINT drill_runs_status_check
    CHECK (status IN ('running', 'passed', 'failed', 'error', 'stopped'));
