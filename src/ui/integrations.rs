//! Settings → Integrations: the MCP servers from mcp-servers.json with their
//! state (an error says why, with Reconnect), their tools (each can be kept
//! from the agent), trust, Test (protocol, tools, connect and round-trip
//! time), the last lines of a stdio server's stderr, and adding or removing a
//! server. Edits go to the mcp worker, which writes the file.
//!
//! Also the other way round: the assistants that read cowork's memory through
//! `cowork mcp serve`, each allowed or denied by name; a new one is asked
//! about at the top of the chat (`client_request_ui`).

use egui::{RichText, ScrollArea};

use crate::mcp::config::McpEdit;
use crate::mcp::events::McpServerStatus;
use crate::state::{AppState, UiAction};
use crate::ui::theme;

/// Drafts of the "Add a server" form and of the catalog's.
#[derive(Default)]
pub struct IntegrationsPanel {
    pub name: String,
    pub endpoint: String,
    /// The catalog entry being filled in, its values by field, and whether it is to be trusted.
    pub catalog: Option<String>,
    pub values: std::collections::BTreeMap<String, String>,
    pub trusted: bool,
}

pub fn integrations_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut IntegrationsPanel, actions: &mut Vec<UiAction>) {
    if state.mcp_servers.is_empty() {
        ui.label(RichText::new("No MCP servers; add one below, or `cowork mcp import FILE` takes Claude Desktop's, Zed's or Codex's").small().color(theme::muted()));
    } else {
        // Trusted or not, a server's own words never act for the user.
        ui.add(egui::Label::new(RichText::new(crate::mcp::tools::UNTRUSTED_ALL).small().color(theme::muted())).wrap());
    }
    for server in &state.mcp_servers {
        let (colour, detail) = match &server.status {
            McpServerStatus::Running => (theme::ok(), format!("{} tools · {} · {}", server.tools.len(), server.protocol_version, server.server_name)),
            McpServerStatus::Starting => (theme::warn(), String::new()),
            McpServerStatus::Stopped => (theme::muted(), String::new()),
            McpServerStatus::Error(why) => (theme::error(), why.clone()),
            McpServerStatus::NeedsSignIn(why) => (theme::warn(), why.clone()),
            McpServerStatus::SigningIn(_) => (theme::warn(), "waiting for you to sign in in the browser".to_owned()),
        };
        ui.horizontal(|ui| {
            ui.label(RichText::new(&server.name).strong());
            ui.label(RichText::new(server.status.label()).color(colour));
        });
        ui.label(RichText::new(&server.endpoint).monospace().small().color(theme::muted()));
        if !detail.is_empty() {
            ui.label(RichText::new(detail).small().color(if server.status == McpServerStatus::Running { theme::muted() } else { colour }));
        }
        if let McpServerStatus::SigningIn(link) = &server.status
            && !link.is_empty()
        {
            ui.horizontal_wrapped(|ui| {
                ui.hyperlink_to(RichText::new("Open the sign-in page").small(), link).on_hover_text(link);
                if ui.small_button("Copy the link").clicked() {
                    ui.ctx().copy_text(link.clone());
                }
            });
        }
        ui.horizontal_wrapped(|ui| {
            if matches!(server.status, McpServerStatus::NeedsSignIn(_)) && ui.small_button("Sign in").on_hover_text("Sign in with your browser (OAuth); the tokens go to the secret store").clicked() {
                actions.push(UiAction::McpSignIn(server.name.clone()));
            }
            if server.signed_in && ui.small_button("Sign out").on_hover_text("Forget this server's sign-in").clicked() {
                actions.push(UiAction::McpSignOut(server.name.clone()));
            }
            let label = if server.status == McpServerStatus::Running { "Reconnect" } else { "Start" };
            if ui.small_button(label).on_hover_text(format!("{label} {}", server.name)).clicked() {
                actions.push(UiAction::McpReconnect(server.name.clone()));
            }
            if matches!(server.status, McpServerStatus::Running | McpServerStatus::SigningIn(_)) && ui.small_button("Stop").clicked() {
                actions.push(UiAction::McpStop(server.name.clone()));
            }
            if ui.small_button("Test").clicked() {
                actions.push(UiAction::McpTest(server.name.clone()));
            }
            if ui.small_button("Remove").clicked() {
                actions.push(UiAction::McpEdit(McpEdit::Remove(server.name.clone())));
            }
            let mut trusted = server.trusted;
            if ui
                .checkbox(&mut trusted, "Trust its annotations")
                .on_hover_text(crate::mcp::tools::UNTRUSTED_TEXT)
                .changed()
            {
                actions.push(UiAction::McpEdit(McpEdit::SetTrusted(server.name.clone(), trusted)));
            }
        });
        ui.add(egui::Label::new(RichText::new(crate::mcp::tools::trust_text(server.trusted)).small()).wrap());
        if let Some(report) = state.mcp_test.as_ref().filter(|r| r.server == server.name) {
            let text = match &report.result {
                Ok(f) => format!(
                    "Test: {} · protocol {} · {} tools · connect {} ms · round trip {:.2} ms",
                    f.server_name,
                    f.protocol_version,
                    f.tools,
                    f.connect_millis,
                    f.round_trip_micros as f64 / 1000.0
                ),
                Err(err) => format!("Test failed: {err}"),
            };
            ui.label(RichText::new(text).small().color(if report.result.is_ok() { theme::ok() } else { theme::error() }));
        }
        if !server.tools.is_empty() {
            egui::CollapsingHeader::new(format!("Tools of {} ({})", server.name, server.tools.len())).id_salt(("mcp-tools", &server.name)).show(ui, |ui| {
                let all: Vec<String> = server.tools.iter().map(|t| t.0.clone()).collect();
                for (tool, description, enabled, risk) in &server.tools {
                    let mut on = *enabled;
                    ui.horizontal(|ui| {
                        if ui.checkbox(&mut on, RichText::new(tool).monospace()).on_hover_text(description).changed() {
                            actions.push(UiAction::McpEdit(McpEdit::SetTool { server: server.name.clone(), tool: tool.clone(), enabled: on, all_tools: all.clone() }));
                        }
                        ui.label(RichText::new(risk).small().color(theme::muted()));
                    });
                }
            });
        }
        if !server.stderr.is_empty() {
            egui::CollapsingHeader::new(format!("What it printed (last {} lines)", server.stderr.len())).id_salt(("mcp-stderr", &server.name)).show(ui, |ui| {
                ScrollArea::vertical().id_salt(("mcp-stderr-scroll", &server.name)).max_height(160.0).stick_to_bottom(true).show(ui, |ui| {
                    for line in &server.stderr {
                        ui.label(RichText::new(line).monospace().small());
                    }
                });
            });
        }
        ui.add_space(theme::SPACING);
    }
    clients_ui(ui, state, actions);
    if !state.mcp_servers.iter().any(|s| s.name == crate::mcp::browser::BUILTIN) {
        ui.horizontal_wrapped(|ui| {
            if ui.button("Add the Browser").clicked() {
                actions.push(UiAction::McpEdit(McpEdit::AddBrowser));
            }
            ui.label(RichText::new("Playwright drives Chromium with its own profile; opening, clicking and typing ask first, submitting asks every time").small().color(theme::muted()));
        });
    }
    catalog_ui(ui, state, panel, actions);
    egui::CollapsingHeader::new("Add a server").show(ui, |ui| {
        ui.horizontal(|ui| {
            let label = ui.label("Name");
            ui.text_edit_singleline(&mut panel.name).labelled_by(label.id);
        });
        ui.horizontal(|ui| {
            let label = ui.label("Command or URL");
            ui.text_edit_singleline(&mut panel.endpoint).labelled_by(label.id);
        });
        ui.label(RichText::new("For example `npx -y @modelcontextprotocol/server-filesystem ~/notes` or `https://host/mcp`; keys and headers go in with `cowork mcp import`").small().color(theme::muted()));
        let ready = !panel.name.trim().is_empty() && !panel.endpoint.trim().is_empty();
        if ui.add_enabled(ready, egui::Button::new("Add server")).clicked() {
            actions.push(UiAction::McpEdit(McpEdit::Add { name: panel.name.trim().to_owned(), endpoint: panel.endpoint.trim().to_owned() }));
            panel.name.clear();
            panel.endpoint.clear();
        }
    });
}

