//! The Chat panel: thread picker, messages with their context chips, input,
//! Send and Stop. An answer's Markdown is drawn in parts: its code blocks
//! (wrapped, with a Copy button) and tables (columns sharing the panel's width)
//! by cowork, the rest by egui_commonmark; session numbers a model copied from
//! a tool's output become source chips (`ids::without_session_refs`).

use egui::{Key, RichText, ScrollArea, TextEdit};

use crate::llm::events::ModelStatus;
use crate::records::{MessageStatus, Role};
use crate::state::{AppState, MessageView, UiAction};
use crate::ui::theme;

#[derive(Default)]
pub struct ChatPanel {
    pub draft: String,
    /// The draft holds text an MCP server's prompt or an app wrote (until the
    /// input is emptied): sent, it counts as theirs, not the user's own words.
    pub draft_origin: Option<crate::tools::Origin>,
    /// Approval cards, questions and tool chips.
    pub agent: crate::ui::agent::AgentPanel,
    /// MCP servers' forms.
    pub mcp: crate::ui::mcp_chat::McpChatPanel,
    /// Rendered Markdown of answers.
    pub markdown: egui_commonmark::CommonMarkCache,
    /// Each answer's words without copied session numbers, and those numbers,
    /// by message id with the length of the text they were made from: worked
    /// out when an answer's text changes, not every frame.
    pub answer_words: std::collections::HashMap<i64, (usize, String, Vec<i64>)>,
    /// The user message whose attached context is expanded.
    pub shown_context: Option<i64>,
    /// A rating being given: (answer, +1/-1, why).
    pub rating: Option<(i64, i8, String)>,
    /// The conversation the user asked to delete, waiting for their yes.
    pub deleting: Option<i64>,
}

/// "Delete this conversation?": what goes, and the user's yes or no.
fn delete_confirm_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut ChatPanel, actions: &mut Vec<UiAction>) {
    let Some(thread_id) = panel.deleting else { return };
    let Some(thread) = state.threads.iter().find(|t| t.thread_id == thread_id) else {
        panel.deleting = None;
        return;
    };
    ui.group(|ui| {
        ui.label(format!("Delete \"{}\"? Its messages, the agent's tasks in it, its summary and its pins go, and are purged from disk. Captured activity stays.", thread.title));
        ui.horizontal(|ui| {
            if ui.button("Delete conversation").clicked() {
                actions.push(UiAction::DeleteThread(thread_id));
                panel.deleting = None;
            }
            if ui.button("Keep it").clicked() {
                panel.deleting = None;
            }
        });
    });
}

