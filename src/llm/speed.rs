//! How fast each local chat model runs on this machine, measured from its own
//! generations: the `llm` worker records each one's prompt length, time to the
//! first token and decode rate in `model-speed.json` in the data directory
//! (the last `KEPT` per model file). Settings → Models shows the medians, and
//! the default model's speed floor uses them once there are enough
//! (`config::resolve_chat_model`) instead of the estimate from the cores.
//! Nothing captured is in it: numbers and model file names only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "model-speed.json";
/// Generations kept per model (older ones drop out: a new CPU or thermal state shows within a day).
const KEPT: usize = 30;
/// Generations a model needs before its measured speed replaces the estimate.
pub const TRUSTED_AFTER: usize = 5;

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// One generation's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub prompt_tokens: u32,
    pub first_token_ms: u32,
    pub completion_tokens: u32,
    pub tokens_per_sec: f32,
}

/// The medians of a model's recent generations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub samples: usize,
    pub first_token_ms: u32,
    pub prompt_tokens: u32,
    pub tokens_per_sec: f32,
}

impl Measured {
    /// "On this machine: first token in 0.8 s (prompts of about 650 tokens), 21 tokens/s; median of 12 answers."
    pub fn describe(&self) -> String {
        format!(
            "On this machine: first token in {:.1} s (prompts of about {} tokens), {:.0} tokens/s; median of {} {}.",
            self.first_token_ms as f64 / 1000.0,
            self.prompt_tokens,
            self.tokens_per_sec,
            self.samples,
            if self.samples == 1 { "answer" } else { "answers" }
        )
    }
}

/// Every model's recent generations, by model file name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Speeds {
    models: BTreeMap<String, Vec<Sample>>,
}

impl Speeds {
    /// What was measured before; a missing file is nothing measured, and a damaged one is
    /// said in the log and started over (the figures come back with the next answers).
    pub fn load(path: &Path) -> Self {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(path = %path.display(), error = %err, "the measured model speeds cannot be read; measuring again");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }

    /// Written whole to a neighbour, then renamed over: a crash leaves the old file or the new one.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(self)?).with_context(|| format!("cannot write {}", partial.display()))?;
        std::fs::rename(&partial, path).with_context(|| format!("cannot replace {}", path.display()))
    }

    /// Records a generation that produced text (a stopped or empty one measures nothing).
    pub fn record(&mut self, model: &str, sample: Sample) -> bool {
        if model.is_empty() || sample.first_token_ms == 0 || sample.completion_tokens == 0 {
            return false;
        }
        let samples = self.models.entry(model.to_owned()).or_default();
        samples.push(sample);
        let excess = samples.len().saturating_sub(KEPT);
        samples.drain(..excess);
        true
    }

    /// The medians of every model that has answered here, by model file name.
    pub fn all(&self) -> BTreeMap<String, Measured> {
        self.models.keys().filter_map(|model| Some((model.clone(), self.measured(model)?))).collect()
    }

    /// The medians for the model file `model`, if it has answered here.
    pub fn measured(&self, model: &str) -> Option<Measured> {
        let samples = self.models.get(model).filter(|s| !s.is_empty())?;
        fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> T {
            values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            values[values.len() / 2]
        }
        // A one-token answer has no decode rate.
        let rates: Vec<f32> = samples.iter().filter(|s| s.completion_tokens > 1).map(|s| s.tokens_per_sec).collect();
        Some(Measured {
            samples: samples.len(),
            first_token_ms: median(samples.iter().map(|s| s.first_token_ms).collect()),
            prompt_tokens: median(samples.iter().map(|s| s.prompt_tokens).collect()),
            tokens_per_sec: if rates.is_empty() { 0.0 } else { median(rates) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(first_token_ms: u32, tokens_per_sec: f32) -> Sample {
        Sample { prompt_tokens: 600 + first_token_ms / 10, first_token_ms, completion_tokens: 20, tokens_per_sec }
    }

    #[test]
    fn speeds_are_medians_of_the_last_generations_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        let mut speeds = Speeds::load(&file);
        assert_eq!(speeds.measured("qwen.gguf"), None);
        // A stopped generation (no first token) measures nothing.
        assert!(!speeds.record("qwen.gguf", Sample { first_token_ms: 0, ..sample(0, 0.0) }));
        for (ms, rate) in [(900, 20.0), (5000, 2.0), (800, 22.0)] {
            assert!(speeds.record("qwen.gguf", sample(ms, rate)));
        }
        let measured = speeds.measured("qwen.gguf").unwrap();
        assert_eq!((measured.samples, measured.first_token_ms, measured.tokens_per_sec), (3, 900, 20.0), "one slow outlier does not move a median");
        assert_eq!(measured.describe(), "On this machine: first token in 0.9 s (prompts of about 690 tokens), 20 tokens/s; median of 3 answers.");
        speeds.save(&file).unwrap();
        assert_eq!(Speeds::load(&file), speeds);
        // Only the last KEPT count: a machine that got slower shows it.
        for _ in 0..KEPT {
            speeds.record("qwen.gguf", sample(4000, 3.0));
        }
        assert_eq!(speeds.measured("qwen.gguf").unwrap().first_token_ms, 4000);
        assert_eq!(speeds.measured("qwen.gguf").unwrap().samples, KEPT);
    }

    #[test]
    fn a_damaged_file_is_measured_again_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        std::fs::write(&file, b"{\"models\": {\"q\": [{\"prompt_tok").unwrap();
        let mut speeds = Speeds::load(&file);
        assert_eq!(speeds, Speeds::default());
        speeds.record("q", sample(700, 10.0));
        speeds.save(&file).unwrap();
        assert_eq!(Speeds::load(&file).measured("q").unwrap().samples, 1);
    }
}
