//! The agent in the chat: approval cards (the tool, its full arguments, the
//! risk and what decided; Approve once / Always allow with an editable
//! pattern / Deny with a reason / Edit the arguments, then approve),
//! questions from `ask_user`, guardrail pauses, tool chips under an answer
//! (expanding to the arguments and the whole result) and the todo list.

use std::collections::{HashMap, HashSet};

use egui::{RichText, TextEdit};

use crate::agent::events::{ApprovalChoice, CallStatus, ToolCallView};
use crate::state::{AppState, UiAction};
use crate::ui::theme;

/// What the user is typing on a card.
#[derive(Clone, Debug, Default)]
pub struct CardEdit {
    pub mode: CardMode,
    pub target: String,
    pub pattern: String,
    pub allow_for: crate::agent::events::AllowFor,
    pub reason: String,
    pub arguments: String,
    /// The arguments as the card shows them, made once (a long file's text is not re-laid each frame).
    pub shown: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CardMode {
    #[default]
    Buttons,
    Always,
    Deny,
    Edit,
}

#[derive(Default)]
pub struct AgentPanel {
    pub cards: HashMap<i64, CardEdit>,
    /// Chips opened to their arguments and result.
    pub expanded: HashSet<i64>,
    /// Answers being typed to `ask_user`.
    pub answers: HashMap<i64, String>,
    /// Tool images uploaded to the GPU, by (call, index): made once, freed with the panel.
    pub textures: HashMap<(i64, usize), egui::TextureHandle>,
}

fn risk_colour(risk: &str) -> egui::Color32 {
    match risk {
        "safe" => theme::ok(),
        "sensitive" => theme::warn(),
        _ => theme::error(),
    }
}

/// The arguments as a person reads them: the command or path alone when
/// that is all, else pretty JSON.
/// How much of a result an open chip shows.
const CHIP_OUTPUT_BYTES: usize = 64 * 1024;

pub fn arguments_text(call: &ToolCallView) -> String {
    let object = call.arguments.as_object();
    if let Some(map) = object.filter(|m| m.len() == 1)
        && let Some(text) = map.values().next().and_then(|v| v.as_str())
    {
        return crate::tools::visible(text, false);
    }
    crate::tools::visible(&serde_json::to_string_pretty(&call.arguments).unwrap_or_default(), false)
}

/// One line for a chip: the first argument, shortened.
fn short_arguments(call: &ToolCallView) -> String {
    let text = call.arguments.as_object().and_then(|m| m.values().next()).map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())).unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 40 { format!("{}…", line.chars().take(40).collect::<String>()) } else { line.to_owned() }
}

/// Everything that waits for the user, above the messages.
pub fn waiting_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut AgentPanel, actions: &mut Vec<UiAction>, now_millis: i64) {
    for (operation_id, why) in state.paused_operations() {
        egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
            let text = why.split_once(": ").map_or(why, |(_, rest)| rest);
            ui.label(RichText::new("Paused").strong().color(theme::warn()));
            ui.label(text);
            ui.horizontal(|ui| {
                if ui.button("Continue").clicked() {
                    actions.push(UiAction::ContinueOperation { operation_id, go_on: true });
                }
                if ui.button("Stop the task").clicked() {
                    actions.push(UiAction::ContinueOperation { operation_id, go_on: false });
                }
            });
        });
        ui.add_space(theme::SPACING);
    }
    for call in state.waiting_calls() {
        if call.tool == "ask_user" {
            question_ui(ui, call, panel, actions);
        } else {
            approval_card_ui(ui, call, panel, actions, now_millis);
        }
        ui.add_space(theme::SPACING);
    }
}

fn question_ui(ui: &mut egui::Ui, call: &ToolCallView, panel: &mut AgentPanel, actions: &mut Vec<UiAction>) {
    egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
        let question = call.arguments.get("question").and_then(|q| q.as_str()).unwrap_or_default();
        ui.label(RichText::new("cowork asks").small().color(theme::muted()));
        ui.label(question);
        let answer = panel.answers.entry(call.call_id).or_default();
        let label = ui.label("Your answer");
        ui.add(TextEdit::singleline(answer).desired_width(f32::INFINITY)).labelled_by(label.id);
        ui.horizontal(|ui| {
            if ui.add_enabled(!answer.trim().is_empty(), egui::Button::new("Answer")).clicked() {
                actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Answer(answer.trim().to_owned()) });
            }
            if ui.button("Skip").clicked() {
                actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Deny { reason: "the user did not answer".into() } });
            }
        });
    });
}

