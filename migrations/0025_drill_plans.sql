-- Drill plans a team keeps for its own workflows (issue 22; studio/plans/). A plan is
-- versioned: saving it again adds version n+1 and never changes an earlier one, so two
-- versions can be compared and a run names exactly what it ran. ``document`` is the plan
-- in the format `wayline drill run --plan` reads.
CREATE TABLE studio_drill_plans (
    team_id    text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    version    integer NOT NULL CHECK (version >= 1),
    definition text NOT NULL,
    document   jsonb NOT NULL,
    saved_by   text NOT NULL,
    saved_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, name, version)
);
CREATE INDEX studio_drill_plans_definition ON studio_drill_plans (team_id, definition);

-- A plan's run from the studio, once it finished: which drill run recorded it
-- (verification.runs) and, per pin, whether it fired, for the coverage heatmap.
CREATE TABLE studio_drill_plan_runs (
    team_id      text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    run_id       text NOT NULL,
    plan_name    text NOT NULL,
    plan_version integer NOT NULL,
    definition   text NOT NULL,
    verdict      text NOT NULL,
    pins         jsonb NOT NULL,
    started_by   text NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, run_id)
);
CREATE INDEX studio_drill_plan_runs_definition
    ON studio_drill_plan_runs (team_id, definition, finished_at DESC);
