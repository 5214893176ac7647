//! One internal message format for every provider: turns in, deltas out.
//! The agent work will feed tool calls and results back as turns.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call the model asked for; `arguments` is JSON text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool the model may call: its name, one line saying what it does, and
/// the JSON schema of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Turn {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None }
    }
}

/// A piece of a streamed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    /// Part of tool call `index`: its id and name arrive once, arguments in pieces.
    ToolCall { index: usize, id: Option<String>, name: Option<String>, arguments: String },
    Usage { input_tokens: u64, output_tokens: u64 },
    /// The model stopped (`stop`, `length`, `tool_calls`, …; the provider's words).
    Finish(String),
}

/// Deltas folded into a whole answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assembled {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub finish: Option<String>,
}

impl Assembled {
    pub fn apply(&mut self, delta: &Delta) {
        match delta {
            Delta::Text(text) => self.text.push_str(text),
            Delta::ToolCall { index, id, name, arguments } => {
                if self.tool_calls.len() <= *index {
                    self.tool_calls.resize(index + 1, ToolCall::default());
                }
                let call = &mut self.tool_calls[*index];
                if let Some(id) = id {
                    call.id.clone_from(id);
                }
                if let Some(name) = name {
                    call.name.clone_from(name);
                }
                call.arguments.push_str(arguments);
            }
            Delta::Usage { input_tokens, output_tokens } => {
                self.input_tokens = self.input_tokens.max(*input_tokens);
                self.output_tokens = self.output_tokens.max(*output_tokens);
            }
            Delta::Finish(reason) => self.finish = Some(reason.clone()),
        }
    }
}
