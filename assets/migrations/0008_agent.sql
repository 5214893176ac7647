-- The agent (issue 13): operations that survive a restart, the user's
-- approval rules, and an append-only audit log of every tool call.

-- One task the agent works on: its conversation so far (turns with their
-- origins, as JSON) is saved after every step, so a kill -9 while an
-- approval waits loses nothing.
CREATE TABLE operations (
    operation_id  INTEGER PRIMARY KEY,
    thread_id     INTEGER,
    answer_id     INTEGER,
    task          TEXT NOT NULL,
    -- idle, running, waiting_for_human, done, error, cancelled
    status        TEXT NOT NULL,
    steps         INTEGER NOT NULL DEFAULT 0,
    cost_usd      REAL NOT NULL DEFAULT 0,
    brain         TEXT NOT NULL,
    state         TEXT NOT NULL,
    error         TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE INDEX operations_open ON operations (status) WHERE status IN ('running', 'waiting_for_human');

-- Every call the model asked for, with its arguments, the decision and what
-- it returned. A call is written as `running` before it runs: one found
-- `running` after a crash "may have run" and is never run again silently.
CREATE TABLE operation_calls (
    call_id        INTEGER PRIMARY KEY,
    operation_id   INTEGER NOT NULL REFERENCES operations ON DELETE CASCADE,
    step           INTEGER NOT NULL,
    model_call_id  TEXT NOT NULL,
    tool           TEXT NOT NULL,
    arguments      TEXT NOT NULL,
    risk           TEXT NOT NULL,
    -- waiting (for approval), running, done, failed, denied, expired, may_have_run, cancelled
    status         TEXT NOT NULL,
    why            TEXT NOT NULL DEFAULT '',
    decided_by     TEXT,
    output         TEXT,
    is_error       INTEGER NOT NULL DEFAULT 0,
    created_at_ms  INTEGER NOT NULL,
    started_at_ms  INTEGER,
    finished_at_ms INTEGER,
    expires_at_ms  INTEGER
);
CREATE INDEX operation_calls_by_operation ON operation_calls (operation_id, step);

-- allow / ask / deny for a tool (or '*'), narrowed by a pattern on the
-- command, path, URL or a JSON pointer, for an operation, until a time, or always.
CREATE TABLE tool_rules (
    rule_id       INTEGER PRIMARY KEY,
    tool          TEXT NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('allow', 'ask', 'deny')),
    target        TEXT,
    pattern       TEXT,
    scope         TEXT NOT NULL CHECK (scope IN ('operation', 'until', 'always')),
    scope_value   INTEGER,
    created_at_ms INTEGER NOT NULL
);

-- Append-only: arguments are stored with keys, tokens and passwords redacted,
-- results as their size and hash.
CREATE TABLE audit_log (
    audit_id      INTEGER PRIMARY KEY,
    at_ms         INTEGER NOT NULL,
    operation_id  INTEGER,
    call_id       INTEGER,
    tool          TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    risk          TEXT NOT NULL,
    decision      TEXT NOT NULL,
    decided_by    TEXT NOT NULL,
    why           TEXT NOT NULL DEFAULT '',
    duration_ms   INTEGER,
    result_bytes  INTEGER,
    result_sha256 TEXT,
    error         TEXT
);
CREATE TRIGGER audit_log_append_only_update BEFORE UPDATE ON audit_log BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_append_only_delete BEFORE DELETE ON audit_log BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
