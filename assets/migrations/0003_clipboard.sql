-- Clipboard events: text copied or cut, with the app it came from.
CREATE TABLE clipboard_events (
    clip_id         INTEGER PRIMARY KEY,
    app             TEXT    NOT NULL,
    title           TEXT    NOT NULL,
    pid             INTEGER,
    at_ms           INTEGER NOT NULL,
    text            TEXT    NOT NULL,
    -- 1 when the text was cut to the size cap.
    truncated       INTEGER NOT NULL DEFAULT 0,
    -- What noticed it: an X selection owner change, or a copy shortcut.
    trigger         TEXT    NOT NULL CHECK (trigger IN ('owner_change', 'shortcut'))
);
CREATE INDEX clipboard_events_at ON clipboard_events (at_ms);

CREATE VIRTUAL TABLE clipboard_fts USING fts5 (
    text, content = 'clipboard_events', content_rowid = 'clip_id'
);
CREATE TRIGGER clipboard_fts_insert AFTER INSERT ON clipboard_events BEGIN
    INSERT INTO clipboard_fts (rowid, text) VALUES (new.clip_id, new.text);
END;
CREATE TRIGGER clipboard_fts_delete AFTER DELETE ON clipboard_events BEGIN
    INSERT INTO clipboard_fts (clipboard_fts, rowid, text) VALUES ('delete', old.clip_id, old.text);
END;
