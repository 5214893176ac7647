-- `cowork mcp serve` (issue 14): the MCP clients that asked to read what
-- cowork remembers, by the name they give at connection, and the user's
-- answer. A client the user has not answered is 'pending' and is served
-- nothing; the sidebar asks. Every call a client makes is in audit_log.
CREATE TABLE mcp_clients (
    name           TEXT PRIMARY KEY,
    status         TEXT NOT NULL CHECK (status IN ('pending', 'allowed', 'denied')),
    version        TEXT NOT NULL DEFAULT '',
    transport      TEXT NOT NULL DEFAULT '',
    asked_at_ms    INTEGER NOT NULL,
    decided_at_ms  INTEGER,
    decided_by     TEXT,
    last_seen_ms   INTEGER NOT NULL
);
