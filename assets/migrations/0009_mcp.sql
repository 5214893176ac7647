-- MCP (issue 14): the definition (name, description, input schema) of each
-- MCP tool as it was when the user first allowed a call to it. When the
-- server later changes the definition, allow rules for the tool stop
-- applying until the user approves it again, and the card shows the change.
CREATE TABLE mcp_allowed_tools (
    tool          TEXT PRIMARY KEY,
    fingerprint   TEXT NOT NULL,
    definition    TEXT NOT NULL,
    allowed_at_ms INTEGER NOT NULL
);
