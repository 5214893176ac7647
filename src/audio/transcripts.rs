//! The `audio_transcripts` stream: what listen mode heard, one row per
//! VAD-gated chunk, with its source (the microphone is "you", the computer's
//! own output is "others"), its time, its confidence and the window in focus.
//! Plain functions over a connection, like the other streams' queries; only the
//! store worker calls the writing ones (`transcript_write` is the listen
//! worker's command). Rows are searched through FTS5 and embedded by the
//! triggers every stream has; retention drops old text and, after its own
//! number of days, kept audio; deleting rows removes their files, and files no
//! row keeps are removed as orphans. Kept audio is sealed (`seal_at_open` seals
//! files from before sealing).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::mic::Source;

/// One transcribed chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct AudioTranscript {
    pub transcript_id: i64,
    pub source: Source,
    pub started_at_millis: i64,
    pub ended_at_millis: i64,
    pub text: String,
    pub confidence: f32,
    /// The window in focus when the chunk began (empty: none, or cowork's own).
    pub app: String,
    pub title: String,
    /// The chunk's WAV under `audio/` in the data directory, when audio is kept.
    pub audio_file: Option<String>,
}

/// The folder kept audio goes to.
pub fn audio_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("audio")
}

/// The file name a transcript's audio is kept under: a WAV sealed with the
/// database's key (`crate::sealed`; `cowork` 0.1 before encryption wrote bare `.wav`).
pub fn audio_file_name(transcript_id: i64) -> String {
    format!("{transcript_id}.wav.sealed")
}

/// A kept audio file's name as the database may hold it: sealed, or a bare
/// WAV from before encryption. Never a path.
fn is_audio_file_name(name: &str) -> bool {
    !name.contains(['/', '\\']) && (name.ends_with(".wav") || name.ends_with(".wav.sealed"))
}

pub fn insert(conn: &Connection, t: &AudioTranscript) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO audio_transcripts (transcript_id, source, started_at_ms, ended_at_ms, text, confidence, app, title, audio_file)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (transcript_id) DO NOTHING",
    )?
    .execute(params![
        t.transcript_id,
        t.source.as_str(),
        t.started_at_millis,
        t.ended_at_millis,
        t.text,
        f64::from(t.confidence),
        t.app,
        t.title,
        t.audio_file
    ])?;
    Ok(())
}

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AudioTranscript> {
    let source: String = row.get(1)?;
    Ok(AudioTranscript {
        transcript_id: row.get(0)?,
        source: Source::parse(&source).unwrap_or(Source::Microphone),
        started_at_millis: row.get(2)?,
        ended_at_millis: row.get(3)?,
        text: row.get(4)?,
        confidence: row.get::<_, f64>(5)? as f32,
        app: row.get(6)?,
        title: row.get(7)?,
        audio_file: row.get(8)?,
    })
}

const COLUMNS: &str = "transcript_id, source, started_at_ms, ended_at_ms, text, confidence, app, title, audio_file";

/// Transcripts overlapping `[since_millis, until_millis)`, oldest first.
pub fn between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<AudioTranscript>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM audio_transcripts WHERE started_at_ms < ?2 AND ended_at_ms >= ?1 ORDER BY started_at_ms"
    ))?;
    let rows = stmt.query_map(params![since_millis, until_millis], from_row)?;
    rows.collect()
}

pub fn get(conn: &Connection, transcript_id: i64) -> rusqlite::Result<Option<AudioTranscript>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM audio_transcripts WHERE transcript_id = ?1"))?
        .query_row(params![transcript_id], from_row)
        .optional()
}

