//! Layer-1 context: a compact description of what the user is doing, built
//! by direct SQL from recent capture and cut to a token budget.

use rusqlite::Connection;

use crate::events::ActivitySession;
use crate::llm::engine::{PromptMessage, PromptRole};
use crate::ids::{format_clock, format_duration_millis, format_when, local_day_start_millis};
use crate::store;

/// How many recent sessions are considered before the budget cuts them.
const RECENT_SESSIONS: usize = 40;

/// Rough token count (≈ 4 characters per token for English text); good
/// enough for a budget, and costs nothing on the hot path.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Layer-1 context in two parts, so the engine's prefix cache can keep the first prefilled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer1 {
    /// Finished windows, oldest first: it only grows at its end as the user
    /// switches windows, and its start moves in half-hour steps when the budget
    /// cuts it, so it goes into the stable system prompt.
    pub log: Option<String>,
    /// The clock and the current window: different for every question.
    pub now: String,
}

/// What a question is sent with, in three parts laid out for the engine's
/// prefix cache: everything before `turn` changes rarely, so a warm model keeps
/// it prefilled and a question costs only its own tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptContext {
    /// After the identity in the system prompt: memory sections (profile, hot memory, summaries).
    pub system: String,
    /// The head of the question's turn: the activity log. Small models read
    /// what is in the user's turn far better than the system prompt (20 vs 14 of
    /// 25 on the grounded-answer questions, README "The local model's prompt").
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

/// The messages for a chat model: identity and memory as the system prompt,
/// worked examples (local models), the last `history_messages` of history, then
/// the question's turn with the log, clock and notes before the question.
pub fn chat_messages(
    identity: &str,
    examples: &[PromptMessage],
    context: Option<&PromptContext>,
    history: &[(crate::events::Role, String)],
    history_messages: usize,
    question: &str,
) -> Vec<PromptMessage> {
    let context = context.cloned().unwrap_or_default();
    let mut messages = vec![PromptMessage { role: PromptRole::System, content: join_parts(&[identity, &context.system]) }];
    messages.extend_from_slice(examples);
    let skip = history.len().saturating_sub(history_messages);
    for (role, content) in history.iter().skip(skip).filter(|(_, c)| c != crate::memory::rag::GROUNDED_REFUSAL) {
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
        stream: crate::search::Stream::Clipboard,
        source_id: 1,
        at_millis: morning + MINUTE,
        label: "firefox — Order 5521 - Zalando".into(),
        text: "Order 5521, parcel tracking number 00340434161094042557, arrives Tuesday".into(),
        origin: Origin::Recalled,
        open_id: None,
    };
    let notes = Assembly { items: vec![note], dropped: Vec::new() }.render(now).unwrap_or_default();
    vec![
        question_turn(&[layer1.log.as_deref().unwrap_or_default(), &layer1.now, &notes], "What is the tracking number of my parcel?"),
        PromptMessage { role: PromptRole::Assistant, content: "Your parcel's tracking number is 00340434161094042557 [1].".to_owned() },
        question_turn(&[], "Which app did I use for the weekly sync, and how long was it?"),
        PromptMessage { role: PromptRole::Assistant, content: "You used Teams for the weekly sync with Marta Ruiz; it took 45 minutes.".to_owned() },
    ]
}

/// Where a budget-cut log starts: on a half-hour boundary, so the start (and
/// with it every prompt token after it) stays put while the user works.
const LOG_START_STEP_MILLIS: i64 = 30 * 60_000;

/// Builds layer-1 context within `budget_tokens`; `None` when nothing has been captured yet.
pub fn layer1_context(conn: &Connection, now_millis: i64, budget_tokens: usize) -> anyhow::Result<Option<Layer1>> {
    let sessions = store::recent_sessions(conn, RECENT_SESSIONS)?;
    Ok(render(&sessions, now_millis, budget_tokens))
}

fn log_line(session: &ActivitySession, now_millis: i64) -> String {
    format!(
        "{} {}: {} ({})\n",
        format_when(session.started_at_millis, now_millis),
        session.app,
        session.title,
        format_duration_millis(session.duration_millis(now_millis))
    )
}

