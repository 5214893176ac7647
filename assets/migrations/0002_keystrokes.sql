-- Keystroke chunks: typed text per window, flushed on pause, Enter/Tab/Escape,
-- window change or length. Self-contained rows (app, title, pid, times).
CREATE TABLE keystroke_chunks (
    chunk_id        INTEGER PRIMARY KEY,
    app             TEXT    NOT NULL,
    title           TEXT    NOT NULL,
    pid             INTEGER,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    text            TEXT    NOT NULL,
    -- Shortcuts pressed in the chunk, newline-separated (e.g. "Ctrl+C").
    shortcuts       TEXT    NOT NULL DEFAULT '',
    flush_reason    TEXT    NOT NULL
);
CREATE INDEX keystroke_chunks_started ON keystroke_chunks (started_at_ms);

CREATE VIRTUAL TABLE keystroke_fts USING fts5 (
    text, content = 'keystroke_chunks', content_rowid = 'chunk_id'
);
CREATE TRIGGER keystroke_fts_insert AFTER INSERT ON keystroke_chunks BEGIN
    INSERT INTO keystroke_fts (rowid, text) VALUES (new.chunk_id, new.text);
END;
CREATE TRIGGER keystroke_fts_delete AFTER DELETE ON keystroke_chunks BEGIN
    INSERT INTO keystroke_fts (keystroke_fts, rowid, text) VALUES ('delete', old.chunk_id, old.text);
END;
