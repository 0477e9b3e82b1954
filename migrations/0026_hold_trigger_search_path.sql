-- The hold trigger reads its own schema's holds whatever the writing session's
-- search_path. A store's connections set it, but a repair in psql
-- (UPDATE wayline.work SET ...), a benchmark loading rows or any tool naming tables with
-- their schema would otherwise fail with 'relation "holds" does not exist' on every
-- write to work. FROM CURRENT is the schema the migration runner set for this file.
ALTER FUNCTION park_held_work() SET search_path FROM CURRENT;
