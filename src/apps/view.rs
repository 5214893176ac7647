//! The declarative view an app returns (JSON, see `assets/sdk/GUIDE.md`),
//! parsed into a tree egui draws (`ui::app_view`). Pure and forgiving in the
//! way Adaptive Cards are: a node of a type this cowork does not know, or one
//! that does not parse, shows its `fallback` text (or says what it was); a
//! view larger than `NODE_LIMIT` nodes is cut with a notice; long strings are
//! cut. Nothing an app returns can make the host do more than draw.

use serde_json::{Map, Value, json};

/// Nodes drawn per view at most (list items and table rows count as nodes).
pub const NODE_LIMIT: usize = 200;
/// Characters of one string drawn at most.
const TEXT_LIMIT: usize = 20_000;
/// Points one chart draws at most.
const POINT_LIMIT: usize = 2_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextStyle {
    Heading,
    Body,
    Muted,
}

/// What a button does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Goes to the app's `handle` as `{"type":"action","id":…,"data":…}`.
    App { title: String, id: String, data: Value },
    /// Opens a chat with this text; the user sends it.
    Chat { title: String, text: String },
    /// Copies the text, after asking.
    Copy { title: String, text: String },
    /// Opens the URL in the browser, after asking.
    OpenUrl { title: String, url: String },
}

impl Action {
    pub fn title(&self) -> &str {
        match self {
            Action::App { title, .. } | Action::Chat { title, .. } | Action::Copy { title, .. } | Action::OpenUrl { title, .. } => title,
        }
    }

    /// What `handle` receives for an app action.
    pub fn message(id: &str, data: &Value) -> String {
        json!({"type": "action", "id": id, "data": data}).to_string()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub title: String,
    pub subtitle: String,
    pub accessory: String,
    pub actions: Vec<Action>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Text,
    Multiline,
    Number,
    Checkbox,
    Select,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub id: String,
    pub label: String,
    pub kind: FieldKind,
    pub value: Value,
    pub options: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Bar { bars: Vec<(String, f64)>, unit: String },
    Line { series: Vec<(String, Vec<[f64; 2]>)> },
    /// Spans in Unix milliseconds.
    Timeline { spans: Vec<(String, i64, i64)> },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Text { text: String, style: TextStyle },
    List { items: Vec<Item>, empty: String },
    Detail { markdown: String, metadata: Vec<(String, String)> },
    Form { id: String, fields: Vec<Field>, submit: String },
    Stat { label: String, value: String, note: String },
    Table { columns: Vec<String>, rows: Vec<Vec<String>> },
    Chart { title: String, chart: Chart },
    Actions(Vec<Action>),
    /// A node this cowork cannot draw: its fallback text.
    Fallback(String),
}

/// A parsed view.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    pub nodes: Vec<Node>,
    /// Nodes left out past the limit.
    pub cut: usize,
}

impl View {
    /// Parses an app's answer; what is not a view at all is one fallback node saying so.
    pub fn parse(json: &str) -> View {
        let value: Value = match serde_json::from_str(json) {
            Ok(value) => value,
            Err(err) => return View { nodes: vec![Node::Fallback(format!("The app's view is not JSON ({err})"))], cut: 0 },
        };
        let mut budget = Budget { left: NODE_LIMIT, cut: 0 };
        let list = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        let mut nodes = Vec::new();
        for value in &list {
            if let Some(node) = budget.node(value) {
                nodes.push(node);
            }
        }
        View { nodes, cut: budget.cut }
    }

    /// How many nodes it draws (items and rows included).
    pub fn size(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match n {
                Node::List { items, .. } => 1 + items.len(),
                Node::Table { rows, .. } => 1 + rows.len(),
                _ => 1,
            })
            .sum()
    }
}

struct Budget {
    left: usize,
    cut: usize,
}

fn text(value: Option<&Value>) -> String {
    let s = match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    cut(s)
}

fn cut(mut s: String) -> String {
    if s.len() > TEXT_LIMIT {
        let mut end = TEXT_LIMIT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn array<'a>(map: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    map.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64().filter(|n| n.is_finite())
}

fn actions(values: &[Value]) -> Vec<Action> {
    values.iter().take(20).filter_map(action).collect()
}

fn action(value: &Value) -> Option<Action> {
    let map = value.as_object()?;
    let title = text(map.get("title"));
    if title.is_empty() {
        return None;
    }
    Some(match map.get("host").and_then(Value::as_str) {
        Some("chat") => Action::Chat { title, text: text(map.get("text")) },
        Some("copy") => Action::Copy { title, text: text(map.get("text")) },
        Some("open_url") => {
            let url = text(map.get("url"));
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return None;
            }
            Action::OpenUrl { title, url }
        }
        Some(_) => return None,
        None => Action::App { title, id: text(map.get("id")), data: map.get("data").cloned().unwrap_or(Value::Null) },
    })
}

