//! `cowork recap [--week] [--date D]`: writes the recap of a day or a week
//! now, with the same brain, rules and checks as the built-in automation
//! (`agent::recap`), keeps it in memory and prints it (`--json`: the recap
//! with its sources, what was dropped and why, and how long it took).
//! `cowork meeting-note --start T --end T`: the same for a call's note from
//! what listen mode heard (`agent::meeting`).

use std::time::{Duration, Instant};

use crossbeam_channel::bounded;

use crate::agent::AgentCommand;
use crate::day::recap::Outcome;
use crate::config::Paths;
use crate::day::recap::Period;

#[derive(Clone, Debug, Default)]
pub struct RecapOptions {
    pub week: bool,
    /// A day of the period, YYYY-MM-DD (default today).
    pub date: Option<String>,
    pub instructions: String,
    /// A chat model of the manifest by name (default: the one that fits this machine).
    pub local_model: Option<String>,
    pub json: bool,
}

/// The longest a recap may take here (a local model loads first).
const RECAP_WAIT: Duration = Duration::from_secs(900);

pub fn recap(paths: &Paths, options: &RecapOptions) -> anyhow::Result<()> {
    let at = match &options.date {
        Some(date) => crate::ids::local_midnight_of(date).map_err(anyhow::Error::msg)?,
        None => crate::ids::now_millis(),
    };
    let period = if options.week { Period::Week } else { Period::Day };
    let (workers, _events) = super::ask::headless_workers(paths, options.local_model.as_deref())?;
    let started = Instant::now();
    let (reply, replies) = bounded(1);
    workers.agent.commands.send(AgentCommand::Recap { period, at_millis: at, instructions: options.instructions.clone(), reply: Some(reply) })?;
    let outcome = replies.recv_timeout(RECAP_WAIT);
    let seconds = started.elapsed().as_secs_f64();
    // The store keeps the recap before the workers stop.
    workers.shutdown(Duration::from_secs(10));
    let outcome = outcome.map_err(|_| anyhow::anyhow!("no recap within {} s", RECAP_WAIT.as_secs()))?.map_err(anyhow::Error::msg)?;
    match outcome {
        Outcome::Written(recap) if options.json => println!("{}", serde_json::json!({"written": true, "seconds": seconds, "text": recap.render(), "recap": recap})),
        Outcome::Written(recap) => {
            println!("{}", recap.render());
            eprintln!("({} line(s) kept, {} dropped; {seconds:.1} s, {})", recap.lines().count(), recap.dropped.len(), recap.model);
        }
        Outcome::Skipped(why) if options.json => println!("{}", serde_json::json!({"written": false, "seconds": seconds, "why": why})),
        Outcome::Skipped(why) => println!("No recap: {why}."),
    }
    Ok(())
}

/// `cowork meeting-note --start T --end T [--title T]`: the call's note, written and kept.
pub fn meeting_note(paths: &Paths, (start, end): (&str, &str), title: &str, local_model: Option<&str>, json: bool) -> anyhow::Result<()> {
    let now = crate::ids::now_millis();
    let start_millis = crate::ids::parse_time(start, now).map_err(anyhow::Error::msg)?;
    let end_millis = crate::ids::parse_time(end, now).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(end_millis > start_millis, "the call ends before it starts");
    let (workers, _events) = super::ask::headless_workers(paths, local_model)?;
    let started = Instant::now();
    let (reply, replies) = bounded(1);
    workers.agent.commands.send(AgentCommand::MeetingNote { start_millis, end_millis, title: title.to_owned(), reply })?;
    let outcome = replies.recv_timeout(RECAP_WAIT);
    let seconds = started.elapsed().as_secs_f64();
    workers.shutdown(Duration::from_secs(10));
    let outcome = outcome.map_err(|_| anyhow::anyhow!("no note within {} s", RECAP_WAIT.as_secs()))?.map_err(anyhow::Error::msg)?;
    match outcome {
        Some((note, text)) if json => println!("{}", serde_json::json!({"written": true, "seconds": seconds, "text": text, "note": note})),
        Some((_, text)) => println!("{text}"),
        None if json => println!("{}", serde_json::json!({"written": false, "seconds": seconds, "why": "nothing was heard during the call"})),
        None => println!("No note: nothing was heard during the call."),
    }
    Ok(())
}
