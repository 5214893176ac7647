-- Cloud use: one row per finished request, for budgets (a restart resets nothing).
CREATE TABLE usage (
    usage_id        INTEGER PRIMARY KEY,
    at_ms           INTEGER NOT NULL,
    provider        TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    input_tokens    INTEGER NOT NULL,
    output_tokens   INTEGER NOT NULL,
    cost_usd        REAL    NOT NULL,
    -- 1 for a free cloud provider (counts against the monthly token quota).
    free_cloud      INTEGER NOT NULL DEFAULT 0,
    -- The question this answered; retries with a smarter model share it.
    ask_id          INTEGER NOT NULL
);
CREATE INDEX usage_at ON usage (at_ms);
CREATE INDEX usage_ask ON usage (ask_id);

-- Which question an answer belongs to (retries share it), who answered, and what it cost.
ALTER TABLE chat_messages ADD COLUMN ask_id INTEGER;
ALTER TABLE chat_messages ADD COLUMN provider TEXT;
ALTER TABLE chat_messages ADD COLUMN cost_usd REAL;
