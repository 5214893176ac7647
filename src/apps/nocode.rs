//! Apps without code: the manifest binds read-lane queries to a view
//! template, and the host fills it in. No component runs; the same lane (and
//! so the same privacy rules) answers the queries. Pure over a `Lane`.
//!
//! A template is the JSON view with `"${name.shape}"` where a query's result
//! goes: a string that is exactly one reference takes the value (a list, a
//! number), and a reference inside other text is replaced by its text.
//! Shapes per query kind:
//! - `time_per_app`: `bars` (for a bar chart), `items` (a list), `rows` (a table), `total` (text)
//! - `recent_activity`: `items`, `rows`, `spans` (a timeline), `count`
//! - `search`: `items`, `rows`, `count`
//! - `active_window`: `text`, `items`

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::runtime::Lane;
use crate::ids::{format_clock, format_duration_millis};

/// A read-lane query an app without code binds to its view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// The name the view template refers to as `${name}`.
    pub name: String,
    /// `time_per_app`, `recent_activity`, `search` or `active_window`.
    pub kind: String,
    /// `today`, `yesterday`, or `<n>h` / `<n>d` back from now (default: today).
    #[serde(default)]
    pub since: Option<String>,
    /// For `search`.
    #[serde(default)]
    pub text: Option<String>,
    /// Only this app's activity.
    #[serde(default)]
    pub app: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

const KINDS: [(&str, &[&str]); 4] = [
    ("time_per_app", &["bars", "items", "rows", "total"]),
    ("recent_activity", &["items", "rows", "spans", "count"]),
    ("search", &["items", "rows", "count"]),
    ("active_window", &["text", "items"]),
];

/// Checks an app without code: known kinds, ranges, and a template whose every reference resolves.
pub fn check(queries: &[Query], template: &str) -> Result<(), String> {
    let view: Value = serde_json::from_str(template).map_err(|err| format!("view is not JSON: {err}"))?;
    if queries.is_empty() {
        return Err("an app without code needs at least one [[query]]".into());
    }
    for query in queries {
        let Some((_, _)) = KINDS.iter().find(|(kind, _)| *kind == query.kind) else {
            return Err(format!("query {:?} has kind {:?}; the kinds are {}", query.name, query.kind, KINDS.map(|k| k.0).join(", ")));
        };
        if query.kind == "search" && query.text.as_deref().is_none_or(|t| t.trim().is_empty()) {
            return Err(format!("query {:?} searches for nothing: give it text", query.name));
        }
        if let Some(since) = &query.since {
            range(since, 0, 0).ok_or_else(|| format!("query {:?} has since = {since:?}; use today, yesterday, or a number of hours or days like 12h or 7d", query.name))?;
        }
    }
    let mut problems = Vec::new();
    walk_strings(&view, &mut |text| {
        for reference in references(text) {
            let (name, shape) = reference.split_once('.').unwrap_or((reference, ""));
            match queries.iter().find(|q| q.name == name) {
                None => problems.push(format!("the view refers to ${{{reference}}}, but no query is named {name:?}")),
                Some(query) => {
                    let shapes = KINDS.iter().find(|(kind, _)| *kind == query.kind).map(|k| k.1).unwrap_or_default();
                    if !shapes.contains(&shape) {
                        problems.push(format!("${{{reference}}}: a {} query gives {}", query.kind, shapes.iter().map(|s| format!("{name}.{s}")).collect::<Vec<_>>().join(", ")));
                    }
                }
            }
        }
    });
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

/// `[since, until)` for a query's `since`.
fn range(since: &str, now: i64, day_start: i64) -> Option<(i64, i64)> {
    const HOUR: i64 = 3_600_000;
    Some(match since.trim() {
        "today" => (day_start, now),
        "yesterday" => (day_start - 24 * HOUR, day_start),
        other => {
            let (number, unit) = other.split_at(other.len().checked_sub(1)?);
            let n: i64 = number.parse().ok().filter(|n| *n > 0 && *n <= 24 * 366)?;
            match unit {
                "h" => (now - n * HOUR, now),
                "d" => (now - n * 24 * HOUR, now),
                _ => return None,
            }
        }
    })
}

fn references(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else { break };
        found.push(&rest[start + 2..start + end]);
        rest = &rest[start + end + 1..];
    }
    found
}

