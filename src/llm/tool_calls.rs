//! Tool calls in the local model's output. Qwen2.5's chat template asks for
//! each call as a block
//!
//! ```text
//! <tool_call>
//! {"name": "search_memory", "arguments": {"query": "flight"}}
//! </tool_call>
//! ```
//!
//! and a step may hold several, with text around them. mistralrs 0.8's parser
//! keeps only the first block and drops the text, so cowork parses the output
//! itself: every block, in order, the text kept, and a block that cannot be
//! read becomes an error for the model rather than a silent drop.
//! `VisibleText` does the same split on the stream, so the chat shows the text
//! as it comes and never the raw blocks.

use serde_json::Value;

const OPEN: &str = "<tool_call>";
pub const CLOSE: &str = "</tool_call>";

#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// A step's output: the text outside the blocks, and each block as a call or
/// as the reason it could not be read (said back to the model).
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub text: String,
    pub calls: Vec<Result<ToolCall, String>>,
}

/// What a generation may write (a grammar constrains the sampler).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Shape {
    /// Anything.
    #[default]
    Free,
    /// Exactly one block whose JSON fits this schema.
    OneCall(Value),
    /// An answer in plain text: no call block, no JSON.
    Prose,
}

/// The regex of a prose answer (see `Shape::Prose`).
const PROSE: &str = r#"[\p{L}\p{N}"'(*$€£-](?:[^{`]|\{[^"]|`[^`]|``[^`])*"#;

impl Shape {
    /// The grammar (llguidance's Lark), None for `Free`. `tags_are_tokens`:
    /// the model's vocabulary has `<tool_call>` and `</tool_call>` as single
    /// special tokens (Qwen2.5's has), which a quoted literal would not match.
    pub fn grammar(&self, tags_are_tokens: bool) -> Option<String> {
        match self {
            Shape::Free => None,
            Shape::OneCall(call_schema) => {
                let mut schema = call_schema.clone();
                // Compact, as the template's example writes a call.
                schema["x-guidance"] = serde_json::json!({"whitespace_flexible": false});
                let (open, close) =
                    if tags_are_tokens { (format!("{OPEN} \"\\n\""), format!("\"\\n\" {CLOSE}")) } else { (format!("\"{OPEN}\\n\""), format!("\"\\n{CLOSE}\"")) };
                Some(format!("start: {open} call {close}\ncall: %json {schema}\n"))
            }
            // Words, not a call: it starts with a letter, digit, quote or bracket (Qwen2.5-Coder-0.5B
            // answered a tool's result with invented calls, bare, after a `>`, or in a ```json
            // fence), and nowhere holds `{"` or a ``` fence; `<`, `{` and single backticks
            // inside stay possible (`a < b`, `Vec<T>`, `x`). A model whose tags are special
            // tokens cannot write them as text under a grammar.
            Shape::Prose => Some(format!("start: ANSWER\nANSWER: /{PROSE}/\n")),
        }
    }
}

/// A whole answer that is nothing but one call, written as bare JSON
/// (`{"name": ..., "arguments": {...}}`, perhaps in a ```json fence) to a tool
/// that `offered` names. llama.cpp's server parses Qwen's calls only inside
/// `<tool_call>` tags, and Qwen2.5-Coder-0.5B writes them bare, so through the
/// OpenAI format its calls arrived as the answer's text. Text around the
/// object, or a name not offered, is an answer, not a call.
pub fn bare_call(text: &str, offered: &dyn Fn(&str) -> bool) -> Option<ToolCall> {
    let mut body = text.trim();
    if let Some(inner) = body.strip_prefix("```json").or_else(|| body.strip_prefix("```")) {
        body = inner.strip_suffix("```")?.trim();
    }
    let value: Value = serde_json::from_str(body).ok()?;
    let object = value.as_object()?;
    let name = object.get("name")?.as_str()?;
    let arguments = object.get("arguments").cloned().unwrap_or_else(|| Value::Object(Default::default()));
    (object.len() <= 2 && arguments.is_object() && offered(name)).then(|| ToolCall { name: name.to_owned(), arguments })
}

