-- Undo and redo in the draft editor (issue 24): a draft keeps the documents its last
-- edits replaced (undo, newest first) and the ones undoing replaced (redo, newest
-- first), each capped by the studio (MAX_UNDO). A new edit empties redo, as editors do.
ALTER TABLE studio_drafts
    ADD COLUMN undo jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(undo) = 'array'),
    ADD COLUMN redo jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(redo) = 'array');
