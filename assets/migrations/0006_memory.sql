-- Memory: everything captured or said is cut into chunks, embedded by the
-- `embed` worker and searchable by meaning. Vectors live here (the source of
-- truth); the faiss indexes next to the database are rebuilt from them.

-- Dated summaries the local model wrote of older activity and conversations.
CREATE TABLE observations (
    observation_id  INTEGER PRIMARY KEY,
    kind            TEXT    NOT NULL CHECK (kind IN ('activity', 'conversation')),
    period_start_ms INTEGER NOT NULL,
    period_end_ms   INTEGER NOT NULL,
    text            TEXT    NOT NULL,
    model           TEXT,
    created_at_ms   INTEGER NOT NULL,
    UNIQUE (kind, period_start_ms)
);
CREATE VIRTUAL TABLE observation_fts USING fts5 (
    text, content = 'observations', content_rowid = 'observation_id'
);
CREATE TRIGGER observation_fts_insert AFTER INSERT ON observations BEGIN
    INSERT INTO observation_fts (rowid, text) VALUES (new.observation_id, new.text);
END;
CREATE TRIGGER observation_fts_delete AFTER DELETE ON observations BEGIN
    INSERT INTO observation_fts (observation_fts, rowid, text) VALUES ('delete', old.observation_id, old.text);
END;

CREATE TABLE embed_jobs (
    job_id          INTEGER PRIMARY KEY,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'processing', 'done', 'paused', 'failed')),
    total_chunks    INTEGER NOT NULL,
    -- The checkpoint: committed together with each batch's vectors.
    chunks_embedded INTEGER NOT NULL DEFAULT 0,
    created_at_ms   INTEGER NOT NULL,
    -- When processing first began (kept across resumes: a job that cannot
    -- finish within 5 minutes is stuck and fails instead of looping).
    started_at_ms   INTEGER,
    updated_at_ms   INTEGER NOT NULL,
    error           TEXT
);
CREATE INDEX embed_jobs_state ON embed_jobs (state, job_id);

CREATE TABLE memory_chunks (
    chunk_id        INTEGER PRIMARY KEY,
    namespace       TEXT    NOT NULL CHECK (namespace IN ('activity', 'conversation', 'observation')),
    source          TEXT    NOT NULL CHECK (source IN ('window', 'typing', 'clipboard', 'chat', 'summary')),
    source_id       INTEGER NOT NULL,
    -- Position of this piece within a long source text.
    part            INTEGER NOT NULL DEFAULT 0,
    text            TEXT    NOT NULL,
    at_ms           INTEGER NOT NULL,
    job_id          INTEGER NOT NULL REFERENCES embed_jobs (job_id),
    -- 384 little-endian f32s, unit length; NULL until embedded.
    vector          BLOB
);
CREATE INDEX memory_chunks_source ON memory_chunks (source, source_id);
CREATE INDEX memory_chunks_job ON memory_chunks (job_id, chunk_id);
CREATE INDEX memory_chunks_at ON memory_chunks (at_ms);

-- Rows written but not yet cut into chunks (filled by triggers, drained by `embed`).
CREATE TABLE embed_queue (
    source          TEXT    NOT NULL,
    source_id       INTEGER NOT NULL,
    PRIMARY KEY (source, source_id)
) WITHOUT ROWID;

-- Embedded chunks deleted since the indexes last heard of it.
CREATE TABLE vector_tombstones (
    chunk_id        INTEGER PRIMARY KEY,
    namespace       TEXT    NOT NULL
);

-- Bumped whenever a namespace's vectors change; an index file records the
-- generation it holds, so a stale one is rebuilt.
CREATE TABLE index_generations (
    namespace       TEXT PRIMARY KEY,
    generation      INTEGER NOT NULL
);
INSERT INTO index_generations (namespace, generation) VALUES ('activity', 0), ('conversation', 0), ('observation', 0);

-- Curated hot memory: short facts the user or the agent pinned, mirrored into
-- USER.md (about the user) and MEMORY.md (the agent's notes).
CREATE TABLE hot_memory (
    memory_id       INTEGER PRIMARY KEY,
    file            TEXT    NOT NULL CHECK (file IN ('user', 'memory')),
    text            TEXT    NOT NULL CHECK (length(text) BETWEEN 1 AND 320),
    pinned_by       TEXT    NOT NULL CHECK (pinned_by IN ('user', 'agent')),
    created_at_ms   INTEGER NOT NULL
);

-- Chunks the user pinned to a thread: first in that thread's context.
CREATE TABLE thread_pins (
    thread_id       INTEGER NOT NULL REFERENCES chat_threads (thread_id) ON DELETE CASCADE,
    chunk_id        INTEGER NOT NULL REFERENCES memory_chunks (chunk_id) ON DELETE CASCADE,
    PRIMARY KEY (thread_id, chunk_id)
) WITHOUT ROWID;

CREATE TABLE feedback (
    message_id      INTEGER PRIMARY KEY REFERENCES chat_messages (message_id) ON DELETE CASCADE,
    rating          INTEGER NOT NULL CHECK (rating IN (-1, 1)),
    reason          TEXT    NOT NULL DEFAULT '',
    at_ms           INTEGER NOT NULL
);

-- Sources an answer used (JSON), and grounded refusals, which are shown but never fed back.
ALTER TABLE chat_messages ADD COLUMN citations TEXT;
ALTER TABLE chat_messages ADD COLUMN refusal INTEGER NOT NULL DEFAULT 0;

-- Queue on write. No OR IGNORE inside triggers: an outer upsert's conflict
-- policy would override it and fail the write; NOT EXISTS guards instead.
CREATE TRIGGER embed_queue_window AFTER INSERT ON activity_sessions BEGIN
    INSERT INTO embed_queue SELECT 'window', new.session_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'window' AND source_id = new.session_id);
