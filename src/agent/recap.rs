//! The daily and weekly recap in the agent (issue 58): the period's ledger
//! (the user's project rules, as `cowork report` reads them) becomes
//! numbered sources (`day::recap`), a brain writes a line per project and
//! what was left open, and only lines that cite sources of their own project
//! are kept; a project the brain said nothing usable about gets cowork's own
//! line. The recap is kept as a summary (`observations`, kind `recap_day` or
//! `recap_week`: searchable, embedded, recalled with its sessions) and shown
//! in the Context panel.
//!
//! The built-in automation `builtin_daily_recap` (and `builtin_weekly_recap`)
//! calls the `recap` tool, which comes here; `cowork recap` asks directly.
//! The brain is chosen as for an app's completion: local by default, a cloud
//! only with the user's consent to see what cowork records. With no brain
//! at all (no local model installed, no cloud allowed) nothing is written.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::operation::{Brain, ChatRequest};
use super::worker::AgentWorker;
use crate::brains::{Role, Turn};
use crate::day::projects::ProjectRules;
use crate::day::recap::{self, Facts, Outcome, Period};
use crate::ids::now_millis;
use crate::llm::LocalBrain;
use crate::tools::ToolOutput;

impl<B: LocalBrain> AgentWorker<B> {
    /// Writes the recap of the day or week holding `at_millis` and keeps it;
    /// the Context panel is told either way.
    pub(super) fn write_recap(&mut self, period: Period, at_millis: i64, instructions: &str) -> Result<Outcome, String> {
        let outcome = self.make_recap(period, at_millis, instructions);
        let result = match &outcome {
            Ok(Outcome::Written(recap)) => Ok(recap.lines().count()),
            Ok(Outcome::Skipped(why)) => Err(why.clone()),
            Err(err) => Err(err.clone()),
        };
        self.sink.send(crate::agent::events::AgentEvent::RecapWritten { period_start: recap::bounds(period, at_millis).0, result });
        outcome
    }

    fn make_recap(&mut self, period: Period, at_millis: i64, instructions: &str) -> Result<Outcome, String> {
        let started = Instant::now();
        let now = now_millis();
        let (start, end) = recap::bounds(period, at_millis);
        let (settings, providers) = self.brains();
        let rules = ProjectRules::parse(&settings.projects).map_err(|err| format!("the project rules (projects.rules): {err}"))?;
        self.open_db();
        let conn = self.db.as_ref().ok_or("cowork's memory cannot be read right now")?;
        let ledger = crate::capture::db::ledger_between(conn, &rules, start, end.min(now.max(start + 1)), now).map_err(|err| format!("reading the sessions: {err}"))?;
        let facts = Facts::of(&ledger, period, start, end);
        if facts.is_empty() {
            return Ok(Outcome::Skipped(format!("nothing was recorded on {}", facts.title())));
        }
        let (system, user) = recap::prompt(&facts, instructions);
        let ask = ChatRequest { text: user.clone(), ..ChatRequest::default() };
        let (brain, ask) = self.plan_operation(&ask, &settings, &providers)?;
        let model = match &brain {
            Brain::Local if self.brain.state().is_unavailable() => return Ok(Outcome::Skipped("no local model is installed or it cannot load, and no cloud is allowed".into())),
            Brain::Local => "local model".to_owned(),
            // A recap is made of what cowork recorded: a cloud writes it only with the user's consent.
            Brain::Cloud { provider, consent: true, .. } if ask.is_none() => format!("{} ({})", provider.name, provider.model),
            Brain::Cloud { provider, .. } => return Ok(Outcome::Skipped(format!("{} is not allowed to see what cowork records; allow it in Settings → Brains", provider.name))),
        };
        // Nothing large enough to ask about: cowork's own lines.
        let output = match facts.asked().is_empty() {
            true => String::new(),
            false => self.complete(&brain, &[Turn::new(Role::System, system), Turn::new(Role::User, user)], facts.answer_tokens(), true)?,
        };
        let mut written = recap::read(&facts, &output);
        written.model = model;
        written.made_in_millis = started.elapsed().as_millis() as i64;
        for (line, why) in &written.dropped {
            tracing::info!(%line, %why, "a recap line was not kept");
        }
        let observation = crate::memory::Observation {
            kind: period.kind().into(),
            period_start_millis: start,
            period_end_millis: end,
            text: written.render(),
            model: Some(written.model.clone()),
        };
        self.store.send_timeout(crate::memory::observation_write(observation), Duration::from_secs(5)).map_err(|_| "the store is not accepting writes")?;
        Ok(Outcome::Written(Box::new(written)))
    }

    /// The `recap` tool: `{"period": "day"|"week", "date": "YYYY-MM-DD", "instructions": "…"}`;
    /// its output is JSON a flow's later steps read (`written`, `headline`, `summary`, `why`).
    pub(super) fn recap_tool(&mut self, args: &Value) -> ToolOutput {
        let text = args.get("period").and_then(Value::as_str).unwrap_or("day");
        let Some(period) = Period::parse(text) else {
            return ToolOutput::error(format!("period is \"day\" or \"week\", not {text:?}"));
        };
        let at = match args.get("date").and_then(Value::as_str).filter(|d| !d.is_empty()) {
            Some(date) => match crate::ids::local_midnight_of(date) {
                Ok(at) => at,
                Err(err) => return ToolOutput::error(err),
            },
            None => now_millis(),
        };
        let instructions = args.get("instructions").and_then(Value::as_str).unwrap_or_default().to_owned();
        match self.write_recap(period, at, &instructions) {
            Ok(Outcome::Written(recap)) => {
                let lines = recap.lines().count();
                let headline = recap.sections.iter().take(3).map(|s| format!("{} {}", s.project, recap::span(s.seconds))).collect::<Vec<_>>().join(", ");
                let summary = recap.lines().take(4).map(|(project, line)| format!("{project}: {}", line.text)).collect::<Vec<_>>().join("\n");
                ToolOutput::ok(json!({"written": true, "period": period.as_str(), "of": recap.facts.title(), "lines": lines, "headline": headline, "summary": summary, "text": recap.render()}).to_string())
            }
            Ok(Outcome::Skipped(why)) => ToolOutput::ok(json!({"written": false, "period": period.as_str(), "why": why}).to_string()),
            Err(err) => ToolOutput::error(format!("the recap was not written: {err}")),
        }
    }
}
