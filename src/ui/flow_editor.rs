//! The automation editor: a flow as a list of step forms, not a canvas. Each
//! templated field offers the variables available at its step (the trigger's
//! data and what the steps before it return) for insertion; the flow's checks
//! run as it is edited and Save is enabled only when it passes them. The
//! editor holds its own copy of the flow; Save pushes `UiAction::SaveFlow`.

use egui::RichText;
use serde_json::Value;

use crate::automations::flow::{self, BuiltIn, Flow, McpEvent, NotifyTier, Op, RunMode, Step, StepKind, Tier, Trigger};
use crate::state::UiAction;
use crate::ui::theme;

pub struct FlowEditor {
    pub flow: Flow,
    /// Each tool step's arguments as the user types them (JSON).
    args_text: Vec<String>,
    /// Whether the flow is new (its name may still change freely).
    pub is_new: bool,
}

impl FlowEditor {
    pub fn new(flow: Flow, is_new: bool) -> Self {
        let args_text = flow.steps.iter().map(args_of).collect();
        FlowEditor { flow, args_text, is_new }
    }

    /// A new automation to start from: run by hand, one notification.
    pub fn blank() -> Self {
        let flow = Flow {
            name: "my_routine".into(),
            description: String::new(),
            trigger: Trigger::Manual,
            steps: vec![default_step("tell", "notify")],
            mode: RunMode::Single,
            agent_tool: false,
            inputs: Vec::new(),
            notify_on_failure: true,
        };
        FlowEditor::new(flow, true)
    }
}

fn args_of(step: &Step) -> String {
    match &step.kind {
        StepKind::Tool { args, .. } => serde_json::to_string(args).unwrap_or_default(),
        _ => String::new(),
    }
}

const STEP_KINDS: [&str; 5] = ["tool", "agent", "condition", "delay", "notify"];
const TRIGGER_KINDS: [&str; 12] = ["manual", "schedule", "focus", "back", "first_activity", "mcp", "approval_waiting", "focus_stretch", "context_switches", "meeting", "calendar", "day_end"];
const OPS: [(&str, Op); 11] = [
    ("equals", Op::Equals),
    ("not_equals", Op::NotEquals),
    ("contains", Op::Contains),
    ("not_contains", Op::NotContains),
    ("matches", Op::Matches),
    ("gt", Op::Gt),
    ("gte", Op::Gte),
    ("lt", Op::Lt),
    ("lte", Op::Lte),
    ("empty", Op::Empty),
    ("not_empty", Op::NotEmpty),
];

fn default_step(id: &str, kind: &str) -> Step {
    let kind = match kind {
        "tool" => StepKind::Tool { tool: "recent_activity".into(), args: serde_json::json!({"minutes": 60}) },
        "agent" => StepKind::Agent { prompt: String::new(), tools: Vec::new(), tier: Tier::Local },
        "condition" => StepKind::Condition { left: String::new(), op: Op::NotEmpty, right: String::new(), then_go: flow::NEXT.into(), else_go: flow::END.into() },
        "delay" => StepKind::Delay { seconds: 60 },
        _ => StepKind::Notify { title: "Done".into(), body: String::new(), tier: NotifyTier::Helpful, task: String::new() },
    };
    Step { id: id.into(), kind, timeout_secs: None, end: false }
}

fn default_trigger(kind: &str) -> Trigger {
    match kind {
        "schedule" => Trigger::Schedule { schedule: "0 9 * * mon-fri".into() },
        "focus" => Trigger::Focus { app: None, title: Some(String::new()) },
        "back" => Trigger::Back { away_minutes: 30 },
        "first_activity" => Trigger::FirstActivity,
        "mcp" => Trigger::Mcp { server: String::new(), event: McpEvent::ToolsChanged, uri: None },
        "approval_waiting" => Trigger::ApprovalWaiting { minutes: 10 },
        "focus_stretch" => Trigger::FocusStretch { minutes: 90 },
        "context_switches" => Trigger::ContextSwitches { count: 12, minutes: 10 },
        "meeting" => Trigger::Meeting { event: crate::automations::flow::MeetingEvent::Ended },
        "calendar" => Trigger::Calendar { minutes_before: 10, title: None },
        "day_end" => Trigger::DayEnd { after_hour: 16, away_minutes: 20 },
        _ => Trigger::Manual,
    }
}