fn approval_card_ui(ui: &mut egui::Ui, call: &ToolCallView, panel: &mut AgentPanel, actions: &mut Vec<UiAction>, now_millis: i64) {
    let edit = panel.cards.entry(call.call_id).or_insert_with(|| {
        let (target, pattern) = call.suggested_rule.clone().unwrap_or_default();
        CardEdit { target, pattern, arguments: serde_json::to_string_pretty(&call.arguments).unwrap_or_default(), shown: arguments_text(call), ..CardEdit::default() }
    });
    egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).stroke(egui::Stroke::new(1.0, risk_colour(&call.risk))).show(ui, |ui| {
        ui.set_width(ui.available_width());
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(format!("{}?", tool_title(&call.tool))).strong()).on_hover_text(format!("The tool {}", call.tool));
            ui.label(RichText::new(&call.risk).small().color(risk_colour(&call.risk)));
            if let Some(at) = call.expires_at_millis {
                let left = ((at - now_millis) / 1000).max(0);
                ui.label(RichText::new(format!("denied in {}:{:02}", left / 60, left % 60)).small().color(theme::muted()));
            }
        });
        egui::Frame::new().inner_margin(4.0).stroke(egui::Stroke::new(1.0, theme::muted())).show(ui, |ui| {
            ui.set_width(ui.available_width());
            // Scrolled, so a long write never pushes the buttons off the panel.
            egui::ScrollArea::vertical().id_salt(("card_arguments", call.call_id)).max_height(200.0).show(ui, |ui| {
                ui.label(RichText::new(&edit.shown).monospace());
            });
        });
        // A screenshot is shown as what would be sent, before anything is.
        if !call.images.is_empty() {
            ui.label(RichText::new("What the model would get").small().color(theme::muted()));
            images_ui(ui, call, &mut panel.textures);
        }
        let by = call.decided_by.as_deref().unwrap_or("policy");
        ui.label(RichText::new(format!("{} ({by})", call.why)).small().color(theme::muted()));
        match edit.mode {
            CardMode::Buttons => {
                ui.horizontal_wrapped(|ui| {
                    if ui.button("Approve once").clicked() {
                        actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Once });
                    }
                    if ui.button("Always allow…").clicked() {
                        edit.mode = CardMode::Always;
                    }
                    if ui.button("Edit…").clicked() {
                        edit.mode = CardMode::Edit;
                    }
                    if ui.button("Deny…").clicked() {
                        edit.mode = CardMode::Deny;
                    }
                });
            }
            CardMode::Always => {
                ui.label(RichText::new("Allow this tool from now on when").small());
                ui.horizontal(|ui| {
                    let label = ui.label("Looks at");
                    ui.add(TextEdit::singleline(&mut edit.target).desired_width(70.0).hint_text("command")).labelled_by(label.id);
                    let label = ui.label("Pattern");
                    ui.add(TextEdit::singleline(&mut edit.pattern).desired_width(f32::INFINITY).hint_text("empty: every call")).labelled_by(label.id);
                });
                ui.horizontal(|ui| {
                    use crate::agent::events::AllowFor;
                    ui.label(RichText::new("For").small());
                    ui.selectable_value(&mut edit.allow_for, AllowFor::ThisTask, "this task");
                    ui.selectable_value(&mut edit.allow_for, AllowFor::Day, "a day");
                    ui.selectable_value(&mut edit.allow_for, AllowFor::Always, "always");
                });
                ui.horizontal(|ui| {
                    if ui.button("Allow and run").clicked() {
                        let (target, pattern) = if edit.pattern.trim().is_empty() { (None, None) } else { (Some(edit.target.trim().to_owned()), Some(edit.pattern.trim().to_owned())) };
                        actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Always { target, pattern, scope: edit.allow_for } });
                    }
                    if ui.button("Back").clicked() {
                        edit.mode = CardMode::Buttons;
                    }
                });
            }
            CardMode::Deny => {
                let label = ui.label("Why (the model reads this)");
                ui.add(TextEdit::singleline(&mut edit.reason).desired_width(f32::INFINITY)).labelled_by(label.id);
                ui.horizontal(|ui| {
                    if ui.button("Deny").clicked() {
                        actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Deny { reason: edit.reason.clone() } });
                    }
                    if ui.button("Back").clicked() {
                        edit.mode = CardMode::Buttons;
                    }
                });
            }
            CardMode::Edit => {
                let label = ui.label("Arguments (JSON)");
                ui.add(TextEdit::multiline(&mut edit.arguments).code_editor().desired_rows(3).desired_width(f32::INFINITY)).labelled_by(label.id);
                let parsed = serde_json::from_str::<serde_json::Value>(&edit.arguments);
                ui.horizontal(|ui| {
                    if ui.add_enabled(parsed.is_ok(), egui::Button::new("Run edited")).clicked()
                        && let Ok(arguments) = parsed.as_ref().map(Clone::clone)
                    {
                        actions.push(UiAction::DecideCall { call_id: call.call_id, choice: ApprovalChoice::Edit { arguments } });
                    }
                    if ui.button("Back").clicked() {
                        edit.mode = CardMode::Buttons;
                    }
                });
                if let Err(err) = parsed {
                    ui.label(RichText::new(format!("not JSON: {err}")).small().color(theme::error()));
                }
            }
        }
    });
}

