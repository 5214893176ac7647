//! Chat threads and messages, in SQL: written by the store worker as the
//! agent answers, read back by the chat view, search and export.

use rusqlite::{Connection, Row, params};

use crate::records::{ChatMessage, ChatThread, MessageStatus, Role, redact_private};
use crate::runtime::EventSink;
use crate::store::{StoreCommand, fts_phrase};

/// What the chat's loads tell the UI.
#[derive(Clone, Debug)]
pub enum ChatEvent {
    ThreadsLoaded(Vec<ChatThread>),
    MessagesLoaded { thread_id: i64, messages: Vec<ChatMessage> },
    /// A conversation was deleted (and purged from disk), with this many messages.
    ThreadDeleted { thread_id: i64, messages: usize },
}

/// Message ids whose text matches an FTS5 query, best first.
pub fn search_messages(conn: &Connection, query: &str, limit: usize) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare_cached(
        "SELECT m.message_id, m.thread_id, m.role, m.content, m.context, m.status, m.created_at_ms, m.ask_id, m.provider, m.cost_usd, m.citations, m.refusal
         FROM message_fts f JOIN chat_messages m ON m.message_id = f.rowid
         WHERE message_fts MATCH ?1 ORDER BY bm25(message_fts) LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![fts_phrase(query), limit as i64], message_from_row)?;
    rows.collect()
}

pub fn upsert_thread(conn: &Connection, thread: &ChatThread, created_at_millis: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO chat_threads (thread_id, title, created_at_ms, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (thread_id) DO UPDATE SET updated_at_ms = max(updated_at_ms, excluded.updated_at_ms)",
    )?
    .execute(params![thread.thread_id, redact_private(&thread.title), created_at_millis, thread.updated_at_millis])?;
    Ok(())
}

pub fn threads(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<ChatThread>> {
    let mut stmt = conn.prepare_cached(
        "SELECT thread_id, title, updated_at_ms FROM chat_threads ORDER BY updated_at_ms DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit as i64], |row| {
        Ok(ChatThread { thread_id: row.get(0)?, title: row.get(1)?, updated_at_millis: row.get(2)? })
    })?;
    rows.collect()
}

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<ChatMessage> {
    let role: String = row.get(2)?;
    let status: String = row.get(5)?;
    Ok(ChatMessage {
        message_id: row.get(0)?,
        thread_id: row.get(1)?,
        role: Role::parse(&role).unwrap_or(Role::Assistant),
        content: row.get(3)?,
        context: row.get(4)?,
        status: MessageStatus::parse(&status).unwrap_or(MessageStatus::Done),
        created_at_millis: row.get(6)?,
        ask_id: row.get(7)?, provider: row.get(8)?, cost_usd: row.get(9)?,
        citations: row.get(10)?, refusal: row.get(11)?,
    })
}

/// Inserts a message, or replaces its content and status (an answer is
/// written when it finishes; a retry of the same write is harmless).
/// `<private>…</private>` spans are never stored: the model saw them in the
/// turn they were typed in, and nothing afterwards does.
pub fn upsert_message(conn: &Connection, message: &ChatMessage, model: Option<&str>) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO chat_messages (message_id, thread_id, role, content, context, status, model, created_at_ms, ask_id, provider, cost_usd, citations, refusal)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
         ON CONFLICT (message_id) DO UPDATE SET content = excluded.content, status = excluded.status,
             context = coalesce(excluded.context, context), provider = coalesce(excluded.provider, provider),
             cost_usd = coalesce(excluded.cost_usd, cost_usd), model = coalesce(excluded.model, model),
             citations = coalesce(excluded.citations, citations), refusal = excluded.refusal",
    )?
    .execute(params![
        message.message_id,
        message.thread_id,
        message.role.as_str(),
        redact_private(&message.content),
        message.context.as_deref().map(redact_private),
        message.status.as_str(),
        model,
        message.created_at_millis,
        message.ask_id,
        message.provider,
        message.cost_usd,
        message.citations,
        message.refusal,
    ])?;
    conn.prepare_cached("UPDATE chat_threads SET updated_at_ms = max(updated_at_ms, ?2) WHERE thread_id = ?1")?
        .execute(params![message.thread_id, message.created_at_millis])?;
    Ok(())
}

/// Stores (or replaces) the user's rating of an answer.
pub fn set_feedback(conn: &Connection, message_id: i64, rating: i8, reason: &str, at_millis: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO feedback (message_id, rating, reason, at_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating, reason = excluded.reason, at_ms = excluded.at_ms",
        params![message_id, rating.signum(), reason.trim(), at_millis],
    )?;
    Ok(())
}

/// A thread's messages, oldest first.
pub fn messages(conn: &Connection, thread_id: i64) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare_cached(
        "SELECT message_id, thread_id, role, content, context, status, created_at_ms, ask_id, provider, cost_usd, citations, refusal
         FROM chat_messages WHERE thread_id = ?1 ORDER BY created_at_ms ASC, message_id ASC",
    )?;
    let rows = stmt.query_map(params![thread_id], message_from_row)?;
    rows.collect()
}