fn trigger_kind(trigger: &Trigger) -> &'static str {
    match trigger {
        Trigger::Manual => "manual",
        Trigger::Schedule { .. } => "schedule",
        Trigger::Focus { .. } => "focus",
        Trigger::Back { .. } => "back",
        Trigger::FirstActivity => "first_activity",
        Trigger::Mcp { .. } => "mcp",
        Trigger::ApprovalWaiting { .. } => "approval_waiting",
        Trigger::FocusStretch { .. } => "focus_stretch",
        Trigger::ContextSwitches { .. } => "context_switches",
        Trigger::Meeting { .. } => "meeting",
        Trigger::Calendar { .. } => "calendar",
        Trigger::DayEnd { .. } => "day_end",
    }
}

/// A labelled one-line text field.
fn text_ui(ui: &mut egui::Ui, label: &str, value: &mut String) {
    ui.horizontal(|ui| {
        let label = ui.label(label);
        ui.add(egui::TextEdit::singleline(value).desired_width(220.0)).labelled_by(label.id);
    });
}

/// A labelled number field.
fn number_ui(ui: &mut egui::Ui, label: &str, value: &mut u32) {
    ui.horizontal(|ui| {
        let label = ui.label(label);
        ui.add(egui::DragValue::new(value).range(0..=100_000)).labelled_by(label.id);
    });
}

/// A templated field, with the variables of its step offered for insertion.
fn template_ui(ui: &mut egui::Ui, label: &str, value: &mut String, variables: &[String], salt: impl std::hash::Hash + std::fmt::Debug, multiline: bool) {
    let label_response = ui.label(label);
    let edit = if multiline { egui::TextEdit::multiline(value).desired_rows(2) } else { egui::TextEdit::singleline(value) };
    ui.add(edit.desired_width(f32::INFINITY)).labelled_by(label_response.id);
    if !variables.is_empty() {
        let mut chosen: Option<&String> = None;
        ui.horizontal(|ui| {
            let insert = ui.label(RichText::new(format!("Insert into {label}")).small());
            egui::ComboBox::from_id_salt(salt)
                .selected_text("a variable")
                .show_ui(ui, |ui| {
                    for variable in variables {
                        if ui.selectable_label(false, variable).clicked() {
                            chosen = Some(variable);
                        }
                    }
                })
                .response
                .labelled_by(insert.id);
        });
        if let Some(variable) = chosen {
            value.push_str(variable);
        }
    }
}

