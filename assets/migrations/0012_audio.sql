-- Listen mode: what the microphone ("you") and the computer's own output
-- ("others") said, transcribed on the device in VAD-gated chunks.
CREATE TABLE audio_transcripts (
    transcript_id   INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL CHECK (source IN ('mic', 'system')),
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    text            TEXT    NOT NULL,
    -- Mean token probability of the kept segments, 0..1.
    confidence      REAL    NOT NULL,
    -- The window in focus when the chunk began ('' when none was, or it was cowork's own).
    app             TEXT    NOT NULL DEFAULT '',
    title           TEXT    NOT NULL DEFAULT '',
    -- The chunk's audio under the data directory's audio/ folder, only when
    -- the user keeps audio; cleared when the audio's own retention removes it.
    audio_file      TEXT
);
CREATE INDEX audio_transcripts_started ON audio_transcripts (started_at_ms);
CREATE INDEX audio_transcripts_files ON audio_transcripts (started_at_ms) WHERE audio_file IS NOT NULL;

CREATE VIRTUAL TABLE audio_fts USING fts5 (
    text, content = 'audio_transcripts', content_rowid = 'transcript_id'
);
CREATE TRIGGER audio_fts_insert AFTER INSERT ON audio_transcripts BEGIN
    INSERT INTO audio_fts (rowid, text) VALUES (new.transcript_id, new.text);
END;
CREATE TRIGGER audio_fts_delete AFTER DELETE ON audio_transcripts BEGIN
    INSERT INTO audio_fts (audio_fts, rowid, text) VALUES ('delete', old.transcript_id, old.text);
END;

-- Embedded like the other capture streams (the activity namespace).
CREATE TRIGGER embed_queue_audio AFTER INSERT ON audio_transcripts BEGIN
    INSERT INTO embed_queue SELECT 'audio', new.transcript_id WHERE NOT EXISTS (SELECT 1 FROM embed_queue WHERE source = 'audio' AND source_id = new.transcript_id);
END;
CREATE TRIGGER memory_forget_audio AFTER DELETE ON audio_transcripts BEGIN
    DELETE FROM memory_chunks WHERE source = 'audio' AND source_id = old.transcript_id;
    DELETE FROM embed_queue WHERE source = 'audio' AND source_id = old.transcript_id;
END;

-- memory_chunks.source gains 'audio'. Only a CHECK constraint is widened, which
-- changes nothing stored, so the table's definition is edited in place (SQLite's
-- documented procedure for such changes) rather than copying every vector; the
-- migration runner bumps the schema cookie afterwards so connections reload it.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, '''chat'', ''summary'')', '''chat'', ''summary'', ''audio'')')
 WHERE type = 'table' AND name = 'memory_chunks';
PRAGMA writable_schema = OFF;