pub fn chat_ui(ui: &mut egui::Ui, state: &AppState, panel: &mut ChatPanel, actions: &mut Vec<UiAction>) {
    ui.horizontal(|ui| {
        let label = ui.label("Thread");
        let current = state
            .current_thread
            .and_then(|id| state.threads.iter().find(|t| t.thread_id == id))
            .map(|t| t.title.clone())
            .unwrap_or_else(|| "New chat".to_owned());
        // New chat on the right; the picker takes what is left, its title cut short.
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            if ui.button("New chat").clicked() {
                actions.push(UiAction::NewThread);
            }
            let deletable = state.current_thread.filter(|id| state.threads.iter().any(|t| t.thread_id == *id) && state.generating.is_none());
            if ui.add_enabled(deletable.is_some(), egui::Button::new("Delete")).on_hover_text("Delete this conversation and everything in it").clicked() {
                panel.deleting = deletable;
            }
            egui::ComboBox::from_id_salt("thread_picker")
                .selected_text(current)
                .width(ui.available_width())
                .truncate()
                .show_ui(ui, |ui| {
                    for thread in &state.threads {
                        if ui.selectable_label(state.current_thread == Some(thread.thread_id), &thread.title).clicked() {
                            actions.push(UiAction::SelectThread(thread.thread_id));
                        }
                    }
                })
                .response
                .labelled_by(label.id);
        });
    });
    delete_confirm_ui(ui, state, panel, actions);
    model_line_ui(ui, state);
    pins_ui(ui, state, actions);
    consent_ui(ui, state, actions);
    crate::ui::integrations::client_request_ui(ui, state, actions);
    retry_offer_ui(ui, state, actions);
    crate::ui::agent::waiting_ui(ui, state, &mut panel.agent, actions, crate::ids::now_millis());
    crate::ui::agent::forget_textures(state, &mut panel.agent);
    crate::ui::mcp_chat::elicitations_ui(ui, state, &mut panel.mcp, actions);
    ui.separator();

    // The input, its buttons, and the MCP rows above and under it stay in view.
    let input_height = 84.0 + crate::ui::mcp_chat::extra_height(state, &panel.draft, &panel.mcp);
    ScrollArea::vertical()
        .auto_shrink([false, false])
        .max_height((ui.available_height() - input_height).max(80.0))
        .stick_to_bottom(true)
        .show(ui, |ui| {
            if state.messages.is_empty() {
                ui.label(RichText::new("Ask about anything, including what you were just doing").color(theme::muted()));
            }
            if panel.answer_words.len() > state.messages.len() + 32 {
                panel.answer_words.retain(|id, _| state.messages.iter().any(|m| m.message_id == *id));
            }
            for (index, message) in state.messages.iter().enumerate() {
                message_ui(ui, state, message, panel);
                if message.role == Role::Assistant && !message.reasoning.is_empty() {
                    reasoning_ui(ui, message);
                }
                if message.role == Role::Assistant {
                    answer_footer_ui(ui, state, index, panel, actions);
                }
                ui.add_space(theme::SPACING);
            }
        });

    ui.separator();
    let generating = state.generating.is_some();
    crate::ui::mcp_chat::attachments_ui(ui, state, actions);
    let label = ui.label("Message");
    let response = ui.add(
        TextEdit::multiline(&mut panel.draft)
            .desired_rows(2)
            .desired_width(f32::INFINITY)
            .hint_text("Ask cowork… (Enter sends, Shift+Enter new line)"),
    )
    .labelled_by(label.id);
    let enter_pressed =
        response.has_focus() && ui.input(|i| i.key_pressed(Key::Enter) && !i.modifiers.shift);
    if enter_pressed {
        // The multiline edit already inserted a newline for this Enter.
        let trimmed = panel.draft.trim_end_matches('\n').len();
        panel.draft.truncate(trimmed);
    }
    if response.has_focus() && generating && ui.input(|i| i.key_pressed(Key::Escape)) {
        actions.push(UiAction::Stop);
    }
    crate::ui::mcp_chat::prompts_ui(ui, state, &mut panel.draft, &mut panel.mcp, response.id);
    ui.horizontal(|ui| {
        let can_send = !generating && !panel.draft.trim().is_empty();
        if ui.add_enabled(can_send, egui::Button::new("Send")).clicked() || (enter_pressed && can_send) {
            // `/name …` of an MCP prompt fills the input with the prompt; anything else is a message.
            match crate::mcp::slash::parse(&panel.draft, &crate::ui::mcp_chat::prompt_lists(state)) {
                Some(Ok(used)) => {
                    actions.push(UiAction::UsePrompt(used));
                    panel.draft.clear();
                    panel.mcp.slash_problem = None;
                }
                Some(Err(why)) => panel.mcp.slash_problem = Some(why),
                None => {
                    actions.push(UiAction::SendMessage(panel.draft.trim().to_owned()));
                    panel.draft.clear();
                }
            }
            response.request_focus();
        }
        if ui.add_enabled(generating, egui::Button::new("Stop")).clicked() {
            actions.push(UiAction::Stop);
        }
        crate::ui::voice::mic_ui(ui, &state.voice, crate::audio::events::VoiceTarget::Chat, actions);
    });
    if state.voice.recording == Some(crate::audio::events::VoiceTarget::Chat) && ui.input(|i| i.key_pressed(Key::Escape)) {
        actions.push(UiAction::VoiceCancel);
    }
}

fn model_line_ui(ui: &mut egui::Ui, state: &AppState) {
    let (text, colour) = match &state.model {
        None | Some(ModelStatus::NotLoaded) => ("Local model: loads on first question".to_owned(), theme::muted()),
        Some(ModelStatus::Loading) => ("Local model: loading…".to_owned(), theme::warn()),
        Some(ModelStatus::Ready { load_millis, resident_bytes: 0 }) => (format!("Local model: ready (loaded in {load_millis} ms)"), theme::ok()),
        Some(ModelStatus::Ready { load_millis, resident_bytes }) => {
            (format!("Local model: ready (loaded in {load_millis} ms, {} MB of memory)", resident_bytes / 1_000_000), theme::ok())
        }
        Some(ModelStatus::Unavailable(reason)) => (format!("Local model unavailable: {reason}"), theme::error()),
    };
    ui.label(RichText::new(text).small().color(colour));
}

