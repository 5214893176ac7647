-- Apps (issue 17): what is installed, what the user granted, each app's own
-- storage and the chats it opened. The component and its manifest are files
-- under apps/<app_id>/ in the data directory; these rows say what the user
-- saw and allowed. Written only by the apps worker (and `cowork apps`).
CREATE TABLE apps (
    app_id          TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    version         TEXT NOT NULL,
    -- The manifest as installed (TOML).
    manifest        TEXT NOT NULL,
    -- sha256 of the component (NULL: an app without code).
    component_sha256 TEXT,
    -- The interfaces the component imports (JSON array), as disclosed at install.
    imports         TEXT NOT NULL,
    -- The optional capabilities the user granted (JSON array: "ai", "http").
    granted         TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1,
    installed_at_ms INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL
);

-- data.storage-get/set: keys are per app; the host supplies app_id.
CREATE TABLE app_storage (
    app_id          TEXT NOT NULL REFERENCES apps (app_id) ON DELETE CASCADE,
    key             TEXT NOT NULL,
    value           TEXT NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (app_id, key)
) WITHOUT ROWID;

-- The chats an app opened (its "open a chat" action): data.conversations()
-- lists them, and removing the app deletes them.
CREATE TABLE app_threads (
    app_id          TEXT NOT NULL REFERENCES apps (app_id) ON DELETE CASCADE,
    thread_id       INTEGER NOT NULL,
    PRIMARY KEY (app_id, thread_id)
) WITHOUT ROWID;
