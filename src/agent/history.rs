//! A thread's history for one prompt, sized by tokens rather than a count of
//! messages: the newest messages whole while they fit the budget, and the
//! older ones summarised a line each ("Earlier in this conversation"), so a
//! long thread keeps what it decided instead of forgetting it at message 9.
//!
//! The budget follows the model: a quarter of a cloud model's context window
//! (the price table knows it), within Settings' cap; the local model's small
//! prompt gets a small one. The summary of the older part is extractive (the
//! head of each message), made without a model call, so it costs no time.

use crate::memory::tokens::estimate_tokens;
use crate::records::Role;

/// History the local model reads, in tokens (its whole prompt is small).
pub const LOCAL_BUDGET_TOKENS: usize = 600;
/// The most history a cloud model reads, in tokens, however large its window.
pub const CLOUD_CAP_TOKENS: usize = 24_000;
/// A cloud model's context window when the price table does not know it.
const UNKNOWN_WINDOW_TOKENS: u64 = 8_192;
/// Characters of an older message its summary line keeps.
const LINE_CHARS: usize = 160;

/// A thread's history fitted to a budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fitted {
    /// The newest messages, whole, oldest first.
    pub recent: Vec<(Role, String)>,
    /// The older ones, a line each (None: everything fitted).
    pub earlier: Option<String>,
}

impl Fitted {
    /// What it costs in a prompt.
    pub fn tokens(&self) -> usize {
        self.recent.iter().map(|(_, text)| estimate_tokens(text)).sum::<usize>() + self.earlier.as_deref().map_or(0, estimate_tokens)
    }
}

/// The history budget for a cloud model with `window` tokens of context, within `cap`.
pub fn cloud_budget(window: Option<u64>, cap: usize) -> usize {
    let window = window.unwrap_or(UNKNOWN_WINDOW_TOKENS) as usize;
    (window / 4).min(cap)
}

/// The newest messages of `history` whole within `budget_tokens` (three
/// quarters of it), the older ones as summary lines within the rest. A
/// grounded refusal is left out: it says nothing the next answer can use.
pub fn fit(history: &[(Role, String)], budget_tokens: usize) -> Fitted {
    let history: Vec<&(Role, String)> = history.iter().filter(|(_, text)| text != crate::memory::rag::GROUNDED_REFUSAL).collect();
    let whole_budget = budget_tokens * 3 / 4;
    let mut used = 0;
    let mut start = history.len();
    while start > 0 {
        let tokens = estimate_tokens(&history[start - 1].1);
        if used + tokens > whole_budget {
            break;
        }
        used += tokens;
        start -= 1;
    }
    // A thread cut mid-exchange starts on the user's turn.
    while start < history.len() && history[start].0 == Role::Assistant {
        start += 1;
    }
    let recent: Vec<(Role, String)> = history[start..].iter().map(|m| (*m).clone()).collect();
    if start == 0 {
        return Fitted { recent, earlier: None };
    }
    let line_budget = budget_tokens - used.min(budget_tokens);
    let mut lines: Vec<String> = Vec::new();
    let mut spent = 0;
    for (role, text) in history[..start].iter().rev() {
        let who = if *role == Role::User { "The user" } else { "You" };
        let head: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(LINE_CHARS).collect();
        let more = if text.chars().count() > LINE_CHARS { "…" } else { "" };
        let line = format!("- {who}: {head}{more}");
        let tokens = estimate_tokens(&line);
        if spent + tokens > line_budget {
            break;
        }
        spent += tokens;
        lines.push(line);
    }
    lines.reverse();
    let left_out = start - lines.len();
    let mut earlier = String::from("Earlier in this conversation (shortened, oldest first):");
    if left_out > 0 {
        earlier.push_str(&format!("\n- ({left_out} earlier messages left out)"));
    }
    for line in &lines {
        earlier.push('\n');
        earlier.push_str(line);
    }
    Fitted { recent, earlier: Some(earlier) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(n: usize, words: usize) -> Vec<(Role, String)> {
        (0..n).map(|i| (if i % 2 == 0 { Role::User } else { Role::Assistant }, format!("message {i}: {}", "word ".repeat(words)))).collect()
    }

    #[test]
    fn a_short_thread_goes_whole_and_a_long_one_keeps_its_newest_whole_and_the_rest_as_lines() {
        let short = thread(12, 5);
        assert_eq!(fit(&short, 4_000), Fitted { recent: short.clone(), earlier: None }, "twelve short messages fit: more than the old limit of 8");
        let long = thread(40, 60);
        let fitted = fit(&long, 1_000);
        assert!(fitted.recent.len() < 40 && fitted.recent.len() >= 2, "{}", fitted.recent.len());
        assert_eq!(fitted.recent.last(), long.last(), "the newest message is kept whole");
        assert_eq!(fitted.recent[0].0, Role::User, "the kept part starts on the user's turn");
        let earlier = fitted.earlier.expect("the older part is summarised");
        let first_kept = &fitted.recent[0].1;
        let cut = long.iter().position(|m| &m.1 == first_kept).unwrap();
        assert!(earlier.contains(&format!("message {}:", cut - 1)), "the message just before the kept part has its line: {earlier}");
        assert!(earlier.contains("earlier messages left out"), "{earlier}");
        let total: usize = fitted.recent.iter().map(|(_, t)| estimate_tokens(t)).sum::<usize>() + estimate_tokens(&earlier);
        assert!(total <= 1_000 + 20, "within the budget: {total}");
    }

    #[test]
    fn the_budget_follows_the_models_window_within_the_cap() {
        assert_eq!(cloud_budget(Some(200_000), 24_000), 24_000);
        assert_eq!(cloud_budget(Some(16_384), 24_000), 4_096);
        assert_eq!(cloud_budget(None, 24_000), 2_048);
    }

    #[test]
    fn a_refusal_is_left_out() {
        let history = vec![(Role::User, "q".to_owned()), (Role::Assistant, crate::memory::rag::GROUNDED_REFUSAL.to_owned()), (Role::User, "q2".to_owned()), (Role::Assistant, "a2".to_owned())];
        let fitted = fit(&history, 1_000);
        assert_eq!(fitted.recent.len(), 3);
        assert!(fitted.recent.iter().all(|(_, t)| t != crate::memory::rag::GROUNDED_REFUSAL));
    }
}