fn message_ui(ui: &mut egui::Ui, state: &AppState, message: &MessageView, panel: &mut ChatPanel) {
    let fill = match message.role {
        Role::User => theme::user_bubble(),
        Role::Assistant => theme::assistant_bubble(),
    };
    egui::Frame::new().fill(fill).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
        ui.set_width(ui.available_width());
        let who = match message.role {
            Role::User => "You",
            Role::Assistant => "cowork",
        };
        ui.label(RichText::new(who).small().color(theme::muted()));
        if message.role == Role::Assistant {
            crate::ui::agent::answer_steps_ui(ui, state, message.message_id, &mut panel.agent);
        }
        if message.content.is_empty() && message.is_streaming() {
            ui.label(RichText::new("Thinking…").italics().color(theme::muted()));
        } else if message.role == Role::Assistant {
            // Answers are Markdown (lists, code blocks, links); the user's own words are shown as typed.
            // A link shows where it goes on hover: its text may have come from a captured page.
            ui.style_mut().url_in_tooltip = true;
            let (text, _) = answer_words(&mut panel.answer_words, message);
            answer_text_ui(ui, text, message.message_id, &mut panel.markdown);
        } else {
            ui.label(&message.content);
        }
        if let Some(context) = &message.context {
            context_chip_ui(ui, message.message_id, context, panel);
        }
        match message.status {
            Some(MessageStatus::Stopped) => {
                ui.label(RichText::new("Stopped").small().color(theme::warn()));
            }
            Some(MessageStatus::Failed) => {
                let error = message.error.as_deref().unwrap_or("the answer failed");
                ui.label(RichText::new(error).small().color(theme::error()));
            }
            _ => {}
        }
        if let Some(stats) = &message.stats {
            let mut parts = vec![format!("{} tokens", stats.completion_tokens)];
            if stats.tokens_per_sec > 0.0 {
                parts.push(format!("{:.1} tok/s · first token {} ms", stats.tokens_per_sec, stats.first_token_millis));
            }
            // How long a reasoning model thought, where the provider says so but shows no summary (OpenAI's chat completions).
            if stats.reasoning_tokens > 0 {
                parts.push(format!("thought for {} tokens", stats.reasoning_tokens));
            }
            // What the provider's prompt cache served (billed at its lower price).
            if stats.cached_prompt_tokens > 0 && stats.prompt_tokens > 0 {
                parts.push(format!("{} % of the prompt from the cache", stats.cached_prompt_tokens * 100 / stats.prompt_tokens));
            }
            ui.label(RichText::new(parts.join(" · ")).small().color(theme::muted()));
        }
    });
}

/// An answer's words and the session numbers taken out of them (`ids::without_session_refs`),
/// from `cache` unless its text changed since (an answer only grows while it streams).
fn answer_words<'c>(cache: &'c mut std::collections::HashMap<i64, (usize, String, Vec<i64>)>, message: &MessageView) -> (&'c str, &'c [i64]) {
    let entry = cache.entry(message.message_id).or_insert_with(|| (usize::MAX, String::new(), Vec::new()));
    if entry.0 != message.content.len() {
        let (text, sessions) = crate::ids::without_session_refs(&message.content);
        *entry = (message.content.len(), text.into_owned(), sessions);
    }
    (&entry.1, &entry.2)
}

