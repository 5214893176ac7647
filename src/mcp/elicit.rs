//! Elicitation: a server asks the user for input during a call
//! (`elicitation/create`, form mode). The requested schema — an object of
//! primitive fields: text (with email, uri, date or date-time formats),
//! numbers, booleans, single and multiple choice — becomes a `Form` the chat
//! draws, and the user's inputs are checked against it here before anything
//! goes back (Accept), or nothing goes (Decline, Cancel). Pure: no egui, no
//! I/O; the `mcp` worker holds the pending requests.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// The user's answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The form's content, checked against the schema.
    Accept(Value),
    /// "No": the server may go on without it.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

/// What a field holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// `format`: email, uri, date or date-time.
    Text { format: Option<String>, min_length: Option<usize>, max_length: Option<usize> },
    Number { integer: bool, minimum: Option<f64>, maximum: Option<f64> },
    Boolean,
    /// One of (value, label).
    Choice(Vec<(String, String)>),
    /// Any of (value, label), between `min` and `max` of them.
    Choices { options: Vec<(String, String)>, min: Option<usize>, max: Option<usize> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    /// The title, or the name when there is none.
    pub title: String,
    pub description: String,
    pub required: bool,
    pub kind: Kind,
}

/// A field as the user is filling it in.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    Text(String),
    Bool(bool),
    Picked(BTreeSet<String>),
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Form {
    pub fields: Vec<Field>,
    /// Default values by field, as the schema gave them.
    defaults: BTreeMap<String, Value>,
}

fn options(schema: &Value) -> Option<Vec<(String, String)>> {
    // `enum` (with the legacy `enumNames`), or `oneOf`/`anyOf` of `{const, title}`.
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let value = v.as_str()?.to_owned();
                    let label = names.and_then(|n| n.get(i)).and_then(Value::as_str).unwrap_or(&value).to_owned();
                    Some((value, label))
                })
                .collect(),
        );
    }
    let list = schema.get("oneOf").or_else(|| schema.get("anyOf"))?.as_array()?;
    Some(
        list.iter()
            .filter_map(|o| {
                let value = o.get("const")?.as_str()?.to_owned();
                let label = o.get("title").and_then(Value::as_str).unwrap_or(&value).to_owned();
                Some((value, label))
            })
            .collect(),
    )
}

impl Form {
    /// The form for a requested schema; a schema cowork cannot draw is an
    /// error (the request is then declined, never half-answered).
    pub fn parse(schema: &Value) -> Result<Form, String> {
        if schema.get("type").and_then(Value::as_str).is_some_and(|t| t != "object") {
            return Err("the requested schema is not an object".into());
        }
        let required: BTreeSet<&str> = schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut form = Form::default();
        for (name, property) in &properties {
            let number = |key: &str| property.get(key).and_then(Value::as_f64);
            let size = |key: &str| property.get(key).and_then(Value::as_u64).map(|n| n as usize);
            let kind = match property.get("type").and_then(Value::as_str).unwrap_or("string") {
                "string" => match options(property) {
                    Some(list) if !list.is_empty() => Kind::Choice(list),
                    _ => Kind::Text { format: property.get("format").and_then(Value::as_str).map(str::to_owned), min_length: size("minLength"), max_length: size("maxLength") },
                },
                "number" => Kind::Number { integer: false, minimum: number("minimum"), maximum: number("maximum") },
                "integer" => Kind::Number { integer: true, minimum: number("minimum"), maximum: number("maximum") },
                "boolean" => Kind::Boolean,
                "array" => match property.get("items").and_then(options) {
                    Some(list) if !list.is_empty() => Kind::Choices { options: list, min: size("minItems"), max: size("maxItems") },
                    _ => return Err(format!("the field {name} is a list cowork cannot draw")),
                },
                other => return Err(format!("the field {name} has a type cowork cannot draw ({other})")),
            };
            if let Some(default) = property.get("default") {
                form.defaults.insert(name.clone(), default.clone());
            }
            form.fields.push(Field {
                name: name.clone(),
                title: property.get("title").and_then(Value::as_str).unwrap_or(name).to_owned(),
                description: property.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
                required: required.contains(name.as_str()),
                kind,
            });
        }
        Ok(form)
    }

