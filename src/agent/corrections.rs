//! Messages about what cowork believes, answered by cowork itself before any
//! brain is chosen (`memory::corrections` reads them): "remember that…",
//! "forget…" and "that's wrong, …" become a proposed change to the pinned
//! facts, shown on the answer for one click to confirm
//! (`AgentEvent::MemoryChangeProposed`); "why do you think that?" says where
//! the last answer's beliefs came from — the pinned facts and profile it
//! repeats, and the sessions, summaries and documents it cited, each with
//! its date. Nothing is sent to a model and nothing changes unconfirmed.

use crate::agent::events::AgentEvent;
use crate::ids::{format_when, now_millis};
use crate::llm::LocalBrain;
use crate::memory::corrections::{Change, Intent, best_match, content_words, file_for};
use crate::memory::hot;
use crate::memory::rag::Citation;

use super::operation::ChatRequest;
use super::worker::AgentWorker;

/// A reply cowork gives without a model.
pub(super) struct Reply {
    pub text: String,
    pub citations: Vec<Citation>,
    pub change: Option<Change>,
}

impl<B: LocalBrain> AgentWorker<B> {
    /// Answers a message about memory; None: it is an ordinary message after
    /// all (a correction of nothing cowork has pinned).
    pub(super) fn about_memory(&mut self, request: &ChatRequest, intent: Intent) -> Option<Reply> {
        self.open_db();
        let conn = self.db.as_ref()?;
        let facts = hot::facts(conn).unwrap_or_default();
        let last_answer = request.history.iter().rev().find(|(role, _)| *role == crate::records::Role::Assistant).map(|(_, text)| text.clone()).unwrap_or_default();
        let reply = |text: String, change: Option<Change>| Reply { text, citations: Vec::new(), change };
        Some(match intent {
            Intent::Remember(text) => match hot::clean(&text) {
                Ok(text) => {
                    let change = Change::Add { file: file_for(&text), text };
                    reply(format!("{}? Confirm below and I will keep it; it goes into every answer from then on.", change.describe()), Some(change))
                }
                Err(err) => reply(format!("I cannot pin that: {err}."), None),
            },
            Intent::Forget(what) => {
                // "forget that": what the last answer stood on.
                let target = if what.is_empty() { last_answer } else { what };
                match best_match(&facts, &target) {
                    Some(fact) => {
                        let change = Change::Remove { memory_id: fact.memory_id, text: fact.text.clone() };
                        reply(format!("{}? Confirm below: it leaves your pinned facts and the summaries that state it.", change.describe()), Some(change))
                    }
                    None => reply("Nothing I have pinned matches that, so there is nothing to forget. Your pinned facts are in the Memory tab.".into(), None),
                }
            }
            Intent::Correct(new) => {
                let fact = best_match(&facts, &new)?;
                let new = hot::clean(&new).ok()?;
                let change = Change::Replace { memory_id: fact.memory_id, old: fact.text.clone(), new };
                reply(format!("{}? Confirm below and I will use the new one from then on (the summaries that state the old one drop it).", change.describe()), Some(change))
            }
            Intent::Why => self.provenance(request, &facts, &last_answer),
        })
    }

    /// Where the last answer's beliefs came from.
    fn provenance(&mut self, request: &ChatRequest, facts: &[hot::Fact], answer: &str) -> Reply {
        let now = now_millis();
        let settings = self.settings();
        // The last answer was handed to the store moments ago: read it once it is committed.
        let (ack, committed) = crossbeam_channel::bounded(1);
        if self.store.send_timeout(crate::store::StoreCommand::Flush(ack), std::time::Duration::from_secs(5)).is_ok() {
            let _ = committed.recv_timeout(std::time::Duration::from_secs(5));
        }
        let conn = self.db.as_ref();
        let said = content_words(answer);
        let mut lines: Vec<String> = Vec::new();
        let shares = |text: &str| content_words(text).iter().filter(|w| said.contains(w)).count() >= 2;
        for fact in facts.iter().filter(|f| shares(&f.text)) {
            let who = if fact.pinned_by == "user" { "you pinned" } else { "cowork noted during a task" };
            lines.push(format!("- a fact {who} {}: “{}”", format_when(fact.created_at_millis, now), fact.text));
        }
        if !settings.profile.trim().is_empty() && shares(&settings.profile) {
            lines.push("- your profile (Settings → Memory)".into());
        }
        // What the answer cited: stored with it.
        let citations: Vec<Citation> = conn
            .and_then(|c| {
                c.query_row(
                    "SELECT citations FROM chat_messages WHERE thread_id = ?1 AND role = 'assistant' AND citations IS NOT NULL ORDER BY created_at_ms DESC LIMIT 1",
                    [request.thread.thread_id],
                    |r| r.get::<_, String>(0),
                )
                .ok()
            })
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default();
        for citation in &citations {
            let kind = match citation.stream {
                crate::memory::Source::Summary => "a summary of your activity",
                crate::memory::Source::Document => "a document",
                crate::memory::Source::Chat => "an earlier conversation",
                crate::memory::Source::Audio => "something heard",
                crate::memory::Source::Screen => "something on screen",
                _ => "what was recorded",
            };
            // A window says which: its app and title (a note's label may name only the app).
            let window = (citation.stream == crate::memory::Source::Window)
                .then(|| conn?.query_row("SELECT app, title FROM activity_sessions WHERE session_id = ?1", [citation.source_id], |r| Ok(format!("{} — {}", r.get::<_, String>(0)?, r.get::<_, String>(1)?))).ok())
                .flatten();
            let label = window.unwrap_or_else(|| citation.label.clone());
            lines.push(format!("- [{}] {kind}: {label}, {}", citation.n, format_when(citation.at_millis, now)));
        }
        let text = if answer.is_empty() {
            "There is no earlier answer in this conversation to explain.".to_owned()
        } else if lines.is_empty() {
            "That answer did not come from anything I remember: no pinned fact, profile or recorded source matches it, so it came from the model alone. Treat it as a guess.".to_owned()
        } else {
            format!("That answer stood on:\n{}\n\nIf one of these is wrong, say \"that's wrong, …\" or \"forget …\" and I will change it.", lines.join("\n"))
        };
        Reply { text, citations, change: None }
    }

    /// Sends and keeps a reply cowork gave without a model.
    pub(super) fn give_reply(&mut self, request: &ChatRequest, remember: bool, reply: Reply) {
        let citations = (!reply.citations.is_empty()).then(|| serde_json::to_string(&reply.citations).unwrap_or_default());
        if !reply.citations.is_empty() {
            self.sink.send(AgentEvent::Citations { answer_id: request.answer_id, citations: reply.citations });
        }
        if let Some(change) = reply.change {
            self.sink.send(AgentEvent::MemoryChangeProposed { answer_id: request.answer_id, change });
        }
        let reason = "a message about what cowork remembers: answered without a model".to_owned();
        self.answer_without_model(request, remember, ("memory", reason), &reply.text, citations, false);
    }
}
