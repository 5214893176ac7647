//! Draws an app's view (`apps::view::View`) natively: text, lists with
//! accessories and actions, Markdown detail with metadata, forms, stats,
//! tables, charts (bar, line, timeline, with egui_plot) and action rows.
//! What the user does comes back as `ViewAction`s: a message for the app's
//! `handle`, or a host action. Copy and open-a-URL are only asked for here;
//! the panel asks the user before either happens.

use std::collections::HashMap;

use egui::RichText;
use serde_json::{Map, Value};

use crate::apps::view::{Action, Chart, Field, FieldKind, Node, TextStyle, View, submit_message};
use crate::ui::theme;

/// What the user did on a view.
#[derive(Clone, Debug, PartialEq)]
pub enum ViewAction {
    /// A message for the app's `handle`.
    Handle(String),
    /// Open a chat with this text.
    Chat(String),
    /// Copy this text (after asking).
    Copy(String),
    /// Open this URL (after asking).
    OpenUrl(String),
}

/// Form fields as the user edited them, by form and field id.
#[derive(Default)]
pub struct Forms {
    values: HashMap<(String, String), Value>,
    markdown: egui_commonmark::CommonMarkCache,
}

impl Forms {
    /// A new view from the app: the forms show what it says again.
    pub fn clear(&mut self) {
        self.values.clear();
    }
}

pub fn view_ui(ui: &mut egui::Ui, view: &View, forms: &mut Forms, out: &mut Vec<ViewAction>) {
    for (index, node) in view.nodes.iter().enumerate() {
        ui.push_id(index, |ui| node_ui(ui, node, forms, out));
        ui.add_space(theme::SPACING);
    }
    if view.cut > 0 {
        ui.label(RichText::new(format!("{} more parts are not shown: an app's view shows at most {}", view.cut, crate::apps::view::NODE_LIMIT)).small().color(theme::warn()));
    }
}

fn actions_ui(ui: &mut egui::Ui, actions: &[Action], out: &mut Vec<ViewAction>) {
    ui.horizontal_wrapped(|ui| {
        for action in actions {
            if ui.small_button(action.title()).clicked() {
                out.push(match action {
                    Action::App { id, data, .. } => ViewAction::Handle(Action::message(id, data)),
                    Action::Chat { text, .. } => ViewAction::Chat(text.clone()),
                    Action::Copy { text, .. } => ViewAction::Copy(text.clone()),
                    Action::OpenUrl { url, .. } => ViewAction::OpenUrl(url.clone()),
                });
            }
        }
    });
}

fn node_ui(ui: &mut egui::Ui, node: &Node, forms: &mut Forms, out: &mut Vec<ViewAction>) {
    match node {
        Node::Text { text, style } => {
            let text = RichText::new(text);
            ui.label(match style {
                TextStyle::Heading => text.strong().size(16.0),
                TextStyle::Body => text,
                TextStyle::Muted => text.small().color(theme::muted()),
            });
        }
        Node::List { items, empty } => {
            if items.is_empty() && !empty.is_empty() {
                ui.label(RichText::new(empty).color(theme::muted()));
            }
            for (index, item) in items.iter().enumerate() {
                ui.push_id(index, |ui| {
                    ui.horizontal(|ui| {
                        ui.label(RichText::new(&item.title).strong());
                        if !item.accessory.is_empty() {
                            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| ui.label(RichText::new(&item.accessory).small().color(theme::muted())));
                        }
                    });
                    if !item.subtitle.is_empty() {
                        ui.label(RichText::new(&item.subtitle).small().color(theme::muted()));
                    }
                    if !item.actions.is_empty() {
                        actions_ui(ui, &item.actions, out);
                    }
                });
                ui.separator();
            }
        }
        Node::Detail { markdown, metadata } => {
            egui_commonmark::CommonMarkViewer::new().show(ui, &mut forms.markdown, markdown);
            if !metadata.is_empty() {
                egui::Grid::new("metadata").num_columns(2).show(ui, |ui| {
                    for (label, value) in metadata {
                        ui.label(RichText::new(label).small().color(theme::muted()));
                        ui.label(value);
                        ui.end_row();
                    }
                });
            }
        }
        Node::Form { id, fields, submit } => {
            for field in fields {
                field_ui(ui, id, field, forms);
            }
            if ui.button(submit).clicked() {
                let mut values = Map::new();
                for field in fields {
                    let value = forms.values.get(&(id.clone(), field.id.clone())).cloned().unwrap_or_else(|| field.value.clone());
                    values.insert(field.id.clone(), value);
                }
                out.push(ViewAction::Handle(submit_message(id, values)));
            }
        }
        Node::Stat { label, value, note } => {
            ui.label(RichText::new(label).small().color(theme::muted()));
            ui.label(RichText::new(value).strong().size(22.0));
            if !note.is_empty() {
                ui.label(RichText::new(note).small().color(theme::muted()));
            }
        }
        Node::Table { columns, rows } => {
            egui::ScrollArea::horizontal().show(ui, |ui| {
                egui::Grid::new("table").striped(true).num_columns(columns.len().max(1)).show(ui, |ui| {
                    for column in columns {
                        ui.label(RichText::new(column).strong());
                    }
                    ui.end_row();
                    for row in rows {
                        for cell in row {
                            ui.label(cell);
                        }
                        ui.end_row();
                    }
                });
            });
        }
        Node::Chart { title, chart } => chart_ui(ui, title, chart),
        Node::Actions(actions) => actions_ui(ui, actions, out),
        Node::Fallback(text) => {
            ui.label(RichText::new(text).italics().color(theme::muted()));
        }
    }
}