/// Settings → Integrations → Add: the catalog of well-known servers, the form
/// of the one chosen (exactly the keys and paths it needs), the trust choice
/// with its consequence, and "Test and add": one `tools/list` first.
fn catalog_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut IntegrationsPanel, actions: &mut Vec<UiAction>) {
    use crate::mcp::catalog::{self, FieldKind};
    egui::CollapsingHeader::new("Add an integration").id_salt("mcp-catalog").default_open(panel.catalog.is_some()).show(ui, |ui| {
        let Some(entry) = panel.catalog.as_deref().and_then(catalog::find) else {
            for entry in catalog::entries() {
                let added = state.mcp_servers.iter().any(|s| s.name == entry.id);
                ui.horizontal_wrapped(|ui| {
                    let button = ui.add_enabled(!added, egui::Button::new(RichText::new(&entry.name).strong()));
                    if button.clicked() {
                        panel.catalog = Some(entry.id.clone());
                        panel.values.clear();
                        panel.trusted = false;
                    }
                    if added {
                        ui.label(RichText::new("added").small().color(theme::ok()));
                    }
                });
                let mut about = entry.description.clone();
                if entry.network {
                    about.push_str(" It reaches the internet itself.");
                }
                ui.add(egui::Label::new(RichText::new(about).small().color(theme::muted())).wrap());
                if let Some(missing) = entry.missing() {
                    ui.add(egui::Label::new(RichText::new(missing).small().color(theme::warn())).wrap());
                }
            }
            return;
        };
        ui.label(RichText::new(&entry.name).strong());
        ui.add(egui::Label::new(RichText::new(&entry.description).small()).wrap());
        ui.label(RichText::new(entry.describe()).monospace().small().color(theme::muted()));
        for field in &entry.fields {
            let value = panel.values.entry(field.key.clone()).or_default();
            let label = ui.label(RichText::new(if field.required { format!("{} (needed)", field.label) } else { field.label.clone() }).small());
            let edit = match field.kind {
                FieldKind::Secret => egui::TextEdit::singleline(value).password(true),
                FieldKind::Folders => egui::TextEdit::multiline(value).desired_rows(2),
                _ => egui::TextEdit::singleline(value),
            };
            let hint = match field.kind {
                FieldKind::Secret => "kept in the secret store",
                FieldKind::Folder | FieldKind::Folders => "/home/you/folder",
                FieldKind::File => "/home/you/file",
                FieldKind::Text => "",
            };
            ui.add(edit.hint_text(hint).desired_width(ui.available_width().min(360.0))).labelled_by(label.id);
            if !field.help.is_empty() {
                ui.add(egui::Label::new(RichText::new(&field.help).small().color(theme::muted())).wrap());
            }
        }
        ui.checkbox(&mut panel.trusted, "Trust its annotations");
        ui.add(egui::Label::new(RichText::new(crate::mcp::tools::trust_text(panel.trusted)).small()).wrap());
        let missing = entry.missing();
        if let Some(missing) = &missing {
            ui.add(egui::Label::new(RichText::new(missing).small().color(theme::error())).wrap());
        }
        // Checked here as the mcp worker will make it (it puts in cowork's data folder).
        let made = entry.config(&panel.values, std::path::Path::new("/data"));
        if let Err(err) = &made
            && panel.values.values().any(|v| !v.trim().is_empty())
        {
            ui.add(egui::Label::new(RichText::new(format!("{err:#}")).small().color(theme::warn())).wrap());
        }
        let testing = state.mcp_catalog.as_ref().is_some_and(|(name, result, _)| name == &entry.id && result.is_none());
        ui.horizontal_wrapped(|ui| {
            let ready = made.is_ok() && missing.is_none() && !testing;
            if ui.add_enabled(ready, egui::Button::new(if testing { "Testing…" } else { "Test and add" })).on_hover_text("Starts it, asks for its tools once, and saves it only if that works").clicked()
            {
                if entry.builtin.is_some() {
                    actions.push(UiAction::McpEdit(McpEdit::AddBrowser));
                } else {
                    actions.push(UiAction::McpAddFromCatalog { id: entry.id.clone(), values: panel.values.clone(), trusted: panel.trusted });
                }
            }
            if ui.button("Back to the list").clicked() {
                panel.catalog = None;
                panel.values.clear();
            }
        });
        if let Some((name, Some(result), stderr)) = &state.mcp_catalog
            && name == &entry.id
        {
            match result {
                Ok(tools) => {
                    ui.label(RichText::new(format!("{} answered with {tools} tools and is added", entry.name)).small().color(theme::ok()));
                }
                Err(err) => {
                    ui.add(egui::Label::new(RichText::new(format!("Not added: {err}")).small().color(theme::error())).wrap());
                    for line in stderr.iter().rev().take(4).rev() {
                        ui.label(RichText::new(line).monospace().small().color(theme::muted()));
                    }
                }
            }
        }
        if testing {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label(RichText::new("starting it (npx and uvx fetch the package the first time)…").small().color(theme::muted()));
            });
        }
    });
}

