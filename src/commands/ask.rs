//! `cowork ask "question"`: answers headlessly with the same context and model
//! as the sidebar, streaming to stdout. The exchange is saved as a chat thread.

use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use crossbeam_channel::bounded;

use crate::agent::{AgentCommand, ChatRequest};
use crate::agent::events::AgentEvent;
use crate::config::{Paths, resolve_named_model};
use crate::events::AppEvent;
use crate::ids::{next_id, now_millis};
use crate::llm::events::LocalModelEvent;
use crate::models::{Manifest, ModelRole};
use crate::records::{ChatThread, MessageStatus};
use crate::runtime::{EventSink, RestartPolicy};
use crate::state::thread_title;
use crate::workers::{WorkerOptions, Workers};

/// How `cowork ask` asks its questions.
#[derive(Clone, Debug, Default)]
pub struct AskOptions {
    /// Print the context sent with each question to stderr.
    pub show_context: bool,
    /// A chat model of the manifest by name (default: the first that fits this machine).
    pub local_model: Option<String>,
    /// All questions in one thread, each seeing the answers before it (otherwise one thread each).
    pub follow_up: bool,
    /// Keep neither the questions nor the answers (as `<no-memory>` does).
    pub forget: bool,
    /// One JSON object per answer on stdout instead of the streamed text.
    pub json: bool,
    /// Prefill the prompt head before the first question, as the app keeps it
    /// prefilled (`agent::warm`), and report how long that took.
    pub warm: bool,
}

/// How long loading the model and prefilling the prompt head took (`--warm`).
#[derive(Debug, Default, serde::Serialize)]
pub struct Warmed {
    pub load_ms: u64,
    pub warmed_ms: u64,
    pub prompt_tokens: usize,
}

/// Loads the local model and prefills the prompt head every question shares
/// (`AgentCommand::Prepare`); waits up to 10 minutes for it. Printed as a JSON
/// line with `json`, else to stderr.
pub fn warm(workers: &Workers, events: &crossbeam_channel::Receiver<AppEvent>, json: bool) -> anyhow::Result<Warmed> {
    let started = std::time::Instant::now();
    workers.agent.commands.send(AgentCommand::Prepare)?;
    let mut warmed = Warmed::default();
    loop {
        let Ok(event) = events.recv_timeout(Duration::from_secs(600)) else { bail!("the prompt head was not prefilled within 10 minutes") };
        match event {
            AppEvent::LocalModel(LocalModelEvent::Model(crate::llm::events::ModelStatus::Ready { load_millis, .. })) => warmed.load_ms = load_millis,
            AppEvent::LocalModel(LocalModelEvent::Model(crate::llm::events::ModelStatus::Unavailable(why))) => bail!(why),
            AppEvent::Agent(AgentEvent::PromptWarmed { millis, prompt_tokens }) => {
                warmed.warmed_ms = millis.saturating_sub(warmed.load_ms);
                warmed.prompt_tokens = prompt_tokens;
                break;
            }
            _ => {}
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the prompt head was not prefilled within 10 minutes");
        }
    }
    if json {
        println!("{}", serde_json::to_string(&warmed)?);
    } else {
        eprintln!("model loaded in {} ms; prompt head ({} tokens) prefilled in {} ms", warmed.load_ms, warmed.prompt_tokens, warmed.warmed_ms);
    }
    Ok(warmed)
}

/// One answer, as `--json` prints it.
#[derive(Debug, serde::Serialize)]
struct Answered<'a> {
    question: &'a str,
    answer: String,
    /// Time to load the model, when this question loaded it.
    load_ms: u64,
    /// From the question sent to its first word (the model's load excluded).
    first_token_ms: u64,
    /// From the model's start on the prompt to its first word: what a model
    /// server is timed on (`scripts/measure` sets it beside llama.cpp's).
    model_first_token_ms: u64,
    /// From the question sent to the answer's end (the model's load excluded).
    total_ms: u64,
    prompt_tokens: usize,
    /// Of `prompt_tokens`, those the engine's prefix cache held (not read again).
    cached_prompt_tokens: usize,
    /// How long reading the rest took.
    prompt_ms: u64,
    completion_tokens: usize,
    tokens_per_sec: f32,
}

