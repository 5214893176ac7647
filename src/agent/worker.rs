//! The `agent` worker: owns conversations. A turn is context (Layer 1, grounded
//! recall through the search worker, memory synthesis) → route
//! (`brains::router`) → consent and budget → a brain step (the local engine
//! over the llm worker's channel, or a cloud provider streamed with
//! `brains::stream_chat`) → the answer, streamed to the UI as tokens and
//! written with its exact context through the store. It holds a read-only
//! database connection; the llm worker only generates.
//!
//! It keeps the last local exchange as sent (`Conversation`): a follow-up in
//! that thread repeats it and appends only its turn, so the engine's prefix
//! cache holds everything before. `AgentCommand::Prepare` (the quick prompt
//! opened) prefills the shared head. Observational memory (`summarise_pending`)
//! runs here too, in the background only on a model that is already loaded and
//! idle (`only_if_loaded`): older hours of activity and quiet conversations
//! become dated `observations`.
//!
//! With the agent on (`ChatRequest::agent`, Settings → Agent, on by default;
//! `cowork ask --agent`) a question becomes an operation, run by `acting`.
//! While one of its calls waits for approval it looks twice a second for a
//! decision another process made (`poll_decisions`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use rusqlite::Connection;

use crate::agent::events::AgentEvent;
use crate::capture::firewall::wants_no_memory;
use crate::ids::now_millis;
use crate::llm::{GenerateRequest, LlmClient, LlmCommand, LocalBrain, LocalModelState, PromptMessage, PromptRole};
use crate::llm::context::{Layer1, layer1_context};
use crate::llm::prompt::{PromptContext, chat_messages, join_parts, local_examples, question_turn};
use crate::records::{ChatMessage, GenerationStats, MessageStatus, Role};
use crate::runtime::{EventSink, RestartPolicy, Supervised, WorkerContext, WorkerHandle, WorkerName, spawn_supervised};
use crate::store::{self, StoreCommand};

pub use super::operation::ChatRequest;

/// The identity. Small local models follow it only when it is this concrete:
/// where the facts are, to copy them exactly, and to say so when they are not
/// there (docs/engine.md, "The local model's prompt"). The text lives in assets so
/// `scripts/measure` can give llama.cpp the identical prompt.
pub const SYSTEM_PROMPT: &str = include_str!("../../assets/prompts/system.txt");

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub db_path: PathBuf,
    pub context_budget_tokens: usize,
    pub max_answer_tokens: usize,
    /// The local model's history, in tokens (`history::fit`; older messages are summarised).
    pub local_history_tokens: usize,
    /// The most history a cloud model reads, in tokens (a quarter of its context window, up to this).
    pub cloud_history_tokens: usize,
    /// Where providers.json and the secret store live.
    pub data_dir: PathBuf,
    /// The longest prompt the local model takes, in tokens (the router's limit).
    pub local_limit_tokens: usize,
    /// The search worker, for recalling memory by meaning (None: no recall).
    pub recall: Option<Sender<crate::memory::search_worker::SearchCommand>>,
    /// The mcp worker, for MCP servers' tools (None: none offered).
    pub mcp: Option<crate::mcp::worker::McpClient>,
    /// Where automation steps' outcomes go (None: no automations).
    pub automations: Option<Sender<crate::automations::steps::StepReport>>,
    /// The automations worker, which `flow_<name>` calls start runs on (None: not offered).
    pub flows: Option<Sender<crate::automations::AutomationsCommand>>,
    /// When the keys worker last saw a key pressed anywhere: the prompt head is
    /// not prefilled while the user types (`warm`).
    pub keys_at_millis: Arc<AtomicI64>,
}

#[cfg(test)]
impl AgentConfig {
    /// A worker on `db` with small budgets and no other workers.
    pub(super) fn for_tests(db_path: PathBuf, data_dir: PathBuf) -> Self {
        AgentConfig {
            db_path,
            context_budget_tokens: 200,
            max_answer_tokens: 16,
            local_history_tokens: 600,
            cloud_history_tokens: 24_000,
            data_dir,
            local_limit_tokens: 1_500,
            recall: None,
            mcp: None,
            automations: None,
            flows: None,
            keys_at_millis: Arc::default(),
        }
    }
}

/// How often the worker looks for older hours to summarise while the local model is loaded.
const SUMMARY_CHECK: Duration = Duration::from_secs(15);
/// How often an owner looks for decisions other processes made on its waiting calls.
const DECISION_POLL: Duration = Duration::from_millis(500);


#[derive(Debug)]
pub enum AgentCommand {
    Chat(ChatRequest),
    /// Load the local model and prefill the prompt head the next question
    /// shares (the quick prompt opened: the user is about to ask).
    Prepare,
    /// The chat model changed (Settings → Models): a follow-up starts a new prompt.
    ModelChanged,
    /// The user changed what cowork remembers: a follow-up starts a new prompt
    /// (the last one may hold a fact that is gone).
    MemoryChanged,
    /// Observational memory: summarise up to `limit` older hours of activity
    /// that have no summary yet (loads the model if needed); the count goes to `reply`.
    Summarise { limit: usize, reply: Option<Sender<Result<usize, String>>> },
    /// The recap of the day or week holding `at_millis` (`cowork recap`; the
    /// automations reach it through the `recap` tool), written and kept.
    Recap {
        period: crate::day::recap::Period,
        at_millis: i64,
        instructions: String,
        reply: Option<Sender<Result<crate::day::recap::Outcome, String>>>,
    },
    /// The note of the call from `start_millis` to `end_millis` (`cowork meeting-note`;
    /// the automations reach it through the `meeting_note` tool): the note and its
    /// text, or None when nothing was heard.
    MeetingNote {
        start_millis: i64,
        end_millis: i64,
        title: String,
        reply: Sender<Result<Option<(crate::day::meetings::Note, String)>, String>>,
    },
    /// The user's decision on a waiting tool call (or the answer to `ask_user`).
    Decide { call_id: i64, choice: crate::agent::events::ApprovalChoice },
    /// The same, decided somewhere the audit log should name (`cowork approve`, a notification).
    DecideAs { call_id: i64, choice: crate::agent::events::ApprovalChoice, by: String },
    /// A guardrail paused an operation: go on, or stop it.
    Continue { operation_id: i64, go_on: bool },
    /// Take over an operation whose process is gone (`cowork approve` waiting on it).
    Resume(i64),
    /// Stop: operations waiting for the user are cancelled.
    CancelWaiting,
    /// Settings → Agent opened: send the rules and the newest audit entries.
    Overview,
    /// Settings → Agent: remove a rule, then send the overview again.
    RemoveRule(i64),
    /// A tool or agent step of an automation run.
    AutomationStep(Box<crate::automations::steps::StepRequest>),
    /// An automation no longer waits for this operation: it ends, cancelled.
    CancelOperation(i64),
    /// "Describe it": draft a flow from the user's words (validated JSON, not saved).
    DraftFlow { description: String, reply: Option<Sender<Result<String, String>>> },
    /// "Make me an app that…": draft an app without code (a checked manifest, not installed).
    DraftApp { description: String, reply: Option<Sender<Result<String, String>>> },
    /// An app's `ai.complete`: one answer through the router, budgets and
    /// cloud consent (no tools, no chat). Apps cannot ask for consent: a
    /// route to a cloud the user has not allowed is refused.
    AppComplete { app_id: String, prompt: String, reply: Sender<Result<String, String>> },
    /// Fault injection for supervisor tests: panic inside the worker.
    InjectPanic,
    Shutdown,
}

/// Hours younger than this are not summarised yet (they may still grow).
const SUMMARY_AFTER_MILLIS: i64 = 3_600_000;
/// How far back unsummarised hours are looked for.
const SUMMARY_LOOKBACK_MILLIS: i64 = 7 * 86_400_000;
/// With the model already loaded and idle this long, one pending hour is summarised.
const SUMMARY_IDLE: Duration = Duration::from_secs(120);

/// The stored form of an answer; an answer that failed empty keeps its reason as text.
pub(super) fn answer_message(request: &ChatRequest, text: String, error: Option<&str>, status: MessageStatus, provider: &str, cost: f64, citations: Option<String>) -> ChatMessage {
    let content = match (error, text.is_empty()) {
        (Some(error), true) => format!("(no answer: {error})"),
        _ => text,
    };
    ChatMessage {
        message_id: request.answer_id,
        thread_id: request.thread.thread_id,
        role: Role::Assistant,
        content,
        context: None,
        status,
        created_at_millis: now_millis(),
        ask_id: Some(request.ask_id),
        provider: Some(provider.to_owned()),
        cost_usd: Some(cost),
        citations,
        refusal: false,
    }
}

/// The stored form of a question, with the context sent along (if any).
pub(super) fn user_message(request: &ChatRequest, context: Option<String>) -> ChatMessage {
    ChatMessage {
        message_id: request.user_message_id,
        thread_id: request.thread.thread_id,
        role: Role::User,
        content: request.text.clone(),
        context,
        status: MessageStatus::Done,
        created_at_millis: now_millis(),
        ask_id: Some(request.ask_id),
        provider: None,
        cost_usd: None,
        citations: None,
        refusal: false,
    }
}

/// Who answers a question, decided before anything is stored or sent.
enum Plan {
    Local { reason: String },
    /// `consent`: what the user chose about captured context for this provider (None: not asked yet).
    Cloud { provider: crate::brains::ProviderConfig, key: Option<String>, reason: String, consent: Option<bool> },
}