fn walk_strings(value: &Value, visit: &mut impl FnMut(&str)) {
    match value {
        Value::String(text) => visit(text),
        Value::Array(items) => items.iter().for_each(|v| walk_strings(v, visit)),
        Value::Object(map) => map.values().for_each(|v| walk_strings(v, visit)),
        _ => {}
    }
}

/// The view: every query asked once, the template filled in.
pub fn render(queries: &[Query], template: &str, lane: &dyn Lane) -> Result<String, String> {
    let template: Value = serde_json::from_str(template).map_err(|err| format!("view is not JSON: {err}"))?;
    let results: Vec<(String, Value)> = queries.iter().map(|q| (q.name.clone(), answer(q, lane))).collect();
    let filled = fill(template, &results);
    serde_json::to_string(&filled).map_err(|err| err.to_string())
}

fn lookup<'a>(results: &'a [(String, Value)], reference: &str) -> Option<&'a Value> {
    let (name, shape) = reference.split_once('.')?;
    results.iter().find(|(n, _)| n == name).and_then(|(_, value)| value.get(shape))
}

fn fill(value: Value, results: &[(String, Value)]) -> Value {
    match value {
        Value::String(text) => {
            let refs = references(&text);
            if refs.len() == 1 && text.trim() == format!("${{{}}}", refs[0]) {
                return lookup(results, refs[0]).cloned().unwrap_or(Value::Null);
            }
            let mut out = text.clone();
            for reference in refs {
                let replacement = match lookup(results, reference) {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                out = out.replace(&format!("${{{reference}}}"), &replacement);
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| fill(v, results)).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, fill(v, results))).collect()),
        other => other,
    }
}

/// One query's result in every shape its kind has.
fn answer(query: &Query, lane: &dyn Lane) -> Value {
    let (now, day_start) = (lane.now(), lane.day_start());
    let (since, until) = range(query.since.as_deref().unwrap_or("today"), now, day_start).unwrap_or((day_start, now));
    match query.kind.as_str() {
        "time_per_app" => {
            let limit = query.limit.unwrap_or(8).clamp(1, 50) as usize;
            let per_app = time_per_app(lane, since, until, query.app.as_deref());
            let total: i64 = per_app.iter().map(|(_, ms)| ms).sum();
            let top = &per_app[..per_app.len().min(limit)];
            json!({
                "bars": top.iter().map(|(app, ms)| json!({"label": app, "value": (*ms as f64 / 60_000.0 * 10.0).round() / 10.0})).collect::<Vec<_>>(),
                "items": top.iter().map(|(app, ms)| json!({"title": app, "accessory": format_duration_millis(*ms)})).collect::<Vec<_>>(),
                "rows": top.iter().map(|(app, ms)| json!([app, format_duration_millis(*ms)])).collect::<Vec<_>>(),
                "total": format_duration_millis(total),
            })
        }
        "recent_activity" => {
            let limit = query.limit.unwrap_or(50).clamp(1, 1000);
            let mut sessions = lane.recent_activity(since, until, query.app.as_deref(), limit);
            sessions.reverse();
            json!({
                "items": sessions.iter().map(|s| json!({"title": s.title, "subtitle": s.app, "accessory": format_clock(s.start_ms)})).collect::<Vec<_>>(),
                "rows": sessions.iter().map(|s| json!([format_clock(s.start_ms), s.app, s.title])).collect::<Vec<_>>(),
                "spans": sessions.iter().map(|s| json!({"label": s.app, "start_ms": s.start_ms, "end_ms": s.end_ms})).collect::<Vec<_>>(),
                "count": sessions.len(),
            })
        }
        "search" => {
            let filters = super::runtime::data::Filters { app: query.app.clone(), since_ms: query.since.as_ref().map(|_| since), until_ms: None, kind: None };
            let hits = lane.search(query.text.as_deref().unwrap_or_default(), &filters, query.limit.unwrap_or(10).clamp(1, 100));
            json!({
                "items": hits.iter().map(|h| json!({"title": h.title, "subtitle": h.snippet, "accessory": h.source})).collect::<Vec<_>>(),
                "rows": hits.iter().map(|h| json!([format_clock(h.at_ms), h.source, h.title])).collect::<Vec<_>>(),
                "count": hits.len(),
            })
        }
        _ => match lane.active_window() {
            Some(w) => json!({"text": format!("{} — {}", w.app, w.title), "items": [{"title": w.title, "subtitle": w.app}]}),
            None => json!({"text": "No window in focus", "items": []}),
        },
    }
}

