//! How many tokens of recalled notes a local question carries (issue 56).
//!
//! A later question's first token waits for the engine to read its own turn:
//! the head before it is prefilled (`warm`), and the notes recalled for the
//! question are most of the rest. So a local question carries as many notes
//! as this machine reads in `NOTES_SECONDS`, at the prefill rate measured on
//! the local model's own prompts (the tokens each one read past the prefix
//! cache, over the time it took: the engine's figures), never more than the
//! configured budget (`memory.recall_budget_tokens`, which a cloud model
//! gets whole) and never fewer than `MIN_NOTES_TOKENS`. Until a prompt was
//! measured, the configured budget. What a cut leaves out is the worst match
//! (`rag::Assembly::fit`), and the Memory view lists it.

use std::collections::VecDeque;

use crate::records::GenerationStats;

/// The share of the first-token target (2 s) the notes may take to read; the
/// rest is the question, the clock and window when they changed, and the
/// first decoded token. Measured with `scripts/eval-grounded` (docs/performance.md).
pub const NOTES_SECONDS: f64 = 1.15;
/// Never fewer notes than this, on the slowest machine: the best match (a note
/// alone over the budget stays too: `rag::Assembly::fit`).
pub const MIN_NOTES_TOKENS: usize = 40;
/// A read shorter than this says more about a step's fixed costs than the rate.
const MIN_READ: usize = 48;
/// The rate is the median of this many recent reads (one model's).
const KEPT: usize = 9;

/// The local model's recent prefill rates, tokens read a second.
#[derive(Debug, Default)]
pub struct PrefillRate {
    model: String,
    rates: VecDeque<f64>,
}

impl PrefillRate {
    /// Keeps one generation's read rate (another model starts over).
    pub fn record(&mut self, model: &str, stats: &GenerationStats) {
        if model != self.model {
            self.model = model.to_owned();
            self.rates.clear();
        }
        let read = stats.prompt_tokens.saturating_sub(stats.cached_prompt_tokens);
        if read < MIN_READ || stats.prompt_millis == 0 {
            return;
        }
        self.rates.push_back(read as f64 * 1000.0 / stats.prompt_millis as f64);
        while self.rates.len() > KEPT {
            self.rates.pop_front();
        }
    }

    /// The median of the recent reads, if any.
    pub fn tokens_per_sec(&self) -> Option<f64> {
        let mut rates: Vec<f64> = self.rates.iter().copied().collect();
        rates.sort_by(f64::total_cmp);
        rates.get(rates.len() / 2).copied()
    }

    /// The notes' budget for a local question, given the configured one.
    pub fn notes_budget(&self, configured: usize) -> usize {
        match self.tokens_per_sec() {
            Some(rate) => ((rate * NOTES_SECONDS) as usize).max(MIN_NOTES_TOKENS).min(configured),
            None => configured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(prompt: usize, cached: usize, millis: u64) -> GenerationStats {
        GenerationStats { prompt_tokens: prompt, cached_prompt_tokens: cached, prompt_millis: millis, ..GenerationStats::default() }
    }

    #[test]
    fn the_budget_is_what_this_machine_reads_in_the_notes_share_of_the_target() {
        let mut rate = PrefillRate::default();
        assert_eq!(rate.notes_budget(500), 500, "nothing measured: the configured budget");
        // A cold head: 836 tokens in 14 s. Cached parts do not count as read.
        rate.record("qwen-1.5b", &read(836, 0, 14_000));
        rate.record("qwen-1.5b", &read(950, 836, 2_000));
        rate.record("qwen-1.5b", &read(960, 950, 900)); // ten tokens: fixed costs, not a rate
        assert_eq!(rate.tokens_per_sec().map(|r| r.round()), Some(60.0), "the median of 57 and 59.7");
        assert_eq!(rate.notes_budget(500), 68);
        assert_eq!(rate.notes_budget(50), 50, "never above the configured budget");
        // A machine four times as fast carries four times the notes; a very slow one the minimum.
        let mut fast = PrefillRate::default();
        fast.record("qwen-1.5b", &read(836, 0, 3_500));
        assert_eq!(fast.notes_budget(500), (836.0 / 3.5 * NOTES_SECONDS) as usize);
        let mut slow = PrefillRate::default();
        slow.record("qwen-1.5b", &read(200, 0, 20_000));
        assert_eq!(slow.notes_budget(500), MIN_NOTES_TOKENS);
        // Another model's rate is its own.
        slow.record("smollm2", &read(100, 0, 100));
        assert_eq!(slow.notes_budget(500), 500);
    }

    #[test]
    fn the_rate_is_the_median_of_the_recent_reads() {
        let mut rate = PrefillRate::default();
        for millis in [1_000, 1_000, 1_000, 10_000] {
            rate.record("m", &read(100, 0, millis));
        }
        assert_eq!(rate.tokens_per_sec(), Some(100.0), "one slow read (a busy moment) does not set it");
        for _ in 0..KEPT {
            rate.record("m", &read(100, 0, 2_000));
        }
        assert_eq!(rate.tokens_per_sec(), Some(50.0), "older reads drop out");
    }
}