pub struct AgentWorker<B: LocalBrain> {
    pub(super) config: AgentConfig,
    pub(super) brain: B,
    pub(super) db: Option<Connection>,
    pub(super) store: Sender<StoreCommand>,
    pub(super) sink: EventSink<AgentEvent>,
    /// Bumped by Stop; an answer that started under an older value stops.
    pub(super) stop_epoch: Arc<AtomicU64>,
    /// Operations being driven, the skills and where file tools work.
    pub(super) acting: super::operation::Acting,
    /// The last local exchange, as sent, for follow-ups to extend.
    conversation: Option<Conversation>,
    /// Worked examples in every local prompt's head.
    pub(super) examples: Vec<PromptMessage>,
    /// The prompt head kept prefilled (`warm`).
    pub(super) warmth: super::warm::Warmth,
    /// How fast the local model reads prompts here: a local question's notes budget.
    pub(super) prefill_rate: super::notes_budget::PrefillRate,
    /// Commands held while background work gives way to them (`give_way`).
    pub(super) inbox: super::inbox::Inbox<AgentCommand>,
}

/// A local exchange as the model saw it: its prompt and answer.
struct Conversation {
    thread_id: i64,
    /// How long the thread's history is after this exchange.
    history_len: usize,
    messages: Vec<PromptMessage>,
}

impl Conversation {
    /// Whether `request` is the next question of this exchange's thread, with
    /// nothing edited in between and its whole history still within the budget.
    fn continued_by(&self, request: &ChatRequest, history: &super::history::Fitted) -> bool {
        let answer = self.messages.last().map(|m| m.content.as_str());
        self.thread_id == request.thread.thread_id
            && request.history.len() == self.history_len
            && request.history.last().map(|(_, text)| text.as_str()) == answer
            && history.earlier.is_none()
    }
}

impl<B: LocalBrain> AgentWorker<B> {
    /// The read-only connection to cowork.db, opened on first use (and again after a failure).
    pub(super) fn open_db(&mut self) {
        if self.db.is_none() {
            self.db = store::open_read_only(&self.config.db_path).ok();
        }
    }

    pub fn new(config: AgentConfig, brain: B, store: Sender<StoreCommand>, sink: EventSink<AgentEvent>, stop_epoch: Arc<AtomicU64>) -> Self {
        let config_data_dir = config.data_dir.clone();
        Self {
            config,
            brain,
            db: None,
            store,
            sink,
            stop_epoch,
            conversation: None,
            examples: local_examples(),
            warmth: super::warm::Warmth::default(),
            prefill_rate: super::notes_budget::PrefillRate::default(),
            inbox: super::inbox::Inbox::default(),
            acting: super::operation::Acting::new(config_data_dir),
        }
    }

