//! The automations as the Apps panel shows them (`AutomationsView`, sent whole).

/// One automation as the Apps panel lists it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AutomationRow {
    pub name: String,
    /// What it does, in one line (the flow's description).
    pub description: String,
    pub enabled: bool,
    /// The trigger in words.
    pub trigger: String,
    pub next_fire_at_millis: Option<i64>,
    /// Why the stored flow does not read, if it does not.
    pub problem: Option<String>,
    /// The flow as stored (JSON), for the editor.
    pub definition: String,
}

impl AutomationRow {
    /// Its name as the user reads it: `builtin_approval_reminder` is "Approval reminder".
    pub fn title(&self) -> String {
        flow_title(&self.name)
    }
}

/// A flow's name as the user reads it: `builtin_` dropped, words spaced,
/// the first capitalised (`builtin_approval_reminder` is "Approval reminder").
pub fn flow_title(name: &str) -> String {
    let words = name.strip_prefix("builtin_").unwrap_or(name).replace('_', " ");
    let mut chars = words.trim().chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// One step of a run as the history shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepSummary {
    pub step_id: String,
    pub kind: String,
    pub status: String,
    pub decision: Option<String>,
    pub error: Option<String>,
    /// The step's output, cut for the panel.
    pub output: String,
    pub duration_millis: Option<i64>,
}

/// One run as the history shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSummary {
    pub run_id: i64,
    pub automation: String,
    pub trigger_kind: String,
    pub status: String,
    pub error: Option<String>,
    pub created_at_millis: i64,
    pub steps: Vec<StepSummary>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct AutomationsView {
    pub flows: Vec<AutomationRow>,
    /// The newest runs of every flow, newest first.
    pub runs: Vec<RunSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flows_name_reads_as_words() {
        assert_eq!(flow_title("builtin_approval_reminder"), "Approval reminder");
        assert_eq!(flow_title("morning_summary"), "Morning summary");
        assert_eq!(flow_title("x"), "X");
    }
}
