//! The agent worker's background prefill of the local model's prompt head
//! (`warm` says when and in what pieces): the head every next question
//! shares, `keep_warm` between commands, and `prefill` piece by piece.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Receiver;

use super::AgentCommand;
use super::events::AgentEvent;
use super::operation::ChatRequest;
use super::warm::{IDLE_SHARE, REWARM_EVERY, Skip, TYPING_QUIET, free_share, hash, pieces};
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
        let all = pieces(head, examples).into_iter().map(<[PromptMessage]>::to_vec).collect();
        let tokens = match self.prefill_pieces(all, commands, commands.is_some()) {
            Ok(tokens) => tokens,
            Err(skip) => return Some(skip),
        };
        let millis = started.elapsed().as_millis() as u64;
        tracing::info!(millis, tokens, "prompt head prefilled");
        self.warmth.head = Some(hash(head));
        self.warmth.at = Some(Instant::now());
        self.warmth.used_at_millis = now_millis();
        self.sink.send(AgentEvent::PromptWarmed { millis, prompt_tokens: tokens });
        None
    }

    /// While the user types a question for the local model
    /// (`AgentCommand::Draft`, at word ends): the turn it will be asked in —
    /// the clock, the current window and the notes memory recalls for the
    /// words so far — prefilled after the warm head, so that sending it costs
    /// the question's own words and whatever its last words changed in the
    /// notes, not the whole turn. Built as the question's prompt is built
    /// (`handle_chat`), cut before "Question:"; nothing is stored or shown.
    /// A waiting command (the question itself, or a newer draft) stops it
    /// between pieces.
    pub(super) fn warm_draft(&mut self, mut request: ChatRequest, commands: Option<&Receiver<AgentCommand>>) -> Option<Skip> {
        if commands.is_some_and(|c| !c.is_empty()) {
            return Some(Skip::Interrupted);
        }
        let settings = self.settings();
        if settings.prefer != crate::brains::Preference::Local || self.brain.state().prefers_cloud() {
            return Some(Skip::Paused);
        }
        request.text = request.text.replace("<no-memory>", "").trim().to_owned();
        let memory = self.chat_memory(&request, &settings);
        // The question would be refused without the model: nothing to prefill.
        if super::worker::refused_ungrounded(&settings, &request, memory.as_ref()) {
            return Some(Skip::Unchanged);
        }
        let context = self.prompt_context(memory.as_ref().map(|m| &m.report), &super::worker::turn_notes(&request, memory.as_ref()));
        let mut messages = self.prompt(&request, context.as_ref());
        let Some(last) = messages.last_mut() else { return Some(Skip::Unchanged) };
        let question = format!("{}{}", crate::llm::prompt::QUESTION_MARK, request.text);
        if last.content.ends_with(&question) {
            let cut = last.content.len() - question.len();
            last.content.truncate(cut);
        } else {
            // No context: the turn is the question alone, and the head is all there is to warm.
            messages.pop();
        }
        let log = context.map(|c| c.log).unwrap_or_default();
        let from = match messages.last() {
            Some(last) if !log.is_empty() && last.content.starts_with(&log) => log.len(),
            _ => 0,
        };
        let examples = if messages.len() > 2 { self.examples.len() } else { 0 };
        let started = Instant::now();
        match self.prefill_pieces(super::warm::draft_pieces(&messages, examples, from), commands, false) {
            Ok(tokens) => {
                tracing::debug!(millis = started.elapsed().as_millis() as u64, tokens, "a draft's turn prefilled");
                None
            }
            Err(skip) => Some(skip),
        }
    }

    /// Generates one token after each piece (its prompt is what the engine's
    /// prefix cache keeps); stops between pieces when a command waits. The
    /// last piece's prompt length, or why it stopped.
    fn prefill_pieces(&mut self, all: Vec<Vec<PromptMessage>>, commands: Option<&Receiver<AgentCommand>>, only_if_loaded: bool) -> Result<usize, Skip> {
        let mut tokens = 0;
        for piece in all {
            if commands.is_some_and(|c| !c.is_empty()) {
                return Err(Skip::Interrupted);
            }
            let request = GenerateRequest { messages: piece, max_tokens: 1, only_if_loaded, ..GenerateRequest::default() };
            match self.brain.generate(request, self.stop_epoch.load(Ordering::SeqCst), &mut |_| {}) {
                Ok(generation) => tokens = generation.stats.prompt_tokens,
                Err(err) => {
                    tracing::warn!(%err, "could not prefill the prompt head");
                    return Err(Skip::Failed(err.to_string()));
                }
            }
        }
        Ok(tokens)
    }
}
