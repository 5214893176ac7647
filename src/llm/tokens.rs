//! Token estimates for budgets, with no tokenizer at hand.

/// A rough token count: about four characters per token of English text. Good
/// enough for a budget, and it costs nothing on the hot path.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The longest prompt sent to the bundled local model (SmolLM2 reads 2,048
/// tokens; the rest is room for the answer). Longer requests go to the cloud
/// when a tier is configured.
pub const LOCAL_LIMIT_TOKENS: usize = 1_500;