/// Every chat message written in `[since_millis, until_millis)`, oldest first (for export).
pub fn messages_between(conn: &Connection, since_millis: i64, until_millis: i64) -> rusqlite::Result<Vec<ChatMessage>> {
    let mut stmt = conn.prepare(
        "SELECT message_id, thread_id, role, content, context, status, created_at_ms, ask_id, provider, cost_usd, citations, refusal
         FROM chat_messages WHERE created_at_ms >= ?1 AND created_at_ms < ?2 ORDER BY created_at_ms ASC",
    )?;
    let rows = stmt.query_map(params![since_millis, until_millis], message_from_row)?;
    rows.collect()
}

/// A thread created or touched, for the next batch.
pub fn thread_write(thread: ChatThread, created_at_millis: i64) -> StoreCommand {
    StoreCommand::write("thread", move |tx| upsert_thread(tx, &thread, created_at_millis))
}

/// A message written or rewritten (an answer as it streams), for the next batch.
pub fn message_write(message: ChatMessage, model: Option<String>) -> StoreCommand {
    StoreCommand::write("message", move |tx| upsert_message(tx, &message, model.as_deref()))
}

/// 👍 (+1) or 👎 (-1) on an answer, with why.
pub fn feedback(message_id: i64, rating: i8, reason: String) -> StoreCommand {
    StoreCommand::run(format!("feedback {rating} on {message_id}: {reason}"), move |writer| {
        if let Err(err) = set_feedback(writer.conn(), message_id, rating, &reason, crate::ids::now_millis()) {
            writer.notice(format!("feedback was not saved: {err}"));
        }
    })
}

/// The newest threads, for the chat's list.
pub fn load_threads(sink: EventSink<ChatEvent>) -> StoreCommand {
    StoreCommand::run("load threads", move |writer| match threads(writer.conn(), 200) {
        Ok(threads) => {
            sink.send(ChatEvent::ThreadsLoaded(threads));
        }
        Err(err) => writer.notice(format!("cannot load chat threads: {err}")),
    })
}

/// A thread's messages, when it is opened.
pub fn load_messages(thread_id: i64, sink: EventSink<ChatEvent>) -> StoreCommand {
    StoreCommand::run(format!("load messages {thread_id}"), move |writer| match messages(writer.conn(), thread_id) {
        Ok(messages) => {
            sink.send(ChatEvent::MessagesLoaded { thread_id, messages });
        }
        Err(err) => writer.notice(format!("cannot load messages: {err}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_db as db;

    #[test]
    fn messages_round_trip_and_fts_follows_updates() {
        let conn = db();
        let thread = ChatThread { thread_id: 10, title: "t".into(), updated_at_millis: 1 };
        upsert_thread(&conn, &thread, 1).unwrap();
        let mut answer = ChatMessage {
            message_id: 11,
            thread_id: 10,
            role: Role::Assistant,
            content: "draft".into(),
            context: None,
            status: MessageStatus::Stopped,
            created_at_millis: 2,
            ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
        };
        upsert_message(&conn, &answer, Some("m")).unwrap();
        answer.content = "the meeting moved to Thursday".into();
        answer.status = MessageStatus::Done;
        upsert_message(&conn, &answer, Some("m")).unwrap();
        assert_eq!(messages(&conn, 10).unwrap(), vec![answer]);
        assert_eq!(search_messages(&conn, "thursday", 5).unwrap().len(), 1);
        assert!(search_messages(&conn, "draft", 5).unwrap().is_empty());
    }

    #[test]
    fn a_private_span_is_never_stored_in_a_message_its_context_or_a_thread_title() {
        let conn = db();
        let thread = ChatThread { thread_id: 20, title: "wifi <private>hunter2</private>".into(), updated_at_millis: 1 };
        upsert_thread(&conn, &thread, 1).unwrap();
        let asked = ChatMessage {
            message_id: 21,
            thread_id: 20,
            role: Role::User,
            content: "the wifi password is <private>hunter2</private>, write it on the card".into(),
            context: Some("typed: <private>hunter2".into()),
            status: MessageStatus::Done,
            created_at_millis: 2,
            ask_id: None, provider: None, cost_usd: None, citations: None, refusal: false,
        };
        upsert_message(&conn, &asked, None).unwrap();
        let stored = &messages(&conn, 20).unwrap()[0];
        assert_eq!(stored.content, "the wifi password is , write it on the card");
        assert_eq!(stored.context.as_deref(), Some("typed: "));
        assert_eq!(threads(&conn, 10).unwrap()[0].title, "wifi ");
        assert!(search_messages(&conn, "hunter2", 5).unwrap().is_empty());
        let raw: i64 = conn.query_row("SELECT count(*) FROM chat_messages WHERE content LIKE '%hunter2%' OR context LIKE '%hunter2%'", [], |r| r.get(0)).unwrap();
        assert_eq!(raw, 0);
    }
}
