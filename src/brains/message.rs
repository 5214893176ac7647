//! One internal message format for every provider: turns in, deltas out.
//! The agent work will feed tool calls and results back as turns.

use std::sync::Arc;

use base64::Engine as _;
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
    /// Gemini's `thoughtSignature` on the call's part: it must go back with
    /// the call when the conversation continues (Gemini 3 refuses it missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
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
    /// An assistant turn's signed thinking blocks (Anthropic extended
    /// thinking), sent back verbatim before its tool calls as the API
    /// requires; never shown to the model as text and never the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<serde_json::Value>,
    /// Pictures the turn shows a model that sees (`ProviderConfig::sees`):
    /// a user's attached picture or screenshot, a tool's images. Captured
    /// content like the text: sent only where that text may go. A model that
    /// does not see gets `content` alone, which already says what they show
    /// (their OCR text and a description). Not kept when a turn is stored.
    #[serde(skip)]
    pub images: Vec<Picture>,
}

impl Turn {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None, thinking: Vec::new(), images: Vec::new() }
    }
}

/// The longest side of a picture sent to a model (Anthropic scales larger ones down to this anyway).
pub const MODEL_SIDE: u32 = 1568;
/// The largest picture sent to a model (Anthropic takes 5 MB per picture).
pub const MODEL_BYTES: usize = 3_500_000;

/// An encoded picture (PNG, JPEG, GIF or WebP) in a turn; shared, not copied, as turns are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    pub mime: String,
    pub data: Arc<[u8]>,
}

impl Picture {
    pub fn new(mime: impl Into<String>, data: impl Into<Arc<[u8]>>) -> Self {
        Self { mime: mime.into(), data: data.into() }
    }

    /// The bytes in standard base64 (Anthropic, Gemini, Ollama).
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }

    /// The pictures of `attachments` (attached picture files), as models take them.
    pub fn of_attachments(attachments: &[crate::records::Attachment]) -> Vec<Picture> {
        attachments.iter().filter_map(|a| a.picture.as_ref()).filter_map(Picture::for_model).collect()
    }

    /// A picture as cloud models take it: its type read from its bytes (a
    /// tool that says PNG and sends a JPEG would get the request refused),
    /// at most `MODEL_SIDE` pixels on its long side and `MODEL_BYTES` long —
    /// a larger one is scaled down and sent as PNG. None when it is not a
    /// picture that decodes (it is then only described in the text).
    pub fn for_model(image: &crate::media::Image) -> Option<Picture> {
        let mime = crate::media::sniff(&image.data)?;
        let picture = crate::media::decode(&image.data).ok()?;
        if picture.width().max(picture.height()) <= MODEL_SIDE && image.data.len() <= MODEL_BYTES {
            return Some(Picture::new(mime, image.data.as_slice()));
        }
        let smaller = picture.thumbnail(MODEL_SIDE, MODEL_SIDE);
        let mut png = Vec::new();
        smaller.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).ok()?;
        Some(Picture::new("image/png", png))
    }

    /// A `data:` URL (OpenAI's `image_url`, the Responses API's `input_image`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64())
    }
}

/// A piece of a streamed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    /// Part of tool call `index`: its id and name arrive once, arguments in pieces.
    ToolCall { index: usize, id: Option<String>, name: Option<String>, arguments: String },
    /// Tokens so far. `input_tokens` counts the whole prompt, cached parts
    /// included (each provider's own fields are normalised to this);
    /// `cached_input_tokens` were read from the provider's prompt cache and
    /// `cache_write_tokens` written to it (Anthropic bills writes apart).
    Usage(Usage),
    /// Reasoning or thinking text the provider shows (OpenRouter `reasoning`,
    /// DeepSeek `reasoning_content`, Anthropic thinking, Gemini thoughts,
    /// Ollama `thinking`): shown collapsed under the answer, never the answer.
    Reasoning(String),
    /// Part of a signed thinking block (Anthropic): its `index`, text and signature pieces.
    Thinking { index: usize, text: String, signature: String, redacted: Option<String> },
    /// Gemini's `thoughtSignature` for tool call `index`.
    CallSignature { index: usize, signature: String },
    /// The model stopped (`stop`, `length`, `tool_calls`, …; the provider's words).
    Finish(String),
}

impl Delta {
    /// The reasoning text this delta shows, if any.
    pub fn reasoning_text(&self) -> Option<&str> {
        match self {
            Delta::Reasoning(text) | Delta::Thinking { text, .. } if !text.is_empty() => Some(text),
            _ => None,
        }
    }
}

/// Token counts of one request (see `Delta::Usage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    /// Of `output_tokens`, spent thinking (OpenAI `reasoning_tokens`, Gemini `thoughtsTokenCount`).
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self { input_tokens, output_tokens, ..Self::default() }
    }
}

/// `Delta::ToolCall`'s index for a call that arrives whole (Gemini): a new call after the others;
/// `Delta::CallSignature` with it signs the last call.
pub const NEW_CALL: usize = usize::MAX;

/// The most tool calls one answer may hold (a stream's index beyond it is ignored, not allocated).
const MAX_CALLS: usize = 256;

