//! `cowork ask "question"`: answers headlessly with the same context and model
//! as the sidebar, streaming to stdout. The exchange is saved as a chat thread.

use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use crossbeam_channel::bounded;

use crate::config::{Paths, resolve_model, resolve_named_model};
use crate::events::{AppEvent, ChatThread, MessageStatus};
use crate::ids::{next_id, now_millis};
use crate::llm::{ChatRequest, LlmCommand};
use crate::models::{Manifest, ModelRole};
use crate::runtime::{EventSink, RestartPolicy};
use crate::state::thread_title;
use crate::workers::{WorkerOptions, Workers};

/// `local_model`: a chat model of the manifest by name (default: the first chat model).
pub fn ask(paths: &Paths, question: &str, show_context: bool, local_model: Option<&str>) -> anyhow::Result<()> {
    let manifest = Manifest::bundled()?;
    let chat_model = match local_model {
        None => resolve_model(&manifest, &paths.models_dir, ModelRole::Chat),
        Some(name) => match resolve_named_model(&manifest, &paths.models_dir, name) {
            Some(model) => Some(model),
            None => {
                let chat: Vec<&str> = manifest.models.iter().filter(|m| m.role == ModelRole::Chat).map(|m| m.name.as_str()).collect();
                bail!("no chat model named {name:?} in the manifest (chat models: {})", chat.join(", "));
            }
        },
    };
    let (events_tx, events) = bounded(4096);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions {
        capture: false,
        display: None,
        chat_model,
        policy: RestartPolicy { max_restarts: 0, ..RestartPolicy::default() },
        require_consent: false,
    };
    let (workers, _settings, _warnings) = Workers::start(paths, options, sink)?;
    let thread = ChatThread { thread_id: next_id(), title: thread_title(question), updated_at_millis: now_millis() };
    let answer_id = next_id();
    let request = ChatRequest {
        thread,
        thread_is_new: true,
        user_message_id: next_id(),
        answer_id,
        text: question.to_owned(),
        history: Vec::new(),
        ask_id: answer_id,
        try_harder_from: None,
        consent_once: false,
        is_retry: false,
    };
    workers.llm.commands.send(LlmCommand::Chat(request))?;
    let mut stdout = std::io::stdout().lock();
    let outcome = loop {
        let Ok(event) = events.recv_timeout(Duration::from_secs(600)) else {
            break Err(anyhow::anyhow!("no answer within 10 minutes"));
        };
        match event {
            AppEvent::ContextAttached { context, .. } if show_context => {
                eprintln!("--- context sent ---\n{context}--- end of context ---");
            }
            AppEvent::Token { text, .. } => {
                stdout.write_all(text.as_bytes())?;
                stdout.flush()?;
            }
            AppEvent::AnswerFinished { answer_id: id, status, error, stats } if id == answer_id => {
                writeln!(stdout)?;
                if stats.completion_tokens > 0 {
                    eprintln!(
                        "[{} tokens, {:.1} tokens/s, first token after {} ms]",
                        stats.completion_tokens, stats.tokens_per_sec, stats.first_token_millis
                    );
                }
                break match (status, error) {
                    (MessageStatus::Failed, Some(error)) => Err(anyhow::anyhow!(error)),
                    _ => Ok(()),
                };
            }
            _ => {}
        }
    };
    workers.shutdown(Duration::from_secs(5));
    match outcome {
        Ok(()) => Ok(()),
        Err(err) => bail!("{err:#}"),
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
            }
        },
    )?;
    if let Some(err) = write_error {
        return Err(err.into());
    }
    writeln!(stdout)?;
    let answer = &completion.answer;
    eprintln!(
        "[{provider_name} {}: {} tokens in, {} out, first token after {} ms, finish {}]",
        model.unwrap_or(&provider.model),
        answer.input_tokens,
        answer.output_tokens,
        completion.first_token.map(|d| d.as_millis()).unwrap_or(0),
        answer.finish.as_deref().unwrap_or("?")
    );
    Ok(())
}
