//! The memory and context family, all safe: `search_memory` (keyword search
//! over every captured stream and the chat, fused with recall by meaning from
//! the search worker), `recent_activity`, `current_window`, `read_session`
//! (what was typed and copied in one session), `remember` (a hot-memory fact
//! of at most 320 characters, written through the store worker) and
//! `list_pins` (hot memory and this chat's pinned sources).
//!
//! Everything these return is captured text: the agent marks it as data
//! (`Origin::Capture` / `Origin::Memory`), never as instructions.

use std::time::Duration;

use crossbeam_channel::{Sender, bounded};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::ToolOutput;
use crate::ids::{format_duration_millis, format_when};
use crate::memory::hybrid::ChunkHit;
use crate::memory::rag::Citation;
use crate::memory::search::{Filters, Stream};
use crate::memory::search_worker::SearchCommand;
use crate::store::StoreCommand;

pub const TOOLS: [&str; 6] = ["search_memory", "recent_activity", "current_window", "read_session", "remember", "list_pins"];

/// How long `search_memory` waits for recall by meaning before answering with keywords alone.
const RECALL_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_LIMIT: u64 = 8;
const MAX_LIMIT: u64 = 50;

/// Recall by meaning: the search worker in the app, the served memory's
/// own indexes in `cowork mcp serve`. None: it did not answer in time.
pub trait Recall {
    fn recall(&self, query: &str, namespaces: Vec<crate::memory::Namespace>, k: usize) -> Option<Result<Vec<ChunkHit>, String>>;
}

impl Recall for Sender<SearchCommand> {
    fn recall(&self, query: &str, namespaces: Vec<crate::memory::Namespace>, k: usize) -> Option<Result<Vec<ChunkHit>, String>> {
        let (reply, answer) = bounded(1);
        self.send_timeout(SearchCommand::Recall { query: query.to_owned(), namespaces, k, reply }, RECALL_TIMEOUT).ok()?;
        answer.recv_timeout(RECALL_TIMEOUT).ok()
    }
}

/// What the family reads and writes through.
pub struct MemoryEnv<'a> {
    /// A read-only connection to cowork.db.
    pub conn: &'a Connection,
    /// Recall by meaning (None: keywords only).
    pub recall: Option<&'a dyn Recall>,
    /// The privacy firewall's rules, applied to what was recorded before
    /// they changed (`cowork mcp serve`); None: what is stored is shown.
    pub withheld: Option<&'a crate::capture::firewall::Rules>,
    /// The store worker, for `remember`, and who is shown memory's new state (None: refused).
    pub store: Option<(&'a Sender<StoreCommand>, crate::runtime::EventSink<crate::memory::events::MemoryEvent>)>,
    /// The chat the call belongs to, for its pins.
    pub thread_id: Option<i64>,
    pub now_millis: i64,
}

pub fn schema(tool: &str) -> Option<Value> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    let limit = json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT});
    Some(match tool {
        "search_memory" => object(
            json!({
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "stream": {"type": "string", "enum": ["window", "typing", "clipboard", "chat", "summary", "audio", "screen"]},
                "app": {"type": "string"},
                "since_minutes": {"type": "integer", "minimum": 1},
                "limit": limit
            }),
            &["query"],
        ),
        "recent_activity" => object(json!({"minutes": {"type": "integer", "minimum": 1, "maximum": 10080}, "limit": limit}), &[]),
        "current_window" | "list_pins" => object(json!({}), &[]),
        "read_session" => object(json!({"session_id": {"type": "integer"}}), &["session_id"]),
        "remember" => object(json!({"text": {"type": "string", "minLength": 1, "maxLength": 320}}), &["text"]),
        _ => return None,
    })
}

/// Runs a call whose arguments were checked against `schema`.
pub fn run(tool: &str, args: &Value, env: &MemoryEnv<'_>) -> ToolOutput {
    let without_sources = |text: String| (text, Vec::new());
    let result = match tool {
        "search_memory" => search_memory(args, env),
        "recent_activity" => recent_activity(args, env).map(without_sources),
        "current_window" => current_window(env).map(without_sources),
        "read_session" => read_session(args, env),
        "remember" => remember(args, env).map(without_sources),
        "list_pins" => list_pins(env).map(without_sources),
        _ => Err(format!("{tool} is not a memory tool")),
    };
    match result {
        Ok((text, sources)) => ToolOutput { sources, ..ToolOutput::ok(text) },
        Err(err) => ToolOutput::error(err),
    }
}

