//! The local model's prompt head, kept prefilled in the background (issue 56):
//! when and in what pieces (this file, pure); the agent worker's part is
//! `prefill.rs`.
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

use std::time::{Duration, Instant};

use crate::llm::PromptMessage;

/// A changed head is prefilled again at most this often: the log grows a line
/// at every window switch, and each refresh reads what was added since.
pub const REWARM_EVERY: Duration = Duration::from_secs(120);
/// The share of one core refreshes may use, averaged over time: after a
/// refresh that kept the engine's threads busy for `c` seconds of CPU, the
/// next waits `c / WARM_SHARE` (and at least `REWARM_EVERY`), so keeping warm
/// costs at most this much however often the head changes (issue 56's target
/// is 1 % of a core over an hour of work). The first read after a load is the
/// first answer's promise and waits on nothing.
pub const WARM_SHARE: f64 = 0.006;
/// The share of the CPUs other work must leave free for a refresh (over the
/// interval since the last look).
pub const IDLE_SHARE: f64 = 0.5;
/// No refresh while the user types, or within this long after a key.
pub const TYPING_QUIET: Duration = Duration::from_secs(10);

/// What the worker knows of the head it last prefilled.
#[derive(Debug)]
pub struct Warmth {
    /// The head's hash (None: never, or the model was unloaded since).
    pub head: Option<u64>,
    /// When the last refresh ended.
    pub at: Option<Instant>,
    /// How long after `at` the next refresh waits (`wait_after`).
    pub wait: Duration,
    /// The local model's last use as of that refresh: a later use ran another prompt.
    pub used_at_millis: i64,
    /// The CPUs' busy and total time at the last look (`stat`).
    pub cpu: Option<(u64, u64)>,
    /// Where the CPUs' time is read (`/proc/stat`; a test's own file).
    stat: std::path::PathBuf,
}

impl Default for Warmth {
    fn default() -> Self {
        Self { head: None, at: None, wait: REWARM_EVERY, used_at_millis: 0, cpu: None, stat: "/proc/stat".into() }
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

    pub fn read_cpu(&self) -> Option<(u64, u64)> {
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

/// How long the next refresh waits after one that took `took` with the
/// engine's `threads` busy (`cold`: the first read after a load, not counted).
pub fn wait_after(took: Duration, threads: usize, cold: bool) -> Duration {
    if cold {
        return REWARM_EVERY;
    }
    let cpu = took.as_secs_f64() * threads.max(1) as f64;
    REWARM_EVERY.max(Duration::from_secs_f64(cpu / WARM_SHARE))
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

/// A head's fingerprint: whether it changed since it was prefilled.
pub fn hash(messages: &[PromptMessage]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for message in messages {
        (message.role as u8).hash(&mut hasher);
        message.content.hash(&mut hasher);
    }
    hasher.finish()
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
    fn a_refresh_waits_long_enough_to_keep_its_average_under_its_share_of_a_core() {
        // 2.9 s on 2 threads = 5.8 s of CPU: the next waits 5.8 / 0.006 s.
        let wait = wait_after(Duration::from_millis(2_900), 2, false);
        assert!((wait.as_secs_f64() - 5.8 / 0.006).abs() < 1e-6, "{wait:?}");
        // Over any run of refreshes each followed by its wait, the average is the share at most.
        let took = [Duration::from_millis(40), Duration::from_secs(3), Duration::from_secs(9), Duration::from_millis(700)];
        let (cpu, span) = took.iter().fold((0.0, 0.0), |(cpu, span), t| {
            let busy = t.as_secs_f64() * 2.0;
            (cpu + busy, span + t.as_secs_f64() + wait_after(*t, 2, false).as_secs_f64())
        });
        assert!(cpu / span <= WARM_SHARE + 1e-12, "{}", cpu / span);
        // A cheap refresh (the cache held it all) waits the floor; the first after a load waits nothing more.
        assert_eq!(wait_after(Duration::from_millis(40), 2, false), REWARM_EVERY);
        assert_eq!(wait_after(Duration::from_secs(9), 2, true), REWARM_EVERY);
        assert_eq!(wait_after(Duration::from_secs(1), 0, false), Duration::from_secs_f64(1.0 / 0.006), "no thread count: one");
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