/// What a served client can read, in the user's words.
const CLIENT_READS: &str = "search what you saw, typed and copied, your recent windows, the current window and today's timeline (read-only; your privacy rules apply)";

/// Settings: every assistant that asked to read cowork's memory, with its answer.
fn clients_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    ui.add_space(theme::SPACING);
    ui.label(RichText::new("Assistants reading cowork's memory").strong());
    if state.mcp_clients.is_empty() {
        ui.label(
            RichText::new("None yet. Give an assistant `cowork mcp serve` as an MCP server (stdio), or `cowork mcp serve --http 127.0.0.1:7480` with the token from `cowork mcp token`.")
                .small()
                .color(theme::muted()),
        );
        return;
    }
    for client in &state.mcp_clients {
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(&client.name).strong());
            let colour = match client.status.as_str() {
                "allowed" => theme::ok(),
                "denied" => theme::error(),
                _ => theme::warn(),
            };
            ui.label(RichText::new(&client.status).color(colour));
            ui.label(RichText::new(format!("{} {} · last {}", client.transport, client.version, crate::ids::user_when(client.last_seen_millis, crate::ids::now_millis()))).small().color(theme::muted()));
            if client.status != "allowed" && ui.small_button("Allow").on_hover_text(format!("{} may {CLIENT_READS}", client.name)).clicked() {
                actions.push(UiAction::McpClientDecision { name: client.name.clone(), allow: true });
            }
            if client.status != "denied" && ui.small_button("Deny").clicked() {
                actions.push(UiAction::McpClientDecision { name: client.name.clone(), allow: false });
            }
        });
    }
}

/// At the top of the chat: an assistant connected to `cowork mcp serve` for
/// the first time and waits for an answer.
pub fn client_request_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    for client in state.mcp_clients.iter().filter(|c| c.status == "pending") {
        egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
            ui.label(RichText::new(format!("{} wants to read cowork's memory", client.name)).strong());
            ui.label(RichText::new(format!("Over {} (cowork mcp serve). If you allow it, it can {CLIENT_READS}. Every call is in the audit log.", client.transport)).small());
            ui.horizontal_wrapped(|ui| {
                if ui.button(format!("Allow {}", client.name)).clicked() {
                    actions.push(UiAction::McpClientDecision { name: client.name.clone(), allow: true });
                }
                if ui.button("Deny").clicked() {
                    actions.push(UiAction::McpClientDecision { name: client.name.clone(), allow: false });
                }
            });
        });
    }
}
