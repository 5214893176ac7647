-- What was on the screen (issue 57): the text of the focused window, read
-- from its accessibility tree or, where the tree holds none, by OCR of the
-- window's pixels. One row per distinct text a window showed, with the
-- activity session it was seen in.
CREATE TABLE screen_texts (
    screen_id       INTEGER PRIMARY KEY,
    -- The window session it was seen in (NULL when no session was recorded).
    session_id      INTEGER,
    seen_at_ms      INTEGER NOT NULL,
    app             TEXT    NOT NULL,
    title           TEXT    NOT NULL,
    url             TEXT,
    -- Where the text came from: 'accessibility' (the tree) or 'ocr'.
    method          TEXT    NOT NULL CHECK (method IN ('accessibility', 'ocr')),
    -- OCR's mean word confidence, 0..100; 100 for the tree's own text.
    confidence      INTEGER NOT NULL,
    text            TEXT    NOT NULL
);
CREATE INDEX screen_texts_seen ON screen_texts (seen_at_ms);
CREATE INDEX screen_texts_session ON screen_texts (session_id);

CREATE VIRTUAL TABLE screen_fts USING fts5 (
    text, content = 'screen_texts', content_rowid = 'screen_id'
);
CREATE TRIGGER screen_fts_insert AFTER INSERT ON screen_texts BEGIN
    INSERT INTO screen_fts (rowid, text) VALUES (new.screen_id, new.text);
END;
CREATE TRIGGER screen_fts_delete AFTER DELETE ON screen_texts BEGIN
    INSERT INTO screen_fts (screen_fts, rowid, text) VALUES ('delete', old.screen_id, old.text);
END;

-- Embedded like the other capture streams (the activity namespace).
CREATE TRIGGER embed_queue_screen AFTER INSERT ON screen_texts BEGIN
    INSERT INTO embed_queue SELECT 'screen', new.screen_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'screen' AND source_id = new.screen_id);
END;
CREATE TRIGGER memory_forget_screen AFTER DELETE ON screen_texts BEGIN
    DELETE FROM memory_chunks WHERE source = 'screen' AND source_id = old.screen_id;
    DELETE FROM embed_queue WHERE source = 'screen' AND source_id = old.screen_id;
END;

-- memory_chunks.source gains 'screen': only a CHECK widens (see 0012).
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, '''document'')', '''document'', ''screen'')')
 WHERE type = 'table' AND name = 'memory_chunks';
PRAGMA writable_schema = OFF;
