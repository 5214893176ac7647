//! The local model's prompt head, kept prefilled in the background (issue 56).
//!
//! Every new question's prompt starts with the same head: the identity, the
//! user's memory (profile, pinned facts, summaries), the worked examples and
//! the activity log (`llm::prompt`). Prefilled once, the engine's prefix cache
//! keeps it, and a question costs only its own turn (the clock, the current
//! window, the notes recalled for it, the question). Cold, the 1.5B reads a
//! 955-token head for 18–21 s: the first answer of the day.
//!
//! While `llm.keep_warm` is on, the llm worker keeps the model loaded where
//! the machine can afford it (`LocalModelState::affordable`: loading it is
//! GREEN and it takes at most an eighth of the RAM; idle unloading off;
//! battery, heat and memory pressure still unload it) and the
//! agent worker, between commands, prefills the head again when it changed
//! (capture added to the log, a summary or a fact changed the memory) or when
//! another prompt ran since (a summary's or a task's prompt may have evicted
//! it): at most every `REWARM_EVERY`, only when the machine is idle enough
//! (`IDLE_SHARE` of the CPUs free), the user has not typed for `TYPING_QUIET`,
//! and the local model is not paused for heat or the battery. The head goes in
//! pieces at message boundaries (memory, then the examples, then the log), and
//! a command waiting for the worker (a question) stops it between pieces, so
//! a question waits for one piece at most. A piece the cache already holds
//! costs one token.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::AgentCommand;
use super::events::AgentEvent;
use super::operation::ChatRequest;
use super::worker::AgentWorker;
use crate::ids::now_millis;
use crate::llm::{GenerateRequest, LocalBrain, PromptMessage};

/// A changed head is prefilled again at most this often: the log grows a line
/// at every window switch, and each refresh reads what was added since.
pub const REWARM_EVERY: Duration = Duration::from_secs(120);
/// The share of the CPUs other work must leave free for a refresh (over the
/// interval since the last look).
pub const IDLE_SHARE: f64 = 0.5;
/// No refresh while the user types, or within this long after a key.
pub const TYPING_QUIET: Duration = Duration::from_secs(10);

/// What the worker knows of the head it last prefilled.
#[derive(Debug)]
pub struct Warmth {
    /// The head's hash (None: never, or the model was unloaded since).
    head: Option<u64>,
    /// When the last refresh ended.
    at: Option<Instant>,
    /// The local model's last use as of that refresh: a later use ran another prompt.
    used_at_millis: i64,
    /// The CPUs' busy and total time at the last look (`stat`).
    cpu: Option<(u64, u64)>,
    /// Where the CPUs' time is read (`/proc/stat`; a test's own file).
    stat: std::path::PathBuf,
}

impl Default for Warmth {
    fn default() -> Self {
        Self { head: None, at: None, used_at_millis: 0, cpu: None, stat: "/proc/stat".into() }
    }
}

impl Warmth {
    /// A warmth that reads the CPUs' time from `stat` (tests).
    #[cfg(test)]
    pub fn with_stat(stat: std::path::PathBuf) -> Self {
        Self { stat, ..Self::default() }
    }

    /// As if the last refresh were `by` older (tests).
    #[cfg(test)]
    pub fn age(&mut self, by: Duration) {
        self.at = self.at.and_then(|at| at.checked_sub(by));
    }

    fn read_cpu(&self) -> Option<(u64, u64)> {
        std::fs::read_to_string(&self.stat).ok().and_then(|s| cpu_times(&s))
    }
}

/// Why the head was not prefilled now (for the log and tests), or None when it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    Off,
    NotLoaded,
    Paused,
    Typing,
    Busy,
    Recent,
    Unchanged,
    /// A command arrived: the rest waits for the next look.
    Interrupted,
    Failed(String),
}

/// The busy and total time of all CPUs, in clock ticks, from `/proc/stat`'s first line.
pub fn cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is counted in user).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (fields.len() >= 4).then_some((total - idle, total))
}

/// The share of the CPUs that was free between two looks.
pub fn free_share(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let total = after.1.checked_sub(before.1)?;
    let busy = after.0.checked_sub(before.0)?;
    (total > 0).then(|| 1.0 - busy as f64 / total as f64)
}

/// The pieces the head is prefilled in: growing prefixes of its messages,
/// cut after the system prompt and after the worked examples.
pub fn pieces(head: &[PromptMessage], examples: usize) -> Vec<&[PromptMessage]> {
    let mut cuts = vec![1, 1 + examples, head.len()];
    cuts.retain(|&cut| cut >= 1 && cut <= head.len());
    cuts.dedup();
    cuts.into_iter().map(|cut| &head[..cut]).collect()
}

fn hash(messages: &[PromptMessage]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for message in messages {
        (message.role as u8).hash(&mut hasher);
        message.content.hash(&mut hasher);
    }
    hasher.finish()
}