    /// The inputs as the form opens: the schema's defaults, else empty.
    pub fn initial(&self) -> BTreeMap<String, Input> {
        self.fields
            .iter()
            .map(|field| {
                let default = self.defaults.get(&field.name);
                let input = match &field.kind {
                    Kind::Boolean => Input::Bool(default.and_then(Value::as_bool).unwrap_or(false)),
                    Kind::Choices { .. } => Input::Picked(default.and_then(Value::as_array).map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default()),
                    _ => Input::Text(match default {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    }),
                };
                (field.name.clone(), input)
            })
            .collect()
    }

    /// The content to send, or what is wrong, by field.
    pub fn answer(&self, inputs: &BTreeMap<String, Input>) -> Result<Value, Vec<(String, String)>> {
        let mut content = Map::new();
        let mut problems = Vec::new();
        for field in &self.fields {
            match check(field, inputs.get(&field.name)) {
                Ok(Some(value)) => {
                    content.insert(field.name.clone(), value);
                }
                Ok(None) => {}
                Err(why) => problems.push((field.name.clone(), why)),
            }
        }
        if problems.is_empty() { Ok(Value::Object(content)) } else { Err(problems) }
    }
}

/// One field's value (None: left empty and optional).
fn check(field: &Field, input: Option<&Input>) -> Result<Option<Value>, String> {
    let text = match input {
        Some(Input::Text(text)) => text.trim().to_owned(),
        Some(Input::Bool(on)) => return Ok(Some(Value::Bool(*on))),
        Some(Input::Picked(picked)) => {
            let Kind::Choices { min, max, .. } = &field.kind else { return Err("not a list".into()) };
            // An optional list left empty is left out (its minItems applies only when present).
            if picked.is_empty() && !field.required {
                return Ok(None);
            }
            if let Some(min) = min.filter(|m| picked.len() < *m) {
                return Err(format!("pick at least {min}"));
            }
            if let Some(max) = max.filter(|m| picked.len() > *m) {
                return Err(format!("pick at most {max}"));
            }
            if picked.is_empty() {
                return Err("pick at least one".into());
            }
            return Ok(Some(Value::Array(picked.iter().cloned().map(Value::String).collect())));
        }
        None => String::new(),
    };
    if text.is_empty() {
        return if field.required { Err("required".into()) } else { Ok(None) };
    }
    match &field.kind {
        Kind::Text { format, min_length, max_length } => {
            let chars = text.chars().count();
            if let Some(min) = min_length.filter(|m| chars < *m) {
                return Err(format!("at least {min} characters"));
            }
            if let Some(max) = max_length.filter(|m| chars > *m) {
                return Err(format!("at most {max} characters"));
            }
            let fits = match format.as_deref() {
                Some("email") => text.split_once('@').is_some_and(|(user, host)| !user.is_empty() && host.contains('.') && !text.contains(char::is_whitespace)),
                Some("uri") => text.split_once("://").is_some_and(|(scheme, rest)| !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) && !rest.is_empty()),
                Some("date") => is_date(&text),
                Some("date-time") => text.len() > 11 && is_date(&text[..10]) && matches!(text.as_bytes()[10], b'T' | b't' | b' '),
                _ => true,
            };
            if !fits {
                return Err(format!("not a valid {}", format.as_deref().unwrap_or("value")));
            }
            Ok(Some(Value::String(text)))
        }
        Kind::Number { integer, minimum, maximum } => {
            let number: f64 = text.parse().map_err(|_| "not a number".to_owned())?;
            if *integer && number.fract() != 0.0 {
                return Err("a whole number".into());
            }
            if let Some(min) = minimum.filter(|m| number < *m) {
                return Err(format!("at least {min}"));
            }
            if let Some(max) = maximum.filter(|m| number > *m) {
                return Err(format!("at most {max}"));
            }
            Ok(Some(if *integer { Value::from(number as i64) } else { Value::from(number) }))
        }
        Kind::Choice(options) => {
            if options.iter().any(|(value, _)| *value == text) { Ok(Some(Value::String(text))) } else { Err("not one of the choices".into()) }
        }
        Kind::Boolean | Kind::Choices { .. } => Err("not a text field".into()),
    }
}