impl Budget {
    /// Takes `n` from the budget; false (and counted as cut) when it is spent.
    fn take(&mut self, n: usize) -> bool {
        if self.left >= n {
            self.left -= n;
            true
        } else {
            self.cut += n;
            false
        }
    }

    fn node(&mut self, value: &Value) -> Option<Node> {
        if !self.take(1) {
            return None;
        }
        let Some(map) = value.as_object() else {
            return Some(Node::Fallback(text(Some(value))));
        };
        let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
        let fallback = || {
            let own = text(map.get("fallback"));
            Node::Fallback(if own.is_empty() { format!("(this cowork cannot show a \"{kind}\")") } else { own })
        };
        Some(match kind {
            "text" => Node::Text {
                text: text(map.get("text")),
                style: match map.get("style").and_then(Value::as_str) {
                    Some("heading") => TextStyle::Heading,
                    Some("muted") => TextStyle::Muted,
                    _ => TextStyle::Body,
                },
            },
            "list" => {
                let mut items = Vec::new();
                for item in array(map, "items") {
                    if !self.take(1) {
                        continue;
                    }
                    let Some(item) = item.as_object() else { continue };
                    items.push(Item { title: text(item.get("title")), subtitle: text(item.get("subtitle")), accessory: text(item.get("accessory")), actions: actions(array(item, "actions")) });
                }
                Node::List { items, empty: text(map.get("empty")) }
            }
            "detail" => Node::Detail {
                markdown: text(map.get("markdown")),
                metadata: array(map, "metadata").iter().take(50).filter_map(|m| Some((text(m.get("label")), text(m.get("value")))).filter(|(l, _)| !l.is_empty())).collect(),
            },
            "form" => {
                let fields = array(map, "fields")
                    .iter()
                    .take(50)
                    .filter_map(|f| {
                        let kind = match f.get("kind").and_then(Value::as_str).unwrap_or("text") {
                            "text" => FieldKind::Text,
                            "multiline" => FieldKind::Multiline,
                            "number" => FieldKind::Number,
                            "checkbox" => FieldKind::Checkbox,
                            "select" => FieldKind::Select,
                            _ => return None,
                        };
                        let id = text(f.get("id"));
                        (!id.is_empty()).then(|| Field {
                            label: Some(text(f.get("label"))).filter(|l| !l.is_empty()).unwrap_or_else(|| id.clone()),
                            id,
                            kind,
                            value: f.get("value").cloned().unwrap_or(Value::Null),
                            options: f.get("options").and_then(Value::as_array).map(|o| o.iter().take(100).map(|v| text(Some(v))).collect()).unwrap_or_default(),
                        })
                    })
                    .collect();
                Node::Form { id: text(map.get("id")), fields, submit: Some(text(map.get("submit"))).filter(|s| !s.is_empty()).unwrap_or_else(|| "Submit".into()) }
            }
            "stat" => Node::Stat { label: text(map.get("label")), value: text(map.get("value")), note: text(map.get("note")) },
            "table" => {
                let columns: Vec<String> = array(map, "columns").iter().take(20).map(|c| text(Some(c))).collect();
                let mut rows = Vec::new();
                for row in array(map, "rows") {
                    if !self.take(1) {
                        continue;
                    }
                    rows.push(row.as_array().map(|cells| cells.iter().take(columns.len().max(1)).map(|c| text(Some(c))).collect()).unwrap_or_default());
                }
                Node::Table { columns, rows }
            }
            "chart" => {
                let chart = match map.get("kind").and_then(Value::as_str) {
                    Some("bar") => Chart::Bar {
                        bars: array(map, "bars").iter().take(POINT_LIMIT).filter_map(|b| Some((text(b.get("label")), number(b.get("value")?)?))).collect(),
                        unit: text(map.get("unit")),
                    },
                    Some("line") => Chart::Line {
                        series: array(map, "series")
                            .iter()
                            .take(10)
                            .map(|s| {
                                let points = s.get("points").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                                let points = points.iter().take(POINT_LIMIT).filter_map(|p| Some([number(p.get(0)?)?, number(p.get(1)?)?])).collect();
                                (text(s.get("name")), points)
                            })
                            .collect(),
                    },
                    Some("timeline") => Chart::Timeline {
                        spans: array(map, "spans")
                            .iter()
                            .take(POINT_LIMIT)
                            .filter_map(|s| Some((text(s.get("label")), s.get("start_ms")?.as_i64()?, s.get("end_ms")?.as_i64()?)).filter(|(_, a, b)| b >= a))
                            .collect(),
                    },
                    _ => return Some(fallback()),
                };
                Node::Chart { title: text(map.get("title")), chart }
            }
            "actions" => Node::Actions(actions(array(map, "actions"))),
            _ => fallback(),
        })
    }
}