/// An answer's Markdown; its code blocks drawn here, wrapped to the panel
/// with a Copy button each (the Markdown viewer's own is an unlabeled icon
/// and scrolls sideways).
fn answer_text_ui(ui: &mut egui::Ui, text: &str, message_id: i64, markdown: &mut egui_commonmark::CommonMarkCache) {
    for (n, block) in split_code_blocks(text).into_iter().enumerate() {
        match block {
            Block::Text(text) if !text.trim().is_empty() => {
                egui_commonmark::CommonMarkViewer::new().show_with_id(ui.scope_id().with(("answer", message_id, n)), ui, markdown, text);
            }
            Block::Text(_) => {}
            Block::Table(rows) => table_ui(ui, &rows, (message_id, n)),
            Block::Code { language, code } => {
                egui::Frame::new().fill(ui.visuals().extreme_bg_color).corner_radius(4.0).inner_margin(6.0).show(ui, |ui| {
                    ui.set_width(ui.available_width());
                    ui.horizontal(|ui| {
                        ui.label(RichText::new(if language.is_empty() { "code" } else { language }).small().color(theme::muted()));
                        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                            if ui.small_button("Copy").on_hover_text("Copy this code").clicked() {
                                ui.copy_text(code.to_owned());
                            }
                        });
                    });
                    ui.add(egui::Label::new(RichText::new(code.trim_end_matches('\n')).monospace()).wrap_mode(egui::TextWrapMode::Wrap).selectable(true));
                });
            }
        }
    }
}

/// A Markdown table in columns that share the panel's width, each cell
/// wrapping (the Markdown viewer's grid grows past a narrow sidebar).
fn table_ui(ui: &mut egui::Ui, rows: &[Vec<String>], id: (i64, usize)) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let spacing = ui.spacing().item_spacing.x * 2.0;
    let column_width = ((ui.available_width() - spacing * columns as f32) / columns as f32).max(24.0);
    egui::Grid::new(("answer-table", id.0, id.1)).striped(true).min_col_width(column_width).max_col_width(column_width).show(ui, |ui| {
        for (r, row) in rows.iter().enumerate() {
            for cell in row {
                let text = if r == 0 { RichText::new(cell).strong() } else { RichText::new(cell) };
                ui.add(egui::Label::new(text).wrap_mode(egui::TextWrapMode::Wrap));
            }
            ui.end_row();
        }
    });
}

/// Part of an answer: Markdown, a table, or a fenced code block.
#[derive(Debug, PartialEq)]
enum Block<'a> {
    Text(&'a str),
    /// Rows of cells (the header first), Markdown emphasis taken off.
    Table(Vec<Vec<String>>),
    Code { language: &'a str, code: &'a str },
}

/// Splits Markdown into code blocks and tables and the text between them.
fn split_code_blocks(text: &str) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    for block in split_fences(text) {
        match block {
            Block::Text(text) => blocks.extend(split_tables(text)),
            other => blocks.push(other),
        }
    }
    blocks
}

/// Splits Markdown text at its tables: a header row of `|` cells, a
/// `|---|` separator row, then the rows that start with `|`.
fn split_tables(text: &str) -> Vec<Block<'_>> {
    let cells = |line: &str| -> Vec<String> {
        let line = line.trim().trim_start_matches('|').trim_end_matches('|');
        line.split('|').map(|c| c.trim().replace("**", "").replace('`', "")).collect()
    };
    let is_separator = |line: &str| {
        let line = line.trim();
        line.starts_with('|') && line.contains('-') && line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
    };
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut offsets = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        offsets.push((at, line));
        at += line.len();
    }
    let mut i = 0;
    while i < offsets.len() {
        let (line_at, line) = offsets[i];
        let header = line.trim_start().starts_with('|');
        if header && i + 1 < offsets.len() && is_separator(offsets[i + 1].1) {
            let mut end = i + 2;
            while end < offsets.len() && offsets[end].1.trim_start().starts_with('|') {
                end += 1;
            }
            blocks.push(Block::Text(&text[start..line_at]));
            let rows = std::iter::once(line).chain(offsets[i + 2..end].iter().map(|(_, l)| *l)).map(cells).collect();
            blocks.push(Block::Table(rows));
            start = offsets.get(end).map_or(text.len(), |(a, _)| *a);
            i = end;
        } else {
            i += 1;
        }
    }
    blocks.push(Block::Text(&text[start..]));
    blocks
}

/// Splits Markdown at its ``` fences (an unclosed fence, as while streaming, runs to the end).
fn split_fences(text: &str) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    let mut rest = text;
    loop {
        let fence = rest.match_indices("```").find(|(at, _)| *at == 0 || rest[..*at].ends_with('\n'));
        let Some((at, _)) = fence else {
            blocks.push(Block::Text(rest));
            return blocks;
        };
        blocks.push(Block::Text(&rest[..at]));
        let after = &rest[at + 3..];
        let (language, body) = after.split_once('\n').unwrap_or((after, ""));
        let close = body.match_indices("```").find(|(at, _)| *at == 0 || body[..*at].ends_with('\n'));
        match close {
            Some((end, _)) => {
                blocks.push(Block::Code { language: language.trim(), code: &body[..end] });
                let next = &body[end + 3..];
                let next = next.strip_prefix('\n').unwrap_or(next);
                rest = next;
            }
            None => {
                blocks.push(Block::Code { language: language.trim(), code: body });
                return blocks;
            }
        }
    }
}