    fn context(&mut self) -> Option<Layer1> {
        self.open_db();
        let conn = self.db.as_ref()?;
        match layer1_context(conn, now_millis(), self.config.context_budget_tokens) {
            Ok(text) => text,
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "cannot build context");
                self.db = None;
                None
            }
        }
    }

    /// The messages for the local model. A follow-up in the thread it answered
    /// last repeats that prompt exactly and appends the answer and the new turn,
    /// so the engine's prefix cache finds everything before the new turn
    /// prefilled; anything else starts from the fixed head (identity, memory,
    /// examples) that every new question shares.
    pub fn prompt(&self, request: &ChatRequest, context: Option<&PromptContext>) -> Vec<PromptMessage> {
        let history = super::history::fit(&request.history, self.config.local_history_tokens);
        if let Some(conversation) = self.conversation.as_ref().filter(|c| c.continued_by(request, &history)) {
            let mut messages = conversation.messages.clone();
            messages.push(question_turn(&[context.map(|c| c.turn.as_str()).unwrap_or_default()], &request.text));
            return messages;
        }
        // The examples teach reading captured context; without any, they would only cost prefill.
        let examples: &[PromptMessage] = if context.is_some() { &self.examples } else { &[] };
        chat_messages(SYSTEM_PROMPT, examples, context, &history.recent, history.earlier.as_deref(), &request.text)
    }

    /// Prefills the head every next question shares (identity, memory,
    /// examples, activity log) so the engine's prefix cache holds it before
    /// the question arrives: `AgentCommand::Prepare`, which the UI sends when
    /// the quick prompt opens, while the user is still typing, and `cowork ask
    /// --warm`. (While `llm.keep_warm` is on, `warm` keeps it prefilled.)
    fn warm_head(&mut self) {
        let head = self.prompt_head(true);
        self.prefill(&head, None);
    }

    /// What a question is sent with: memory sections (the identity comes first)
    /// for the system prompt; the activity log, then the clock and current
    /// window, then `notes` nearest the question (small models weigh what they
    /// read last) for its turn. `None` when there is nothing at all.
    pub(super) fn prompt_context(&mut self, memory: Option<&crate::memory::synthesis::Report>, notes: &str) -> Option<PromptContext> {
        let system: Vec<&str> = memory.map(|report| report.injected.iter().skip(1).map(|s| s.text.as_str()).collect()).unwrap_or_default();
        let system = join_parts(&system);
        let (log, now) = self.context().map(|l| (l.log.unwrap_or_default(), l.now)).unwrap_or_default();
        let context = PromptContext { system, log, turn: join_parts(&[&now, notes]) };
        (!context.text().is_empty()).then_some(context)
    }

    /// The messages for a cloud model: the same layout without the worked
    /// examples, with as much history as its context window allows.
    fn cloud_prompt(&self, request: &ChatRequest, context: Option<&PromptContext>, provider: &crate::brains::ProviderConfig) -> Vec<PromptMessage> {
        let history = super::history::fit(&request.history, self.history_budget(Some(provider)));
        chat_messages(SYSTEM_PROMPT, &[], context, &history.recent, history.earlier.as_deref(), &request.text)
    }

    /// How much of a thread's history a brain reads, in tokens: a cloud
    /// `provider`'s model by its context window, else the local model.
    pub(super) fn history_budget(&self, provider: Option<&crate::brains::ProviderConfig>) -> usize {
        match provider {
            None => self.config.local_history_tokens,
            Some(provider) => super::history::cloud_budget(provider.context_window(&provider.model), self.config.cloud_history_tokens),
        }
    }

    /// Writes a message through the store; `model` names who wrote an answer.
    pub(super) fn persist(&self, message: ChatMessage, model: Option<String>) {
        // Blocking with a timeout: losing a chat message is worse than a short wait.
        if self.store.send_timeout(crate::chat::message_write(message, model), Duration::from_secs(5)).is_err() {
            self.sink.notice("the store is not accepting writes: a chat message was not saved");
        }
    }

    pub fn handle_chat(&mut self, mut request: ChatRequest) {
        // A message about what cowork believes ("that's wrong, …") is answered here, whatever brain would answer.
        let from_user = request.text_origin.is_none_or(|o| o == crate::tools::Origin::User);
        if let Some(intent) = crate::memory::corrections::parse(request.text.replace("<no-memory>", "").trim()).filter(|_| from_user)
            && let Some(reply) = self.about_memory(&request, intent)
        {
            let remember = !wants_no_memory(&request.text);
            request.text = request.text.replace("<no-memory>", "").trim().to_owned();
            self.give_reply(&request, remember, reply);
            return;
        }
        let mut request = match request.agent {
            false => request,
            // Decided once, before any operation starts: a task, or a plain answer from memory.
            true => match self.agent_answer(request) {
                Some(request) => request,
                None => return,
            },
        };
        let epoch = self.stop_epoch.load(Ordering::SeqCst);
        // `<no-memory>`: answer, but keep neither the question nor the answer.
        let remember = !wants_no_memory(&request.text);
        request.text = request.text.replace("<no-memory>", "").trim().to_owned();
        let (settings, providers) = self.brains();
        let mut memory = self.chat_memory(&request, &settings);
        // Grounded mode: nothing to stand on → a fixed refusal, without calling a model.
        // (What the user attached is something to stand on.)
        if settings.grounded && request.attachments.is_empty() && memory.as_ref().is_none_or(|m| !m.any_embedded || m.assembly.items.is_empty()) {
            self.refuse(&request, remember);
            return;
        }
        // Attached resources sit with the notes: data next to the question.
        let notes = |memory: &Option<super::MemoryContext>| join_parts(&[&request.attached_data(), &memory.as_ref().and_then(|m| m.assembly.render(now_millis())).unwrap_or_default()]);
        let mut context = self.prompt_context(memory.as_ref().map(|m| &m.report), &notes(&memory));
        let mut context_text = context.as_ref().map(PromptContext::text);
        // Route first: a cloud answer may need the user's consent before anything happens.
        let plan = match self.plan(&request, context_text.as_deref(), &settings, &providers) {
            Ok(plan) => plan,
            Err(message) => {
                self.finish_early(&request, remember, context_text.as_deref(), message);
                return;
            }
        };
        // A local question carries the notes this machine reads in its share of the first-token target (`notes_budget`).
        if let (Plan::Local { .. }, Some(local)) = (&plan, memory.as_mut()) {
            let carried = local.assembly.items.len();
            local.assembly.fit(self.prefill_rate.notes_budget(settings.recall_budget_tokens), now_millis());
            if local.assembly.items.len() < carried {
                context = self.prompt_context(memory.as_ref().map(|m| &m.report), &notes(&memory));
                context_text = context.as_ref().map(PromptContext::text);
            }
        }
        let citations = memory.as_ref().map(|m| m.assembly.citations()).unwrap_or_default();
        if let Some(memory) = &memory {
            self.sink.send(AgentEvent::MemoryInjected {
                user_message_id: request.user_message_id,
                report: memory.report.clone(),
                recalled: memory.assembly.items.clone(),
                dropped: memory.assembly.dropped.clone(),
            });
        }
        if !citations.is_empty() {
            self.sink.send(AgentEvent::Citations { answer_id: request.answer_id, citations: citations.clone() });
        }
        let citations_json = (!citations.is_empty()).then(|| serde_json::to_string(&citations).unwrap_or_default());
        if let Plan::Cloud { provider, reason, consent, .. } = &plan {
            let allowed = consent.or(request.consent_once.then_some(true));
            if allowed.is_none() && context.is_some() {
                let preview = crate::brains::consent::redact_for_cloud(context_text.as_deref().unwrap_or_default());
                self.sink.send(AgentEvent::ConsentNeeded { provider: provider.name.clone(), reason: reason.clone(), preview, request: Box::new(request) });
                return;
            }
        }
        if request.thread_is_new && remember && !request.is_retry {
            let _ = self.store.send_timeout(
                crate::chat::thread_write(request.thread.clone(), now_millis()),
                Duration::from_secs(5),
            );
        }
        let (sent_context, chip) = match &plan {
            Plan::Local { .. } => (context.clone(), context_text.clone().unwrap_or_default()),
            Plan::Cloud { provider, consent, .. } => {
                let allowed = consent.or(request.consent_once.then_some(true)).unwrap_or(false);
                match (&context, allowed) {
                    (Some(context), true) => {
                        let redacted = context.map(crate::brains::consent::redact_for_cloud);
                        let chip = redacted.text();
                        (Some(redacted), chip)
                    }
                    (Some(_), false) => (None, format!("(captured context not sent to {}: you have not allowed it)", provider.name)),
                    (None, _) => (None, String::new()),
                }
            }
        };
        let user = user_message(&request, sent_context.as_ref().map(PromptContext::text).or(Some(chip.clone())).filter(|c| !c.is_empty()));
        if remember && !request.is_retry {
            self.persist(user, None);
        }
        if !request.is_retry {
            self.sink.send(AgentEvent::ContextAttached { user_message_id: request.user_message_id, context: chip });
        }
        let (answered_by, reason) = match &plan {
            Plan::Local { reason } => ("local".to_owned(), reason.clone()),
            Plan::Cloud { provider, reason, .. } => (format!("{} · {}", provider.name, provider.model), reason.clone()),
        };
        self.sink.send(AgentEvent::Routed { answer_id: request.answer_id, ask_id: request.ask_id, answered_by, reason });
        if let Plan::Cloud { provider, key, .. } = plan {
            self.cloud_answer(&request, remember, sent_context.as_ref(), &provider, key.as_deref(), epoch, citations_json);
            return;
        }
        let context = sent_context;

        let mut answer = String::new();
        let mut sent = self.prompt(&request, context.as_ref());
        let sink = self.sink.clone();
        let answer_id = request.answer_id;
        let outcome = self.brain.generate(
            GenerateRequest { messages: sent.clone(), max_tokens: self.config.max_answer_tokens, ..GenerateRequest::default() },
            epoch,
            &mut |token| {
                answer.push_str(token);
                sink.send(AgentEvent::Token { answer_id, text: token.to_owned() });
            },
        );
        let stopped = self.stop_epoch.load(Ordering::SeqCst) != epoch;
        if let Ok(generation) = &outcome {
            self.prefill_rate.record(&generation.model, &generation.stats);
        }
        let model = outcome.as_ref().ok().map(|g| g.model.clone());
        let (status, error, stats) = match outcome {
            Ok(generation) if stopped => (MessageStatus::Stopped, None, generation.stats),
            Ok(generation) => (MessageStatus::Done, None, generation.stats),
            // The llm worker reports its own health; here the failure is this answer's.
            Err(err) => (MessageStatus::Failed, Some(err.to_string()), GenerationStats::default()),
        };
        self.conversation = (status == MessageStatus::Done).then(|| {
            sent.push(PromptMessage { role: PromptRole::Assistant, content: answer.clone() });
            Conversation { thread_id: request.thread.thread_id, history_len: request.history.len() + 2, messages: sent }
        });
        let answer = answer_message(&request, answer, error.as_deref(), status, "local", 0.0, citations_json);
        if remember {
            self.persist(answer, model);
        }
        self.sink.send(AgentEvent::AnswerFinished { answer_id: request.answer_id, status, error, stats });
    }

    /// The user's settings, fresh (an operation's steps read them without providers.json).
    pub(super) fn settings(&mut self) -> crate::config::Settings {
        self.open_db();
        let pairs = self.db.as_ref().and_then(|c| store::all_settings(c).ok()).unwrap_or_default();
        crate::config::Settings::from_pairs(&pairs).0
    }

    /// The user's settings and providers, fresh for each question.
    pub(super) fn brains(&mut self) -> (crate::config::Settings, crate::brains::Providers) {
        let settings = self.settings();
        let providers = crate::brains::Providers::load(&crate::brains::Providers::path(&self.config.data_dir)).unwrap_or_else(|err| {
            self.sink.notice(format!("{err:#}"));
            Default::default()
        });
        (settings, providers)
    }

    /// Decides who answers, with the key a cloud provider needs.
    fn plan(
        &mut self,
        request: &ChatRequest,
        context: Option<&str>,
        settings: &crate::config::Settings,
        providers: &crate::brains::Providers,
    ) -> Result<Plan, String> {
        use crate::brains::router::{RouteInput, Target, route};
        use crate::memory::tokens::estimate_tokens;
        let offline = crate::net::OutboundGate::global().is_offline();
        match &request.brain {
            Some(super::operation::BrainChoice::Local) => return Ok(Plan::Local { reason: "the local model, as asked".into() }),
            Some(super::operation::BrainChoice::Provider { name, model }) => {
                let Some(provider) = providers.get(name) else {
                    let known: Vec<&str> = providers.list.iter().map(|p| p.name.as_str()).collect();
                    return Err(format!("no provider {name:?} is configured (configured: {})", if known.is_empty() { "none".into() } else { known.join(", ") }));
                };
                if offline && !crate::net::host_of_url(&provider.base_url).is_some_and(|h| crate::net::is_loopback(&h)) {
                    return Err(format!("offline mode: {name} is not on this machine"));
                }
                let mut provider = provider.clone();
                if let Some(model) = model {
                    provider.model = model.clone();
                }
                let key = crate::brains::provider_key(&self.config.data_dir, &provider).map_err(|err| format!("{err:#}"))?;
                let prompt_tokens = estimate_tokens(&request.text) + context.map(estimate_tokens).unwrap_or(0);
                let spent = self.db.as_ref().and_then(|c| crate::brains::budget::spent(c, now_millis()).ok()).unwrap_or_default();
                crate::brains::budget::fit(&mut provider, &settings.budget, &spent, prompt_tokens as u64, self.config.max_answer_tokens as u64)
                    .map_err(|err| format!("not sent to {}: {err}", provider.name))?;
                let consent = settings.consent.get(&provider.name).copied();
                return Ok(Plan::Cloud { provider, key, reason: "the provider asked for".into(), consent });
            }
            None => {}
        }
        // Tiers that exist and, offline, only those on this machine.
        let tiers: Vec<&crate::brains::ProviderConfig> = settings
            .tiers
            .iter()
            .filter_map(|name| providers.get(name))
            .filter(|p| !offline || crate::net::host_of_url(&p.base_url).is_some_and(|h| crate::net::is_loopback(&h)))
            .collect();
        let prompt_tokens = estimate_tokens(SYSTEM_PROMPT)
            + context.map(estimate_tokens).unwrap_or(0)
            // The history as the local model would read it (a cloud one reads more).
            + super::history::fit(&request.history, self.config.local_history_tokens).tokens()
            + estimate_tokens(&request.text);
        let input = RouteInput {
            preference: settings.prefer,
            prompt_tokens,
            attachments: 0,
            tools_needed: 0,
            try_harder_from: request.try_harder_from,
            local_limit_tokens: self.config.local_limit_tokens,
            // Heat or the battery paused the local model: a cloud tier the user set up answers instead.
            local_available: !self.brain.state().is_unavailable() && (!self.brain.state().prefers_cloud() || tiers.is_empty()),
            cloud_tiers: tiers.len(),
        };
        let route = route(&input).map_err(|err| err.to_string())?;
        match route.target {
            Target::Local => Ok(Plan::Local { reason: route.reason }),
            Target::Cloud(tier) => {
                let mut provider = tiers[tier].clone();
                let key = crate::brains::provider_key(&self.config.data_dir, &provider).map_err(|err| format!("{err:#}"))?;
                // Budgets, before anything is sent (a reasoning model thinks within them).
                let spent = self
                    .db
                    .as_ref()
                    .and_then(|c| crate::brains::budget::spent(c, now_millis()).ok())
                    .unwrap_or_default();
                crate::brains::budget::fit(&mut provider, &settings.budget, &spent, prompt_tokens as u64, self.config.max_answer_tokens as u64)
                    .map_err(|err| format!("not sent to {}: {err}", provider.name))?;
                let consent = settings.consent.get(&provider.name).copied();
                Ok(Plan::Cloud { provider, key, reason: route.reason, consent })
            }
        }
    }

    /// Who works on an operation: routed on the question alone (its context comes through tools).
    /// With a cloud brain the user has not been asked about yet, also why it was routed there.
    pub(super) fn plan_operation(
        &mut self,
        request: &ChatRequest,
        settings: &crate::config::Settings,
        providers: &crate::brains::Providers,
    ) -> Result<(super::operation::Brain, Option<String>), String> {
        Ok(match self.plan(request, None, settings, providers)? {
            Plan::Local { .. } => (super::operation::Brain::Local, None),
            Plan::Cloud { provider, key, consent, reason } => {
                let ask = (consent.is_none() && !request.consent_once).then_some(reason);
                (super::operation::Brain::Cloud { provider, key, consent: consent.unwrap_or(false) || request.consent_once }, ask)
            }
        })
    }

    /// Observational memory: each older hour with activity and each quiet
    /// conversation without a summary yet (or with new messages since) is
    /// compressed by the local model into a dated summary (stored, then
    /// embedded into the observation namespace). Returns how many were written.
    /// With `only_if_loaded`, nothing loads the local model for it (background work).
    pub fn summarise_pending(&mut self, now: i64, limit: usize, only_if_loaded: bool) -> Result<usize, String> {
        const HOUR: i64 = 3_600_000;
        self.open_db();
        let conn = self.db.as_ref().ok_or("the database is not readable")?;
        let (quiet_since, oldest) = (now - SUMMARY_AFTER_MILLIS, now - SUMMARY_LOOKBACK_MILLIS);
        let hours: Vec<i64> = conn
            .prepare(
                "SELECT started_at_ms / 3600000 AS hour FROM activity_sessions
                 WHERE started_at_ms < ?1 AND started_at_ms >= ?2
                 GROUP BY hour HAVING hour NOT IN (SELECT period_start_ms / 3600000 FROM observations WHERE kind = 'activity')
                 ORDER BY hour DESC LIMIT ?3",
            )
            .and_then(|mut s| s.query_map(rusqlite::params![quiet_since, oldest, limit as i64], |r| r.get(0))?.collect())
            .map_err(|e| e.to_string())?;
        // A conversation's summary spans its first to its last message; one
        // that went on after it was summarised is summarised again.
        let threads: Vec<(i64, String, i64, i64)> = conn
            .prepare(
                "SELECT t.thread_id, t.title, min(m.created_at_ms) AS first, max(m.created_at_ms) AS last
                 FROM chat_threads t JOIN chat_messages m ON m.thread_id = t.thread_id
                 WHERE m.refusal = 0
                 GROUP BY t.thread_id
                 HAVING last < ?1 AND last >= ?2 AND count(*) >= 2
                    AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.kind = 'conversation' AND o.period_start_ms = first AND o.period_end_ms >= last)
                 ORDER BY last DESC LIMIT ?3",
            )
            .and_then(|mut s| s.query_map(rusqlite::params![quiet_since, oldest, limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect())
            .map_err(|e| e.to_string())?;
        let mut prompts: Vec<(&str, i64, i64, String)> = Vec::new();
        for hour in hours {
            let (start, end) = (hour * HOUR, (hour + 1) * HOUR);
            let sessions = crate::capture::db::sessions_between(conn, start, end).map_err(|e| e.to_string())?;
            let lines: Vec<String> = sessions
                .iter()
                .take(30)
                .map(|s| format!("- {} {} — {} ({})", crate::ids::format_clock(s.started_at_millis), s.app, s.title, crate::ids::format_duration_millis(s.duration_millis(end))))
                .collect();
            let prompt = format!(
                "Between {} and {} these windows were in use:\n{}\nIn one or two sentences, what was the user working on?",
                crate::ids::format_clock(start),
                crate::ids::format_clock(end),
                lines.join("\n")
            );
            prompts.push(("activity", start, end, prompt));
        }
        for (thread_id, title, first, last) in threads {
            let messages = crate::chat::messages(conn, thread_id).map_err(|e| e.to_string())?;
            let said: Vec<_> = messages.iter().filter(|m| !m.refusal).collect();
            let lines: Vec<String> = said[said.len().saturating_sub(12)..]
                .iter()
                .map(|m| {
                    let who = if m.role == crate::records::Role::User { "User" } else { "Assistant" };
                    let text: String = m.content.chars().take(300).collect();
                    format!("{who}: {}", text.replace('\n', " "))
                })
                .collect();
            let prompt = format!(
                "A conversation titled \"{title}\":\n{}\nIn one or two sentences, what did the user want, and what was settled?",
                lines.join("\n")
            );
            prompts.push(("conversation", first, last, prompt));
        }
        // Newest first across both kinds, so neither waits for the other.
        prompts.sort_by_key(|p| std::cmp::Reverse(p.2));
        let mut written = 0;
        for (kind, start, end, prompt) in prompts.into_iter().take(limit) {
            let messages = vec![
                PromptMessage { role: PromptRole::System, content: "You keep a private work diary. Answer with one or two plain sentences.".into() },
                PromptMessage { role: PromptRole::User, content: prompt },
            ];
            let mut request = GenerateRequest { messages, max_tokens: 80, only_if_loaded, background: true, ..GenerateRequest::default() };
            // Unasked (the model was idle), it gives way to a question and waits for the next idle moment.
            if only_if_loaded {
                request.give_way = self.give_way();
            }
            // Stop ends a summary too: it runs under the current epoch.
            let generation = self.brain.generate(request, self.stop_epoch.load(Ordering::SeqCst), &mut |_| {}).map_err(|e| e.to_string())?;
            self.prefill_rate.record(&generation.model, &generation.stats);
            let text = generation.text.trim().to_owned();
            if text.is_empty() {
                continue;
            }
            let observation = crate::memory::Observation { kind: kind.into(), period_start_millis: start, period_end_millis: end, text, model: Some(generation.model) };
            self.store.send_timeout(crate::memory::observation_write(observation), Duration::from_secs(5)).map_err(|_| "the store is not accepting writes")?;
            written += 1;
        }
        Ok(written)
    }

    /// Grounded mode found nothing: the fixed refusal is the answer (stored as a
    /// refusal, so it is never embedded nor sent back as history).
    pub(super) fn refuse(&mut self, request: &ChatRequest, remember: bool) {
        let why = ("grounded mode", "nothing in memory matches; no model was asked".to_owned());
        self.answer_without_model(request, remember, why, crate::memory::rag::GROUNDED_REFUSAL, None, true);
    }

    /// An answer cowork gives itself: the question and `text` kept (unless
    /// `remember` is false), shown as answered by `by.0` for the reason `by.1`.
    pub(super) fn answer_without_model(&mut self, request: &ChatRequest, remember: bool, by: (&str, String), text: &str, citations: Option<String>, refusal: bool) {
        if remember && !request.is_retry {
            if request.thread_is_new {
                let _ = self.store.send_timeout(
                    crate::chat::thread_write(request.thread.clone(), now_millis()),
                    Duration::from_secs(5),
                );
            }
            self.persist(user_message(request, None), None);
        }
        self.sink.send(AgentEvent::Routed { answer_id: request.answer_id, ask_id: request.ask_id, answered_by: by.0.to_owned(), reason: by.1 });
        self.sink.send(AgentEvent::Token { answer_id: request.answer_id, text: text.to_owned() });
        if remember {
            let provider = if refusal { "grounded" } else { by.0 };
            let mut answer = answer_message(request, text.to_owned(), None, MessageStatus::Done, provider, 0.0, citations);
            answer.refusal = refusal;
            self.persist(answer, None);
        }
        self.sink.send(AgentEvent::AnswerFinished { answer_id: request.answer_id, status: MessageStatus::Done, error: None, stats: GenerationStats::default() });
    }

    /// A question that cannot be answered (no route, over budget, no key): it is
    /// kept with the reason as the failed answer, and nothing is sent anywhere.
    pub(super) fn finish_early(&mut self, request: &ChatRequest, remember: bool, context: Option<&str>, error: String) {
        if remember && !request.is_retry {
            if request.thread_is_new {
                let _ = self.store.send_timeout(
                    crate::chat::thread_write(request.thread.clone(), now_millis()),
                    Duration::from_secs(5),
                );
            }
            self.persist(user_message(request, context.map(str::to_owned)), None);
        }
        self.sink.send(AgentEvent::AnswerFinished {
            answer_id: request.answer_id,
            status: MessageStatus::Failed,
            error: Some(error),
            stats: GenerationStats::default(),
        });
    }

    /// Streams an answer from a cloud (or local HTTP) provider.
    #[allow(clippy::too_many_arguments)]
    fn cloud_answer(
        &mut self,
        request: &ChatRequest,
        remember: bool,
        context: Option<&PromptContext>,
        provider: &crate::brains::ProviderConfig,
        key: Option<&str>,
        epoch: u64,
        citations: Option<String>,
    ) {
        use crate::brains::{Delta, Turn};
        let mut turns: Vec<Turn> = self
            .cloud_prompt(request, context, provider)
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    PromptRole::System => crate::brains::Role::System,
                    PromptRole::User => crate::brains::Role::User,
                    PromptRole::Assistant => crate::brains::Role::Assistant,
                };
                Turn::new(role, m.content)
            })
            .collect();
        // Attached pictures go where the captured context went (their OCR text is in it either way).
        if context.is_some()
            && let Some(question) = turns.iter_mut().rev().find(|t| t.role == crate::brains::Role::User)
        {
            question.images = crate::brains::message::Picture::of_attachments(&request.attachments);
        }
        let stop_epoch = self.stop_epoch.clone();
        let sink = self.sink.clone();
        let answer_id = request.answer_id;
        let mut answer = String::new();
        let started = std::time::Instant::now();
        let result = crate::brains::stream_chat(
            crate::net::OutboundGate::global(),
            provider,
            None,
            key,
            &turns,
            self.config.max_answer_tokens as u32,
            &|| stop_epoch.load(Ordering::SeqCst) != epoch,
            &mut |delta| {
                if let Delta::Text(text) = delta {
                    answer.push_str(text);
                    sink.send(AgentEvent::Token { answer_id, text: text.clone() });
                } else if let Some(thought) = delta.reasoning_text() {
                    sink.send(AgentEvent::Reasoning { answer_id, text: thought.to_owned() });
                }
            },
        );
        let (status, error, stats, cost) = match result {
            Ok(completion) => {
                let a = &completion.answer;
                let usage = crate::brains::budget::usage_row(provider, &provider.model, &a.usage(), request.ask_id);
                let cost = usage.cost_usd;
                // Budget accounting is kept even for <no-memory> questions: it holds no content.
                let _ = self.store.send_timeout(crate::brains::budget::usage_write(usage), Duration::from_secs(5));
                let elapsed = started.elapsed().as_secs_f32();
                let stats = GenerationStats {
                    prompt_tokens: a.input_tokens as usize,
                    completion_tokens: a.output_tokens as usize,
                    first_token_millis: completion.first_token.map(|d| d.as_millis() as u64).unwrap_or(0),
                    tokens_per_sec: if elapsed > 0.0 { a.output_tokens as f32 / elapsed } else { 0.0 },
                    cached_prompt_tokens: a.cached_input_tokens as usize,
                    reasoning_tokens: a.reasoning_tokens as usize,
                    ..GenerationStats::default()
                };
                (MessageStatus::Done, None, stats, cost)
            }
            Err(crate::brains::ProviderError::Cancelled) => (MessageStatus::Stopped, None, GenerationStats::default(), 0.0),
            Err(err) => (MessageStatus::Failed, Some(err.to_string()), GenerationStats::default(), 0.0),
        };
        // The agent pins a lasting fact by writing <remember>fact</remember> (cloud models; the tag is not kept).
        let (answer, pins) = crate::memory::hot::take_pins(&answer);
        if remember {
            for text in pins {
                let _ = self.store.send_timeout(
                    crate::memory::commands::add_fact(crate::memory::hot::File::Memory, text, "agent".into(), self.sink.narrow()),
                    Duration::from_secs(5),
                );
            }
            self.persist(answer_message(request, answer, error.as_deref(), status, &provider.name, cost, citations), Some(provider.model.clone()));
        }
        self.sink.send(AgentEvent::AnswerCost { answer_id: request.answer_id, usd: cost });
        self.sink.send(AgentEvent::AnswerFinished { answer_id: request.answer_id, status, error, stats });
    }

    /// Handles one command. Returns false on Shutdown.
    pub fn handle(&mut self, command: AgentCommand, _ctx: &WorkerContext) -> bool {
        match command {
            AgentCommand::Chat(request) => self.handle_chat(request),
            AgentCommand::Prepare => self.warm_head(),
            AgentCommand::ModelChanged | AgentCommand::MemoryChanged => self.conversation = None,
            AgentCommand::Summarise { limit, reply } => {
                let result = self.summarise_pending(now_millis(), limit, false);
                if let Err(err) = &result {
                    tracing::warn!(%err, "summarising older activity failed");
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            AgentCommand::Recap { period, at_millis, instructions, reply } => {
                let outcome = self.write_recap(period, at_millis, &instructions);
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            AgentCommand::MeetingNote { start_millis, end_millis, title, reply } => {
                let _ = reply.send(self.write_meeting_note((start_millis, end_millis), &title, ""));
            }
            AgentCommand::Decide { call_id, choice } => self.handle_decision(call_id, choice),
            AgentCommand::DecideAs { call_id, choice, by } => self.handle_decision_by(call_id, choice, by),
            AgentCommand::Continue { operation_id, go_on } => self.handle_continue(operation_id, go_on),
            AgentCommand::Resume(operation_id) => self.handle_resume(operation_id),
            AgentCommand::CancelWaiting => self.cancel_waiting(),
            AgentCommand::Overview => self.overview(),
            AgentCommand::RemoveRule(id) => self.remove_rule(id),
            AgentCommand::AutomationStep(request) => self.start_automation_step(*request),
            AgentCommand::DraftFlow { description, reply } => {
                let draft = self.draft_flow(&description);
                self.sink.send(AgentEvent::FlowDrafted(draft.clone()));
                if let Some(reply) = reply {
                    let _ = reply.send(draft);
                }
            }
            AgentCommand::DraftApp { description, reply } => {
                let draft = self.draft_app(&description);
                self.sink.send(AgentEvent::AppDrafted(draft.clone()));
                if let Some(reply) = reply {
                    let _ = reply.send(draft);
                }
            }
            AgentCommand::AppComplete { app_id, prompt, reply } => {
                let _ = reply.send(self.app_complete(&app_id, &prompt));
            }
            AgentCommand::CancelOperation(id) => self.finish(id, crate::agent::events::OpStatus::Cancelled, Some("the automation stopped waiting for this step".into())),
            AgentCommand::InjectPanic => panic!("injected agent fault"),
            AgentCommand::Shutdown => return false,
        }
        true
    }
}

impl<B: LocalBrain> Supervised for AgentWorker<B> {
    type Command = AgentCommand;

    fn run(&mut self, commands: &Receiver<AgentCommand>, ctx: &WorkerContext) -> anyhow::Result<()> {
        // Operations that were open when cowork stopped come back first.
        self.resume_operations();
        self.inbox.attach(commands);
        let mut next_expiry = self.expire_approvals(now_millis());
        loop {
            // Commands held while background work gave way come first, in order (`give_way`).
            if let Some(command) = self.inbox.next_held() {
                if !self.handle(command, ctx) {
                    break;
                }
                continue;
            }
            let mut wait = next_expiry.map_or(SUMMARY_CHECK, |at| Duration::from_millis((at - now_millis()).clamp(0, SUMMARY_CHECK.as_millis() as i64) as u64));
            // A call shown for approval may be decided by another process (`cowork approve`):
            // the database is looked at twice a second while one waits.
            if self.has_waiting() {
                wait = wait.min(DECISION_POLL);
            }
            let received = commands.recv_timeout(wait);
            self.poll_decisions();
            next_expiry = self.expire_approvals(now_millis());
            match received {
                Ok(command) => {
                    if !self.handle(command, ctx) {
                        break;
                    }
                    next_expiry = self.expire_approvals(now_millis());
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    // Observational memory rides on a model that is already loaded and idle:
                    // summarising never loads 400 MB on its own.
                    let local = self.brain.state();
                    if local.is_loaded() && local.idle_for(now_millis()) >= SUMMARY_IDLE {
                        let _ = self.summarise_pending(now_millis(), 1, true);
                    }
                    // Then the prompt head, kept prefilled (after a summary, which changes it).
                    if let Some(skip) = self.keep_warm(commands) {
                        tracing::trace!(?skip, "prompt head not prefilled now");
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }
}

/// Starts the agent worker under supervision on a thread named `agent`; it
/// reaches the local model through `llm`.
pub fn spawn_agent(
    config: AgentConfig,
    llm: Sender<LlmCommand>,
    local: Arc<LocalModelState>,
    store: Sender<StoreCommand>,
    sink: EventSink<AgentEvent>,
    stop_epoch: Arc<AtomicU64>,
    policy: RestartPolicy,
) -> std::io::Result<WorkerHandle<AgentCommand>> {
    let channel = bounded(16);
    spawn_supervised::<AgentWorker<LlmClient>, _, _>(WorkerName::Agent, policy, sink.clone(), channel, move |_ctx| {
        let brain = LlmClient::new(llm.clone(), local.clone());
        Ok(AgentWorker::new(config.clone(), brain, store.clone(), sink.clone(), stop_epoch.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the worker asked the store to keep, as kept: its commands run on
    /// a fresh database, then every message read back, oldest first.
    fn kept_messages(store_rx: &crossbeam_channel::Receiver<StoreCommand>) -> Vec<ChatMessage> {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        for command in store_rx.try_iter() {
            command.run_on(&conn).unwrap();
        }
        crate::chat::messages_between(&conn, i64::MIN, i64::MAX).unwrap()
    }
    use crate::events::AppEvent;
    use crate::agent::events::AgentEvent;
    use crate::records::{ActivitySession, ChatThread};
    use crate::runtime::{WorkerContext, WorkerName};
    use std::cell::RefCell;

    /// Records the prompt it was given and streams a fixed answer; can press
    /// Stop (bump the epoch) after some tokens, as a user would mid-answer.
    #[derive(Default)]
    struct ScriptedEngine {
        prompts: std::rc::Rc<RefCell<Vec<Vec<PromptMessage>>>>,
        press_stop_after: Option<(usize, Arc<AtomicU64>)>,
        stop: Arc<AtomicU64>,
        state: LocalModelState,
        /// Answer this instead of the fixed answer.
        answer: Option<String>,
    }

    impl LocalBrain for ScriptedEngine {
        fn generate(&mut self, request: GenerateRequest, epoch: u64, on_text: &mut dyn FnMut(&str)) -> Result<crate::llm::Generation, crate::llm::EngineError> {
            self.prompts.borrow_mut().push(request.messages.clone());
            // Background work asks once whether someone waits, as the llm worker does between pieces.
            if request.background && request.give_way.as_ref().is_some_and(crate::llm::GiveWay::now) {
                return Err(crate::llm::EngineError::GaveWay);
            }
            if let Some(answer) = &self.answer {
                return Ok(crate::llm::Generation { text: answer.clone(), model: "scripted".into(), ..Default::default() });
            }
            let mut text = String::new();
            for (n, token) in ["You ", "are ", "editing ", "a ", "report."].iter().enumerate() {
                if let Some((after, epoch)) = &self.press_stop_after
                    && *after == n
                {
                    epoch.fetch_add(1, Ordering::SeqCst);
                }
                if self.stop.load(Ordering::SeqCst) != epoch {
                    break;
                }
                text.push_str(token);
                on_text(token);
            }
            Ok(crate::llm::Generation { text, stats: GenerationStats { completion_tokens: 5, ..GenerationStats::default() }, model: "scripted".into(), ..Default::default() })
        }
        fn state(&self) -> &LocalModelState {
            &self.state
        }
    }

    fn fixture() -> (tempfile::TempDir, AgentConfig) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cowork.db");
        let conn = crate::store::open_writer(&db).unwrap();
        let session = ActivitySession {
            session_id: 1,
            app: "LibreOffice".into(),
            title: "Q3 report.odt".into(),
            pid: Some(3),
            window_id: 9,
            started_at_millis: now_millis() - 60_000,
            ended_at_millis: None,
            end_reason: None,
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &session).unwrap();
        let config = AgentConfig { local_history_tokens: 12, ..AgentConfig::for_tests(db, dir.path().to_owned()) };
        (dir, config)
    }

    fn request(history: Vec<(Role, String)>) -> ChatRequest {
        let thread = ChatThread { thread_id: 1, title: "t".into(), updated_at_millis: 0 };
        ChatRequest { history, ..ChatRequest::new(thread, true, 10, 11, "What am I doing?") }
    }

    struct Harness {
        _dir: tempfile::TempDir,
        worker: AgentWorker<ScriptedEngine>,
        ctx: WorkerContext,
        store_rx: crossbeam_channel::Receiver<StoreCommand>,
        events: crossbeam_channel::Receiver<AppEvent>,
        prompts: std::rc::Rc<RefCell<Vec<Vec<PromptMessage>>>>,
    }

    /// A worker on a scripted engine, with the far ends of its channels.
    fn harness(mut engine: ScriptedEngine, stop: Arc<AtomicU64>) -> Harness {
        engine.stop = stop.clone();
        let (dir, config) = fixture();
        let (store_tx, store_rx) = bounded(16);
        let (events_tx, events) = bounded(64);
        let sink = crate::runtime::EventSink::<crate::events::AppEvent>::new(events_tx, || {}).narrow();
        let prompts = engine.prompts.clone();
        let worker = AgentWorker::new(config, engine, store_tx, sink.clone(), stop);
        Harness { _dir: dir, worker, ctx: WorkerContext::new(WorkerName::Agent, &sink), store_rx, events, prompts }
    }

    #[test]
    fn the_prompt_carries_the_captured_window_and_recent_history_and_both_messages_are_saved() {
        let Harness { _dir, mut worker, ctx, store_rx, events, prompts } = harness(ScriptedEngine::default(), Arc::default());
        let history = vec![
            (Role::User, "old question".into()),
            (Role::Assistant, "old answer".into()),
            (Role::User, "recent question".into()),
            (Role::Assistant, "recent answer".into()),
        ];
        worker.handle(AgentCommand::Chat(request(history)), &ctx);

        let prompt = prompts.borrow_mut()[0].clone();
        assert_eq!(prompt[0].role, PromptRole::System);
        let examples = local_examples();
        assert_eq!(prompt[1..1 + examples.len()], examples[..], "the worked examples follow the identity");
        let turn = &prompt.last().unwrap().content;
        assert!(turn.contains("The user is in LibreOffice: Q3 report.odt"), "{turn}");
        assert!(turn.ends_with("\n\nQuestion: What am I doing?"), "{turn}");
        let contents: Vec<&str> = prompt[1 + examples.len()..prompt.len() - 1].iter().map(|m| m.content.as_str()).collect();
        assert_eq!(contents, ["recent question", "recent answer"], "history is cut to its budget (12 tokens)");
        assert!(prompt[0].content.contains("Earlier in this conversation") && prompt[0].content.contains("2 earlier messages left out"), "{}", prompt[0].content);

        let saved: Vec<ChatMessage> = kept_messages(&store_rx);
        assert_eq!(saved.len(), 2);
        assert!(saved[0].context.as_deref().unwrap().contains("Q3 report.odt"));
        assert_eq!(saved[1].content, "You are editing a report.");
        let finished = events.try_iter().find_map(|e| match e {
            AppEvent::Agent(AgentEvent::AnswerFinished { status, .. }) => Some(status),
            _ => None,
        });
        assert_eq!(finished, Some(MessageStatus::Done));
    }

    #[test]
    fn grounded_mode_refuses_without_the_model_and_memory_reaches_the_prompt_with_citations() {
        let Harness { _dir, mut worker, ctx, store_rx, events, prompts } = harness(ScriptedEngine::default(), Arc::default());
        let conn = crate::store::open_writer(&worker.config.db_path).unwrap();
        crate::store::set_setting(&conn, crate::config::keys::GROUNDED, "true", 1).unwrap();
        // No embeddings at all: the fixed refusal, and no model call.
        worker.handle(AgentCommand::Chat(request(Vec::new())), &ctx);
        assert!(prompts.borrow_mut().is_empty(), "the model was not asked");
        let saved: Vec<ChatMessage> = kept_messages(&store_rx);
        assert_eq!(saved.len(), 2);
        assert!(saved[1].refusal && saved[1].content == crate::memory::rag::GROUNDED_REFUSAL);
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::Token { ref text, .. }) if text == crate::memory::rag::GROUNDED_REFUSAL)));

        // Something embedded and pinned to the thread, a hot fact and a profile: all in the prompt, cited.
        crate::store::set_setting(&conn, crate::config::keys::PROFILE, "Goal: ship the Q3 report by Friday", 2).unwrap();
        crate::memory::hot::add(&conn, crate::memory::hot::File::User, "Works at Nordbank in Porto", "user", 3).unwrap();
        crate::chat::upsert_thread(&conn, &ChatThread { thread_id: 1, title: "t".into(), updated_at_millis: 0 }, 0).unwrap();
        let job = crate::memory::jobs::create_job(&conn, 4, 10).unwrap().unwrap();
        let batch = crate::memory::jobs::next_batch(&conn, job.job_id, 10).unwrap();
        let vectors: Vec<Vec<f32>> = batch.iter().map(|_| vec![1.0 / (crate::memory::embed::DIMENSIONS as f32).sqrt(); crate::memory::embed::DIMENSIONS]).collect();
        crate::memory::jobs::commit_batch(&conn, job.job_id, &batch, &vectors, 5).unwrap();
        conn.execute("INSERT INTO thread_pins (thread_id, chunk_id) VALUES (1, ?1)", [batch[0].chunk_id]).unwrap();
        let history = vec![(Role::User, "What am I doing?".into()), (Role::Assistant, crate::memory::rag::GROUNDED_REFUSAL.into())];
        worker.handle(AgentCommand::Chat(ChatRequest { user_message_id: 20, answer_id: 21, ..request(history) }), &ctx);
        let prompt = prompts.borrow_mut()[0].clone();
        let system = &prompt[0].content;
        assert!(system.contains("Facts about the user:\n- Works at Nordbank in Porto"), "{system}");
        assert!(system.contains("Goal: ship the Q3 report by Friday"));
        let turn = &prompt.last().unwrap().content;
        assert!(turn.contains("[1] ") && turn.contains("Q3 report.odt"), "the pinned chunk, numbered, in the question's turn: {turn}");
        assert!(prompt[1..].iter().all(|m| m.content != crate::memory::rag::GROUNDED_REFUSAL), "a refusal is never fed back");
        let citations = events.try_iter().find_map(|e| match e { AppEvent::Agent(AgentEvent::Citations { answer_id: 21, citations }) => Some(citations), _ => None }).unwrap();
        assert_eq!((citations[0].n, citations[0].stream, citations[0].source_id, citations[0].open_id), (1, crate::memory::search::Stream::Window, 1, Some(1)));
        let answer = kept_messages(&store_rx).into_iter().find(|message| message.message_id == 21).unwrap();
        assert!(answer.citations.unwrap().contains("\"source_id\":1"));
    }

    #[test]
    fn a_follow_up_repeats_the_previous_prompt_and_answer_so_only_its_turn_is_new() {
        let Harness { _dir, mut worker, ctx, events, prompts, .. } = harness(ScriptedEngine::default(), Arc::default());
        worker.config.local_history_tokens = 600;
        worker.handle(AgentCommand::Chat(request(Vec::new())), &ctx);
        let answer: String = events.try_iter().filter_map(|e| match e { AppEvent::Agent(AgentEvent::Token { text, .. }) => Some(text), _ => None }).collect();
        let history = vec![(Role::User, "What am I doing?".to_owned()), (Role::Assistant, answer.clone())];
        worker.handle(AgentCommand::Chat(ChatRequest { user_message_id: 30, answer_id: 31, text: "And before that?".into(), ..request(history.clone()) }), &ctx);
        let (first, second) = { let p = prompts.borrow_mut(); (p[0].clone(), p[1].clone()) };
        assert_eq!(second[..first.len()], first[..], "the first prompt, exactly as sent (log and all)");
        assert_eq!(second[first.len()], PromptMessage { role: PromptRole::Assistant, content: answer });
        let turn = &second[first.len() + 1].content;
        assert!(turn.ends_with("Question: And before that?") && turn.contains("Q3 report.odt"), "the new turn, with the current window: {turn}");
        // Another thread (or an edited history) starts from the shared head again.
        let other = ChatRequest { thread: ChatThread { thread_id: 99, title: "other".into(), updated_at_millis: 0 }, user_message_id: 40, answer_id: 41, ..request(history) };
        worker.handle(AgentCommand::Chat(other), &ctx);
        let third = prompts.borrow_mut()[2].clone();
        let head = first.len() - 1;
        assert_eq!(third[..head], first[..head], "the shared head: identity and examples");
        assert_eq!(third[head].content, "What am I doing?", "then the history as plain turns");
        assert!(third.last().unwrap().content.contains("Q3 report.odt"), "and a full turn with the context");
    }

    #[test]
    fn prepare_prefills_the_head_that_the_next_question_shares() {
        let Harness { _dir, mut worker, ctx, prompts, events, .. } = harness(ScriptedEngine::default(), Arc::default());
        worker.handle(AgentCommand::Prepare, &ctx);
        let pieces = prompts.borrow().len();
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::PromptWarmed { .. }))), "cowork ask --warm waits for it");
        worker.handle(AgentCommand::Chat(request(Vec::new())), &ctx);
        // In pieces: the identity, then the examples, then the turn (a question waits for one piece at most).
        let lengths: Vec<usize> = prompts.borrow()[..pieces].iter().map(Vec::len).collect();
        assert_eq!(lengths, vec![1, 1 + worker.examples.len(), 2 + worker.examples.len()]);
        let (warm, asked) = { let p = prompts.borrow_mut(); (p[pieces - 1].clone(), p[pieces].clone()) };
        assert_eq!(warm.len(), asked.len(), "same layout: system, examples, the turn");
        assert_eq!(warm[..warm.len() - 1], asked[..asked.len() - 1], "identity, memory and examples are shared");
        let head = warm.last().unwrap().content.trim_end_matches("Question: ").to_owned();
        assert!(head.contains("Q3 report.odt"), "the log and clock are in the warmed turn: {head}");
        assert!(asked.last().unwrap().content.starts_with(&head), "the question's turn extends the warmed head");
    }

    /// `llm.keep_warm`: between commands, the head (without the clock) is
    /// prefilled when the model is loaded, the CPUs were idle since the last
    /// look and the user is not typing; again only when it changed or another
    /// prompt ran since, and not within `REWARM_EVERY`; a waiting command stops it.
    #[test]
    fn the_prompt_head_is_kept_prefilled_only_when_it_changed_and_the_machine_is_idle() {
        use super::super::warm::Skip;
        let Harness { _dir, mut worker, events, prompts, .. } = harness(ScriptedEngine::default(), Arc::default());
        let stat = _dir.path().join("stat");
        let (ticks, busy_ticks) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
        // Each look: 1,000 more ticks of which `busy` were busy.
        let advance = |busy: u64| {
            ticks.set(ticks.get() + 1_000);
            busy_ticks.set(busy_ticks.get() + busy);
            std::fs::write(&stat, format!("cpu  {} 0 0 {} 0 0 0 0 0 0\n", busy_ticks.get(), ticks.get() - busy_ticks.get())).unwrap();
        };
        worker.warmth = super::super::warm::Warmth::with_stat(stat.clone());
        let (_commands_tx, commands) = bounded::<AgentCommand>(4);
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::NotLoaded), "the llm worker loads it first");
        assert!(!worker.brain.state().keeps_loaded(), "not affordable: no preflight in a test");
        worker.brain.state().set_loaded(true);
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Busy), "the first look only measures");
        advance(900);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Busy), "90 % busy: the user's work comes first");
        assert!(prompts.borrow().is_empty());
        advance(100);
        assert_eq!(worker.keep_warm(&commands), None, "idle: prefilled");
        let head = prompts.borrow().last().unwrap().clone();
        assert!(head.last().unwrap().content.is_empty() || !head.last().unwrap().content.contains("It is "), "no clock in the background's head: {head:?}");
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::PromptWarmed { .. }))));
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Recent));
        // A refresh that cost much waits longer than the floor (its share of a core, `warm::wait_after`).
        let wait = worker.warmth.wait;
        assert!(wait >= super::super::warm::REWARM_EVERY, "{wait:?}");
        worker.warmth.wait = super::super::warm::REWARM_EVERY * 5;
        worker.warmth.age(super::super::warm::REWARM_EVERY * 2);
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Recent), "the last refresh's cost is not paid off yet");
        // Later: unchanged and nothing else ran, so nothing to do; a finished window changes the log.
        worker.warmth.age(super::super::warm::REWARM_EVERY * 3);
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Unchanged));
        let conn = crate::store::open_writer(&worker.config.db_path).unwrap();
        let finished = ActivitySession { session_id: 2, app: "Firefox".into(), title: "Atlas roadmap".into(), window_id: 4, started_at_millis: now_millis() - 300_000, ended_at_millis: Some(now_millis() - 200_000), end_reason: Some(crate::records::SessionEnd::Switch), ..Default::default() };
        crate::capture::db::upsert_session(&conn, &finished).unwrap();
        advance(100);
        let before = prompts.borrow().len();
        assert_eq!(worker.keep_warm(&commands), None);
        let head = prompts.borrow().last().unwrap().clone();
        assert!(prompts.borrow().len() > before && head.last().unwrap().content.contains("Atlas roadmap"), "the log is in the head: {head:?}");
        // Typing, or a question waiting, and it waits.
        let wait = worker.warmth.wait;
        worker.warmth.age(wait);
        crate::capture::db::upsert_session(&conn, &ActivitySession { session_id: 3, title: "Budget".into(), ended_at_millis: Some(now_millis() - 100_000), ..finished.clone() }).unwrap();
        worker.config.keys_at_millis.store(now_millis(), Ordering::Relaxed);
        advance(100);
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Typing));
        worker.config.keys_at_millis.store(0, Ordering::Relaxed);
        _commands_tx.send(AgentCommand::Prepare).unwrap();
        advance(100);
        let before = prompts.borrow().len();
        assert_eq!(worker.keep_warm(&commands), Some(Skip::Interrupted));
        assert_eq!(prompts.borrow().len(), before, "not a piece before the question");
    }

    #[test]
    fn a_no_memory_message_is_answered_but_nothing_is_stored() {
        let Harness { _dir, mut worker, ctx, store_rx, events, prompts } = harness(ScriptedEngine::default(), Arc::default());
        let ask = ChatRequest { text: "my diagnosis is X <no-memory>".into(), ..request(Vec::new()) };
        worker.handle(AgentCommand::Chat(ask), &ctx);
        assert_eq!(store_rx.try_iter().count(), 0, "neither thread, question nor answer reaches the store");
        let turn = prompts.borrow_mut()[0].last().unwrap().content.clone();
        assert!(turn.ends_with("Question: my diagnosis is X") && !turn.contains("no-memory"), "the tag is not sent: {turn}");
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { status: MessageStatus::Done, .. }))));
    }

    #[test]
    fn stop_mid_answer_keeps_the_partial_text_and_an_old_stop_does_not_affect_the_next_question() {
        let stop = Arc::new(AtomicU64::new(0));
        let engine = ScriptedEngine { press_stop_after: Some((2, stop.clone())), ..ScriptedEngine::default() };
        let Harness { _dir, mut worker, ctx, store_rx, .. } = harness(engine, stop);
        let answers = |rx: &crossbeam_channel::Receiver<StoreCommand>| -> Vec<ChatMessage> {
            kept_messages(rx).into_iter().filter(|message| message.role == Role::Assistant).collect()
        };
        worker.handle(AgentCommand::Chat(request(Vec::new())), &ctx);
        let stopped = answers(&store_rx);
        assert_eq!((stopped[0].status, stopped[0].content.as_str()), (MessageStatus::Stopped, "You are "));
        // The next question starts under the new epoch: it runs to the end.
        worker.brain.press_stop_after = None;
        worker.handle(AgentCommand::Chat(request(Vec::new())), &ctx);
        let next = answers(&store_rx);
        assert_eq!((next[0].status, next[0].content.as_str()), (MessageStatus::Done, "You are editing a report."));
    }

    #[test]
    fn background_work_gives_way_to_a_question_and_is_taken_up_again_after_it() {
        let Harness { _dir, mut worker, ctx: _, store_rx: _store, events, prompts } = harness(ScriptedEngine::default(), Arc::default());
        let (commands, inbox) = bounded(16);
        worker.inbox.attach(&inbox);
        let recap = || GenerateRequest { messages: vec![PromptMessage { role: PromptRole::User, content: "Write the recap.".into() }], max_tokens: 40, ..GenerateRequest::default() };
        // Alone, it runs once to its end.
        assert_eq!(worker.generate_in_background(recap()).unwrap().text, "You are editing a report.");
        assert_eq!(prompts.borrow().len(), 1);
        // Other background work waiting does not stop it; a question does.
        let (summary, summaries) = bounded(1);
        commands.send(AgentCommand::Summarise { limit: 1, reply: Some(summary) }).unwrap();
        // A decision drives an operation, maybe the one the recap is a step of: it waits too.
        commands.send(AgentCommand::Decide { call_id: 404, choice: crate::agent::events::ApprovalChoice::Deny { reason: String::new() } }).unwrap();
        assert!(!worker.give_way().unwrap().now(), "a summary and a decision wait their turn");
        commands.send(AgentCommand::Chat(request(Vec::new()))).unwrap();
        let generation = worker.generate_in_background(recap()).unwrap();
        assert_eq!(generation.text, "You are editing a report.");
        let seen: Vec<String> = prompts.borrow().iter().skip(1).map(|p| p.last().unwrap().content.clone()).collect();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!((seen[0].as_str(), seen[2].as_str()), ("Write the recap.", "Write the recap."), "asked, gave way, asked again: {seen:?}");
        assert!(seen[1].contains("What am I doing?"), "the question in between: {seen:?}");
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: 11, status: MessageStatus::Done, .. }))));
        // The summary and the decision kept their places, for the run loop, and did not run inside the recap.
        assert!(matches!(worker.inbox.next_held(), Some(AgentCommand::Summarise { .. })));
        assert!(matches!(worker.inbox.next_held(), Some(AgentCommand::Decide { call_id: 404, .. })) && worker.inbox.next_held().is_none());
        assert!(summaries.try_recv().is_err());
        // Shutting down: the background work ends with an error, and Shutdown stays for the run loop.
        commands.send(AgentCommand::Shutdown).unwrap();
        let stopped = worker.generate_in_background(recap()).unwrap_err();
        assert!(stopped.to_string().contains("stopping"), "{stopped}");
        assert!(matches!(worker.inbox.next_held(), Some(AgentCommand::Shutdown)));
    }

    #[test]
    fn a_recap_keeps_only_lines_citing_their_projects_sources_and_is_kept_as_a_summary() {
        let answer = "Here is your recap.\nAtlas: fixed the export's rounding of cents [1][2]\nZephyr: planned the launch [1]\nAcme Portal: also fixed the ledger [1]\nOpen: reply on the November invoice [4]";
        let engine = ScriptedEngine { answer: Some(answer.into()), ..ScriptedEngine::default() };
        let Harness { _dir, mut worker, ctx, store_rx, events, prompts } = harness(engine, Arc::default());
        let conn = crate::store::open_writer(&worker.config.db_path).unwrap();
        crate::store::set_setting(&conn, crate::config::keys::PROJECT_RULES, "Atlas: ledger-svc, ATL\nAcme Portal: acme-portal", 1).unwrap();
        let midnight = crate::ids::local_day_start_millis(now_millis() - 3 * 86_400_000);
        let at = |minutes: i64| midnight + 9 * 3_600_000 + minutes * 60_000;
        for (id, app, title, from, to) in [
            (101, "code", "export.rs - ledger-svc - Visual Studio Code", 0, 90),
            (102, "firefox", "ATL-212 Export rounds cents wrong - Jira", 90, 110),
            (103, "code", "App.tsx - acme-portal - Visual Studio Code", 120, 180),
            (104, "thunderbird", "Re: invoice for November - Thunderbird", 180, 200),
        ] {
            let session = ActivitySession { session_id: id, app: app.into(), title: title.into(), started_at_millis: at(from), ended_at_millis: Some(at(to)), ..Default::default() };
            crate::capture::db::upsert_session(&conn, &session).unwrap();
        }
        let (reply, replies) = bounded(1);
        worker.handle(AgentCommand::Recap { period: crate::day::recap::Period::Day, at_millis: midnight + 3_600_000, instructions: "Keep it short.".into(), reply: Some(reply) }, &ctx);
        let Ok(crate::day::recap::Outcome::Written(recap)) = replies.try_recv().unwrap() else { panic!("no recap") };
        let turn = prompts.borrow()[0].last().unwrap().content.clone();
        assert!(turn.contains("[1] Atlas, 1 h 30 min: code — export.rs - ledger-svc") && turn.ends_with("Keep it short.\n"), "{turn}");
        assert_eq!(recap.dropped.len(), 2, "the invented project and the line citing another project's source: {:?}", recap.dropped);
        // Kept as a summary of the day, each line with its sessions.
        for command in store_rx.try_iter() {
            command.run_on(&conn).unwrap();
        }
        let (kind, start, text): (String, i64, String) = conn.query_row("SELECT kind, period_start_ms, text FROM observations", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        assert_eq!((kind.as_str(), start), ("recap_day", midnight));
        assert!(text.contains("Atlas (1 h 50 min):\n- fixed the export's rounding of cents (session 101) (session 102)"), "{text}");
        assert!(text.contains("Acme Portal (1 h 00 min):\n- worked in code — App.tsx - acme-portal - Visual Studio Code (session 103)"), "{text}");
        assert!(text.contains("Left open:\n- reply on the November invoice (session 104)") && !text.contains("Zephyr"), "{text}");
        assert!(events.try_iter().any(|e| matches!(e, AppEvent::Agent(AgentEvent::RecapWritten { period_start, result: Ok(4) }) if period_start == midnight)));
        // The recap tool (the built-in automation's step) says what a flow's next steps read.
        let output = worker.recap_tool(&serde_json::json!({"period": "day", "date": crate::ids::local_date(midnight)}));
        let data: serde_json::Value = serde_json::from_str(&output.content).unwrap();
        assert_eq!((data["written"].as_bool(), data["lines"].as_u64()), (Some(true), Some(4)), "{data}");
        assert!(data["headline"].as_str().unwrap().starts_with("Atlas 1 h 50 min"), "{data}");
        // A day with nothing recorded writes nothing and says why.
        let empty = worker.recap_tool(&serde_json::json!({"date": crate::ids::local_date(midnight - 86_400_000)}));
        assert!(!empty.is_error && empty.content.contains("\"written\":false") && empty.content.contains("nothing was recorded"), "{}", empty.content);
        assert!(worker.recap_tool(&serde_json::json!({"period": "month"})).is_error);
    }

    #[test]
    fn a_meeting_note_takes_its_calendar_events_title_and_keeps_cited_action_items() {
        let answer = "Summary: the Q3 budget was reviewed [1][2]\nAction: You | send the deck to Sam | Friday [2]\nAction: Priya | book the room | none [3]";
        let engine = ScriptedEngine { answer: Some(answer.into()), ..ScriptedEngine::default() };
        let Harness { _dir, mut worker, store_rx, prompts, .. } = harness(engine, Arc::default());
        let mut conn = crate::store::open_writer(&worker.config.db_path).unwrap();
        let start = now_millis() - 3_600_000;
        for (id, source, at, text) in [
            (1, crate::audio::mic::Source::SystemAudio, 10, "Sam here, let's go through the Q3 budget."),
            (2, crate::audio::mic::Source::Microphone, 40, "I'll send you the deck by Friday, Sam."),
            (3, crate::audio::mic::Source::SystemAudio, 70, "Someone should book the room."),
        ] {
            let t = crate::audio::transcripts::AudioTranscript { transcript_id: id, source, started_at_millis: start + at * 1000, ended_at_millis: start + at * 1000 + 5_000, text: text.into(), confidence: 0.9, app: String::new(), title: String::new(), audio_file: None };
            crate::audio::transcripts::insert(&conn, &t).unwrap();
        }
        let review = crate::day::calendar::Event { uid: "q3".into(), title: "Q3 review with Sam".into(), start_millis: start - 60_000, end_millis: start + 1_800_000, ..Default::default() };
        let tx = conn.transaction().unwrap();
        crate::calendar::db::replace(&tx, "s", (start - 86_400_000, start + 86_400_000), &[review]).unwrap();
        tx.commit().unwrap();
        let output = worker.meeting_note_tool(&serde_json::json!({"start_ms": start, "end_ms": start + 120_000, "title": "Meet - abc-defg-hij - Chromium"}));
        let data: serde_json::Value = serde_json::from_str(&output.content).unwrap_or_else(|_| panic!("{}", output.content));
        assert_eq!(data["title"], "Q3 review with Sam", "the calendar names the call, not its window: {data}");
        assert_eq!(data["action_items"], "You: send the deck to Sam\nunassigned: book the room", "Priya was never said in the call: {data}");
        assert!(prompts.borrow()[0].last().unwrap().content.starts_with("Meeting: Q3 review with Sam\n"));
        for command in store_rx.try_iter() {
            command.run_on(&conn).unwrap();
        }
        let text: String = conn.query_row("SELECT text FROM observations WHERE kind = 'meeting'", [], |r| r.get(0)).unwrap();
        assert!(text.starts_with("Meeting note: Q3 review with Sam\n"), "{text}");
    }
}