/// The editor. Returns false when it should close (saved or cancelled).
pub fn flow_editor_ui(ui: &mut egui::Ui, editor: &mut FlowEditor, actions: &mut Vec<UiAction>) -> bool {
    let mut keep_open = true;
    ui.heading(if editor.is_new { "New automation" } else { "Edit automation" });
    text_ui(ui, "Name", &mut editor.flow.name);
    text_ui(ui, "Description", &mut editor.flow.description);
    trigger_ui(ui, &mut editor.flow.trigger);
    ui.checkbox(&mut editor.flow.agent_tool, "Usable by the agent");
    ui.separator();
    let ids: Vec<String> = editor.flow.steps.iter().map(|s| s.id.clone()).collect();
    let mut change: Option<(usize, &'static str)> = None;
    for i in 0..editor.flow.steps.len() {
        let variables = editor.flow.variables_at(i);
        let later: Vec<String> = ids[i + 1..].to_vec();
        let args_text = &mut editor.args_text[i];
        let step = &mut editor.flow.steps[i];
        ui.group(|ui| {
            ui.horizontal_wrapped(|ui| {
                let title = ui.label(RichText::new(format!("Step {}", i + 1)).strong());
                let mut kind = step.kind_name();
                egui::ComboBox::from_id_salt(("step-kind", i))
                    .selected_text(kind)
                    .show_ui(ui, |ui| {
                        for k in STEP_KINDS {
                            ui.selectable_value(&mut kind, k, k);
                        }
                    })
                    .response
                    .labelled_by(title.id);
                if kind != step.kind_name() {
                    step.kind = default_step(&step.id, kind).kind;
                    *args_text = args_of(step);
                }
                if ui.small_button("Up").clicked() {
                    change = Some((i, "up"));
                }
                if ui.small_button("Down").clicked() {
                    change = Some((i, "down"));
                }
                if ui.small_button("Remove").clicked() {
                    change = Some((i, "remove"));
                }
            });
            text_ui(ui, "Id", &mut step.id);
            step_fields_ui(ui, i, step, args_text, &variables, &later);
            ui.checkbox(&mut step.end, "End the flow after this step");
        });
    }
    if let Some((i, what)) = change {
        let steps = &mut editor.flow.steps;
        match what {
            "up" if i > 0 => {
                steps.swap(i, i - 1);
                editor.args_text.swap(i, i - 1);
            }
            "down" if i + 1 < steps.len() => {
                steps.swap(i, i + 1);
                editor.args_text.swap(i, i + 1);
            }
            "remove" => {
                steps.remove(i);
                editor.args_text.remove(i);
            }
            _ => {}
        }
    }
    if ui.button("Add a step").clicked() {
        let mut n = editor.flow.steps.len() + 1;
        while editor.flow.steps.iter().any(|s| s.id == format!("step_{n}")) {
            n += 1;
        }
        let step = default_step(&format!("step_{n}"), "notify");
        editor.args_text.push(args_of(&step));
        editor.flow.steps.push(step);
    }
    ui.separator();
    let checked = editor.flow.validate(&BuiltIn);
    if let Err(problems) = &checked {
        for problem in problems {
            ui.label(RichText::new(problem).small().color(theme::error()));
        }
    }
    ui.horizontal(|ui| {
        if ui.add_enabled(checked.is_ok(), egui::Button::new("Save")).clicked() {
            actions.push(UiAction::SaveFlow(editor.flow.to_json()));
            keep_open = false;
        }
        if ui.button("Cancel").clicked() {
            keep_open = false;
        }
    });
    keep_open
}

fn trigger_ui(ui: &mut egui::Ui, trigger: &mut Trigger) {
    ui.horizontal(|ui| {
        let label = ui.label("Trigger");
        let mut kind = trigger_kind(trigger);
        egui::ComboBox::from_id_salt("trigger-kind")
            .selected_text(kind)
            .show_ui(ui, |ui| {
                for k in TRIGGER_KINDS {
                    ui.selectable_value(&mut kind, k, k);
                }
            })
            .response
            .labelled_by(label.id);
        if kind != trigger_kind(trigger) {
            *trigger = default_trigger(kind);
        }
    });
    match trigger {
        Trigger::Schedule { schedule } => text_ui(ui, "Schedule", schedule),
        Trigger::Focus { app, title } => {
            let mut a = app.clone().unwrap_or_default();
            let mut t = title.clone().unwrap_or_default();
            text_ui(ui, "App matches", &mut a);
            text_ui(ui, "Title matches", &mut t);
            *app = Some(a).filter(|a| !a.is_empty());
            *title = Some(t).filter(|t| !t.is_empty());
        }
        Trigger::Back { away_minutes } => number_ui(ui, "Away at least (minutes)", away_minutes),
        Trigger::Mcp { server, uri, .. } => {
            text_ui(ui, "Server", server);
            let mut u = uri.clone().unwrap_or_default();
            text_ui(ui, "Resource", &mut u);
            *uri = Some(u).filter(|u| !u.is_empty());
        }
        Trigger::ApprovalWaiting { minutes } | Trigger::FocusStretch { minutes } => number_ui(ui, "Minutes", minutes),
        Trigger::ContextSwitches { count, minutes } => {
            number_ui(ui, "Switches", count);
            number_ui(ui, "Within (minutes)", minutes);
        }
        Trigger::Meeting { event } => {
            ui.horizontal(|ui| {
                ui.label("When a call");
                ui.selectable_value(event, crate::automations::flow::MeetingEvent::Started, "starts");
                ui.selectable_value(event, crate::automations::flow::MeetingEvent::Ended, "ends");
            });
        }
        Trigger::DayEnd { after_hour, away_minutes } => {
            number_ui(ui, "After (hour, 0-23)", after_hour);
            number_ui(ui, "Away at least (minutes)", away_minutes);
        }
        Trigger::Calendar { minutes_before, title } => {
            number_ui(ui, "Minutes before the event", minutes_before);
            let mut t = title.clone().unwrap_or_default();
            text_ui(ui, "Title (regex; empty: any meeting)", &mut t);
            *title = Some(t).filter(|t| !t.is_empty());
        }
        Trigger::FirstActivity | Trigger::Manual => {}
    }
}

fn step_fields_ui(ui: &mut egui::Ui, i: usize, step: &mut Step, args_text: &mut String, variables: &[String], later: &[String]) {
    match &mut step.kind {
        StepKind::Tool { tool, args } => {
            text_ui(ui, "Tool", tool);
            template_ui(ui, "Arguments", args_text, variables, ("args", i), false);
            match serde_json::from_str::<Value>(args_text) {
                Ok(value) => *args = value,
                Err(err) => {
                    ui.label(RichText::new(format!("the arguments are not JSON: {err}")).small().color(theme::error()));
                }
            }
        }
        StepKind::Agent { prompt, tools, tier } => {
            template_ui(ui, "Prompt", prompt, variables, ("prompt", i), true);
            let mut list = tools.join(", ");
            text_ui(ui, "Tools", &mut list);
            *tools = list.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
            ui.horizontal(|ui| {
                ui.label("Brain");
                ui.selectable_value(tier, Tier::Local, "local");
                ui.selectable_value(tier, Tier::Auto, "auto");
                ui.selectable_value(tier, Tier::Cloud, "cloud");
            });
        }
        StepKind::Condition { left, op, right, then_go, else_go } => {
            template_ui(ui, "If", left, variables, ("left", i), false);
            ui.horizontal(|ui| {
                let label = ui.label("Test");
                let name = OPS.iter().find(|(_, o)| o == op).map_or("equals", |(n, _)| n);
                egui::ComboBox::from_id_salt(("op", i))
                    .selected_text(name)
                    .show_ui(ui, |ui| {
                        for (n, o) in OPS {
                            ui.selectable_value(op, o, n);
                        }
                    })
                    .response
                    .labelled_by(label.id);
            });
            template_ui(ui, "Compared with", right, variables, ("right", i), false);
            for (label, target) in [("Then", then_go), ("Else", else_go)] {
                ui.horizontal(|ui| {
                    let l = ui.label(label);
                    egui::ComboBox::from_id_salt((label, i))
                        .selected_text(target.clone())
                        .show_ui(ui, |ui| {
                            for choice in [flow::NEXT.to_owned(), flow::END.to_owned()].into_iter().chain(later.iter().cloned()) {
                                let text = choice.clone();
                                ui.selectable_value(target, choice, text);
                            }
                        })
                        .response
                        .labelled_by(l.id);
                });
            }
        }
        StepKind::Delay { seconds } => {
            let mut value = *seconds as u32;
            number_ui(ui, "Seconds", &mut value);
            *seconds = value as u64;
        }
        StepKind::Notify { title, body, tier, task } => {
            template_ui(ui, "Title", title, variables, ("title", i), false);
            template_ui(ui, "Body", body, variables, ("body", i), true);
            text_ui(ui, "Accept starts (a chat request; optional)", task);
            ui.horizontal(|ui| {
                ui.label("Tier");
                ui.selectable_value(tier, NotifyTier::Informational, "informational");
                ui.selectable_value(tier, NotifyTier::Helpful, "helpful");
                ui.selectable_value(tier, NotifyTier::Urgent, "urgent");
            });
        }
    }
}
