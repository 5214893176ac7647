//! Memory the user corrects in conversation. A message that starts "remember
//! that…", "forget…", "that's wrong, …" (or "correction: …") or asks "why
//! do you think that?" is about what cowork believes, so cowork answers it
//! itself, the same way whichever brain is set: it proposes the change to the
//! pinned facts — what goes, what comes — for one click to confirm (nothing
//! changes without it), or says where the last answer's beliefs came from.
//!
//! A correction that matches no pinned fact is an ordinary message: the model
//! answers it, with the thread's history ("no, make it shorter" starts like a
//! correction and is one of those). Confirming a removal or replacement
//! also takes the old fact out of the summaries derived from it (the
//! sentences that state it), so it does not come back through them.

use serde::{Deserialize, Serialize};

use super::hot::{Fact, File};

/// What a message asks of memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Intent {
    /// "remember that …": pin a fact.
    Remember(String),
    /// "forget …" ("forget that" alone: what the last answer stood on).
    Forget(String),
    /// "that's wrong, …": replace the fact it contradicts.
    Correct(String),
    /// "why do you think that?": where the last answer's beliefs came from.
    Why,
}

/// A change to the pinned facts, proposed; it happens when the user confirms it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    Add { file: File, text: String },
    Replace { memory_id: i64, old: String, new: String },
    Remove { memory_id: i64, text: String },
}

impl Change {
    /// What the confirmation card says.
    pub fn describe(&self) -> String {
        match self {
            Change::Add { file, text } => format!("Pin to {}: “{text}”", file.file_name()),
            Change::Replace { old, new, .. } => format!("Replace “{old}” with “{new}”"),
            Change::Remove { text, .. } => format!("Forget “{text}”"),
        }
    }
}

const REMEMBER: &[&str] = &["please remember that ", "please remember: ", "please remember ", "remember that ", "remember: ", "remember "];
const FORGET: &[&str] = &["please forget that ", "please forget about ", "please forget: ", "please forget ", "forget that ", "forget about ", "forget: ", "forget "];
const CORRECT: &[&str] = &[
    "that's wrong, ", "that's wrong: ", "that's wrong. ", "that is wrong, ", "that is wrong: ", "that's not right, ", "that's not right: ", "that's incorrect, ",
    "that is incorrect, ", "wrong: ", "correction: ", "no, that's wrong: ", "no, that's wrong, ", "not true, ", "not true: ", "no, ", "actually, ",
];
const WHY: &[&str] = &["why do you think that", "why do you think so", "why do you believe that", "where did you get that", "how do you know that", "what makes you think that"];

/// What `text` asks of memory, if anything.
pub fn parse(text: &str) -> Option<Intent> {
    let trimmed = text.trim();
    let lower = trimmed.to_lowercase();
    if WHY.iter().any(|w| lower.trim_end_matches(['?', '.', '!']).trim() == *w) {
        return Some(Intent::Why);
    }
    let rest = |prefixes: &[&str]| prefixes.iter().find(|p| lower.starts_with(*p)).map(|p| tidy(&trimmed[p.len()..]));
    if lower.trim_end_matches(['.', '!']) == "forget that" || lower.trim_end_matches(['.', '!']) == "forget it" {
        return Some(Intent::Forget(String::new()));
    }
    // A question is asked, not remembered ("remember when I…?").
    if let Some(fact) = rest(REMEMBER).filter(|f| !f.is_empty() && !f.ends_with('?')) {
        return Some(Intent::Remember(fact));
    }
    if let Some(what) = rest(FORGET).filter(|f| !f.ends_with('?')) {
        return Some(Intent::Forget(what));
    }
    rest(CORRECT).filter(|f| !f.is_empty() && !f.ends_with('?')).map(Intent::Correct)
}

/// A fact's text from the user's words: trimmed, "that" dropped, a capital first letter, a full stop.
fn tidy(text: &str) -> String {
    let text = text.trim().trim_start_matches("that ").trim();
    let mut chars = text.chars();
    let Some(first) = chars.next() else { return String::new() };
    let mut out: String = first.to_uppercase().chain(chars).collect();
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// The words that say what a text is about (short and common words dropped).
pub fn content_words(text: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "the", "and", "for", "that", "this", "with", "have", "has", "had", "about", "from", "into", "you", "your", "are", "was", "were", "not", "now",
        "but", "its", "it's", "his", "her", "their", "they", "them", "our", "who", "what", "when", "where", "which", "how", "why", "there", "then",
        "than", "also", "just", "very", "really", "actually", "anymore", "any", "more", "all", "some", "one", "our", "out", "is", "my", "i'm",
    ];
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'').map(|w| w.trim_matches('\'').to_lowercase()) {
        if word.chars().count() >= 3 && !STOP.contains(&word.as_str()) && !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// How much of `fact` the words of `text` cover (0 to 1).
fn overlap(fact: &str, text: &[String]) -> f64 {
    let words = content_words(fact);
    if words.is_empty() {
        return 0.0;
    }
    words.iter().filter(|w| text.contains(w)).count() as f64 / words.len() as f64
}

/// The pinned fact `text` is most about, if it is about one (nearly a third of its words or more).
pub fn best_match<'a>(facts: &'a [Fact], text: &str) -> Option<&'a Fact> {
    let words = content_words(text);
    facts
        .iter()
        .map(|f| (f, overlap(&f.text, &words)))
        .filter(|(_, score)| *score >= 0.3)
        .max_by(|a, b| a.1.total_cmp(&b.1).then(a.0.created_at_millis.cmp(&b.0.created_at_millis)))
        .map(|(f, _)| f)
}

