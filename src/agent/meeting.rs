//! A meeting's note in the agent (issue 58): what listen mode heard during
//! the call (`audio_transcripts`: the microphone is the user, the computer's
//! output the others) is numbered and read by a brain in parts that fit its
//! prompt (`day::meetings`); only summary lines, decisions and action items
//! that cite transcript lines are kept, and an owner must be the user or a
//! name said in the call. The note is kept as a summary (`observations`,
//! kind `meeting`, the call's span): searchable, embedded, recalled.
//!
//! The built-in automation `builtin_meeting_note` calls the `meeting_note`
//! tool when a call cowork listened to ends (listen mode's `Signal::Meeting`).
//! The brain is chosen as for the recap: local, or a cloud the user allowed
//! to see what cowork records. A calendar event that overlaps the call gives
//! the note its title.

use std::time::Duration;

use serde_json::{Value, json};

use super::operation::{Brain, ChatRequest};
use super::worker::AgentWorker;
use crate::brains::{Role, Turn};
use crate::day::meetings::{Note, Said, action_prompt, note_prompt, numbered_parts, read_note};
use crate::llm::LocalBrain;
use crate::tools::ToolOutput;

/// The most one part's summary and decisions may run to.
const NOTE_TOKENS: usize = 220;
/// The most the action items may run to.
const ACTION_TOKENS: usize = 200;

impl<B: LocalBrain> AgentWorker<B> {
    /// Writes and keeps the note of the call from `start` to `end`; None when nothing was heard.
    pub(super) fn write_meeting_note(&mut self, (start, end): (i64, i64), title: &str, instructions: &str) -> Result<Option<(Note, String)>, String> {
        self.open_db();
        let conn = self.db.as_ref().ok_or("cowork's memory cannot be read right now")?;
        let heard = crate::audio::transcripts::between(conn, start, end).map_err(|err| format!("reading what was heard: {err}"))?;
        let said: Vec<Said> = heard
            .iter()
            .filter(|t| !t.text.trim().is_empty())
            .map(|t| Said { at_secs: (t.started_at_millis - start).max(0) as f64 / 1000.0, you: t.source == crate::audio::mic::Source::Microphone, text: t.text.clone() })
            .collect();
        if said.is_empty() {
            return Ok(None);
        }
        // The calendar's event for the call names it better than its window did.
        let event = crate::calendar::db::overlapping(conn, start, end);
        let title = event.as_ref().map(|e| e.title.trim()).filter(|t| !t.is_empty()).unwrap_or(title).to_owned();
        let title = title.as_str();
        let (settings, providers) = self.brains();
        let parts = numbered_parts(&said);
        let ask = ChatRequest { text: parts[0].1.clone(), ..ChatRequest::default() };
        let (brain, ask) = self.plan_operation(&ask, &settings, &providers)?;
        match &brain {
            Brain::Local if self.brain.state().is_unavailable() => return Err("no local model is installed or it cannot load, and no cloud is allowed".into()),
            Brain::Local => {}
            Brain::Cloud { consent: true, .. } if ask.is_none() => {}
            Brain::Cloud { provider, .. } => return Err(format!("{} is not allowed to see what cowork records; allow it in Settings → Brains", provider.name)),
        }
        let mut note = Note { title: title.to_owned(), ..Note::default() };
        for (_, part) in &parts {
            let (system, user) = note_prompt(title, part, instructions);
            let output = self.complete(&brain, &[Turn::new(Role::System, system), Turn::new(Role::User, user)], NOTE_TOKENS, true)?;
            read_note(&said, &output, &mut note);
        }
        // The action items, asked alone: the lines where something was taken on, and who was named.
        if let Some((system, user)) = action_prompt(title, &said, instructions) {
            let output = self.complete(&brain, &[Turn::new(Role::System, system), Turn::new(Role::User, user)], ACTION_TOKENS, true)?;
            read_note(&said, &output, &mut note);
        }
        for (line, why) in &note.dropped {
            tracing::info!(%line, %why, "a meeting note's line was not kept");
        }
        let text = note.render(title, &said);
        let observation = crate::memory::Observation { kind: "meeting".into(), period_start_millis: start, period_end_millis: end, text: text.clone(), model: None };
        self.store.send_timeout(crate::memory::observation_write(observation), Duration::from_secs(5)).map_err(|_| "the store is not accepting writes")?;
        Ok(Some((note, text)))
    }

    /// The `meeting_note` tool: `{"start_ms", "end_ms", "title", "instructions"}`;
    /// its output is JSON a flow's later steps read (`written`, `summary`, `actions`, `text`).
    pub(super) fn meeting_note_tool(&mut self, args: &Value) -> ToolOutput {
        let (Some(start), Some(end)) = (args.get("start_ms").and_then(Value::as_i64), args.get("end_ms").and_then(Value::as_i64)) else {
            return ToolOutput::error("start_ms and end_ms are the call's start and end (milliseconds since 1970)");
        };
        if end <= start || end - start > 12 * 3_600_000 {
            return ToolOutput::error("a call runs forward and for at most 12 hours");
        }
        let title = args.get("title").and_then(Value::as_str).filter(|t| !t.trim().is_empty()).unwrap_or("a call");
        let instructions = args.get("instructions").and_then(Value::as_str).unwrap_or_default();
        match self.write_meeting_note((start, end), title, instructions) {
            Ok(Some((note, text))) => {
                let summary = note.summary.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(" ");
                let actions: Vec<String> = note.actions.iter().map(|a| format!("{}: {}", a.owner, a.item)).collect();
                ToolOutput::ok(json!({"written": true, "title": note.title, "summary": summary, "actions": actions.len(), "action_items": actions.join("\n"), "text": text}).to_string())
            }
            Ok(None) => ToolOutput::ok(json!({"written": false, "why": "nothing was heard during the call"}).to_string()),
            Err(err) => ToolOutput::error(format!("the meeting note was not written: {err}")),
        }
    }
}
