-- Chunks not embedded yet: the embed worker's progress counts and the
-- "recent capture" part of grounded answers read these without walking the
-- table and its vectors (1.5 GB at a million chunks).
CREATE INDEX memory_chunks_waiting ON memory_chunks (at_ms) WHERE vector IS NULL;

-- A summary rewritten in place (a conversation that went on after it was
-- summarised) must be re-indexed for keyword search too; without this the
-- index kept the old words and deleting the row later damaged it.
CREATE TRIGGER observation_fts_update AFTER UPDATE OF text ON observations BEGIN
    INSERT INTO observation_fts (observation_fts, rowid, text) VALUES ('delete', old.observation_id, old.text);
    INSERT INTO observation_fts (rowid, text) VALUES (new.observation_id, new.text);
END;
INSERT INTO observation_fts (observation_fts) VALUES ('rebuild');
