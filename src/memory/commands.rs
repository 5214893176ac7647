//! What memory asks the store to do: pin and unpin facts of hot memory
//! (reading back hand edits of USER.md/MEMORY.md first), pin sources to a
//! thread, and show the results (`MemoryEvent`).

use rusqlite::Connection;

use super::events::MemoryEvent;
use super::{Source, hot, rag};
use crate::runtime::EventSink;
use crate::store::{StoreCommand, Writer};

/// Pins a fact (≤ 320 characters) into USER.md or MEMORY.md; `show` hears the list.
pub fn add_fact(file: hot::File, text: String, pinned_by: String, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run(format!("pin a fact by {pinned_by}: {text}"), move |writer| edit(writer, &show, |conn| hot::add(conn, file, &text, &pinned_by, crate::ids::now_millis()).map(|_| ())))
}

/// Unpins a fact; `show` hears the list.
pub fn remove_fact(memory_id: i64, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run("unpin a fact", move |writer| edit(writer, &show, |conn| hot::remove(conn, memory_id).map(|_| ()).map_err(|e| e.to_string())))
}

/// A change the user confirmed in conversation (`corrections`): the fact is
/// pinned, replaced or removed as theirs, and a replaced or removed fact's
/// sentences leave the summaries that stated it, in one transaction. `show`
/// hears the list; the notice says what changed.
pub fn apply_change(change: super::corrections::Change, show: EventSink<MemoryEvent>) -> StoreCommand {
    use super::corrections::Change;
    StoreCommand::run(format!("memory change: {}", change.describe()), move |writer| {
        let mut pruned = None;
        edit(writer, &show, |conn| {
            let now = crate::ids::now_millis();
            let tx = crate::store::write_transaction(conn).map_err(|e| e.to_string())?;
            let old = match &change {
                Change::Add { file, text } => {
                    hot::add(&tx, *file, text, "user", now)?;
                    None
                }
                Change::Replace { memory_id, old, new } => {
                    let new = hot::clean(new)?;
                    let changed = tx
                        .execute("UPDATE hot_memory SET text = ?1, pinned_by = 'user', created_at_ms = ?2 WHERE memory_id = ?3", rusqlite::params![new, now, memory_id])
                        .map_err(|e| e.to_string())?;
                    if changed == 0 {
                        return Err(format!("“{old}” is no longer pinned: nothing was replaced"));
                    }
                    Some(old.clone())
                }
                Change::Remove { memory_id, text } => {
                    hot::remove(&tx, *memory_id).map_err(|e| e.to_string())?;
                    Some(text.clone())
                }
            };
            let changed = match old {
                Some(old) => prune_summaries(&tx, &old).map_err(|e| e.to_string())?,
                None => 0,
            };
            tx.commit().map_err(|e| e.to_string())?;
            pruned = Some(changed);
            Ok(())
        });
        // Not made (edit() said why): nothing to report.
        let Some(pruned) = pruned else { return };
        let summaries = match pruned {
            0 => String::new(),
            1 => "; it also left 1 summary".to_owned(),
            n => format!("; it also left {n} summaries"),
        };
        writer.notice(format!("Memory: {}{summaries}", change.describe()));
        writer.wrote();
    })
}

/// Takes the sentences that state `fact` out of every summary (one left
/// empty goes); how many summaries changed.
fn prune_summaries(conn: &Connection, fact: &str) -> rusqlite::Result<usize> {
    let summaries: Vec<(i64, String)> = conn.prepare("SELECT rowid, text FROM observations")?.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    let mut changed = 0;
    for (rowid, text) in summaries {
        let Some(kept) = super::corrections::without_fact(&text, fact) else { continue };
        changed += 1;
        if kept.is_empty() {
            conn.execute("DELETE FROM observations WHERE rowid = ?1", [rowid])?;
        } else {
            conn.execute("UPDATE observations SET text = ?1 WHERE rowid = ?2", rusqlite::params![kept, rowid])?;
        }
    }
    Ok(changed)
}

