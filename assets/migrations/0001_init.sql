-- Activity sessions: one row per stretch of time in one window with one title.
CREATE TABLE activity_sessions (
    session_id      INTEGER PRIMARY KEY,
    app             TEXT    NOT NULL,
    title           TEXT    NOT NULL,
    pid             INTEGER,
    window_id       INTEGER NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER,
    -- Last time capture confirmed the session was still open (crash recovery).
    last_seen_ms    INTEGER NOT NULL,
    end_reason      TEXT CHECK (end_reason IN ('switch', 'afk', 'shutdown', 'recovered'))
);
CREATE INDEX activity_sessions_started ON activity_sessions (started_at_ms);

CREATE TABLE chat_threads (
    thread_id       INTEGER PRIMARY KEY,
    title           TEXT    NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL
);

CREATE TABLE chat_messages (
    message_id      INTEGER PRIMARY KEY,
    thread_id       INTEGER NOT NULL REFERENCES chat_threads (thread_id) ON DELETE CASCADE,
    role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
    content         TEXT    NOT NULL,
    -- Layer-1 context attached to a user message, exactly as sent to the model.
    context         TEXT,
    status          TEXT    NOT NULL DEFAULT 'done' CHECK (status IN ('done', 'stopped', 'failed')),
    model           TEXT,
    created_at_ms   INTEGER NOT NULL
);
CREATE INDEX chat_messages_thread ON chat_messages (thread_id, created_at_ms);

CREATE TABLE settings (
    key             TEXT PRIMARY KEY,
    value           TEXT    NOT NULL,
    updated_at_ms   INTEGER NOT NULL
);

-- Full-text search over window titles and chat messages (external content).
CREATE VIRTUAL TABLE activity_fts USING fts5 (
    title, app, content = 'activity_sessions', content_rowid = 'session_id'
);
CREATE TRIGGER activity_fts_insert AFTER INSERT ON activity_sessions BEGIN
    INSERT INTO activity_fts (rowid, title, app) VALUES (new.session_id, new.title, new.app);
END;
CREATE TRIGGER activity_fts_delete AFTER DELETE ON activity_sessions BEGIN
    INSERT INTO activity_fts (activity_fts, rowid, title, app) VALUES ('delete', old.session_id, old.title, old.app);
END;
CREATE TRIGGER activity_fts_update AFTER UPDATE OF title, app ON activity_sessions BEGIN
    INSERT INTO activity_fts (activity_fts, rowid, title, app) VALUES ('delete', old.session_id, old.title, old.app);
    INSERT INTO activity_fts (rowid, title, app) VALUES (new.session_id, new.title, new.app);
END;

CREATE VIRTUAL TABLE message_fts USING fts5 (
    content, content = 'chat_messages', content_rowid = 'message_id'
);
CREATE TRIGGER message_fts_insert AFTER INSERT ON chat_messages BEGIN
    INSERT INTO message_fts (rowid, content) VALUES (new.message_id, new.content);
END;
CREATE TRIGGER message_fts_delete AFTER DELETE ON chat_messages BEGIN
    INSERT INTO message_fts (message_fts, rowid, content) VALUES ('delete', old.message_id, old.content);
END;
CREATE TRIGGER message_fts_update AFTER UPDATE OF content ON chat_messages BEGIN
    INSERT INTO message_fts (message_fts, rowid, content) VALUES ('delete', old.message_id, old.content);
    INSERT INTO message_fts (rowid, content) VALUES (new.message_id, new.content);
END;
