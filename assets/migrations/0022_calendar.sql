-- The calendar (issue 58), read-only: each source's events (repeats expanded)
-- from 14 days back to 60 ahead, replaced whole each time the source is read.
-- `source` is a hash of the source's line (an address may be a secret);
-- `attendees` is a JSON array of names. A calendar's words are data.
CREATE TABLE calendar_events (
    source      TEXT    NOT NULL,
    uid         TEXT    NOT NULL,
    start_ms    INTEGER NOT NULL,
    end_ms      INTEGER NOT NULL,
    all_day     INTEGER NOT NULL DEFAULT 0,
    title       TEXT    NOT NULL DEFAULT '',
    location    TEXT    NOT NULL DEFAULT '',
    organizer   TEXT    NOT NULL DEFAULT '',
    attendees   TEXT    NOT NULL DEFAULT '[]',
    join_url    TEXT,
    description TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (source, uid, start_ms)
) WITHOUT ROWID;
CREATE INDEX calendar_events_start ON calendar_events(start_ms);
