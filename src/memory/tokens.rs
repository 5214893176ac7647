//! Token estimates for budgets, with no tokenizer at hand.

/// A rough token count: about four characters per token of English text. Good
/// enough for a budget, and it costs nothing on the hot path.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}