/// The answer's todo list and tool chips, above its text.
pub fn answer_steps_ui(ui: &mut egui::Ui, state: &AppState, answer_id: i64, panel: &mut AgentPanel) {
    if let Some(items) = state.todos.get(&answer_id).filter(|i| !i.is_empty()) {
        for item in items {
            let mark = if item.done { "[x]" } else { "[ ]" };
            ui.label(RichText::new(format!("{mark} {}", item.text)).small());
        }
    }
    let calls: Vec<&ToolCallView> = state.tool_calls.iter().filter(|c| c.answer_id == answer_id && c.tool != "update_todos").collect();
    if calls.is_empty() {
        return;
    }
    ui.horizontal_wrapped(|ui| {
        for call in &calls {
            let (status, colour) = match call.status {
                CallStatus::Waiting => ("waiting", theme::warn()),
                CallStatus::Running => ("running", theme::warn()),
                CallStatus::Done => ("done", theme::ok()),
                CallStatus::Failed => ("failed", theme::error()),
                CallStatus::Denied => ("denied", theme::error()),
                CallStatus::Expired => ("expired", theme::error()),
                CallStatus::MayHaveRun => ("may have run — check", theme::error()),
                CallStatus::Cancelled => ("stopped", theme::muted()),
            };
            let took = call.duration_millis.filter(|_| call.status.settled()).map(|ms| format!(" {ms} ms")).unwrap_or_default();
            // An MCP server's progress for a running call ("3/10 · indexing").
            let progress = state.tool_progress.get(&call.call_id).filter(|_| call.status == CallStatus::Running).map(|p| format!(" {p}")).unwrap_or_default();
            let text = format!("{}: {} · {status}{progress}{took}", tool_title(&call.tool), short_arguments(call));
            let open = panel.expanded.contains(&call.call_id);
            if ui.selectable_label(open, RichText::new(text).small().color(colour)).on_hover_text(&call.why).clicked() {
                if open {
                    panel.expanded.remove(&call.call_id);
                } else {
                    panel.expanded.insert(call.call_id);
                }
            }
        }
    });
    browser_log_ui(ui, &calls);
    search_results_ui(ui, &calls);
    for call in calls.iter().filter(|c| !c.images.is_empty()) {
        images_ui(ui, call, &mut panel.textures);
    }
    for call in calls.iter().filter(|c| panel.expanded.contains(&c.call_id)) {
        egui::Frame::new().inner_margin(4.0).stroke(egui::Stroke::new(1.0, theme::muted())).show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new(format!("{} · {} · {}", call.tool, call.risk, call.decided_by.as_deref().unwrap_or("policy"))).small().color(theme::muted()));
            ui.label(RichText::new(arguments_text(call)).monospace().small());
            if let Some(output) = &call.output {
                // The head of a long result (a 10 MB one would be copied and hashed every frame);
                // the whole is kept in cowork.db.
                let cut = output.floor_char_boundary(CHIP_OUTPUT_BYTES);
                egui::ScrollArea::vertical().id_salt(("tool_output", call.call_id)).max_height(160.0).show(ui, |ui| {
                    ui.label(RichText::new(&output[..cut]).monospace().small().color(if call.is_error { theme::error() } else { theme::muted() }));
                    if cut < output.len() {
                        ui.label(RichText::new(format!("… {} more bytes, kept whole in cowork.db: `cowork audit --output {}` prints it", output.len() - cut, call.call_id)).small().color(theme::muted()));
                    }
                });
            }
        });
    }
}