/// YYYY-MM-DD with a real month and day.
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let [year, month, day] = parts.as_slice() else { return false };
    let number = |s: &str, len: usize| (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u32>().ok()).flatten();
    matches!((number(year, 4), number(month, 2), number(day, 2)), (Some(_), Some(1..=12), Some(1..=31)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The schema server-everything's `trigger-elicitation-request` sends (abridged).
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"title": "String", "type": "string", "description": "Your full, legal name"},
                "check": {"title": "Boolean", "type": "boolean"},
                "firstLine": {"type": "string", "default": "It was a dark and stormy night."},
                "email": {"type": "string", "format": "email"},
                "birthdate": {"type": "string", "format": "date"},
                "integer": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
                "untitledSingleSelectEnum": {"type": "string", "enum": ["Option 1", "Option 2"]},
                "titledSingleSelectEnum": {"type": "string", "oneOf": [{"const": "value1", "title": "First"}, {"const": "value2", "title": "Second"}]},
                "untitledMultipleSelectEnum": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}}
            },
            "required": ["name"]
        })
    }

    #[test]
    fn a_schema_becomes_fields_with_titles_defaults_and_choices() {
        let form = Form::parse(&schema()).unwrap();
        assert_eq!(form.fields.len(), 9);
        let field = |name: &str| form.fields.iter().find(|f| f.name == name).unwrap();
        assert!(field("name").required && !field("email").required);
        assert_eq!(field("name").title, "String");
        assert_eq!(field("titledSingleSelectEnum").kind, Kind::Choice(vec![("value1".into(), "First".into()), ("value2".into(), "Second".into())]));
        let initial = form.initial();
        assert_eq!(initial["firstLine"], Input::Text("It was a dark and stormy night.".into()));
        assert_eq!(initial["integer"], Input::Text("42".into()));
        assert_eq!(initial["check"], Input::Bool(false));
        assert!(Form::parse(&json!({"type": "object", "properties": {"x": {"type": "object"}}})).unwrap_err().contains("cannot draw"));
    }

    #[test]
    fn inputs_are_checked_before_anything_is_sent() {
        let form = Form::parse(&schema()).unwrap();
        let mut inputs = form.initial();
        // Empty required name, a bad email, a date that is no date, an integer out of range.
        inputs.insert("email".into(), Input::Text("not-an-email".into()));
        inputs.insert("birthdate".into(), Input::Text("2026-13-01".into()));
        inputs.insert("integer".into(), Input::Text("101".into()));
        inputs.insert("untitledSingleSelectEnum".into(), Input::Text("Option 9".into()));
        let problems: BTreeMap<String, String> = form.answer(&inputs).unwrap_err().into_iter().collect();
        assert_eq!(problems.keys().map(String::as_str).collect::<Vec<_>>(), ["birthdate", "email", "integer", "name", "untitledSingleSelectEnum"]);
        assert_eq!(problems["name"], "required");
        inputs.insert("name".into(), Input::Text(" Ada Lovelace ".into()));
        inputs.insert("email".into(), Input::Text("ada@example.org".into()));
        inputs.insert("birthdate".into(), Input::Text("1815-12-10".into()));
        inputs.insert("integer".into(), Input::Text("7".into()));
        inputs.insert("untitledSingleSelectEnum".into(), Input::Text("Option 2".into()));
        inputs.insert("untitledMultipleSelectEnum".into(), Input::Picked(["a".to_owned(), "b".to_owned(), "c".to_owned()].into()));
        assert_eq!(form.answer(&inputs).unwrap_err(), vec![("untitledMultipleSelectEnum".to_owned(), "pick at most 2".to_owned())]);
        inputs.insert("untitledMultipleSelectEnum".into(), Input::Picked(["a".to_owned(), "c".to_owned()].into()));
        let content = form.answer(&inputs).unwrap();
        assert_eq!(
            content,
            json!({"name": "Ada Lovelace", "check": false, "firstLine": "It was a dark and stormy night.", "email": "ada@example.org",
                   "birthdate": "1815-12-10", "integer": 7, "untitledSingleSelectEnum": "Option 2", "untitledMultipleSelectEnum": ["a", "c"]})
        );
    }
}