/// What a reasoning model showed of its thinking: collapsed, quieter than the answer.
fn reasoning_ui(ui: &mut egui::Ui, message: &crate::state::MessageView) {
    let words = message.reasoning.split_whitespace().count();
    let title = if message.is_streaming() && message.content.is_empty() { format!("Thinking… ({words} words)") } else { format!("Thought ({words} words)") };
    egui::CollapsingHeader::new(RichText::new(title).small().color(theme::muted())).id_salt(("reasoning", message.message_id)).default_open(false).show(ui, |ui| {
        ui.add(egui::Label::new(RichText::new(&message.reasoning).small().color(theme::muted())).wrap());
    });
}

/// Who answered and why, what it cost, and "Retry with a smarter model" on
/// the last answer to a question; retries stack under the first answer.
fn answer_footer_ui(ui: &mut egui::Ui, state: &AppState, index: usize, panel: &mut ChatPanel, actions: &mut Vec<UiAction>) {
    let message = &state.messages[index];
    let mut parts = Vec::new();
    if let Some(by) = &message.answered_by {
        parts.push(format!("by {by}"));
    }
    if let Some(cost) = message.cost_usd.filter(|c| *c > 0.0) {
        parts.push(format!("${cost:.4}"));
    }
    if let Some(ask_id) = message.ask_id {
        let (answers, total) = state.answers_to(ask_id);
        if answers > 1 {
            let position = state.messages[..=index].iter().filter(|m| m.role == Role::Assistant && m.ask_id == Some(ask_id)).count();
            parts.push(format!("answer {position} of {answers} · total ${total:.4}"));
        }
    }
    ui.horizontal_wrapped(|ui| {
        if !parts.is_empty() {
            let label = ui.label(RichText::new(parts.join(" · ")).small().color(theme::muted()));
            if let Some(reason) = &message.route_reason {
                label.on_hover_text(format!("routed: {reason}"));
            }
        }
        if message.status.is_some() && state.generating != Some(message.message_id) {
            // The bundled fonts have no emoji: words instead of thumbs.
            for (rating, glyph, hover) in [(1i8, "Helpful", "A good answer (thumbs up)"), (-1, "Not helpful", "A bad answer (thumbs down)")] {
                let chosen = message.feedback == Some(rating) || panel.rating.as_ref().is_some_and(|r| r.0 == message.message_id && r.1 == rating);
                if ui.selectable_label(chosen, glyph).on_hover_text(hover).clicked() {
                    panel.rating = Some((message.message_id, rating, String::new()));
                }
            }
        }
        if message.status.is_some() && state.generating != Some(message.message_id) && !message.content.trim().is_empty() {
            // The answer as a document of its own (in the Documents folder).
            if ui.small_button("Save as DOCX").on_hover_text("Save this answer as a Word document in your Documents folder").clicked() {
                actions.push(UiAction::ExportAnswer { answer_id: message.message_id, extension: "docx" });
            }
            if ui.small_button("Save as PDF").on_hover_text("Save this answer as a PDF in your Documents folder (needs LibreOffice)").clicked() {
                actions.push(UiAction::ExportAnswer { answer_id: message.message_id, extension: "pdf" });
            }
        }
        // A change to the pinned facts the user asked for: nothing changes until they confirm it.
        if let Some(change) = state.memory_changes.get(&message.message_id) {
            let (yes, hover) = match change {
                crate::memory::corrections::Change::Add { .. } => ("Pin it", "Add this to your pinned facts"),
                crate::memory::corrections::Change::Replace { .. } => ("Replace it", "Replace the old fact with the new one; summaries drop the old one"),
                crate::memory::corrections::Change::Remove { .. } => ("Forget it", "Remove this fact; summaries drop it too"),
            };
            if ui.button(yes).on_hover_text(hover).clicked() {
                actions.push(UiAction::MemoryChange { answer_id: message.message_id, confirm: true });
            }
            if ui.small_button("Keep as it is").clicked() {
                actions.push(UiAction::MemoryChange { answer_id: message.message_id, confirm: false });
            }
        }
        // What the task deleted, moved or wrote can be put back for five minutes.
        if let Some((operation_id, until)) = state.undoable.get(&message.message_id)
            && crate::ids::now_millis() < *until
        {
            let left = (*until - crate::ids::now_millis()) / 1000;
            let hover = format!("Put back what this task deleted, moved or wrote (from the trash); {}:{:02} left. Later: cowork undo", left / 60, left % 60);
            if ui.button("Undo").on_hover_text(hover).clicked() {
                actions.push(UiAction::Undo(*operation_id));
            }
            ui.ctx().request_repaint_after(std::time::Duration::from_secs(1));
        }
        let last_for_ask = !state.messages[index + 1..].iter().any(|m| m.role == Role::Assistant && m.ask_id == message.ask_id);
        if last_for_ask && message.status.is_some() && state.generating.is_none() && message.ask_id.is_some() && ui.small_button("Retry with a smarter model").clicked() {
            actions.push(UiAction::TryHarder { answer_id: message.message_id });
        }
    });
    let (_, sessions) = answer_words(&mut panel.answer_words, message);
    citations_ui(ui, state, message, sessions, actions);
    let mut saved = false;
    if let Some((message_id, rating, reason)) = panel.rating.as_mut().filter(|r| r.0 == message.message_id) {
        ui.horizontal(|ui| {
            let label = ui.label("Why");
            ui.add(TextEdit::singleline(reason).desired_width(180.0)).labelled_by(label.id);
            if ui.small_button("Save rating").clicked() {
                actions.push(UiAction::Rate { message_id: *message_id, rating: *rating, reason: reason.clone() });
                saved = true;
            }
        });
    }
    if saved {
        panel.rating = None;
    }
}