/// Splits a finished step's output into text and calls.
pub fn parse(output: &str) -> Parsed {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut rest = output;
    while let Some(start) = rest.find(OPEN) {
        text.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let (block, next, closed) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..], true),
            None => (after, "", false),
        };
        let n = calls.len() + 1;
        calls.push(read_call(block).map_err(|err| {
            let unterminated = if closed { "" } else { " (the block has no closing </tool_call>)" };
            format!("tool call {n} could not be read{unterminated}: {err}. Write each call as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call>.")
        }));
        rest = next;
    }
    text.push_str(rest);
    Parsed { text: text.trim().to_owned(), calls }
}

fn read_call(block: &str) -> Result<ToolCall, String> {
    let value: Value = serde_json::from_str(block.trim()).map_err(|err| format!("it is not valid JSON ({err})"))?;
    let Value::Object(mut object) = value else { return Err("it is not a JSON object".into()) };
    let name = match object.remove("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.trim().to_owned(),
        _ => return Err("it has no \"name\"".into()),
    };
    let arguments = match object.remove("arguments").or_else(|| object.remove("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        // Some models write the arguments as a JSON string.
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(value @ Value::Object(_)) => value,
            _ => return Err(format!("the arguments of {name} are a string, not an object")),
        },
        Some(value @ Value::Object(_)) => value,
        Some(_) => return Err(format!("the arguments of {name} are not an object")),
    };
    Ok(ToolCall { name, arguments })
}

/// The streamed text without the blocks: `push` each delta and show what it
/// returns; `finish` at the end. A tag split across deltas is held back until
/// it is whole; nothing inside a block is ever returned.
#[derive(Debug, Default)]
pub struct VisibleText {
    pending: String,
    inside: bool,
}