/// Which file a new fact belongs in: about the user (USER.md) or a note (MEMORY.md).
pub fn file_for(text: &str) -> File {
    let lower = format!(" {} ", text.to_lowercase());
    if [" i ", " i'm ", " i am ", " my ", " me ", " mine "].iter().any(|w| lower.contains(w)) { File::User } else { File::Memory }
}

/// The sentences of a summary that state `fact` (most of its words), taken out;
/// None when none does.
pub fn without_fact(summary: &str, fact: &str) -> Option<String> {
    let wanted = content_words(fact);
    if wanted.is_empty() {
        return None;
    }
    let sentences: Vec<&str> = summary.split_inclusive(['.', '!', '?', '\n']).collect();
    let kept: Vec<&str> = sentences
        .iter()
        .copied()
        .filter(|sentence| {
            let words = content_words(sentence);
            let stated = wanted.iter().filter(|w| words.contains(w)).count() as f64 / wanted.len() as f64;
            stated < 0.6
        })
        .collect();
    (kept.len() < sentences.len()).then(|| kept.concat().trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: i64, text: &str) -> Fact {
        Fact { memory_id: id, file: File::User, text: text.into(), pinned_by: "user".into(), created_at_millis: id }
    }

    #[test]
    fn what_a_message_asks_of_memory() {
        assert_eq!(parse("Remember that my manager is Marta Kowalski"), Some(Intent::Remember("My manager is Marta Kowalski.".into())));
        assert_eq!(parse("please remember: standup is at 10:30"), Some(Intent::Remember("Standup is at 10:30.".into())));
        assert_eq!(parse("Forget that my manager is Dana."), Some(Intent::Forget("My manager is Dana.".into())));
        assert_eq!(parse("forget that"), Some(Intent::Forget(String::new())));
        assert_eq!(parse("That's wrong, he moved to Lisbon"), Some(Intent::Correct("He moved to Lisbon.".into())));
        assert_eq!(parse("Correction: the Atlas budget code is ATL-9100"), Some(Intent::Correct("The Atlas budget code is ATL-9100.".into())));
        assert_eq!(parse("Why do you think that?"), Some(Intent::Why));
        // Ordinary messages are not about memory.
        for text in ["Do you remember when I booked the flight?", "remember when we met?", "What is my manager's name?", "why is the sky blue?", "forget it?", "no, is it?"] {
            assert_eq!(parse(text), None, "{text}");
        }
        // "no, …" reads as a correction, and is one only when it matches a pinned fact (`best_match`).
        assert_eq!(parse("No, my manager is Marta Kowalski"), Some(Intent::Correct("My manager is Marta Kowalski.".into())));
        let facts = [fact(1, "My manager is Dana Reyes.")];
        for text in ["no, make it shorter", "actually, write it in French"] {
            let Some(Intent::Correct(said)) = parse(text) else { panic!("{text}") };
            assert!(best_match(&facts, &said).is_none(), "{text}: an ordinary message after all");
        }
    }

    #[test]
    fn a_correction_finds_the_fact_it_contradicts() {
        let facts = [fact(1, "My manager is Dana Reyes."), fact(2, "The Atlas project's budget code is ATL-7734."), fact(3, "My partner Lior's birthday is 14 March.")];
        assert_eq!(best_match(&facts, "My manager is Marta Kowalski now").map(|f| f.memory_id), Some(1));
        assert_eq!(best_match(&facts, "The Atlas budget code changed to ATL-9100").map(|f| f.memory_id), Some(2));
        assert_eq!(best_match(&facts, "Dana Reyes").map(|f| f.memory_id), Some(1));
        assert_eq!(best_match(&facts, "the weather in Porto"), None);
        assert_eq!(file_for("My manager is Marta."), File::User);
        assert_eq!(file_for("The printer on floor 2 jams."), File::Memory);
    }

    #[test]
    fn forgetting_a_fact_takes_its_sentences_out_of_a_summary() {
        let summary = "Sam met Dana Reyes, his manager, about the Q3 plan. He then fixed the ETL job.";
        assert_eq!(without_fact(summary, "My manager is Dana Reyes.").as_deref(), Some("He then fixed the ETL job."));
        assert_eq!(without_fact(summary, "Lior's birthday is 14 March."), None);
    }
}