/// What is pinned to this thread (always first in its answers), each with Unpin.
fn pins_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    for pin in &state.pins {
        ui.horizontal(|ui| {
            ui.label(RichText::new(format!("Pinned: {}", pin.label)).small().color(theme::muted())).on_hover_text(&pin.text);
            if ui.small_button("Unpin").on_hover_text("Take it out of this chat's context").clicked() {
                actions.push(UiAction::UnpinFromThread { stream: pin.stream, source_id: pin.source_id });
            }
        });
    }
}

/// "Sources": each citation, and each session the answer named, as a small
/// chip (app, title, time) that opens its session or thread.
fn citations_ui(ui: &mut egui::Ui, state: &AppState, message: &MessageView, sessions: &[i64], actions: &mut Vec<UiAction>) {
    let named = sessions.iter().copied().filter(|id| !message.citations.iter().any(|c| c.open_id == Some(*id) && c.stream == crate::memory::search::Stream::Window));
    let named: Vec<crate::memory::rag::Citation> = named
        .enumerate()
        .map(|(i, session_id)| {
            let known = state.sessions_today.iter().find(|s| s.session_id == session_id);
            crate::memory::rag::Citation {
                n: message.citations.len() + i + 1,
                chunk_id: None,
                stream: crate::memory::search::Stream::Window,
                source_id: session_id,
                at_millis: known.map_or(0, |s| s.started_at_millis),
                label: known.map_or_else(|| "A window you used".to_owned(), |s| format!("{} — {}", s.app, s.title)),
                open_id: Some(session_id),
            }
        })
        .collect();
    if message.citations.is_empty() && named.is_empty() {
        return;
    }
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new("Sources").small().color(theme::muted()));
        for citation in message.citations.iter().chain(&named) {
            if source_chip_ui(ui, citation).clicked() {
                actions.push(UiAction::OpenCitation(citation.clone()));
            }
        }
    });
}

/// One source as a rounded chip: its number, a shortened label and its
/// local time; the whole label on hover and for screen readers.
fn source_chip_ui(ui: &mut egui::Ui, citation: &crate::memory::rag::Citation) -> egui::Response {
    const SHOWN: usize = 34;
    let mut short: String = citation.label.chars().take(SHOWN).collect();
    if citation.label.chars().count() > SHOWN {
        short.push('…');
    }
    let when = if citation.at_millis > 0 { format!(" · {}", crate::ids::user_clock(citation.at_millis)) } else { String::new() };
    let full = format!("[{}] {}{when}", citation.n, citation.label);
    let chip = egui::Button::new(RichText::new(format!("[{}] {short}{when}", citation.n)).small()).corner_radius(9.0).fill(theme::user_bubble());
    let response = ui.add(chip).on_hover_text(format!("{full}\nOpen its {}", citation.stream.as_str()));
    response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &full));
    response
}