impl VisibleText {
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let mut shown = String::new();
        loop {
            if self.inside {
                match self.pending.find(CLOSE) {
                    Some(end) => {
                        self.pending.drain(..end + CLOSE.len());
                        self.inside = false;
                    }
                    None => {
                        // Keep only what could still start the closing tag.
                        let keep = self.pending.len().saturating_sub(CLOSE.len() - 1);
                        let cut = (keep..=self.pending.len()).find(|i| self.pending.is_char_boundary(*i)).unwrap_or(self.pending.len());
                        self.pending.drain(..cut);
                        return shown;
                    }
                }
            } else {
                match self.pending.find(OPEN) {
                    Some(start) => {
                        shown.push_str(&self.pending[..start]);
                        self.pending.drain(..start + OPEN.len());
                        self.inside = true;
                    }
                    None => {
                        // Hold back the longest end that may be the start of the tag.
                        let held = (1..OPEN.len()).rev().find(|n| self.pending.ends_with(&OPEN[..*n])).unwrap_or(0);
                        let cut = self.pending.len() - held;
                        shown.push_str(&self.pending[..cut]);
                        self.pending.drain(..cut);
                        return shown;
                    }
                }
            }
        }
    }

    /// What is left once the stream ends (an unfinished tag that never completed).
    pub fn finish(&mut self) -> String {
        let rest = if self.inside { String::new() } else { std::mem::take(&mut self.pending) };
        self.pending.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prose_answer_is_words_and_never_a_written_call() {
        let prose = regex::Regex::new(&format!("^(?:{PROSE})$")).unwrap();
        for answer in ["The port is 8087.", "Yes: `x` and a < b, Vec<T>, {a}.", "7 files.", "\"Piranesi\" is next.\n\nIt is on line 2.", "Über-cool"] {
            assert!(prose.is_match(answer), "{answer:?}");
        }
        for call in ["```json\n{\"name\": \"read_file\"}\n```", ">{\"name\":\"list_files\"}", "{\"name\": 1}", " leading", "The call: {\"name\": \"x\"}", "See ```rust\nfn main() {}\n```"] {
            assert!(!prose.is_match(call), "{call:?}");
        }
    }
    use serde_json::json;

    const TWO_CALLS: &str = "Let me look.\n<tool_call>\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"flight\"}}\n</tool_call>\nand\n<tool_call>\n{\"name\": \"current_window\", \"arguments\": \"{}\"}\n</tool_call>\nDone.";

    #[test]
    fn every_block_is_read_in_order_and_the_text_around_them_is_kept() {
        let parsed = parse(TWO_CALLS);
        assert_eq!(parsed.text, "Let me look.\n\nand\n\nDone.");
        assert_eq!(
            parsed.calls,
            vec![
                Ok(ToolCall { name: "search_memory".into(), arguments: json!({"query": "flight"}) }),
                Ok(ToolCall { name: "current_window".into(), arguments: json!({}) }),
            ]
        );
        assert_eq!(parse("Just text, no call.").calls, vec![]);
    }

    #[test]
    fn a_block_that_cannot_be_read_is_an_error_for_the_model_not_a_silent_drop() {
        let parsed = parse("<tool_call>{'name': 'run'}</tool_call><tool_call>{\"arguments\": {}}</tool_call><tool_call>{\"name\": \"run\", \"arguments\": [1]}</tool_call><tool_call>{\"name\": \"remember\", \"arguments\": {\"text\": \"x\"}}");
        assert_eq!(parsed.text, "");
        let errors: Vec<&str> = parsed.calls.iter().filter_map(|c| c.as_ref().err().map(String::as_str)).collect();
        assert_eq!(errors.len(), 3, "{parsed:?}");
        assert!(errors[0].starts_with("tool call 1 could not be read: it is not valid JSON"), "{}", errors[0]);
        assert!(errors[1].contains("no \"name\""), "{}", errors[1]);
        assert!(errors[2].contains("arguments of run are not an object"), "{}", errors[2]);
        // An unterminated last block is still read when its JSON is whole.
        assert_eq!(parsed.calls[3], Ok(ToolCall { name: "remember".into(), arguments: json!({"text": "x"}) }));
        let cut = parse("<tool_call>{\"name\": \"run\", \"argu");
        assert!(cut.calls[0].as_ref().unwrap_err().contains("no closing </tool_call>"));
    }

    #[test]
    fn the_stream_shows_the_same_text_however_the_deltas_split_the_tags() {
        let want = "Let me look.\n\nand\n\nDone.";
        for split in 1..TWO_CALLS.len() {
            if !TWO_CALLS.is_char_boundary(split) {
                continue;
            }
            let mut visible = VisibleText::default();
            let mut shown = visible.push(&TWO_CALLS[..split]);
            shown.push_str(&visible.push(&TWO_CALLS[split..]));
            shown.push_str(&visible.finish());
            assert_eq!(shown, want, "split at {split}");
        }
        // Character by character, with a near-tag that never completes.
        let text = "a <tool b <tool_cal";
        let mut visible = VisibleText::default();
        let mut shown: String = text.chars().map(|c| visible.push(&c.to_string())).collect();
        shown.push_str(&visible.finish());
        assert_eq!(shown, text);
        let mut inside = VisibleText::default();
        assert_eq!(inside.push("ok <tool_call>{\"name\": \"é\""), "ok ");
        assert_eq!(inside.finish(), "");
    }

    #[test]
    fn an_answer_that_is_only_a_call_to_an_offered_tool_is_a_call() {
        let offered = |name: &str| name == "recent_activity";
        let call = bare_call(" {\"name\": \"recent_activity\", \"arguments\": {\"minutes\": 1}}\n", &offered).unwrap();
        assert_eq!((call.name.as_str(), call.arguments["minutes"].as_i64()), ("recent_activity", Some(1)));
        assert!(bare_call("```json\n{\"name\": \"recent_activity\", \"arguments\": {}}\n```", &offered).is_some());
        assert!(bare_call("{\"name\": \"run_command\", \"arguments\": {}}", &offered).is_none(), "not offered");
        assert!(bare_call("I will call {\"name\": \"recent_activity\", \"arguments\": {}}", &offered).is_none(), "text around it");
        assert!(bare_call("{\"name\": \"recent_activity\", \"arguments\": \"x\"}", &offered).is_none());
        assert!(bare_call("{\"name\": \"recent_activity\", \"arguments\": {}, \"then\": 1}", &offered).is_none());
    }
}
