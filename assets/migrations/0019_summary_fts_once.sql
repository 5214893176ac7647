-- A summary whose text changes was indexed for keyword search twice over:
-- `embed_requeue_summary` (0006) and `observation_fts_update` (0007) each
-- deleted the old text from observation_fts and inserted the new one, and
-- the second delete of an entry already gone damaged the index ("database
-- disk image is malformed" on the next write). One trigger does it now; the
-- index is rebuilt from the table, which repairs one damaged before.
DROP TRIGGER IF EXISTS observation_fts_update;
INSERT INTO observation_fts (observation_fts) VALUES ('rebuild');