/// The chat model `--local-model NAME` names (or, without it, the one that
/// fits this machine), as the llm worker loads it.
pub fn chosen_chat_model(paths: &Paths, local_model: Option<&str>) -> anyhow::Result<Option<crate::config::ResolvedModel>> {
    let manifest = Manifest::bundled()?;
    Ok(match local_model {
        None => crate::workers::chat_model(&manifest, paths),
        Some(name) => match resolve_named_model(&manifest, &paths.models_dir, &crate::models::user::list(&paths.data_dir).unwrap_or_default(), name) {
            Some(model) => Some(model),
            None => {
                let chat: Vec<&str> = manifest.models.iter().filter(|m| m.role == ModelRole::Chat).map(|m| m.name.as_str()).collect();
                bail!("no chat model named {name:?} in the manifest or added (chat models: {}; add your own with cowork models add PATH)", chat.join(", "));
            }
        },
    })
}

/// The workers a headless command (`ask`, `recap`, `meeting-note`) asks the
/// agent through: no capture, no automations, no restarts; and the far end of
/// their events (kept open while they run).
pub fn headless_workers(paths: &Paths, local_model: Option<&str>) -> anyhow::Result<(Workers, crossbeam_channel::Receiver<AppEvent>)> {
    let chat_model = chosen_chat_model(paths, local_model)?;
    let (events_tx, events) = bounded(4096);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions {
        capture: false,
        display: None,
        chat_model,
        policy: RestartPolicy { max_restarts: 0, ..RestartPolicy::default() },
        require_consent: false,
        automations: false,
    };
    Ok((Workers::start(paths, options, sink)?.0, events))
}

/// `cowork ask "question" ["question" ...]`: answers headlessly with the same
/// context and model as the sidebar. The model loads once, so later questions
/// find the stable head of the prompt already prefilled (the engine's prefix cache).
pub fn ask(paths: &Paths, questions: &[String], options: &AskOptions) -> anyhow::Result<()> {
    let (workers, events) = headless_workers(paths, options.local_model.as_deref())?;
    if options.warm {
        warm(&workers, &events, options.json)?;
    }
    let mut outcome = Ok(());
    let mut thread = None;
    let mut history = Vec::new();
    for question in questions {
        let new_thread = thread.is_none() || !options.follow_up;
        if new_thread {
            thread = Some(ChatThread { thread_id: next_id(), title: thread_title(question), updated_at_millis: now_millis() });
            history.clear();
        }
        let answer_id = next_id();
        let text = if options.forget { format!("<no-memory> {question}") } else { question.clone() };
        let request = ChatRequest {
            history: history.clone(),
            ask_id: answer_id,
            ..ChatRequest::new(thread.clone().expect("set above"), new_thread, next_id(), answer_id, text)
        };
        workers.agent.commands.send(AgentCommand::Chat(request))?;
        match answer(&events, question, answer_id, options) {
            Ok(text) => {
                history.push((crate::records::Role::User, question.clone()));
                history.push((crate::records::Role::Assistant, text));
            }
            Err(err) => {
                outcome = Err(err);
                break;
            }
        }
    }
    workers.shutdown(Duration::from_secs(5));
    outcome.map_err(|err| anyhow::anyhow!("{err:#}"))
}

