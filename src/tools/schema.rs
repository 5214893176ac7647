//! Checks a call's arguments against its tool's JSON schema, with errors
//! written for the model that made the call (it gets them back and tries
//! again). Tool schemas stay short for the local model, so this covers the
//! subset they use: `type` (object, string, integer, number, boolean, array),
//! `properties`, `required`, `additionalProperties: false`, `enum`, `items`,
//! `minimum` / `maximum`, `minLength` / `maxLength`, `maxItems`. Anything else in a schema
//! is refused when the tool is registered (`check_schema`), not ignored.

use serde_json::Value;

const KEYWORDS: [&str; 13] = [
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "items",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "maxItems",
    "default",
];

/// Refuses a schema that uses keywords `validate` does not check.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else { return Err("a schema must be a JSON object".into()) };
    if let Some(key) = object.keys().find(|k| !KEYWORDS.contains(&k.as_str())) {
        return Err(format!("the schema keyword {key:?} is not supported"));
    }
    if let Some(properties) = object.get("properties") {
        let Some(properties) = properties.as_object() else { return Err("\"properties\" must be an object".into()) };
        for (name, property) in properties {
            check_schema(property).map_err(|err| format!("{name}: {err}"))?;
        }
    }
    if let Some(items) = object.get("items") {
        check_schema(items).map_err(|err| format!("items: {err}"))?;
    }
    Ok(())
}

/// Every way `value` breaks `schema`, as sentences naming the argument
/// (`limit must be an integer, got "five"`); empty when it fits.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, value, "arguments", &mut errors);
    errors
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn check(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let want = schema.get("type").and_then(Value::as_str);
    let fits = match (want, value) {
        (None, _) => true,
        (Some("object"), Value::Object(_)) | (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) | (Some("array"), Value::Array(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        (Some("number"), Value::Number(_)) => true,
        _ => false,
    };
    if !fits {
        let article = if want.is_some_and(|w| w.starts_with(['a', 'e', 'i', 'o', 'u'])) { "an" } else { "a" };
        errors.push(format!("{at} must be {article} {}, got {} {}", want.unwrap_or("?"), type_name(value), short(value)));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(|v| v.to_string()).collect();
        errors.push(format!("{at} must be one of {}, got {}", list.join(", "), short(value)));
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    errors.push(format!("{at} is missing the required argument {name:?}"));
                }
            }
            for (name, item) in object {
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => check(property, item, name, errors),
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        let known: Vec<&str> = properties.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        errors.push(format!("{at} has an unknown argument {name:?} (known: {})", known.join(", ")));
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64).filter(|max| items.len() as u64 > *max) {
                errors.push(format!("{at} may hold at most {max} items, got {}", items.len()));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{at}[{i}]"), errors);
                }
            }
        }
        Value::String(text) => {
            let chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64).filter(|min| chars < *min) {
                errors.push(if min == 1 { format!("{at} must not be empty") } else { format!("{at} must be at least {min} characters long") });
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64).filter(|max| chars > *max) {
                errors.push(format!("{at} must be at most {max} characters long, got {chars}"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64).filter(|min| x < *min) {
                errors.push(format!("{at} must be at least {min}, got {n}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64).filter(|max| x > *max) {
                errors.push(format!("{at} must be at most {max}, got {n}"));
            }
        }
        _ => {}
    }
}

/// JSON with object keys sorted at every depth: the same value gives the same
/// text whatever order its keys came in (repeated calls, tool fingerprints).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn search_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 200},
                "stream": {"type": "string", "enum": ["window", "typing", "clipboard"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                "apps": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    /// Errors come in the order of the arguments as the model wrote them.
    #[test]
    fn arguments_that_fit_pass_and_each_break_is_named_for_the_model() {
        let schema = search_schema();
        check_schema(&schema).unwrap();
        assert!(validate(&schema, &json!({"query": "invoice", "limit": 5, "apps": ["code"]})).is_empty());
        assert!(validate(&schema, &json!({"query": "invoice", "limit": 5.0})).is_empty(), "a whole float is an integer");
        let errors = validate(&schema, &json!({"limit": "five", "stream": "email", "apps": ["code", 3], "colour": "red"}));
        assert_eq!(
            errors,
            vec![
                "arguments is missing the required argument \"query\"",
                "limit must be an integer, got a string \"five\"",
                "stream must be one of \"window\", \"typing\", \"clipboard\", got \"email\"",
                "apps[1] must be a string, got an integer 3",
                "arguments has an unknown argument \"colour\" (known: query, stream, limit, apps)",
            ]
        );
        assert_eq!(validate(&schema, &json!({"query": "", "limit": 50})), vec!["query must not be empty", "limit must be at most 20, got 50"]);
        assert_eq!(validate(&schema, &json!("invoice")), vec!["arguments must be an object, got a string \"invoice\""]);
    }

    #[test]
    fn a_schema_with_keywords_the_validator_does_not_check_is_refused() {
        assert!(check_schema(&json!({"type": "object", "properties": {"q": {"type": "string", "pattern": "^a"}}})).unwrap_err().contains("pattern"));
        assert!(check_schema(&json!({"oneOf": []})).is_err());
        assert!(check_schema(&json!([])).is_err());
    }
}