/// What a form's submit sends to `handle`.
pub fn submit_message(form: &str, values: Map<String, Value>) -> String {
    json!({"type": "submit", "form": form, "values": values}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_type_parses_and_an_unknown_one_shows_its_fallback() {
        let view = View::parse(
            r#"[
            {"type":"text","text":"Today","style":"heading"},
            {"type":"list","items":[{"title":"Code","subtitle":"main.rs","accessory":"2h","actions":[{"title":"Ask","host":"chat","text":"What did I do in Code?"},{"title":"Open","id":"open","data":{"n":1}}]}],"empty":"none"},
            {"type":"detail","markdown":"**Hi**","metadata":[{"label":"App","value":"Code"}]},
            {"type":"form","id":"f","fields":[{"id":"q","label":"Query","kind":"text","value":"x"},{"id":"bad","kind":"wormhole"}],"submit":"Go"},
            {"type":"stat","label":"Focused","value":"3 h"},
            {"type":"table","columns":["a","b"],"rows":[["1","2","3"]]},
            {"type":"chart","kind":"bar","bars":[{"label":"Code","value":120},{"label":"NaN","value":"x"}],"unit":"min"},
            {"type":"chart","kind":"timeline","spans":[{"label":"Code","start_ms":1,"end_ms":5}]},
            {"type":"actions","actions":[{"title":"Site","host":"open_url","url":"javascript:alert(1)"},{"title":"Copy","host":"copy","text":"t"}]},
            {"type":"hologram","fallback":"A 3-D chart of your day"},
            {"type":"carousel"}
        ]"#,
        );
        assert_eq!(view.cut, 0);
        assert_eq!(view.nodes.len(), 11);
        assert_eq!(view.nodes[0], Node::Text { text: "Today".into(), style: TextStyle::Heading });
        let Node::List { items, .. } = &view.nodes[1] else { panic!() };
        assert_eq!(items[0].actions[0], Action::Chat { title: "Ask".into(), text: "What did I do in Code?".into() });
        assert_eq!(items[0].actions[1], Action::App { title: "Open".into(), id: "open".into(), data: json!({"n": 1}) });
        let Node::Form { fields, submit, .. } = &view.nodes[3] else { panic!() };
        assert_eq!((fields.len(), submit.as_str()), (1, "Go"), "a field of an unknown kind is left out");
        let Node::Table { rows, .. } = &view.nodes[5] else { panic!() };
        assert_eq!(rows[0], ["1", "2"], "cells beyond the columns are cut");
        assert_eq!(view.nodes[6], Node::Chart { title: String::new(), chart: Chart::Bar { bars: vec![("Code".into(), 120.0)], unit: "min".into() } });
        assert_eq!(view.nodes[8], Node::Actions(vec![Action::Copy { title: "Copy".into(), text: "t".into() }]), "only http(s) URLs open");
        assert_eq!(view.nodes[9], Node::Fallback("A 3-D chart of your day".into()));
        assert_eq!(view.nodes[10], Node::Fallback("(this cowork cannot show a \"carousel\")".into()));
    }

    #[test]
    fn a_view_past_the_node_limit_is_cut_and_says_how_much() {
        let items: Vec<Value> = (0..500).map(|i| json!({"title": format!("item {i}")})).collect();
        let view = View::parse(&json!([{"type": "list", "items": items}, {"type": "text", "text": "after"}]).to_string());
        assert_eq!(view.size(), NODE_LIMIT);
        assert_eq!(view.cut, 500 - (NODE_LIMIT - 1) + 1);
        assert_eq!(View::parse("not json").nodes.len(), 1);
        assert_eq!(View::parse(r#"{"type":"text","text":"one node, not a list"}"#).nodes.len(), 1);
    }
}