/// Frees the textures of calls the chat no longer holds (another thread, or
/// beyond the newest `MAX_TOOL_CALLS`).
pub fn forget_textures(state: &AppState, panel: &mut AgentPanel) {
    if !panel.textures.is_empty() {
        panel.textures.retain(|(call_id, _), _| state.tool_calls.iter().any(|c| c.call_id == *call_id));
    }
}

/// The images a call returned, as thumbnails (or why one cannot be shown).
fn images_ui(ui: &mut egui::Ui, call: &ToolCallView, textures: &mut HashMap<(i64, usize), egui::TextureHandle>) {
    ui.horizontal_wrapped(|ui| {
        for (index, attached) in call.images.iter().enumerate() {
            let about = |ui: &mut egui::Ui| {
                ui.label(format!("{} · {} · from {}", attached.image.mime, crate::media::human_bytes(attached.image.data.len() as u64), call.tool));
            };
            match &attached.shown {
                Ok(thumbnail) => {
                    let texture = textures.entry((call.call_id, index)).or_insert_with(|| {
                        let pixels = egui::ColorImage::from_rgba_unmultiplied([thumbnail.width as usize, thumbnail.height as usize], &thumbnail.rgba);
                        ui.ctx().load_texture(format!("tool-image-{}-{index}", call.call_id), pixels, egui::TextureOptions::LINEAR)
                    });
                    let width = (thumbnail.width as f32).min(ui.available_width().max(48.0));
                    let size = egui::vec2(width, width * thumbnail.height as f32 / thumbnail.width.max(1) as f32);
                    // A picture's one-pixel bitmap still shows at a size a person can see.
                    let size = if size.x < 24.0 { size * (24.0 / size.x.max(1.0)) } else { size };
                    ui.add(egui::Image::new((texture.id(), size)).alt_text(format!("Image from {}", call.tool))).on_hover_ui(about);
                }
                Err(why) => {
                    ui.label(RichText::new(format!("[image not shown: {why}]")).small().color(theme::muted())).on_hover_ui(about);
                }
            }
        }
    });
}

/// What the built-in browser did for this answer, one line per action with
/// the page it ended on.
fn browser_log_ui(ui: &mut egui::Ui, calls: &[&ToolCallView]) {
    let prefix = format!("mcp__{}__", crate::mcp::browser::BUILTIN);
    let actions: Vec<&&ToolCallView> = calls.iter().filter(|c| c.tool.starts_with(&prefix)).collect();
    if actions.is_empty() {
        return;
    }
    ui.label(RichText::new("Browser").small().strong());
    for call in actions {
        let action = call.tool.trim_start_matches(&prefix).trim_start_matches("browser_").replace('_', " ");
        let target = call.arguments.get("url").or_else(|| call.arguments.get("element")).and_then(|v| v.as_str()).unwrap_or_default();
        let page = match call.status {
            CallStatus::Done => call.output.as_deref().and_then(crate::mcp::browser::page_title).map(|t| format!(" — {t}")).unwrap_or_default(),
            CallStatus::Waiting | CallStatus::Running => " …".to_owned(),
            _ => format!(" ({})", call.status.as_str().replace('_', " ")),
        };
        ui.label(RichText::new(format!("{action} {target}{page}").trim_end().to_owned()).small().color(if call.is_error { theme::error() } else { theme::muted() }));
    }
}

/// A web search's results as links the user can open: each title with the
/// site it leads to beside it (a title is the web's words; the host is not).
fn search_results_ui(ui: &mut egui::Ui, calls: &[&ToolCallView]) {
    for call in calls.iter().filter(|c| c.tool == "web_search" && c.status == CallStatus::Done && !c.is_error) {
        let Some(output) = &call.output else { continue };
        for found in crate::tools::web_search::parse_rendered(output).iter().take(10) {
            let host = crate::net::host_of_url(&found.url).unwrap_or_default();
            ui.horizontal_wrapped(|ui| {
                ui.hyperlink_to(RichText::new(&found.title).small(), &found.url).on_hover_text(format!("{}\n{}", found.url, found.snippet));
                ui.label(RichText::new(host).small().color(theme::muted()));
            });
        }
    }
}

/// A tool's name as the user reads it: a built-in's title ("Run a command"), else the name it has (MCP tools, flows).
fn tool_title(tool: &str) -> &str {
    crate::tools::registry::get(tool).map_or(tool, |spec| spec.title)
}