/// Milliseconds per app in `[since, until)`, most first.
pub fn time_per_app(lane: &dyn Lane, since: i64, until: i64, app: Option<&str>) -> Vec<(String, i64)> {
    let mut totals: std::collections::BTreeMap<String, i64> = Default::default();
    for session in lane.recent_activity(since, until, app, 1000) {
        let spent = session.end_ms.min(until) - session.start_ms.max(since);
        if spent > 0 {
            *totals.entry(session.app).or_default() += spent;
        }
    }
    let mut list: Vec<(String, i64)> = totals.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::runtime::{context, data};

    struct Day;

    impl Lane for Day {
        fn active_window(&self) -> Option<context::Window> {
            None
        }
        fn recent_activity(&self, since_ms: i64, until_ms: i64, app: Option<&str>, _limit: u32) -> Vec<context::Activity> {
            let all = [("Firefox", 0, 30), ("Code", 30, 130), ("Firefox", 130, 145)];
            all.iter()
                .map(|(a, s, e)| context::Activity { app: (*a).into(), title: format!("{a} window"), start_ms: s * 60_000, end_ms: e * 60_000 })
                .filter(|s| s.end_ms > since_ms && s.start_ms < until_ms && app.is_none_or(|a| a == s.app))
                .collect()
        }
        fn now(&self) -> i64 {
            150 * 60_000
        }
        fn day_start(&self) -> i64 {
            0
        }
        fn profile(&self) -> String {
            String::new()
        }
        fn preferences(&self) -> Vec<(String, String)> {
            Vec::new()
        }
        fn search(&self, _query: &str, _filters: &data::Filters, _limit: u32) -> Vec<data::Hit> {
            Vec::new()
        }
        fn conversations(&self, _app_id: &str) -> Vec<data::Conversation> {
            Vec::new()
        }
        fn storage_get(&self, _app_id: &str, _key: &str) -> Option<String> {
            None
        }
        fn storage_set(&self, _app_id: &str, _key: &str, _value: &str) {}
        fn complete(&self, _app_id: &str, _prompt: &str) -> Result<String, String> {
            Err("none".into())
        }
        fn fetch(&self, _url: &str) -> Result<String, String> {
            Err("none".into())
        }
    }

    fn apps(since: &str) -> Vec<Query> {
        vec![Query { name: "apps".into(), kind: "time_per_app".into(), since: Some(since.into()), text: None, app: None, limit: None }]
    }

    #[test]
    fn a_template_is_filled_with_typed_values_and_text() {
        let template = r#"[{"type":"stat","label":"Today","value":"${apps.total} in all"},{"type":"chart","kind":"bar","bars":"${apps.bars}"}]"#;
        check(&apps("today"), template).unwrap();
        let view: Value = serde_json::from_str(&render(&apps("today"), template, &Day).unwrap()).unwrap();
        assert_eq!(view[0]["value"], "2h 25m in all");
        assert_eq!(view[1]["bars"], json!([{"label": "Code", "value": 100.0}, {"label": "Firefox", "value": 45.0}]));
    }

    #[test]
    fn a_reference_to_nothing_or_a_wrong_shape_is_refused_with_what_exists() {
        let template = r#"{"type":"list","items":"${apps.spans}"}"#;
        let err = check(&apps("today"), template).unwrap_err();
        assert!(err.contains("apps.bars, apps.items, apps.rows, apps.total"), "{err}");
        let err = check(&apps("today"), &template.replace("apps.spans", "other.items")).unwrap_err();
        assert!(err.contains("no query is named \"other\""), "{err}");
        let err = check(&apps("last week"), &template.replace("apps.spans", "apps.items")).unwrap_err();
        assert!(err.contains("12h or 7d"), "{err}");
    }
}
