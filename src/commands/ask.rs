//! `cowork ask "question"`: answers headlessly with the same context and model
//! as the sidebar, streaming to stdout. The exchange is saved as a chat thread.

use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use crossbeam_channel::bounded;

use crate::config::{Paths, resolve_model};
use crate::events::{AppEvent, ChatThread, MessageStatus};
use crate::ids::{next_id, now_millis};
use crate::llm::{ChatRequest, LlmCommand};
use crate::models::{Manifest, ModelRole};
use crate::runtime::{EventSink, RestartPolicy};
use crate::state::thread_title;
use crate::workers::{WorkerOptions, Workers};

pub fn ask(paths: &Paths, question: &str, show_context: bool) -> anyhow::Result<()> {
    let manifest = Manifest::bundled()?;
    let (events_tx, events) = bounded(4096);
    let sink = EventSink::new(events_tx, || {});
    let options = WorkerOptions {
        capture: false,
        display: None,
        chat_model: resolve_model(&manifest, &paths.models_dir, ModelRole::Chat),
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
