-- Documents (issue 44): what the user attached or the agent read, kept
-- searchable by meaning and keywords in the `documents` namespace, cited by
-- page; and what the agent changed on disk, so it can be undone.

CREATE TABLE documents (
    document_id     INTEGER PRIMARY KEY,
    -- Where it was read from (the same path read again replaces it).
    path            TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    title           TEXT,
    bytes           INTEGER NOT NULL,
    sha256          TEXT    NOT NULL,
    -- 'attached' (the user), 'agent' (read by a tool), 'folder' (an indexed folder).
    origin          TEXT    NOT NULL CHECK (origin IN ('attached', 'agent', 'folder')),
    added_at_ms     INTEGER NOT NULL
);

-- One page, slide, sheet, chapter or section.
CREATE TABLE document_parts (
    part_id         INTEGER PRIMARY KEY,
    document_id     INTEGER NOT NULL REFERENCES documents (document_id) ON DELETE CASCADE,
    number          INTEGER NOT NULL,
    -- How it is cited: "page 3", "sheet Budget (A1:D12)".
    label           TEXT    NOT NULL,
    text            TEXT    NOT NULL,
    added_at_ms     INTEGER NOT NULL
);
CREATE INDEX document_parts_document ON document_parts (document_id, number);

CREATE VIRTUAL TABLE document_fts USING fts5 (
    text, content = 'document_parts', content_rowid = 'part_id'
);
CREATE TRIGGER document_fts_insert AFTER INSERT ON document_parts BEGIN
    INSERT INTO document_fts (rowid, text) VALUES (new.part_id, new.text);
END;
CREATE TRIGGER document_fts_delete AFTER DELETE ON document_parts BEGIN
    INSERT INTO document_fts (document_fts, rowid, text) VALUES ('delete', old.part_id, old.text);
END;
CREATE TRIGGER embed_queue_document AFTER INSERT ON document_parts BEGIN
    INSERT INTO embed_queue SELECT 'document', new.part_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'document' AND source_id = new.part_id);
END;
CREATE TRIGGER memory_forget_document AFTER DELETE ON document_parts BEGIN
    DELETE FROM memory_chunks WHERE source = 'document' AND source_id = old.part_id;
    DELETE FROM embed_queue WHERE source = 'document' AND source_id = old.part_id;
END;

INSERT INTO index_generations (namespace, generation) VALUES ('documents', 0);

-- What an agent operation changed on disk that can be put back (tools::undo::UndoStep as JSON).
CREATE TABLE undo_steps (
    step_id         INTEGER PRIMARY KEY,
    operation_id    INTEGER NOT NULL,
    call_id         INTEGER NOT NULL,
    at_ms           INTEGER NOT NULL,
    step            TEXT    NOT NULL,
    undone_at_ms    INTEGER,
    -- Why undoing it failed, when it did.
    error           TEXT
);
CREATE INDEX undo_steps_operation ON undo_steps (operation_id, step_id);

-- memory_chunks gains the 'documents' namespace and the 'document' source:
-- only CHECK constraints widen, so the definition is edited in place (see 0012).
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(replace(sql, '''observation'')', '''observation'', ''documents'')'), '''audio'')', '''audio'', ''document'')')
 WHERE type = 'table' AND name = 'memory_chunks';
PRAGMA writable_schema = OFF;