fn field_ui(ui: &mut egui::Ui, form: &str, field: &Field, forms: &mut Forms) {
    let key = (form.to_owned(), field.id.clone());
    let value = forms.values.entry(key).or_insert_with(|| field.value.clone());
    let label = ui.label(&field.label);
    match field.kind {
        FieldKind::Text | FieldKind::Multiline | FieldKind::Number => {
            let mut text = match &*value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let edit = match field.kind {
                FieldKind::Multiline => egui::TextEdit::multiline(&mut text).desired_rows(6),
                _ => egui::TextEdit::singleline(&mut text),
            };
            if ui.add(edit.desired_width(f32::INFINITY)).labelled_by(label.id).changed() {
                *value = match field.kind {
                    FieldKind::Number => text.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or(Value::String(text)),
                    _ => Value::String(text),
                };
            }
        }
        FieldKind::Checkbox => {
            let mut checked = value.as_bool().unwrap_or(false);
            if ui.checkbox(&mut checked, "").labelled_by(label.id).changed() {
                *value = Value::Bool(checked);
            }
        }
        FieldKind::Select => {
            let current = value.as_str().unwrap_or_default().to_owned();
            egui::ComboBox::from_id_salt(("select", form, &field.id)).selected_text(&current).show_ui(ui, |ui| {
                for option in &field.options {
                    if ui.selectable_label(current == *option, option).clicked() {
                        *value = Value::String(option.clone());
                    }
                }
            });
        }
    }
}

fn chart_ui(ui: &mut egui::Ui, title: &str, chart: &Chart) {
    use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints};
    if !title.is_empty() {
        ui.label(RichText::new(title).strong());
    }
    let plot = |id: &str, rows: usize| Plot::new(id.to_owned()).height((rows as f32 * 22.0 + 40.0).clamp(90.0, 260.0)).allow_drag(false).allow_zoom(false).allow_scroll(false).allow_boxed_zoom(false);
    match chart {
        Chart::Bar { bars, unit } => {
            let labels: Vec<String> = bars.iter().map(|(label, _)| label.clone()).collect();
            // Horizontal bars, the first on top: app names read well in a narrow sidebar.
            let n = bars.len();
            let chart = BarChart::new(unit.clone(), bars.iter().enumerate().map(|(i, (label, value))| Bar::new((n - 1 - i) as f64, *value).name(label).width(0.7)).collect()).horizontal();
            let unit = unit.clone();
            plot("bar", n)
                .y_axis_formatter(move |mark, _| {
                    let index = mark.value.round();
                    if (mark.value - index).abs() > 1e-6 || index < 0.0 || index as usize >= n { String::new() } else { labels[n - 1 - index as usize].clone() }
                })
                .x_axis_formatter(move |mark, _| format!("{} {unit}", mark.value))
                .show(ui, |plot| plot.bar_chart(chart));
        }
        Chart::Line { series } => {
            plot("line", 6).show(ui, |plot| {
                for (name, points) in series {
                    plot.line(Line::new(name.clone(), PlotPoints::from(points.clone())));
                }
            });
        }
        Chart::Timeline { spans } => {
            let mut lanes: Vec<&str> = Vec::new();
            for (label, _, _) in spans {
                if !lanes.contains(&label.as_str()) {
                    lanes.push(label);
                }
            }
            let origin = spans.iter().map(|(_, start, _)| *start).min().unwrap_or_default();
            let minutes = |ms: i64| (ms - origin) as f64 / 60_000.0;
            let bars = spans
                .iter()
                .map(|(label, start, end)| {
                    let lane = lanes.iter().position(|l| *l == label.as_str()).unwrap_or_default();
                    Bar::new((lanes.len() - 1 - lane) as f64, minutes(*end) - minutes(*start)).base_offset(minutes(*start)).name(label).width(0.6)
                })
                .collect();
            let names: Vec<String> = lanes.iter().map(|l| (*l).to_owned()).collect();
            let n = names.len();
            plot("timeline", n)
                .y_axis_formatter(move |mark, _| {
                    let index = mark.value.round();
                    if (mark.value - index).abs() > 1e-6 || index < 0.0 || index as usize >= n { String::new() } else { names[n - 1 - index as usize].clone() }
                })
                .x_axis_formatter(move |mark, _| crate::ids::user_clock(origin + (mark.value * 60_000.0) as i64))
                .show(ui, |plot| plot.bar_chart(BarChart::new("time", bars).horizontal()));
        }
    }
}
