-- Browser URLs on window sessions, with where each came from.
ALTER TABLE activity_sessions ADD COLUMN url TEXT;
ALTER TABLE activity_sessions ADD COLUMN url_source TEXT CHECK (url_source IN ('atspi', 'title', 'script'));

-- The URL joins title and app in full-text search.
DROP TRIGGER activity_fts_insert;
DROP TRIGGER activity_fts_delete;
DROP TRIGGER activity_fts_update;
DROP TABLE activity_fts;
CREATE VIRTUAL TABLE activity_fts USING fts5 (
    title, app, url, content = 'activity_sessions', content_rowid = 'session_id'
);
INSERT INTO activity_fts (activity_fts) VALUES ('rebuild');
CREATE TRIGGER activity_fts_insert AFTER INSERT ON activity_sessions BEGIN
    INSERT INTO activity_fts (rowid, title, app, url) VALUES (new.session_id, new.title, new.app, new.url);
END;
CREATE TRIGGER activity_fts_delete AFTER DELETE ON activity_sessions BEGIN
    INSERT INTO activity_fts (activity_fts, rowid, title, app, url) VALUES ('delete', old.session_id, old.title, old.app, old.url);
END;
CREATE TRIGGER activity_fts_update AFTER UPDATE OF title, app, url ON activity_sessions BEGIN
    INSERT INTO activity_fts (activity_fts, rowid, title, app, url) VALUES ('delete', old.session_id, old.title, old.app, old.url);
    INSERT INTO activity_fts (rowid, title, app, url) VALUES (new.session_id, new.title, new.app, new.url);
END;

-- AFK as a heartbeat stream (ActivityWatch's afkstatus bucket): one row per
-- stretch of one status; identical heartbeats within the pulse extend it.
CREATE TABLE afk_events (
    event_id        INTEGER PRIMARY KEY,
    status          TEXT    NOT NULL CHECK (status IN ('afk', 'not-afk')),
    -- Why a quiet user still counted as present: media playing or a fullscreen window.
    held_by         TEXT    CHECK (held_by IN ('media', 'fullscreen')),
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL
);
CREATE INDEX afk_events_started ON afk_events (started_at_ms);