/// Streams (or collects) one answer; returns its text.
fn answer(events: &crossbeam_channel::Receiver<AppEvent>, question: &str, answer_id: i64, options: &AskOptions) -> anyhow::Result<String> {
    let mut stdout = std::io::stdout().lock();
    let mut text = String::new();
    let mut load_ms = 0;
    let started = std::time::Instant::now();
    // Timed from the sending, as the user waits (reading memory and recalling notes included).
    let mut first_token_ms = None;
    loop {
        let Ok(event) = events.recv_timeout(Duration::from_secs(600)) else {
            bail!("no answer within 10 minutes");
        };
        match event {
            AppEvent::Agent(AgentEvent::ContextAttached { context, .. }) if options.show_context => {
                eprintln!("--- context sent ---\n{context}\n--- end of context ---");
            }
            AppEvent::LocalModel(LocalModelEvent::Model(crate::llm::events::ModelStatus::Ready { load_millis, .. })) => load_ms = load_millis,
            AppEvent::Agent(AgentEvent::Token { text: token, answer_id: id }) if id == answer_id => {
                if first_token_ms.is_none() && !token.trim().is_empty() {
                    first_token_ms = Some((started.elapsed().as_millis() as u64).saturating_sub(load_ms));
                }
                text.push_str(&token);
                if !options.json {
                    stdout.write_all(token.as_bytes())?;
                    stdout.flush()?;
                }
            }
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, stats }) if id == answer_id => {
                if let (MessageStatus::Failed, Some(error)) = (status, error) {
                    bail!(error);
                }
                let first_token_ms = first_token_ms.unwrap_or(stats.first_token_millis);
                if options.json {
                    let line = Answered {
                        question,
                        answer: text.clone(),
                        load_ms,
                        first_token_ms,
                        model_first_token_ms: stats.first_token_millis,
                        total_ms: (started.elapsed().as_millis() as u64).saturating_sub(load_ms),
                        prompt_tokens: stats.prompt_tokens,
                        cached_prompt_tokens: stats.cached_prompt_tokens,
                        prompt_ms: stats.prompt_millis,
                        completion_tokens: stats.completion_tokens,
                        tokens_per_sec: stats.tokens_per_sec,
                    };
                    writeln!(stdout, "{}", serde_json::to_string(&line)?)?;
                } else {
                    writeln!(stdout)?;
                    if stats.completion_tokens > 0 {
                        eprintln!(
                            "[{} tokens, {:.1} tokens/s, first token after {} ms]",
                            stats.completion_tokens, stats.tokens_per_sec, first_token_ms
                        );
                    }
                }
                return Ok(text);
            }
            _ => {}
        }
    }
}

/// `cowork ask --provider NAME [--model M] "question"`: one answer from a
/// configured provider (`providers.json` in the data directory), streamed to
/// stdout. Captured context is not sent: consent per provider comes first.
pub fn ask_provider(paths: &Paths, provider_name: &str, model: Option<&str>, question: &str) -> anyhow::Result<()> {
    use crate::brains::{Delta, Providers, Role, Turn, stream_chat};
    let file = Providers::path(&paths.data_dir);
    let providers = Providers::load(&file)?;
    let Some(provider) = providers.get(provider_name) else {
        let known: Vec<&str> = providers.list.iter().map(|p| p.name.as_str()).collect();
        bail!("no provider {provider_name:?} in {} (configured: {})", file.display(), if known.is_empty() { "none".into() } else { known.join(", ") });
    };
    let key = crate::brains::provider_key(&paths.data_dir, provider)?;
    crate::brains::rules::remember_in(&paths.data_dir);
    eprintln!("[{provider_name}: captured context is not sent without your consent for this provider]");
    let turns = [
        Turn::new(Role::System, "You are cowork, a concise desktop assistant."),
        Turn::new(Role::User, question),
    ];
    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let completion = stream_chat(
        crate::net::OutboundGate::global(),
        provider,
        model,
        key.as_deref(),
        &turns,
        400,
        &|| false,
        &mut |delta| {
            if let Delta::Text(text) = delta
                && let Err(err) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
            {
                write_error.get_or_insert(err);
            } else if let Some(thought) = delta.reasoning_text() {
                // Reasoning goes to stderr: stdout carries only the answer.
                eprint!("{thought}");
            }
        },
    )?;
    if let Some(err) = write_error {
        return Err(err.into());
    }
    writeln!(stdout)?;
    let answer = &completion.answer;
    eprintln!(
        "[{provider_name} {}: {} tokens in ({} cached), {} out, first token after {} ms, finish {}]",
        model.unwrap_or(&provider.model),
        answer.input_tokens,
        answer.cached_input_tokens,
        answer.output_tokens,
        completion.first_token.map(|d| d.as_millis()).unwrap_or(0),
        answer.finish.as_deref().unwrap_or("?")
    );
    Ok(())
}