impl MemoryEnv<'_> {
    fn withholds(&self, session: &crate::records::ActivitySession) -> bool {
        self.withheld.is_some_and(|rules| rules.withholds(Some(&session.app), &session.title, session.url.as_deref()))
    }
}

fn limit(args: &Value, default: u64) -> usize {
    args.get("limit").and_then(Value::as_u64).unwrap_or(default).min(MAX_LIMIT) as usize
}

/// A result's source, for the answer's citation chips (numbered by the task).
fn source(stream: Stream, source_id: i64, at_millis: i64, app: Option<&str>, title: &str, open_id: Option<i64>) -> Citation {
    let label = match app {
        Some(app) => format!("{app} — {title}"),
        None => title.to_owned(),
    };
    Citation { n: 0, chunk_id: None, stream, source_id, at_millis, label, open_id }
}

fn search_memory(args: &Value, env: &MemoryEnv<'_>) -> Result<(String, Vec<Citation>), String> {
    let query = args.get("query").and_then(Value::as_str).unwrap_or_default().trim().to_owned();
    let limit = limit(args, DEFAULT_LIMIT);
    let stream = args.get("stream").and_then(Value::as_str).and_then(Stream::parse);
    let filters = Filters {
        since_millis: args.get("since_minutes").and_then(Value::as_i64).map(|m| env.now_millis - m.saturating_mul(60_000)),
        until_millis: None,
        app: args.get("app").and_then(Value::as_str).map(str::to_owned),
        streams: stream.into_iter().collect(),
    };
    let hits = search_hits(env, &query, &filters, limit)?;
    if hits.is_empty() {
        // The query is not repeated: a served answer says nothing about what was asked or withheld.
        return Ok(("Nothing in memory matches that search.".to_owned(), Vec::new()));
    }
    let text = hits
        .iter()
        .map(|hit| {
            let app = hit.app.as_deref().map(|a| format!("{a} — ")).unwrap_or_default();
            format!("- {} [{}] {app}{}: {}", format_when(hit.at_millis, env.now_millis), hit.stream.as_str(), hit.title, hit.snippet)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let sources = hits.iter().map(|hit| source(hit.stream, hit.id, hit.at_millis, hit.app.as_deref(), &hit.title, hit.open_id)).collect();
    Ok((text, sources))
}

/// Keyword and meaning hits for `query` under `filters`, fused and withheld
/// by the rules as `search_memory` shows them (the apps' `data.search` too).
pub fn search_hits(env: &MemoryEnv<'_>, query: &str, filters: &Filters, limit: usize) -> Result<Vec<crate::memory::search::Hit>, String> {
    // Keywords and, when the search worker has vectors, meaning, fused as the search box fuses
    // them; recall has no filters of its own, so they are applied to its hits here.
    let mut lists = crate::memory::search::keyword_lists(env.conn, query, filters, limit).map_err(|err| format!("search failed: {err}"))?;
    if let Some(recall) = env.recall {
        let mut namespaces: Vec<crate::memory::Namespace> = filters.streams().iter().map(|s| s.namespace()).collect();
        namespaces.dedup();
        if let Some(Ok(hits)) = recall.recall(query, namespaces, limit) {
            lists.push(hits.iter().filter(|h| filters.admits(h.stream, h.app.as_deref(), h.at_millis, h.at_millis)).map(ChunkHit::to_hit).collect());
        }
    }
    if let Some(rules) = env.withheld {
        // A window, typed text or a copy is judged by its session as the rules judge
        // sessions (app, title and URL, so a denied domain counts); one whose session is
        // gone is withheld. A chat is judged as a whole thread, a summary with the
        // sessions of its hours (`Withholding`).
        let mut judge = Withholding { conn: env.conn, rules, sessions: Default::default(), threads: Default::default(), documents: Default::default() };
        for list in &mut lists {
            list.retain(|hit| {
                let withheld = match (hit.stream, hit.open_id) {
                    (Stream::Window | Stream::Typing | Stream::Clipboard | Stream::Audio | Stream::Screen, Some(id)) => judge.session(id),
                    (Stream::Window | Stream::Typing | Stream::Clipboard | Stream::Audio | Stream::Screen, None) => true,
                    (Stream::Chat, thread) => judge.thread(thread, hit.id),
                    (Stream::Summary, _) => judge.summary(hit.id),
                    // A document by its path as the rules and the exclusions read it now, then its name and words (below).
                    (Stream::Document, _) => judge.document(hit.id),
                };
                !withheld && !rules.withholds(hit.app.as_deref(), &hit.title, None) && !rules.mentions(&hit.title) && !rules.mentions(&hit.snippet)
            });
        }
    }
    Ok(crate::memory::search::reciprocal_rank_fusion(lists, limit))
}

/// What the rules withhold among chats and summaries, which have no session
/// of their own: a chat thread is withheld whole when any of its messages,
/// the context sent with them, the thread's title or what its tasks' tools
/// returned names something withheld, or when an answer in it cited a
/// withheld session; a summary when its text does, or when any session of
/// the hours it sums up is withheld; a document part when its document's
/// path is covered by the rules (a title rule, a denied app or domain named
/// in it) or by an excluded path pattern, as they are now.
struct Withholding<'a> {
    conn: &'a rusqlite::Connection,
    rules: &'a crate::capture::firewall::Rules,
    sessions: std::collections::HashMap<i64, bool>,
    threads: std::collections::HashMap<i64, bool>,
    /// By document path.
    documents: std::collections::HashMap<String, bool>,
}

/// Sessions a summary's hours may hold, at most (beyond that it is withheld).
const SUMMARY_SESSIONS: usize = 5_000;

impl Withholding<'_> {
    fn document(&mut self, part_id: i64) -> bool {
        let path: Option<String> = self
            .conn
            .query_row("SELECT d.path FROM document_parts p JOIN documents d ON d.document_id = p.document_id WHERE p.part_id = ?1", [part_id], |r| r.get(0))
            .ok();
        // A part whose document is gone is withheld, as a session that is gone is.
        let Some(path) = path else { return true };
        let rules = self.rules;
        *self.documents.entry(path.clone()).or_insert_with(|| {
            rules.withholds(None, &path, None) || rules.mentions(&path) || crate::documents::memory::excluded(std::path::Path::new(&path), &rules.document_exclude).is_some()
        })
    }

    fn session(&mut self, session_id: i64) -> bool {
        let (conn, rules) = (self.conn, self.rules);
        *self.sessions.entry(session_id).or_insert_with(|| {
            crate::capture::db::session(conn, session_id).map_or(true, |s| rules.withholds(Some(&s.app), &s.title, s.url.as_deref()) || rules.mentions(&s.title))
        })
    }

    fn thread(&mut self, thread_id: Option<i64>, message_id: i64) -> bool {
        let thread_id = match thread_id {
            Some(id) => id,
            None => match self.conn.query_row("SELECT thread_id FROM chat_messages WHERE message_id = ?1", [message_id], |r| r.get::<_, i64>(0)) {
                Ok(id) => id,
                Err(_) => return true,
            },
        };
        if let Some(known) = self.threads.get(&thread_id) {
            return *known;
        }
        let withheld = self.judge_thread(thread_id).unwrap_or(true);
        self.threads.insert(thread_id, withheld);
        withheld
    }

    fn judge_thread(&mut self, thread_id: i64) -> rusqlite::Result<bool> {
        let title: String = self.conn.query_row("SELECT title FROM chat_threads WHERE thread_id = ?1", [thread_id], |r| r.get(0)).unwrap_or_default();
        if self.rules.mentions(&title) {
            return Ok(true);
        }
        let mut stmt = self.conn.prepare_cached("SELECT content, context, citations FROM chat_messages WHERE thread_id = ?1")?;
        let messages: Vec<(String, Option<String>, Option<String>)> = stmt.query_map([thread_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<_>>()?;
        let mut cited: Vec<i64> = Vec::new();
        for (content, context, citations) in &messages {
            if self.rules.mentions(content) || context.as_deref().is_some_and(|c| self.rules.mentions(c)) {
                return Ok(true);
            }
            let citations: Vec<crate::memory::rag::Citation> = citations.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
            cited.extend(citations.iter().filter(|c| !matches!(c.stream, crate::memory::Source::Chat | crate::memory::Source::Summary)).filter_map(|c| c.open_id));
            cited.extend(session_ids(content));
        }
        // What the thread's tasks read: their tools' outputs.
        let mut stmt = self.conn.prepare_cached(
            "SELECT c.output FROM operation_calls c JOIN operations o ON o.operation_id = c.operation_id WHERE o.thread_id = ?1 AND c.output IS NOT NULL",
        )?;
        let outputs: Vec<String> = stmt.query_map([thread_id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        for output in &outputs {
            if self.rules.mentions(output) {
                return Ok(true);
            }
            cited.extend(session_ids(output));
        }
        Ok(cited.into_iter().any(|id| self.session(id)))
    }

    fn summary(&mut self, observation_id: i64) -> bool {
        let row: Option<(i64, i64, String)> =
            self.conn.query_row("SELECT period_start_ms, period_end_ms, text FROM observations WHERE observation_id = ?1", [observation_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).ok();
        let Some((start, end, text)) = row else { return true };
        if self.rules.mentions(&text) {
            return true;
        }
        let ids: Vec<i64> = self
            .conn
            .prepare_cached("SELECT session_id FROM activity_sessions WHERE started_at_ms < ?2 AND coalesce(ended_at_ms, last_seen_ms, started_at_ms) >= ?1 LIMIT ?3")
            .and_then(|mut stmt| stmt.query_map(rusqlite::params![start, end, SUMMARY_SESSIONS as i64 + 1], |r| r.get(0))?.collect())
            .unwrap_or_default();
        ids.len() > SUMMARY_SESSIONS || ids.into_iter().any(|id| self.session(id))
    }
}

/// Session ids a text names as memory tools write them ("(session 42)").
fn session_ids(text: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("(session ") {
        rest = &rest[at + 9..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(id) = digits.parse() {
            ids.push(id);
        }
    }
    ids
}

fn session_line(session: &crate::records::ActivitySession, now_millis: i64) -> String {
    let end = session.ended_at_millis.unwrap_or(now_millis);
    let url = session.url.as_deref().map(|u| format!(" <{u}>")).unwrap_or_default();
    format!(
        "- {} for {} · {} — {}{url} (session {})",
        format_when(session.started_at_millis, now_millis),
        format_duration_millis(end - session.started_at_millis),
        session.app,
        session.title,
        session.session_id
    )
}

fn recent_activity(args: &Value, env: &MemoryEnv<'_>) -> Result<String, String> {
    // Without `minutes`: today, and at least the last hour (just after midnight).
    let since = match args.get("minutes").and_then(Value::as_i64) {
        Some(minutes) => env.now_millis - minutes * 60_000,
        None => crate::ids::local_day_start_millis(env.now_millis).min(env.now_millis - 60 * 60_000),
    };
    activity_since(env, since, limit(args, 20))
}

/// Today's timeline, oldest first (`cowork mcp serve`'s timeline resource).
pub fn today(env: &MemoryEnv<'_>, most: usize) -> Result<String, String> {
    let since = crate::ids::local_day_start_millis(env.now_millis);
    let text = activity_since(env, since, most)?;
    Ok(text.lines().rev().collect::<Vec<_>>().join("\n"))
}

fn activity_since(env: &MemoryEnv<'_>, since: i64, most: usize) -> Result<String, String> {
    let mut sessions = crate::capture::db::sessions_since(env.conn, since, most).map_err(|err| format!("cannot read activity: {err}"))?;
    sessions.retain(|s| !env.withholds(s));
    sessions.sort_by_key(|s| std::cmp::Reverse(s.started_at_millis));
    if sessions.is_empty() {
        return Ok(format!("No window was in use since {}.", format_when(since, env.now_millis)));
    }
    Ok(sessions.iter().map(|s| session_line(s, env.now_millis)).collect::<Vec<_>>().join("\n"))
}

fn current_window(env: &MemoryEnv<'_>) -> Result<String, String> {
    let sessions = crate::capture::db::recent_sessions(env.conn, 1).map_err(|err| format!("cannot read activity: {err}"))?;
    if sessions.first().is_some_and(|s| env.withholds(s)) {
        // Say no more than that: the window's name is what the rules keep back.
        return Ok("The current window is withheld by the user's privacy rules.".into());
    }
    Ok(match sessions.first() {
        Some(s) if s.ended_at_millis.is_none() => {
            let url = s.url.as_deref().map(|u| format!(" <{u}>")).unwrap_or_default();
            format!("The user is in {}: {}{url} (since {}, session {})", s.app, s.title, format_when(s.started_at_millis, env.now_millis), s.session_id)
        }
        Some(s) => format!("No window is active now (away or paused). The last one was:\n{}", session_line(s, env.now_millis)),
        None => "Nothing has been captured yet.".into(),
    })
}

fn read_session(args: &Value, env: &MemoryEnv<'_>) -> Result<(String, Vec<Citation>), String> {
    let session_id = args.get("session_id").and_then(Value::as_i64).ok_or("session_id is required")?;
    let (typed, copied) = match crate::capture::db::session_detail(env.conn, session_id) {
        Ok(detail) => detail,
        Err(rusqlite::Error::QueryReturnedNoRows) => return Err(format!("there is no session {session_id} (recent_activity lists session ids)")),
        Err(err) => return Err(format!("cannot read session {session_id}: {err}")),
    };
    let session = crate::capture::db::session(env.conn, session_id).map_err(|err| format!("cannot read session {session_id}: {err}"))?;
    if env.withholds(&session) {
        return Err(format!("session {session_id} is withheld by the user's privacy rules"));
    }
    let mut out = vec![session_line(&session, env.now_millis)];
    out.push(if typed.is_empty() { "Typed: nothing recorded.".into() } else { "Typed:".into() });
    out.extend(typed.iter().map(|(at, text)| format!("- {} {text}", format_when(*at, env.now_millis))));
    out.push(if copied.is_empty() { "Copied: nothing recorded.".into() } else { "Copied:".into() });
    out.extend(copied.iter().map(|(at, text)| format!("- {} {text}", format_when(*at, env.now_millis))));
    let cited = source(Stream::Window, session.session_id, session.started_at_millis, Some(&session.app), &session.title, Some(session.session_id));
    Ok((out.join("\n"), vec![cited]))
}

fn remember(args: &Value, env: &MemoryEnv<'_>) -> Result<String, String> {
    let text = crate::memory::hot::clean(args.get("text").and_then(Value::as_str).unwrap_or_default())?;
    let (store, shown) = env.store.as_ref().ok_or("memory cannot be written here")?;
    let command = crate::memory::commands::add_fact(crate::memory::hot::File::Memory, text.clone(), "agent".into(), shown.clone());
    store.send_timeout(command, Duration::from_secs(5)).map_err(|_| "the store is not accepting writes".to_owned())?;
    Ok(format!("Remembered: {text}"))
}

fn list_pins(env: &MemoryEnv<'_>) -> Result<String, String> {
    let facts = crate::memory::hot::facts(env.conn).map_err(|err| format!("cannot read memory: {err}"))?;
    let mut out: Vec<String> = facts.iter().map(|f| format!("- fact ({}, by {}): {}", f.file.as_str(), f.pinned_by, f.text)).collect();
    if let Some(thread_id) = env.thread_id {
        let pinned = crate::memory::rag::pinned(env.conn, thread_id).map_err(|err| format!("cannot read pins: {err}"))?;
        out.extend(pinned.iter().map(|item| format!("- pinned to this chat: {} ({})", item.label, format_when(item.at_millis, env.now_millis))));
    }
    if out.is_empty() {
        return Ok("Nothing is remembered or pinned yet.".into());
    }
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ActivitySession;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::store::open_writer(&dir.path().join("cowork.db")).unwrap();
        (dir, conn)
    }

    fn session(conn: &Connection, session_id: i64, app: &str, title: &str, started: i64, ended: Option<i64>) {
        let session = ActivitySession { session_id, app: app.into(), title: title.into(), window_id: 1, started_at_millis: started, ended_at_millis: ended, ..Default::default() };
        crate::capture::db::upsert_session(conn, &session).unwrap();
    }

    fn env(conn: &Connection, now: i64) -> MemoryEnv<'_> {
        MemoryEnv { conn, recall: None, withheld: None, store: None, thread_id: None, now_millis: now }
    }

    #[test]
    fn every_schema_is_one_the_validator_accepts_and_every_tool_has_a_description() {
        for tool in TOOLS {
            crate::tools::schema::check_schema(&schema(tool).unwrap()).unwrap_or_else(|e| panic!("{tool}: {e}"));
            let described = crate::tools::registry::get(tool).map(|t| t.description);
            assert!(described.is_some_and(|d| !d.is_empty() && d.len() < 120), "{tool}");
        }
    }

    #[test]
    fn search_fuses_recall_by_meaning_with_keywords_under_the_same_filters() {
        let (_dir, conn) = db();
        let now = crate::ids::now_millis();
        for i in 0..4 {
            session(&conn, i + 1, "firefox", &format!("Flight search {i} - TAP"), now - 3_000_000 + i * 1000, Some(now - 2_000_000));
        }
        // The search worker, answering by meaning: a window and a clipboard chunk.
        let (recall, asked) = crossbeam_channel::bounded(1);
        let worker = std::thread::spawn(move || {
            if let Ok(SearchCommand::Recall { reply, .. }) = asked.recv() {
                let chunk = |stream, id, title: &str, text: &str| ChunkHit {
                    chunk_id: id,
                    stream,
                    source_id: id,
                    at_millis: now - 1_000_000,
                    app: Some("Thunderbird".into()),
                    title: title.into(),
                    text: text.into(),
                    score: 0.9,
                    open_id: None,
                };
                let _ = reply.send(Ok(vec![
                    chunk(Stream::Window, 40, "Itinerary LH1723", "Window in Thunderbird: Itinerary LH1723"),
                    chunk(Stream::Clipboard, 41, "Itinerary", "Copied in Thunderbird (Itinerary): booking code XK42"),
                ]));
            }
        });
        let env = MemoryEnv { recall: Some(&recall as &dyn Recall), ..env(&conn, now) };
        let found = run("search_memory", &json!({"query": "flight", "stream": "window", "limit": 4}), &env);
        worker.join().unwrap();
        assert_eq!(found.content.lines().count(), 4, "{}", found.content);
        assert!(found.content.contains("Itinerary LH1723"), "recall is fused in even when keywords fill the limit: {}", found.content);
        assert!(!found.content.contains("XK42"), "the stream filter applies to recall too: {}", found.content);
    }

    /// What a client of `cowork mcp serve` searches is withheld by the rules as
    /// sessions are: a denied domain hides a window whose title says nothing.
    #[test]
    fn search_withholds_a_session_on_a_denied_domain_whatever_its_title() {
        let (_dir, conn) = db();
        let now = crate::ids::now_millis();
        let booking = ActivitySession {
            session_id: 1,
            app: "firefox".into(),
            title: "Flight deals".into(),
            url: Some("https://www.lufthansa.com/booking".into()),
            window_id: 1,
            started_at_millis: now - 3_000_000,
            ended_at_millis: Some(now - 2_000_000),
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &booking).unwrap();
        session(&conn, 2, "firefox", "Flight history - Wikipedia", now - 2_000_000, Some(now - 1_000_000));
        let rules = crate::capture::firewall::Rules { denied_domains: vec!["lufthansa.com".into()], ..Default::default() };
        let open = run("search_memory", &json!({"query": "flight"}), &env(&conn, now));
        assert!(open.content.contains("Flight deals"), "{}", open.content);
        let served = run("search_memory", &json!({"query": "flight"}), &MemoryEnv { withheld: Some(&rules), ..env(&conn, now) });
        assert!(!served.content.contains("Flight deals") && served.content.contains("Wikipedia"), "{}", served.content);
    }

    #[test]
    fn activity_current_window_and_search_read_the_captured_day() {
        let (_dir, conn) = db();
        let now = crate::ids::now_millis();
        session(&conn, 1, "firefox", "Flight LIS-BER booking - TAP", now - 3_000_000, Some(now - 2_000_000));
        session(&conn, 2, "Code", "main.py - weather-bot", now - 2_000_000, Some(now - 600_000));
        session(&conn, 3, "XTerm", "cargo test", now - 600_000, None);
        let env = env(&conn, now);

        let recent = run("recent_activity", &json!({"minutes": 20}), &env);
        assert!(!recent.is_error);
        let lines: Vec<&str> = recent.content.lines().collect();
        assert_eq!(lines.len(), 2, "only the sessions of the last 20 minutes: {}", recent.content);
        assert!(lines[0].contains("XTerm — cargo test") && lines[1].contains("main.py - weather-bot"), "newest first: {}", recent.content);
        let today = run("recent_activity", &json!({}), &env);
        assert_eq!(today.content.lines().count(), 3, "without minutes: today, at least the last hour: {}", today.content);

        let current = run("current_window", &json!({}), &env);
        assert!(current.content.starts_with("The user is in XTerm: cargo test"), "{}", current.content);

        let found = run("search_memory", &json!({"query": "flight"}), &env);
        assert!(found.content.contains("Flight LIS-BER") && !found.content.contains("weather"), "{}", found.content);
        let filtered = run("search_memory", &json!({"query": "flight", "app": "Code"}), &env);
        assert!(filtered.content.starts_with("Nothing in memory matches"), "{}", filtered.content);
    }

    #[test]
    fn read_session_shows_what_was_typed_and_copied_and_names_a_missing_session() {
        let (_dir, conn) = db();
        let now = crate::ids::now_millis();
        session(&conn, 7, "Code", "notes.md", now - 60_000, None);
        let chunk = crate::records::KeystrokeChunk {
            chunk_id: 70,
            app: "Code".into(),
            title: "notes.md".into(),
            pid: None,
            started_at_millis: now - 50_000,
            ended_at_millis: now - 40_000,
            text: "call Dana about the budget".into(),
            shortcuts: vec![],
            flush_reason: crate::records::FlushReason::Enter,
        };
        crate::capture::db::insert_keystroke_chunk(&conn, &chunk).unwrap();
        let env = env(&conn, now);
        let out = run("read_session", &json!({"session_id": 7}), &env);
        assert!(out.content.contains("call Dana about the budget"), "{}", out.content);
        assert!(out.content.contains("Copied: nothing recorded."), "{}", out.content);
        let missing = run("read_session", &json!({"session_id": 99}), &env);
        assert!(missing.is_error && missing.content.contains("no session 99"));
    }

    #[test]
    fn remember_goes_through_the_store_and_list_pins_shows_facts() {
        let (_dir, conn) = db();
        crate::memory::hot::add(&conn, crate::memory::hot::File::User, "Works at Nordbank", "user", 1).unwrap();
        let (store, writes) = bounded(4);
        let env = MemoryEnv { store: Some((&store, crate::runtime::EventSink::ignored())), ..env(&conn, 10) };
        let out = run("remember", &json!({"text": "The weather bot deploys on Fridays"}), &env);
        assert_eq!(out.content, "Remembered: The weather bot deploys on Fridays");
        writes.try_recv().unwrap().run_on(&conn).unwrap();
        let fact = crate::memory::hot::facts(&conn).unwrap().into_iter().find(|f| f.text == "The weather bot deploys on Fridays").unwrap();
        assert_eq!((fact.file, fact.pinned_by.as_str()), (crate::memory::hot::File::Memory, "agent"));
        let too_long = run("remember", &json!({"text": "x".repeat(321)}), &env);
        assert!(too_long.is_error && writes.try_recv().is_err(), "nothing written: {}", too_long.content);
        let pins = run("list_pins", &json!({}), &env);
        assert!(pins.content.contains("Works at Nordbank"), "{}", pins.content);
    }
}