/// Deltas folded into a whole answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assembled {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
    pub finish: Option<String>,
    /// What the model showed of its reasoning (not part of `text`).
    pub reasoning: String,
    /// Signed thinking blocks by their index (Anthropic), to send back with tool calls.
    pub thinking: Vec<(usize, serde_json::Value)>,
}

impl Assembled {
    /// The signed thinking blocks in their order, for the assistant turn.
    pub fn thinking_blocks(&self) -> Vec<serde_json::Value> {
        let mut blocks = self.thinking.clone();
        blocks.sort_by_key(|(index, _)| *index);
        blocks.into_iter().map(|(_, block)| block).collect()
    }

    /// The token counts, for the usage row.
    pub fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cached_input_tokens,
            cache_write_tokens: self.cache_write_tokens,
            reasoning_tokens: self.reasoning_tokens,
        }
    }

    pub fn apply(&mut self, delta: &Delta) {
        match delta {
            Delta::Text(text) => self.text.push_str(text),
            Delta::ToolCall { index, id, name, arguments } => {
                let index = if *index == NEW_CALL { self.tool_calls.len() } else { *index };
                if index >= MAX_CALLS {
                    return;
                }
                if self.tool_calls.len() <= index {
                    self.tool_calls.resize(index + 1, ToolCall::default());
                }
                let call = &mut self.tool_calls[index];
                if let Some(id) = id {
                    call.id.clone_from(id);
                }
                if let Some(name) = name {
                    call.name.clone_from(name);
                }
                call.arguments.push_str(arguments);
            }
            Delta::Usage(usage) => {
                self.input_tokens = self.input_tokens.max(usage.input_tokens);
                self.output_tokens = self.output_tokens.max(usage.output_tokens);
                self.cached_input_tokens = self.cached_input_tokens.max(usage.cached_input_tokens);
                self.cache_write_tokens = self.cache_write_tokens.max(usage.cache_write_tokens);
                self.reasoning_tokens = self.reasoning_tokens.max(usage.reasoning_tokens);
            }
            Delta::Finish(reason) => self.finish = Some(reason.clone()),
            Delta::Reasoning(text) => self.reasoning.push_str(text),
            Delta::Thinking { index, text, signature, redacted } => {
                if *index >= MAX_CALLS {
                    return;
                }
                let at = match self.thinking.iter().position(|(i, _)| i == index) {
                    Some(at) => at,
                    None => {
                        let block = match redacted {
                            Some(_) => serde_json::json!({"type": "redacted_thinking", "data": ""}),
                            None => serde_json::json!({"type": "thinking", "thinking": "", "signature": ""}),
                        };
                        self.thinking.push((*index, block));
                        self.thinking.len() - 1
                    }
                };
                let block = &mut self.thinking[at].1;
                let append = |block: &mut serde_json::Value, key: &str, more: &str| {
                    if !more.is_empty() {
                        let joined = format!("{}{more}", block[key].as_str().unwrap_or_default());
                        block[key] = serde_json::Value::String(joined);
                    }
                };
                match redacted {
                    Some(data) => append(block, "data", data),
                    None => {
                        append(block, "thinking", text);
                        append(block, "signature", signature);
                    }
                }
                if !text.is_empty() {
                    self.reasoning.push_str(text);
                }
            }
            Delta::CallSignature { index, signature } => {
                let index = if *index == NEW_CALL { self.tool_calls.len().saturating_sub(1) } else { *index };
                if let Some(call) = self.tool_calls.get_mut(index) {
                    call.signature = Some(signature.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
        let mut out = Vec::new();
        image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(width, height, image::Rgb([20, 200, 20]))).write_to(&mut std::io::Cursor::new(&mut out), format).unwrap();
        out
    }

    #[test]
    fn pictures_go_to_models_as_what_they_are_and_no_larger_than_models_take() {
        // A JPEG a tool called a PNG goes as a JPEG, its bytes untouched.
        let jpeg = encoded(40, 30, image::ImageFormat::Jpeg);
        let claimed = crate::media::Image { mime: "image/png".into(), data: jpeg.clone() };
        let picture = Picture::for_model(&claimed).unwrap();
        assert_eq!((picture.mime.as_str(), &*picture.data), ("image/jpeg", jpeg.as_slice()));
        // A wide screenshot is scaled to the long side models take, as PNG.
        let wide = crate::media::Image { mime: "image/png".into(), data: encoded(3000, 600, image::ImageFormat::Png) };
        let picture = Picture::for_model(&wide).unwrap();
        let back = image::load_from_memory(&picture.data).unwrap();
        assert_eq!((picture.mime.as_str(), back.width()), ("image/png", MODEL_SIDE));
        assert!((313..=314).contains(&back.height()), "{}", back.height());
        // Not a picture, or one that does not decode: not sent (it is described in the text).
        assert_eq!(Picture::for_model(&crate::media::Image { mime: "image/png".into(), data: b"<svg/>".to_vec() }), None);
        let mut cut = encoded(40, 30, image::ImageFormat::Png);
        cut.truncate(cut.len() / 2);
        assert_eq!(Picture::for_model(&crate::media::Image { mime: "image/png".into(), data: cut }), None);
        assert_eq!(Picture::new("image/png", vec![0x89, b'P']).data_url(), "data:image/png;base64,iVA=");
    }
}
