//! The agent worker's background prefill of the local model's prompt head
//! (`warm` says when and in what pieces): the head every next question
//! shares, `keep_warm` between commands, and `prefill` piece by piece.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Receiver;

use super::AgentCommand;
use super::events::AgentEvent;
use super::operation::ChatRequest;
use super::warm::{IDLE_SHARE, Skip, TYPING_QUIET, free_share, hash, pieces, wait_after};
use super::worker::AgentWorker;
use crate::ids::now_millis;
use crate::llm::{GenerateRequest, LocalBrain, PromptMessage};

impl<B: LocalBrain> AgentWorker<B> {
    /// The head every next question shares: identity, memory, examples and
    /// activity log (at least the identity), nothing said about the question.
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
        if self.warmth.at.is_some_and(|at| at.elapsed() < self.warmth.wait) {
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
        let cold = self.warmth.head.is_none();
        let examples = if head.len() > 2 { self.examples.len() } else { 0 };
        let mut tokens = 0;
        for piece in pieces(head, examples) {
            if commands.is_some_and(|c| !c.is_empty()) {
                return Some(Skip::Interrupted);
            }
            let request = GenerateRequest { messages: piece.to_vec(), max_tokens: 1, only_if_loaded: commands.is_some(), background: commands.is_some(), ..GenerateRequest::default() };
            match self.brain.generate(request, self.stop_epoch.load(Ordering::SeqCst), &mut |_| {}) {
                Ok(generation) => {
                    self.prefill_rate.record(&generation.model, &generation.stats);
                    tokens = generation.stats.prompt_tokens;
                }
                Err(err) => {
                    tracing::warn!(%err, "could not prefill the prompt head");
                    return Some(Skip::Failed(err.to_string()));
                }
            }
        }
        let took = started.elapsed();
        let millis = took.as_millis() as u64;
        // The engine keeps every core busy while it reads (candle's pool is the machine's size).
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.warmth.wait = wait_after(took, threads, cold);
        tracing::info!(millis, tokens, next_in_secs = self.warmth.wait.as_secs(), "prompt head prefilled");
        self.warmth.head = Some(hash(head));
        self.warmth.at = Some(Instant::now());
        self.warmth.used_at_millis = now_millis();
        self.sink.send(AgentEvent::PromptWarmed { millis, prompt_tokens: tokens });
        None
    }
}
