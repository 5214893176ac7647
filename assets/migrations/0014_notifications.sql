-- Proactive notifications (issue 16): every notification lands in this
-- inbox first, whatever the gate then decides, so a held, deferred or capped
-- one is never lost. The gate's counters are queries over it (shown per tier
-- in the last hour, a source's last shown), so a restart neither repeats nor
-- bypasses them. Written only by the notify worker.
CREATE TABLE notifications (
    notification_id INTEGER PRIMARY KEY,
    source          TEXT NOT NULL,
    tier            TEXT NOT NULL,
    title           TEXT NOT NULL,
    body            TEXT NOT NULL,
    -- What Accept does (JSON), if anything.
    action          TEXT,
    -- pending (the gate holds, defers or bundles it), inbox (capped, muted or
    -- no notification service: shown only in the inbox), shown, accepted,
    -- opened, dismissed, expired, closed
    state           TEXT NOT NULL,
    -- The gate's last word, in words.
    reason          TEXT,
    -- When the gate looks at a pending one again at the latest.
    release_at_ms   INTEGER,
    created_at_ms   INTEGER NOT NULL,
    shown_at_ms     INTEGER,
    -- The desktop's id for it (notifications bundled together share one).
    desktop_id      INTEGER,
    closed_at_ms    INTEGER
);
CREATE INDEX notifications_pending ON notifications (state) WHERE state = 'pending';
CREATE INDEX notifications_shown ON notifications (shown_at_ms) WHERE shown_at_ms IS NOT NULL;
-- The gate's counters: shown per tier in the last hour, a source's last shown.
CREATE INDEX notifications_tier_shown ON notifications (tier, shown_at_ms) WHERE shown_at_ms IS NOT NULL;
CREATE INDEX notifications_source_shown ON notifications (source, shown_at_ms) WHERE shown_at_ms IS NOT NULL;
CREATE INDEX notifications_desktop ON notifications (desktop_id) WHERE desktop_id IS NOT NULL;

-- What the user did with each source: dismissals in a row (a proposal to
-- mute it after several), and whether it is muted (only ever by the user).
CREATE TABLE notify_sources (
    source              TEXT PRIMARY KEY,
    dismissals_in_a_row INTEGER NOT NULL DEFAULT 0,
    dismissed_total     INTEGER NOT NULL DEFAULT 0,
    muted               INTEGER NOT NULL DEFAULT 0,
    mute_proposed_at_ms INTEGER
) WITHOUT ROWID;