/// Deletes the transcripts overlapping `[since, until)`; returns how many
/// went and the audio files they kept (for the caller to remove once the
/// deletion committed).
pub fn delete_range(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<(usize, Vec<String>)> {
    let files = conn
        .prepare_cached("SELECT audio_file FROM audio_transcripts WHERE started_at_ms < ?2 AND ended_at_ms >= ?1 AND audio_file IS NOT NULL")?
        .query_map(params![since_millis, until_millis], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let deleted = conn.execute(
        "DELETE FROM audio_transcripts WHERE started_at_ms < ?2 AND ended_at_ms >= ?1",
        params![since_millis, until_millis],
    )?;
    Ok((deleted, files))
}

/// Retention of the transcripts: deletes those that ended before `cutoff`;
/// returns how many and their audio files.
pub fn delete_ended_before(conn: &Connection, cutoff_millis: i64) -> rusqlite::Result<(usize, Vec<String>)> {
    let files = conn
        .prepare_cached("SELECT audio_file FROM audio_transcripts WHERE ended_at_ms < ?1 AND audio_file IS NOT NULL")?
        .query_map(params![cutoff_millis], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let deleted = conn.execute("DELETE FROM audio_transcripts WHERE ended_at_ms < ?1", params![cutoff_millis])?;
    Ok((deleted, files))
}

/// Retention of the kept audio (shorter than the text's): forgets the files
/// of chunks that ended before `cutoff`; returns the files to remove.
pub fn release_audio_before(conn: &Connection, cutoff_millis: i64) -> rusqlite::Result<Vec<String>> {
    let files = conn
        .prepare_cached("SELECT audio_file FROM audio_transcripts WHERE audio_file IS NOT NULL AND ended_at_ms < ?1")?
        .query_map(params![cutoff_millis], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    conn.execute("UPDATE audio_transcripts SET audio_file = NULL WHERE audio_file IS NOT NULL AND ended_at_ms < ?1", params![cutoff_millis])?;
    Ok(files)
}

/// Every audio file a row still points at.
pub fn kept_files(conn: &Connection) -> rusqlite::Result<std::collections::HashSet<String>> {
    conn.prepare_cached("SELECT audio_file FROM audio_transcripts WHERE audio_file IS NOT NULL")?
        .query_map([], |r| r.get(0))?
        .collect()
}

/// Seals kept audio an older cowork wrote as bare WAV files (issue 18): each
/// is sealed under its new name, its row points there, and the WAV is zeroed
/// and removed. Returns how many were sealed; one that fails stays as it was.
pub fn seal_plain_files(conn: &Connection, data_dir: &Path, key: &crate::sealed::SealKey) -> rusqlite::Result<usize> {
    let plain: Vec<(i64, String)> = conn
        .prepare("SELECT transcript_id, audio_file FROM audio_transcripts WHERE audio_file LIKE '%.wav'")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let dir = audio_dir(data_dir);
    let mut replaced = Vec::new();
    for (transcript_id, name) in plain {
        if !is_audio_file_name(&name) {
            continue;
        }
        let sealed_name = audio_file_name(transcript_id);
        let moved = std::fs::read(dir.join(&name)).map_err(anyhow::Error::from).and_then(|bytes| crate::sealed::write(&dir.join(&sealed_name), key, &bytes));
        match moved {
            Ok(()) => {
                conn.execute("UPDATE audio_transcripts SET audio_file = ?1 WHERE transcript_id = ?2", params![sealed_name, transcript_id])?;
                replaced.push(name);
            }
            Err(err) => tracing::warn!("kept audio {name} stays unsealed: {err:#}"),
        }
    }
    if replaced.is_empty() {
        return Ok(0);
    }
    // The rows and the sealed files durable before a WAV goes: a power cut
    // must not leave a row naming a file that is gone.
    conn.query_row("PRAGMA wal_checkpoint(FULL)", [], |_| Ok(()))?;
    if let Ok(folder) = std::fs::File::open(&dir) {
        let _ = folder.sync_all();
    }
    remove_files(data_dir, &replaced);
    Ok(replaced.len())
}

/// Removes files under `audio/` (only names this module makes), each
/// overwritten with zeros first so the audio does not linger in free blocks
/// of a filesystem that reuses them in place.
pub fn remove_files(data_dir: &Path, files: &[String]) -> usize {
    let dir = audio_dir(data_dir);
    let mut removed = 0;
    for name in files {
        // Only a bare "<id>.wav[.sealed]": a name from the database never leaves the folder.
        if !is_audio_file_name(name) {
            continue;
        }
        let path = dir.join(name);
        if let Ok(meta) = std::fs::metadata(&path)
            && let Ok(file) = std::fs::OpenOptions::new().write(true).open(&path)
        {
            let _ = std::io::Write::write_all(&mut &file, &vec![0u8; meta.len() as usize]);
            let _ = file.sync_data();
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Files in `audio/` no row points at and older than `grace` (a chunk whose
/// row was refused or deleted while its file was being written).
pub fn orphan_files(data_dir: &Path, kept: &std::collections::HashSet<String>, grace: std::time::Duration) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(audio_dir(data_dir)) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= grace))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_audio_file_name(name) && !kept.contains(name))
        .collect()
}

/// A chunk listen mode heard, for the next batch; dropped with its audio
/// file when a deletion in this run covered its time.
pub fn transcript_write(transcript: AudioTranscript) -> crate::store::StoreCommand {
    let file = transcript.audio_file.clone();
    crate::store::StoreCommand::write_during("transcript", (transcript.started_at_millis, transcript.ended_at_millis), move |tx| insert(tx, &transcript)).or_when_dropped(move |dir| {
        if let Some(file) = file {
            remove_files(dir, &[file]);
        }
    })
}

/// At open: kept audio written before encryption is sealed like the rest.
pub fn seal_at_open(writer: &mut crate::store::Writer<'_>) -> anyhow::Result<()> {
    let Some(dir) = writer.data_dir() else { return Ok(()) };
    let Some(path) = writer.conn().path().map(std::path::PathBuf::from) else { return Ok(()) };
    if let Ok(key) = crate::sealed::SealKey::for_database(&path) {
        match seal_plain_files(writer.conn(), &dir, &key) {
            Ok(0) => {}
            Ok(sealed) => tracing::info!(sealed, "sealed kept audio written before encryption"),
            Err(err) => tracing::warn!("cannot seal kept audio written before encryption: {err}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, source: Source, start: i64, text: &str, file: Option<&str>) -> AudioTranscript {
        AudioTranscript {
            transcript_id: id,
            source,
            started_at_millis: start,
            ended_at_millis: start + 3_000,
            text: text.into(),
            confidence: 0.8,
            app: "zoom".into(),
            title: "Weekly sync".into(),
            audio_file: file.map(str::to_owned),
        }
    }

    #[test]
    fn transcripts_are_stored_searchable_queued_for_embedding_and_deleted_with_their_chunks() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        insert(&conn, &row(1, Source::Microphone, 10_000, "I will send the budget tomorrow", None)).unwrap();
        insert(&conn, &row(2, Source::SystemAudio, 20_000, "please review the quarterly budget", Some("2.wav"))).unwrap();
        assert_eq!(get(&conn, 2).unwrap().unwrap().source, Source::SystemAudio);
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue WHERE source = 'audio'", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 2);
        let fts: i64 = conn.query_row("SELECT count(*) FROM audio_fts WHERE audio_fts MATCH 'budget'", [], |r| r.get(0)).unwrap();
        assert_eq!(fts, 2);
        assert_eq!(between(&conn, 0, 15_000).unwrap().iter().map(|t| t.transcript_id).collect::<Vec<_>>(), vec![1]);
        let (deleted, files) = delete_range(&conn, 19_000, 30_000).unwrap();
        assert_eq!((deleted, files), (1, vec!["2.wav".to_owned()]));
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue WHERE source = 'audio'", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 1, "the deleted row left the embedding queue");
        let fts: i64 = conn.query_row("SELECT count(*) FROM audio_fts WHERE audio_fts MATCH 'quarterly'", [], |r| r.get(0)).unwrap();
        assert_eq!(fts, 0);
    }

    #[test]
    fn kept_audio_has_its_own_retention_and_files_never_leave_the_folder() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(audio_dir(dir.path())).unwrap();
        for id in [1, 2] {
            std::fs::write(audio_dir(dir.path()).join(audio_file_name(id)), b"RIFF....").unwrap();
        }
        std::fs::write(dir.path().join("keep.wav"), b"outside").unwrap();
        insert(&conn, &row(1, Source::Microphone, 0, "old", Some(&audio_file_name(1)))).unwrap();
        insert(&conn, &row(2, Source::Microphone, 100_000, "new", Some(&audio_file_name(2)))).unwrap();
        let released = release_audio_before(&conn, 50_000).unwrap();
        assert_eq!(released, vec!["1.wav.sealed".to_owned()]);
        assert_eq!(remove_files(dir.path(), &released), 1);
        assert_eq!(remove_files(dir.path(), &["../keep.wav".to_owned()]), 0);
        assert!(dir.path().join("keep.wav").exists());
        assert_eq!(get(&conn, 1).unwrap().unwrap().audio_file, None, "the text stays, its audio went");
        assert!(!audio_dir(dir.path()).join("1.wav.sealed").exists());
        // An orphan, sealed or from before sealing.
        std::fs::write(audio_dir(dir.path()).join("9.wav"), b"orphan").unwrap();
        let mut orphans = orphan_files(dir.path(), &kept_files(&conn).unwrap(), std::time::Duration::ZERO);
        assert_eq!(orphans, vec!["9.wav".to_owned()]);
        std::fs::write(audio_dir(dir.path()).join("8.wav.sealed"), b"orphan").unwrap();
        orphans = orphan_files(dir.path(), &kept_files(&conn).unwrap(), std::time::Duration::ZERO);
        orphans.sort();
        assert_eq!(orphans, vec!["8.wav.sealed".to_owned(), "9.wav".to_owned()]);

        // A bare WAV an older cowork kept is sealed and its row follows.
        std::fs::write(audio_dir(dir.path()).join("3.wav"), b"RIFF old speech").unwrap();
        insert(&conn, &row(3, Source::Microphone, 200_000, "older", Some("3.wav"))).unwrap();
        let key = crate::sealed::SealKey::from_bytes(&[5; 32]);
        assert_eq!(seal_plain_files(&conn, dir.path(), &key).unwrap(), 1);
        assert!(!audio_dir(dir.path()).join("3.wav").exists());
        assert_eq!(get(&conn, 3).unwrap().unwrap().audio_file.as_deref(), Some("3.wav.sealed"));
        assert_eq!(crate::sealed::read(&audio_dir(dir.path()).join("3.wav.sealed"), &key).unwrap(), b"RIFF old speech");
        assert_eq!(seal_plain_files(&conn, dir.path(), &key).unwrap(), 0);
    }
}