/// Captured context is about to go to a cloud provider for the first time:
/// show exactly what, and let the user choose.
fn consent_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let Some(prompt) = &state.pending_consent else { return };
    egui::Frame::new().fill(theme::user_bubble()).corner_radius(6.0).inner_margin(8.0).show(ui, |ui| {
        ui.label(RichText::new(format!("Send what you were doing to {}?", prompt.provider)).strong());
        ui.label(RichText::new(format!("This question goes to {} because {}. This is exactly what would be sent with it:", prompt.provider, prompt.reason)).small());
        ScrollArea::vertical().id_salt("consent_preview").max_height(120.0).show(ui, |ui| {
            ui.label(RichText::new(&prompt.preview).monospace().small());
        });
        ui.horizontal_wrapped(|ui| {
            if ui.button(format!("Allow for {}", prompt.provider)).clicked() {
                actions.push(UiAction::Consent(crate::state::ConsentChoice::Always));
            }
            if ui.button("This time only").clicked() {
                actions.push(UiAction::Consent(crate::state::ConsentChoice::Once));
            }
            if ui.button("Never (send the question alone)").clicked() {
                actions.push(UiAction::Consent(crate::state::ConsentChoice::Never));
            }
        });
    });
}

fn retry_offer_ui(ui: &mut egui::Ui, state: &AppState, actions: &mut Vec<UiAction>) {
    let Some(offer) = &state.retry_offer else { return };
    ui.horizontal_wrapped(|ui| {
        let cost = if offer.estimate_usd > 0.0 { format!("up to ${:.4}", offer.estimate_usd) } else { "free".to_owned() };
        ui.label(RichText::new(format!("Retry with {}: {cost}", offer.label)).small());
        if ui.small_button("Send retry").clicked() {
            actions.push(UiAction::ConfirmRetry);
        }
        if ui.small_button("Cancel").clicked() {
            actions.push(UiAction::CancelRetry);
        }
    });
}

/// "Context: activity" chip; clicking shows the exact text that was sent.
fn context_chip_ui(ui: &mut egui::Ui, message_id: i64, context: &str, panel: &mut ChatPanel) {
    let chip = if context.is_empty() { "Context: none captured yet" } else { "Context: recent activity" };
    let open = panel.shown_context == Some(message_id);
    if ui.selectable_label(open, RichText::new(chip).small()).clicked() {
        panel.shown_context = if open { None } else { Some(message_id) };
    }
    if open {
        egui::Frame::new().inner_margin(4.0).stroke(egui::Stroke::new(1.0, theme::muted())).show(ui, |ui| {
            let text = if context.is_empty() { "(nothing was attached)" } else { context };
            ui.label(RichText::new(text).monospace().small());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_fences_split_an_answer_even_while_it_streams() {
        let blocks = split_code_blocks("Run:\n```sh\ncargo test\n```\nthen look.");
        assert_eq!(blocks, [Block::Text("Run:\n"), Block::Code { language: "sh", code: "cargo test\n" }, Block::Text("then look.")]);
        let open = split_code_blocks("Run:\n```\ncargo te");
        assert_eq!(open, [Block::Text("Run:\n"), Block::Code { language: "", code: "cargo te" }]);
        assert_eq!(split_code_blocks("inline ```x``` stays"), [Block::Text("inline ```x``` stays")]);
        let table = split_code_blocks("Time:\n\n| App | Time |\n|---|---:|\n| **Code** | 2 h |\n| `vim` | 1 h |\n\nDone.");
        let rows = vec![vec!["App".to_owned(), "Time".to_owned()], vec!["Code".to_owned(), "2 h".to_owned()], vec!["vim".to_owned(), "1 h".to_owned()]];
        assert_eq!(table, [Block::Text("Time:\n\n"), Block::Table(rows), Block::Text("\nDone.")]);
        assert_eq!(split_code_blocks("a | b without a separator"), [Block::Text("a | b without a separator")]);
    }
}