/// Works out the profile proposals on the store's connection; `show` hears them.
pub fn profile_proposals(show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run("profile proposals", move |writer| send_proposals(writer, &show))
}

/// The user dismissed a proposed profile line: it is not proposed again. `show` hears the list left.
pub fn dismiss_proposal(text: String, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run("dismiss a profile proposal", move |writer| {
        let conn = writer.conn();
        let key = super::profile::DISMISSED_KEY;
        let mut dismissed: Vec<String> = crate::store::setting(conn, key).ok().flatten().and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default();
        if !dismissed.contains(&text) {
            dismissed.push(text);
        }
        let json = serde_json::to_string(&dismissed).unwrap_or_default();
        if let Err(err) = crate::store::set_setting(conn, key, &json, crate::ids::now_millis()) {
            writer.notice(format!("the dismissal was not kept: {err}"));
        }
        send_proposals(writer, &show);
    })
}

fn send_proposals(writer: &Writer<'_>, show: &EventSink<MemoryEvent>) {
    match super::profile::proposals(writer.conn(), crate::ids::now_millis()) {
        Ok(list) => {
            show.send(MemoryEvent::ProfileProposals(list));
        }
        Err(err) => writer.notice(format!("cannot suggest profile lines: {err}")),
    }
}

/// Reads back hand edits of USER.md/MEMORY.md, rewrites them, and shows the list.
pub fn load_facts(show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run("load hot memory", move |writer| edit(writer, &show, |_| Ok(())))
}

/// A hot-memory change: first read back hand edits of USER.md/MEMORY.md
/// (so rewriting them never loses one), then `change`, then rewrite both
/// files and show the list.
fn edit(writer: &mut Writer<'_>, show: &EventSink<MemoryEvent>, change: impl FnOnce(&Connection) -> Result<(), String>) {
    let now = crate::ids::now_millis();
    let dir = writer.data_dir();
    if let Some(dir) = &dir {
        for (file, texts, problems) in hot::edited(writer.conn(), dir).unwrap_or_default() {
            for problem in problems {
                writer.notice(format!("{}: {problem}", file.file_name()));
            }
            if let Err(err) = hot::replace(writer.conn(), file, &texts, now) {
                writer.notice(format!("{} was not read back: {err}", file.file_name()));
            }
        }
    }
    if let Err(error) = change(writer.conn()) {
        writer.notice(format!("hot memory: {error}"));
    }
    if let Some(dir) = &dir
        && let Err(err) = hot::write_mirrors(writer.conn(), dir, now)
    {
        writer.notice(format!("cannot write USER.md/MEMORY.md: {err:#}"));
    }
    show.send(MemoryEvent::HotMemory(hot::facts(writer.conn()).unwrap_or_default()));
}

/// Pins a source row's chunks to a thread (chunking it now if still queued); `show` hears the thread's pins.
pub fn pin(thread_id: i64, source: Source, source_id: i64, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run(format!("pin {} {source_id} to thread {thread_id}", source.as_str()), move |writer| {
        let pinned = writer.transaction(|tx| Ok(rag::pin_source(tx, thread_id, source, source_id, crate::ids::now_millis())?));
        match pinned {
            Ok(0) if !has_chunks(writer.conn(), source, source_id) => writer.notice("that item is no longer in your history, so it cannot be pinned"),
            Ok(_) => writer.wrote(), // a row cut into chunks just now waits for its vectors
            Err(err) => writer.notice(format!("cannot pin: {err}")),
        }
        send_pins(writer, thread_id, &show);
    })
}

/// Takes a source row's chunks off a thread; `show` hears the thread's pins.
pub fn unpin(thread_id: i64, source: Source, source_id: i64, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run(format!("unpin {} {source_id} from thread {thread_id}", source.as_str()), move |writer| {
        if let Err(err) = rag::unpin_source(writer.conn(), thread_id, source, source_id) {
            writer.notice(format!("cannot unpin: {err}"));
        }
        send_pins(writer, thread_id, &show);
    })
}

