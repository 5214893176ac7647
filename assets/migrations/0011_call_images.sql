-- MCP (issue 14): images a tool call returned, whole, in the order the tool
-- gave them. The chat shows them as thumbnails (decoded when read); they go
-- with their call (and its operation) when a range is deleted.
CREATE TABLE operation_call_images (
    call_id  INTEGER NOT NULL REFERENCES operation_calls ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    mime     TEXT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (call_id, seq)
) WITHOUT ROWID;