/// Pure rendering. The log keeps the newest finished windows that fit the
/// budget, from a half-hour boundary on, and lists them oldest first.
pub fn render(sessions_newest_first: &[ActivitySession], now_millis: i64, budget_tokens: usize) -> Option<Layer1> {
    let (current, finished) = match sessions_newest_first.split_first() {
        None => return None,
        Some((first, rest)) if first.ended_at_millis.is_none() => (Some(first), rest),
        Some(_) => (None, sessions_newest_first),
    };
    let now = match current {
        Some(current) => format!(
            "It is {} now. The user is in {}: {} (for {}).",
            format_clock(now_millis),
            current.app,
            current.title,
            format_duration_millis(current.duration_millis(now_millis))
        ),
        None => match finished.first() {
            Some(last) => format!(
                "It is {} now. No window is focused (the user is away or using cowork). The last window the user was in: {}: {} (until {}).",
                format_clock(now_millis),
                last.app,
                last.title,
                format_when(last.ended_at_millis.unwrap_or(now_millis), now_millis)
            ),
            None => format!("It is {} now.", format_clock(now_millis)),
        },
    };
    let header = "Activity log, oldest first (start, app: window title (time spent)):\n";
    let mut used = estimate_tokens(header);
    let mut fitting = 0;
    for session in finished {
        let cost = estimate_tokens(&log_line(session, now_millis));
        if used + cost > budget_tokens {
            break;
        }
        used += cost;
        fitting += 1;
    }
    let mut kept = &finished[..fitting];
    if fitting < finished.len()
        && let Some(oldest) = kept.last()
    {
        let start = -(-oldest.started_at_millis).div_euclid(LOG_START_STEP_MILLIS) * LOG_START_STEP_MILLIS;
        let keep = kept.iter().take_while(|s| s.started_at_millis >= start).count();
        kept = &kept[..keep];
    }
    let log = (!kept.is_empty()).then(|| {
        let mut text = header.to_owned();
        for session in kept.iter().rev() {
            text.push_str(&log_line(session, now_millis));
        }
        text.truncate(text.trim_end().len());
        text
    });
    Some(Layer1 { log, now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::SessionEnd;

    fn session(id: i64, title: &str, start: i64, end: Option<i64>) -> ActivitySession {
        ActivitySession {
            session_id: id,
            app: "Firefox".into(),
            title: title.into(),
            pid: None,
            window_id: 1,
            started_at_millis: start,
            ended_at_millis: end,
            end_reason: end.map(|_| SessionEnd::Switch),
            ..Default::default()
        }
    }

    #[test]
    fn the_log_lists_finished_windows_oldest_first_and_the_current_one_apart() {
        let now = 10_000_000;
        let sessions = vec![
            session(3, "Invoice 2291 - Mail", now - 5_000, None),
            session(2, "Pull request #1193", now - 200_000, Some(now - 5_000)),
            session(1, "Flights to Lisbon", now - 400_000, Some(now - 200_000)),
        ];
        let layer = render(&sessions, now, 400).unwrap();
        assert!(layer.now.contains("Firefox: Invoice 2291 - Mail (for 5s)"), "{}", layer.now);
        let log = layer.log.unwrap();
        let (lisbon, pr) = (log.find("Flights to Lisbon").unwrap(), log.find("Pull request #1193").unwrap());
        assert!(lisbon < pr, "oldest first: {log}");
        assert!(!log.contains("Invoice 2291"), "the current window is not in the stable log");
    }

    #[test]
    fn a_cut_log_starts_on_a_half_hour_and_keeps_its_start_as_windows_are_added() {
        let minute = 60_000;
        let base = 1_000 * LOG_START_STEP_MILLIS;
        // One finished window every 5 minutes, newest first.
        let day = |count: i64| -> Vec<ActivitySession> {
            (0..count).rev().map(|i| session(i, &format!("Tab {i}"), base + i * 5 * minute, Some(base + (i + 1) * 5 * minute))).collect()
        };
        let now = |count: i64| base + count * 5 * minute;
        let logs: Vec<String> = (30..=42).map(|count| render(&day(count), now(count), 150).unwrap().log.unwrap()).collect();
        let starts: Vec<&str> = logs.iter().map(|log| log.lines().nth(1).unwrap()).collect();
        for (log, start) in logs.iter().zip(&starts) {
            assert!(estimate_tokens(log) <= 150);
            let minute_of_hour: i64 = start[3..5].parse().unwrap();
            assert!(minute_of_hour % 30 == 0, "starts on a half hour: {start}");
        }
        // An hour of new windows (12) moves the start at most twice; otherwise a new window only appends.
        let moves = starts.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(moves <= 2, "{starts:?}");
        for pair in logs.windows(2).filter(|w| w[0].lines().nth(1) == w[1].lines().nth(1)) {
            assert!(pair[1].starts_with(&pair[0]), "{}\n---\n{}", pair[0], pair[1]);
        }
    }

    #[test]
    fn nothing_captured_means_no_context() {
        assert_eq!(render(&[], 0, 100), None);
    }
}