/// What is pinned to a thread, when it is opened.
pub fn load_pins(thread_id: i64, show: EventSink<MemoryEvent>) -> StoreCommand {
    StoreCommand::run(format!("load pins {thread_id}"), move |writer| send_pins(writer, thread_id, &show))
}

fn send_pins(writer: &Writer<'_>, thread_id: i64, show: &EventSink<MemoryEvent>) {
    match rag::pinned(writer.conn(), thread_id) {
        Ok(items) => {
            show.send(MemoryEvent::ThreadPins { thread_id, items });
        }
        Err(err) => writer.notice(format!("cannot load the thread's pins: {err}")),
    }
}

/// Whether a source row has been cut into chunks.
fn has_chunks(conn: &Connection, source: Source, source_id: i64) -> bool {
    conn.query_row("SELECT 1 FROM memory_chunks WHERE source = ?1 AND source_id = ?2 LIMIT 1", rusqlite::params![source.as_str(), source_id], |_| Ok(()))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::corrections::Change;

    #[test]
    fn a_confirmed_change_replaces_or_removes_the_fact_and_takes_it_out_of_summaries() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        let dana = hot::add(&conn, hot::File::User, "My manager is Dana Reyes.", "user", 1).unwrap();
        let observation = |start: i64, text: &str| crate::memory::Observation { kind: "activity".into(), period_start_millis: start, period_end_millis: start + 1, text: text.into(), model: None };
        crate::memory::insert_observation(&conn, &observation(0, "Sam met Dana Reyes, his manager. He fixed the ETL job."), 0).unwrap();
        crate::memory::insert_observation(&conn, &observation(10, "Dana Reyes is Sam's manager."), 0).unwrap();
        crate::memory::insert_observation(&conn, &observation(20, "Sam walked the dog."), 0).unwrap();
        let replace = Change::Replace { memory_id: dana, old: "My manager is Dana Reyes.".into(), new: "My manager is Marta Kowalski.".into() };
        apply_change(replace, EventSink::ignored()).run_on(&conn).unwrap();
        let facts = hot::facts(&conn).unwrap();
        assert_eq!(facts.iter().map(|f| (f.text.as_str(), f.pinned_by.as_str())).collect::<Vec<_>>(), [("My manager is Marta Kowalski.", "user")]);
        let summaries: Vec<String> = conn.prepare("SELECT text FROM observations ORDER BY period_start_ms").unwrap().query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(summaries, ["He fixed the ETL job.", "Sam walked the dog."], "the sentence that stated it went, and a summary left empty with it");
        // The keyword index follows the rewritten text, and is whole (it was damaged by two triggers updating it: migration 19).
        conn.execute("INSERT INTO observation_fts (observation_fts) VALUES ('integrity-check')", []).unwrap();
        let found: Vec<i64> = conn.prepare("SELECT rowid FROM observation_fts WHERE observation_fts MATCH 'ETL'").unwrap().query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(found.len(), 1);
        let gone: i64 = conn.query_row("SELECT count(*) FROM observation_fts WHERE observation_fts MATCH 'Dana'", [], |r| r.get(0)).unwrap();
        assert_eq!(gone, 0, "the old words are out of the index");
        apply_change(Change::Remove { memory_id: facts[0].memory_id, text: facts[0].text.clone() }, EventSink::ignored()).run_on(&conn).unwrap();
        assert!(hot::facts(&conn).unwrap().is_empty());
        apply_change(Change::Add { file: hot::File::Memory, text: "Reports go out on Fridays.".into() }, EventSink::ignored()).run_on(&conn).unwrap();
        assert_eq!(hot::facts(&conn).unwrap()[0].pinned_by, "user", "confirmed by the user: theirs");
    }
}
