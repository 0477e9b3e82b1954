-- Code-first workflows (issue 20): a dead letter can say more than its code. A code
-- workflow whose replay diverges from its journal parks its decision work as a dead
-- letter with the code 'journal-divergence' and the divergence message here (where the
-- journal and the code differ), so an operator sees what to deploy before retrying it.
-- Retrying a dead letter clears it, as it clears the code.
ALTER TABLE work ADD COLUMN failure_detail text NOT NULL DEFAULT '';
