-- Chunks not embedded yet: the embed worker's progress counts and the
-- "recent capture" part of grounded answers read these without walking the
-- table and its vectors (1.5 GB at a million chunks).
CREATE INDEX memory_chunks_waiting ON memory_chunks (at_ms) WHERE vector IS NULL;
