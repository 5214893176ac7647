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
