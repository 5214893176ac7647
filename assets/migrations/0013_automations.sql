-- Automations (issue 16): flows, their runs and steps, the scheduler's state
-- and claimed events. A run, a delay and a parked approval are rows with a
-- wake time, never a sleeping thread: a restart, a crash or a suspend
-- resumes them. Written only by the automations worker.

-- A flow as the user saved it (JSON, validated before it was stored).
CREATE TABLE automations (
    automation_id INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    definition    TEXT NOT NULL,
    enabled       INTEGER NOT NULL DEFAULT 1,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);

-- When a scheduled flow fires next, and how its runs have gone.
CREATE TABLE automation_scheduler (
    automation_id        INTEGER PRIMARY KEY REFERENCES automations ON DELETE CASCADE,
    next_fire_at_ms      INTEGER,
    last_fire_at_ms      INTEGER,
    last_success_at_ms   INTEGER,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    -- Starts skipped because the flow was still running (mode single or parallel at its limit).
    skipped              INTEGER NOT NULL DEFAULT 0
);

-- One run: the flow as it was when the run was queued, what triggered it,
-- where it is (the next step to take) and when it must be looked at again
-- (a delay ends, a step times out, an approval expires).
CREATE TABLE automation_runs (
    run_id        INTEGER PRIMARY KEY,
    automation_id INTEGER NOT NULL REFERENCES automations ON DELETE CASCADE,
    definition    TEXT NOT NULL,
    trigger_kind  TEXT NOT NULL,
    -- The variables so far: {"trigger": …, "steps": {id: data}, origins}.
    scope         TEXT NOT NULL,
    event_key     TEXT,
    -- queued, running, waiting_delay, waiting_approval, done, failed, cancelled, expired
    status        TEXT NOT NULL,
    step_index    INTEGER NOT NULL DEFAULT 0,
    wake_at_ms    INTEGER,
    -- The agent operation the current step waits for.
    operation_id  INTEGER,
    output        TEXT,
    error         TEXT,
    rerun_of      INTEGER,
    created_at_ms INTEGER NOT NULL,
    started_at_ms INTEGER,
    finished_at_ms INTEGER
);
CREATE INDEX automation_runs_by_flow ON automation_runs (automation_id, created_at_ms);
CREATE INDEX automation_runs_open ON automation_runs (status, wake_at_ms)
    WHERE status IN ('queued', 'running', 'waiting_delay', 'waiting_approval');

-- What each step of a run was given and gave back, with the decision on it.
CREATE TABLE run_steps (
    run_id         INTEGER NOT NULL REFERENCES automation_runs ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    step_id        TEXT NOT NULL,
    kind           TEXT NOT NULL,
    input          TEXT,
    output         TEXT,
    -- running, waiting_approval, waiting_delay, done, failed, skipped, expired, cancelled
    status         TEXT NOT NULL,
    decision       TEXT,
    error          TEXT,
    operation_id   INTEGER,
    started_at_ms  INTEGER NOT NULL,
    finished_at_ms INTEGER,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- An event is claimed here in the same transaction that queues its run, so
-- a repeated event (or a scheduled time seen twice) never runs twice.
CREATE TABLE automation_claims (
    automation_id INTEGER NOT NULL REFERENCES automations ON DELETE CASCADE,
    event_key     TEXT NOT NULL,
    run_id        INTEGER,
    claimed_at_ms INTEGER NOT NULL,
    PRIMARY KEY (automation_id, event_key)
) WITHOUT ROWID;

-- Small facts about the automations themselves (the built-in suggestions were
-- added once: a user who removed one does not get it back).
CREATE TABLE automation_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
