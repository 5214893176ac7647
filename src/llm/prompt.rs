//! How a chat prompt is laid out: identity and memory in the system prompt,
//! worked examples for small local models, then the question's own turn
//! (activity log, clock and current window, recalled notes, question). Every
//! part before the turn's clock is the same for every question, so a warm
//! engine's prefix cache keeps it prefilled (docs/engine.md,
//! "The local model's prompt").

use crate::ids::local_day_start_millis;
use crate::llm::context::render;
use crate::llm::engine::{PromptMessage, PromptRole};
use crate::records::ActivitySession;

/// What a question is sent with, in three parts laid out for the engine's
/// prefix cache: everything before `turn` changes rarely, so a warm model keeps
/// it prefilled and a question costs only its own tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptContext {
    /// After the identity in the system prompt: memory sections (profile, hot memory, summaries).
    pub system: String,
    /// The head of the question's turn: the activity log. Small models read
    /// what is in the user's turn far better than the system prompt (20 vs 14 of
    /// 25 on the grounded-answer questions, docs/engine.md, "The local model's
    /// prompt").
    pub log: String,
    /// Right before the question: the clock, the current window and recalled notes.
    pub turn: String,
}

impl PromptContext {
    /// All parts as one text: what the context chip shows and the user message keeps.
    pub fn text(&self) -> String {
        join_parts(&[&self.system, &self.log, &self.turn])
    }

    pub fn map(&self, f: impl Fn(&str) -> String) -> Self {
        Self { system: f(&self.system), log: f(&self.log), turn: f(&self.turn) }
    }
}

/// Non-empty parts, trimmed, a blank line apart.
pub fn join_parts(parts: &[&str]) -> String {
    parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n\n")
}

/// The question's turn: `head` (log, clock, notes) then the question itself.
pub fn question_turn(head: &[&str], question: &str) -> PromptMessage {
    let head = join_parts(head);
    let content = if head.is_empty() { question.to_owned() } else { format!("{head}\n\nQuestion: {question}") };
    PromptMessage { role: PromptRole::User, content }
}

/// The messages for a chat model: identity and memory as the system prompt
/// (then `earlier`: the older part of a long thread, summarised), worked
/// examples (local models), the newest `history` as it was said, then the
/// question's turn with the log, clock and notes before the question.
pub fn chat_messages(
    identity: &str,
    examples: &[PromptMessage],
    context: Option<&PromptContext>,
    history: &[(crate::records::Role, String)],
    earlier: Option<&str>,
    question: &str,
) -> Vec<PromptMessage> {
    let context = context.cloned().unwrap_or_default();
    let mut messages = vec![PromptMessage { role: PromptRole::System, content: join_parts(&[identity, &context.system, earlier.unwrap_or_default()]) }];
    messages.extend_from_slice(examples);
    for (role, content) in history.iter().filter(|(_, c)| c != crate::memory::rag::GROUNDED_REFUSAL) {
        messages.push(PromptMessage { role: (*role).into(), content: content.clone() });
    }
    messages.push(question_turn(&[&context.log, &context.turn], question));
    messages
}

/// One worked example for small local models, in the exact format of a real
/// turn: it shows where answers are and how to copy them. It sits in the
/// prefix-cached head of every prompt, so it costs nothing once the model is warm.
pub fn local_examples() -> Vec<PromptMessage> {
    use crate::memory::rag::{Assembly, Item, Origin};
    const MINUTE: i64 = 60_000;
    // A fixed morning, rendered by the same code as real context.
    let morning = local_day_start_millis(0) + 9 * 60 * MINUTE;
    let window = |id: i64, app: &str, title: &str, start: i64, minutes: i64| ActivitySession {
        session_id: id,
        app: app.into(),
        title: title.into(),
        started_at_millis: morning + start * MINUTE,
        ended_at_millis: Some(morning + (start + minutes) * MINUTE),
        ..Default::default()
    };
    let sessions = [
        window(3, "code", "main.py - weather-bot - Visual Studio Code", 50, 20),
        window(2, "Teams", "Weekly sync with Marta Ruiz - Microsoft Teams", 4, 45),
        window(1, "firefox", "Order 5521 - Zalando", 0, 3),
    ];
    let now = morning + 73 * MINUTE;
    let layer1 = render(&sessions, now, 400).expect("sessions given");
    let note = Item {
        chunk_id: None,
        stream: crate::memory::search::Stream::Clipboard,
        source_id: 1,
        at_millis: morning + MINUTE,
        label: "firefox — Order 5521 - Zalando".into(),
        text: "Order 5521, parcel tracking number 00340434161094042557, arrives Tuesday".into(),
        origin: Origin::Recalled,
        open_id: None,
    };
    let notes = Assembly { items: vec![note], ..Assembly::default() }.render(now).unwrap_or_default();
    vec![
        question_turn(&[layer1.log.as_deref().unwrap_or_default(), &layer1.now, &notes], "What is the tracking number of my parcel?"),
        PromptMessage { role: PromptRole::Assistant, content: "Your parcel's tracking number is 00340434161094042557 [1].".to_owned() },
        question_turn(&[], "Which app did I use for the weekly sync, and how long was it?"),
        PromptMessage { role: PromptRole::Assistant, content: "You used Teams for the weekly sync with Marta Ruiz; it took 45 minutes.".to_owned() },
        question_turn(&[], "What was I just working on?"),
        PromptMessage { role: PromptRole::Assistant, content: "You were just working on main.py (weather-bot) in Visual Studio Code.".to_owned() },
    ]
}
