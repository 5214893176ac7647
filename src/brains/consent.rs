//! What leaves the machine with a cloud request: captured context only with
//! the user's consent for that provider, and redacted even then. The preview
//! the user approves is exactly the text that would be sent.

use std::sync::OnceLock;

use regex::Regex;

/// Masks what should not leave even with consent: e-mail addresses, API-key
/// and token shapes, and long digit runs (card, account and phone numbers).
pub fn redact_for_cloud(text: &str) -> String {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        vec![
            (Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}").expect("valid"), "[email]"),
            (Regex::new(r"\b(sk|pk|rk|ghp|gho|ghs|xox[abp]|glpat|AKIA)[-_A-Za-z0-9]{12,}\b").expect("valid"), "[key]"),
            (Regex::new(r"\b\d(?:[ -]?\d){7,}\b").expect("valid"), "[number]"),
        ]
    });
    static DATE: OnceLock<Regex> = OnceLock::new();
    // "2026-11-27 07:36" is a date and a time, not an account number.
    let date = DATE.get_or_init(|| Regex::new(r"^\d{4}-\d{2}-\d{2}(?: \d{1,2})?$").expect("valid"));
    let mut out = crate::records::redact_private(text);
    for (pattern, mask) in patterns {
        out = pattern.replace_all(&out, |found: &regex::Captures| if *mask == "[number]" && date.is_match(&found[0]) { found[0].to_owned() } else { (*mask).to_owned() }).into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mail_keys_and_long_numbers_are_masked_and_the_rest_kept() {
        let text = "Current window: Inbox - dana@example.com\nTyped: card 4111 1111 1111 1111, key sk-proj-AbCdEf1234567890xyz, room 42";
        let out = redact_for_cloud(text);
        assert_eq!(out, "Current window: Inbox - [email]\nTyped: card [number], key [key], room 42");
        // Dates and times are not numbers to hide.
        assert_eq!(redact_for_cloud("It is Fri 2026-11-27 07:36 now; call 0151 2345 6789"), "It is Fri 2026-11-27 07:36 now; call [number]");
    }
}
