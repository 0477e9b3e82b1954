-- Drill campaigns (`wayline drill run`, the studio's drills page) and their scorecards,
-- so the studio can list and show them. The drills themselves run in throwaway schemas
-- (drill_<campaign>_<drill>) that are dropped afterwards; only this record stays here.

CREATE TABLE drill_runs (
    run_id         text PRIMARY KEY,
    -- the team that asked for the run (the studio checks it on every read)
    team_id        text NOT NULL DEFAULT '',
    profile        text NOT NULL,
    seed           bigint NOT NULL,
    requested      text[] NOT NULL DEFAULT '{}',
    -- 'owned cluster' or 'given server': whether server drills could run
    target         text NOT NULL DEFAULT '',
    status         text NOT NULL CHECK (status IN ('running', 'passed', 'failed', 'error')),
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    drills_total   integer NOT NULL DEFAULT 0 CHECK (drills_total >= 0),
    passed         integer NOT NULL DEFAULT 0 CHECK (passed >= 0),
    failed         integer NOT NULL DEFAULT 0 CHECK (failed >= 0),
    not_run        integer NOT NULL DEFAULT 0 CHECK (not_run >= 0),
    error          text NOT NULL DEFAULT '',
    scorecard_text text,
    scorecard      jsonb
);
COMMENT ON TABLE drill_runs IS
    'One drill campaign: what was asked, how it ended, and its scorecard (text and JSON).';

CREATE INDEX drill_runs_started_idx ON drill_runs (started_at, run_id);

CREATE TABLE drill_results (
    run_id      text NOT NULL REFERENCES drill_runs (run_id) ON DELETE CASCADE,
    drill_id    text NOT NULL,
    family      text NOT NULL,
    title       text NOT NULL,
    seed        bigint NOT NULL,
    verdict     text NOT NULL CHECK (verdict IN ('passed', 'failed', 'not_run')),
    seconds     double precision NOT NULL CHECK (seconds >= 0),
    failures    text[] NOT NULL DEFAULT '{}',
    known_bug   text NOT NULL DEFAULT '',
    reproduce   text NOT NULL DEFAULT '',
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, drill_id)
);
COMMENT ON TABLE drill_results IS
    'Each drill of a campaign as it finished, so a running campaign can be watched.';