END;
CREATE TRIGGER embed_queue_typing AFTER INSERT ON keystroke_chunks BEGIN
    INSERT INTO embed_queue SELECT 'typing', new.chunk_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'typing' AND source_id = new.chunk_id);
END;
CREATE TRIGGER embed_queue_clipboard AFTER INSERT ON clipboard_events BEGIN
    INSERT INTO embed_queue SELECT 'clipboard', new.clip_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'clipboard' AND source_id = new.clip_id);
END;
CREATE TRIGGER embed_queue_chat AFTER INSERT ON chat_messages WHEN new.refusal = 0 BEGIN
    INSERT INTO embed_queue SELECT 'chat', new.message_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'chat' AND source_id = new.message_id);
END;
CREATE TRIGGER embed_queue_summary AFTER INSERT ON observations BEGIN
    INSERT INTO embed_queue SELECT 'summary', new.observation_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'summary' AND source_id = new.observation_id);
END;
-- A rewritten text is chunked again (an answer is written when it finishes).
CREATE TRIGGER embed_requeue_chat AFTER UPDATE OF content ON chat_messages WHEN new.refusal = 0 AND new.content IS NOT old.content BEGIN
    DELETE FROM memory_chunks WHERE source = 'chat' AND source_id = new.message_id;
    INSERT INTO embed_queue SELECT 'chat', new.message_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'chat' AND source_id = new.message_id);
END;

CREATE TRIGGER embed_requeue_summary AFTER UPDATE OF text ON observations WHEN new.text IS NOT old.text BEGIN
    DELETE FROM memory_chunks WHERE source = 'summary' AND source_id = new.observation_id;
    INSERT INTO embed_queue SELECT 'summary', new.observation_id
        WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'summary' AND source_id = new.observation_id);
    INSERT INTO observation_fts (observation_fts, rowid, text) VALUES ('delete', old.observation_id, old.text);
    INSERT INTO observation_fts (rowid, text) VALUES (new.observation_id, new.text);
END;

-- Deleting a source deletes its chunks; deleting an embedded chunk leaves a
-- tombstone for the indexes and makes their files stale.
CREATE TRIGGER memory_forget_window AFTER DELETE ON activity_sessions BEGIN
    DELETE FROM memory_chunks WHERE source = 'window' AND source_id = old.session_id;
    DELETE FROM embed_queue WHERE source = 'window' AND source_id = old.session_id;
END;
CREATE TRIGGER memory_forget_typing AFTER DELETE ON keystroke_chunks BEGIN
    DELETE FROM memory_chunks WHERE source = 'typing' AND source_id = old.chunk_id;
    DELETE FROM embed_queue WHERE source = 'typing' AND source_id = old.chunk_id;
END;
CREATE TRIGGER memory_forget_clipboard AFTER DELETE ON clipboard_events BEGIN
    DELETE FROM memory_chunks WHERE source = 'clipboard' AND source_id = old.clip_id;
    DELETE FROM embed_queue WHERE source = 'clipboard' AND source_id = old.clip_id;
END;
CREATE TRIGGER memory_forget_chat AFTER DELETE ON chat_messages BEGIN
    DELETE FROM memory_chunks WHERE source = 'chat' AND source_id = old.message_id;
    DELETE FROM embed_queue WHERE source = 'chat' AND source_id = old.message_id;
END;
CREATE TRIGGER memory_forget_summary AFTER DELETE ON observations BEGIN
    DELETE FROM memory_chunks WHERE source = 'summary' AND source_id = old.observation_id;
    DELETE FROM embed_queue WHERE source = 'summary' AND source_id = old.observation_id;
END;
CREATE TRIGGER memory_chunk_tombstone AFTER DELETE ON memory_chunks WHEN old.vector IS NOT NULL BEGIN
    INSERT INTO vector_tombstones (chunk_id, namespace) SELECT old.chunk_id, old.namespace
        WHERE NOT EXISTS (SELECT 1 FROM vector_tombstones WHERE chunk_id = old.chunk_id);
    UPDATE index_generations SET generation = generation + 1 WHERE namespace = old.namespace;
END;

-- Everything recorded before this version is embedded too.
INSERT OR IGNORE INTO embed_queue SELECT 'window', session_id FROM activity_sessions;
INSERT OR IGNORE INTO embed_queue SELECT 'typing', chunk_id FROM keystroke_chunks;
INSERT OR IGNORE INTO embed_queue SELECT 'clipboard', clip_id FROM clipboard_events;
INSERT OR IGNORE INTO embed_queue SELECT 'chat', message_id FROM chat_messages;
