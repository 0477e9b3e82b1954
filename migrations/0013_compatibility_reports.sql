-- Replay-compatibility gate (issue 21): when a version is published, every running or
-- paused instance of the name's other versions is judged against it (could it move to
-- the new version where it stands?). The report is kept with the version, one row per
-- published version, written in the transaction that publishes it: the verdicts as
-- JSON (instance, from version and fingerprint, compatible or the reason) with their
-- counts, whether every running instance was judged, and when.
CREATE TABLE compatibility_reports (
    name         text NOT NULL,
    version      text NOT NULL,
    fingerprint  text NOT NULL CHECK (length(fingerprint) = 64),
    report       jsonb NOT NULL,
    compatible   integer NOT NULL CHECK (compatible >= 0),
    incompatible integer NOT NULL CHECK (incompatible >= 0),
    complete     boolean NOT NULL,
    judged_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);
COMMENT ON TABLE compatibility_reports IS
    'The compatibility report of each published version: its verdicts on the instances of other versions running when it was published.';