impl<B: LocalBrain> AgentWorker<B> {
    /// The head every next question shares, without the clock or anything
    /// said about the question: identity, memory, examples, activity log
    /// (at least the identity).
    /// With `clock`, the clock and current window too, for a question asked
    /// within the minute (the quick prompt is open).
    pub(super) fn prompt_head(&mut self, clock: bool) -> Vec<PromptMessage> {
        let (settings, _) = self.brains();
        let probe = ChatRequest::default();
        let memory = self.chat_memory(&probe, &settings);
        let context = self.prompt_context(memory.as_ref().map(|m| &m.report), "");
        if clock {
            return self.prompt(&probe, context.as_ref());
        }
        let context = context.map(|mut context| {
            context.turn.clear();
            context
        });
        let mut messages = self.prompt(&probe, context.as_ref());
        // The last turn ends with the log; the question's own part starts after it.
        match context.map(|c| c.log).filter(|log| !log.is_empty()) {
            Some(log) => {
                if let Some(last) = messages.last_mut() {
                    last.content = log;
                }
            }
            None => {
                messages.pop();
            }
        }
        messages
    }

    /// Between commands: tells the llm worker whether to keep the model
    /// loaded, and prefills the head again when it is due (module docs).
    pub(super) fn keep_warm(&mut self, commands: &Receiver<AgentCommand>) -> Option<Skip> {
        let (settings, _) = self.brains();
        let state = self.brain.state();
        state.set_keep_loaded(settings.keep_warm);
        if !settings.keep_warm {
            return Some(Skip::Off);
        }
        // The llm worker loads it (when the machine can afford it) on its own next look.
        if !state.is_loaded() {
            self.warmth.head = None;
            return Some(Skip::NotLoaded);
        }
        if state.prefers_cloud() {
            return Some(Skip::Paused);
        }
        let last_used = now_millis() - state.idle_for(now_millis()).as_millis() as i64;
        let typed = self.config.keys_at_millis.load(Ordering::Relaxed);
        if now_millis() - typed < TYPING_QUIET.as_millis() as i64 {
            return Some(Skip::Typing);
        }
        // Idle since the last look (the first look only takes the measure; without /proc, no measure).
        let cpu = self.warmth.read_cpu();
        let before = std::mem::replace(&mut self.warmth.cpu, cpu);
        let idle = match (before, cpu) {
            (Some(before), Some(after)) => free_share(before, after).is_some_and(|free| free >= IDLE_SHARE),
            (None, Some(_)) => false,
            (_, None) => true,
        };
        if !idle {
            return Some(Skip::Busy);
        }
        if self.warmth.at.is_some_and(|at| at.elapsed() < REWARM_EVERY) {
            return Some(Skip::Recent);
        }
        let head = self.prompt_head(false);
        let key = hash(&head);
        if self.warmth.head == Some(key) && last_used <= self.warmth.used_at_millis {
            return Some(Skip::Unchanged);
        }
        let skip = self.prefill(&head, Some(commands));
        // The prefill's own work is not the user's: the next look measures from here.
        self.warmth.cpu = self.warmth.read_cpu();
        skip
    }

    /// Prefills `head` piece by piece; a waiting command stops it between
    /// pieces. Tells the UI how long it took.
    pub(super) fn prefill(&mut self, head: &[PromptMessage], commands: Option<&Receiver<AgentCommand>>) -> Option<Skip> {
        let started = Instant::now();
        let examples = if head.len() > 2 { self.examples.len() } else { 0 };
        let mut tokens = 0;
        for piece in pieces(head, examples) {
            if commands.is_some_and(|c| !c.is_empty()) {
                return Some(Skip::Interrupted);
            }
            let request = GenerateRequest { messages: piece.to_vec(), max_tokens: 1, only_if_loaded: commands.is_some(), ..GenerateRequest::default() };
            match self.brain.generate(request, self.stop_epoch.load(Ordering::SeqCst), &mut |_| {}) {
                Ok(generation) => tokens = generation.stats.prompt_tokens,
                Err(err) => {
                    tracing::warn!(%err, "could not prefill the prompt head");
                    return Some(Skip::Failed(err.to_string()));
                }
            }
        }
        let millis = started.elapsed().as_millis() as u64;
        tracing::info!(millis, tokens, "prompt head prefilled");
        self.warmth.head = Some(hash(head));
        self.warmth.at = Some(Instant::now());
        self.warmth.used_at_millis = now_millis();
        self.sink.send(AgentEvent::PromptWarmed { millis, prompt_tokens: tokens });
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::PromptRole;

    #[test]
    fn the_cpus_free_share_comes_from_proc_stat() {
        let before = cpu_times("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3").unwrap();
        assert_eq!(before, (150, 1000));
        // 300 more ticks, 240 of them busy: a fifth free.
        let after = cpu_times("cpu  300 0 90 850 60 0 0 0 0 0\n").unwrap();
        assert!((free_share(before, after).unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(free_share(after, after), None, "no time passed");
        assert_eq!(cpu_times("intr 1 2 3"), None);
    }

    #[test]
    fn the_head_is_prefilled_in_pieces_at_message_boundaries() {
        let message = |n: usize| PromptMessage { role: PromptRole::User, content: n.to_string() };
        let head: Vec<PromptMessage> = (0..8).map(message).collect();
        let cut: Vec<usize> = pieces(&head, 6).iter().map(|p| p.len()).collect();
        assert_eq!(cut, vec![1, 7, 8]);
        // Without examples or a log: the system prompt, once.
        assert_eq!(pieces(&head[..1], 0).iter().map(|p| p.len()).collect::<Vec<_>>(), vec![1]);
        assert_eq!(pieces(&head[..2], 0).iter().map(|p| p.len()).collect::<Vec<_>>(), vec![1, 2]);
    }
}
