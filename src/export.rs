//! Moving history out: JSON Lines (every session and chat message), and
//! ActivityWatch-compatible bucket JSON (window, AFK and web events) so a user
//! can take their history to ActivityWatch. Reads through any connection (times
//! as RFC 3339, and `--since`/`--until` parsed, by `ids`).
//!
//! ActivityWatch buckets carry cowork's own ids (`cowork-window_<host>`,
//! `cowork-afk_<host>`, `cowork-web_<host>`, client `cowork`) with the types
//! ActivityWatch's views select on, so importing into a server that already has
//! its watchers' buckets cannot collide.
//!
//! Invariant: an export of a sub-range is the whole export clipped to it: every
//! event is clipped, and AFK is derived from sessions only before the recorded
//! AFK stream's first event, whatever the range.

use std::io::Write;

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::ids::rfc3339;
use crate::records::SessionEnd;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    JsonLines,
    ActivityWatch,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "jsonl" => Ok(Format::JsonLines),
            "activitywatch" => Ok(Format::ActivityWatch),
            other => Err(format!("unknown export format {other:?}: use jsonl or activitywatch")),
        }
    }
}

/// Writes `[since, until)` in `format`; returns how many records were written.
pub fn export(conn: &Connection, format: Format, since_millis: i64, until_millis: i64, out: &mut dyn Write) -> anyhow::Result<usize> {
    match format {
        Format::JsonLines => write_jsonl(conn, since_millis, until_millis, out),
        Format::ActivityWatch => write_activitywatch(conn, since_millis, until_millis, &hostname(), out),
    }
}

pub fn write_jsonl(conn: &Connection, since_millis: i64, until_millis: i64, out: &mut dyn Write) -> anyhow::Result<usize> {
    let mut count = 0;
    for s in crate::capture::db::sessions_between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "window",
            "session_id": s.session_id,
            "app": s.app,
            "title": s.title,
            "pid": s.pid,
            "start": rfc3339(s.started_at_millis),
            "end": s.ended_at_millis.map(rfc3339),
            "end_reason": s.end_reason.map(SessionEnd::as_str),
            "url": s.url,
            "url_source": s.url_source.map(crate::records::UrlSource::as_str),
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    for e in crate::capture::db::afk_between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "afk",
            "event_id": e.id,
            "status": e.data.as_str(),
            "held_by": e.data.held_by().map(crate::capture::heartbeat::HeldBy::as_str),
            "start": rfc3339(e.start_millis),
            "end": rfc3339(e.end_millis),
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    for k in crate::capture::db::chunks_between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "keys",
            "chunk_id": k.chunk_id,
            "app": k.app,
            "title": k.title,
            "pid": k.pid,
            "start": rfc3339(k.started_at_millis),
            "end": rfc3339(k.ended_at_millis),
            "text": k.text,
            "shortcuts": k.shortcuts,
            "flush_reason": k.flush_reason.as_str(),
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    for c in crate::capture::db::clips_between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "clipboard",
            "clip_id": c.clip_id,
            "app": c.app,
            "title": c.title,
            "pid": c.pid,
            "time": rfc3339(c.at_millis),
            "text": c.text,
            "truncated": c.truncated,
            "trigger": c.trigger.as_str(),
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    for a in crate::audio::transcripts::between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "audio",
            "transcript_id": a.transcript_id,
            "source": a.source.as_str(),
            "speaker": a.source.speaker(),
            "app": a.app,
            "title": a.title,
            "start": rfc3339(a.started_at_millis),
            "end": rfc3339(a.ended_at_millis),
            "text": a.text,
            "confidence": a.confidence,
            "audio_file": a.audio_file,
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    let mut seen = crate::capture::screen_texts::seen_between(conn, since_millis, until_millis, usize::MAX >> 1)?;
    seen.reverse();
    for s in seen {
        let record = json!({
            "stream": "screen",
            "screen_id": s.screen_id,
            "session_id": s.session_id,
            "app": s.app,
            "title": s.title,
            "url": s.url,
            "at": rfc3339(s.seen_at_millis),
            "method": s.method.as_str(),
            "confidence": s.confidence,
            "text": s.text,
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    for m in crate::chat::messages_between(conn, since_millis, until_millis)? {
        let record = json!({
            "stream": "chat",
            "message_id": m.message_id,
            "thread_id": m.thread_id,
            "role": m.role.as_str(),
            "content": m.content,
            "context": m.context,
            "status": m.status.as_str(),
            "time": rfc3339(m.created_at_millis),
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    // The automations changed in the range, as saved (their definitions import back with `cowork automations import`).
    for row in crate::automations::store::flows(conn)?.into_iter().filter(|r| r.updated_at_millis >= since_millis && r.updated_at_millis < until_millis) {
        let definition = row.flow.as_ref().ok().and_then(|f| serde_json::to_value(f).ok());
        let record = json!({"stream": "automation", "name": row.name, "enabled": row.enabled, "definition": definition, "time": rfc3339(row.updated_at_millis)});
        writeln!(out, "{record}")?;
        count += 1;
    }
    // Automation runs hold what their steps read and wrote: each with its steps.
    for r in crate::automations::store::runs_between(conn, since_millis, until_millis)? {
        let steps: Vec<serde_json::Value> = crate::automations::store::steps(conn, r.run_id)?
            .into_iter()
            .map(|s| json!({"step_id": s.step_id, "kind": s.kind, "status": s.status, "input": s.input, "output": s.output, "decision": s.decision, "error": s.error,
                "start": rfc3339(s.started_at_millis), "end": s.finished_at_millis.map(rfc3339)}))
            .collect();
        let record = json!({
            "stream": "automation_run",
            "run_id": r.run_id,
            "automation": r.flow.name,
            "trigger": r.trigger_kind,
            "trigger_data": r.scope.trigger,
            "status": r.status.as_str(),
            "error": r.error,
            "time": rfc3339(r.created_at_millis),
            "steps": steps,
        });
        writeln!(out, "{record}")?;
        count += 1;
    }
    Ok(count)
}

/// The bucket ids cowork exports under: its own, so an import never collides
/// with the buckets of ActivityWatch's watchers on the same host (aw-server
/// refuses a whole import when one id exists). The bucket *types* are the ones
/// ActivityWatch's views look for (`currentwindow`, `afkstatus`, `web.tab.current`).
pub const AW_CLIENT: &str = "cowork";
pub const AW_WINDOW_BUCKET: &str = "cowork-window";
pub const AW_AFK_BUCKET: &str = "cowork-afk";
pub const AW_WEB_BUCKET: &str = "cowork-web";

/// One event of an ActivityWatch bucket: `[start, end)` in Unix milliseconds and its data.
#[derive(Clone, Debug, PartialEq)]
struct Span {
    start: i64,
    end: i64,
    data: Value,
}

impl Span {
    /// This event clipped to `[since, until)`; `None` when nothing of it is inside.
    /// A zero-length event (a single heartbeat) is kept when it lies in the range.
    fn clip(&self, since: i64, until: i64) -> Option<Span> {
        let (start, end) = (self.start.max(since), self.end.min(until));
        let inside = if self.start == self.end { self.start >= since && self.start < until } else { end > start };
        inside.then(|| Span { start, end, data: self.data.clone() })
    }

    fn to_json(&self) -> Value {
        json!({"timestamp": rfc3339(self.start), "duration": (self.end - self.start).max(0) as f64 / 1000.0, "data": self.data})
    }
}

/// ActivityWatch's export layout: `{"buckets": {id: {id, created, type, client, hostname, events}}}`
/// with a `currentwindow` bucket (app, title), an `afkstatus` bucket and, when
/// browsers were recorded, a `web.tab.current` bucket (url, title).
///
/// Every event is clipped to `[since, until)`, so an export of a sub-range is
/// exactly the whole export cut to that range. AFK comes from the recorded AFK
/// stream from its first event on; history older than the stream is derived
/// from the sessions that AFK ended — decided by the stream's start, never by
/// whether the range happens to hold a recorded event.
pub fn write_activitywatch(
    conn: &Connection,
    since_millis: i64,
    until_millis: i64,
    hostname: &str,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let now = crate::ids::now_millis();
    let until = until_millis.min(now);
    let sessions = crate::capture::db::sessions_between(conn, since_millis, until)?;
    let session_span = |s: &crate::records::ActivitySession, data: Value| Span { start: s.started_at_millis, end: s.ended_at_millis.unwrap_or(now), data };
    let window: Vec<Span> = sessions.iter().map(|s| session_span(s, json!({"app": s.app, "title": s.title}))).collect();
    // Browser tabs, as ActivityWatch's web watchers record them.
    let web: Vec<Span> = sessions
        .iter()
        .filter_map(|s| Some(session_span(s, json!({"url": s.url.as_ref()?, "title": s.title, "audible": false, "incognito": false}))))
        .collect();
    let afk_stream_start = crate::capture::db::first_afk_start(conn)?.unwrap_or(i64::MAX);
    let mut afk = Vec::new();
    if since_millis < afk_stream_start {
        // Before the AFK stream: present during each session, away from an AFK
        // end to the next session. The away stretch after a session that ended
        // before the range may reach into it, and the next session may lie past it.
        let derive_from = crate::capture::db::previous_session_start(conn, since_millis)?.unwrap_or(since_millis);
        let around = crate::capture::db::sessions_between(conn, derive_from, until)?;
        for (i, s) in around.iter().enumerate() {
            let end = s.ended_at_millis.unwrap_or(now);
            afk.push(Span { start: s.started_at_millis, end, data: json!({"status": "not-afk"}) });
            if s.end_reason == Some(SessionEnd::Afk) {
                let back = match around.get(i + 1) {
                    Some(next) => Some(next.started_at_millis),
                    None => crate::capture::db::next_session_start(conn, s.started_at_millis)?,
                };
                afk.push(Span { start: end, end: back.unwrap_or(now), data: json!({"status": "afk"}) });
            }
        }
        afk.retain_mut(|span| {
            span.end = span.end.min(afk_stream_start);
            span.start < afk_stream_start
        });
    }
    afk.extend(
        crate::capture::db::afk_between(conn, since_millis, until)?
            .iter()
            .map(|e| Span { start: e.start_millis, end: e.end_millis, data: json!({"status": e.data.as_str()}) }),
    );
    let clip = |spans: Vec<Span>| -> Vec<Value> { spans.iter().filter_map(|s| s.clip(since_millis, until)).map(|s| s.to_json()).collect() };
    let (window, afk, web) = (clip(window), clip(afk), clip(web));
    let created = rfc3339(sessions.first().map(|s| s.started_at_millis.max(since_millis)).unwrap_or(since_millis.max(0)));
    let count = window.len() + afk.len() + web.len();
    let mut buckets = serde_json::Map::new();
    let mut bucket = |name: &str, kind: &str, events: Vec<Value>| {
        let id = format!("{name}_{hostname}");
        buckets.insert(id.clone(), json!({"id": id, "created": created, "type": kind, "client": AW_CLIENT, "hostname": hostname, "events": events}));
    };
    bucket(AW_WINDOW_BUCKET, "currentwindow", window);
    bucket(AW_AFK_BUCKET, "afkstatus", afk);
    if !web.is_empty() {
        bucket(AW_WEB_BUCKET, "web.tab.current", web);
    }
    let document = json!({"buckets": buckets});
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)?;
    Ok(count)
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into())
}

/// Writes an export of `[since, until)` to `path` (the UI's Export); the user hears the outcome.
pub fn export_command(format: Format, since_millis: i64, until_millis: i64, path: std::path::PathBuf) -> crate::store::StoreCommand {
    crate::store::StoreCommand::run(format!("export {format:?} {since_millis}..{until_millis} to {}", path.display()), move |writer| {
        let outcome = std::fs::File::create(&path).map_err(anyhow::Error::from).and_then(|file| {
            let mut out = std::io::BufWriter::new(file);
            let count = export(writer.conn(), format, since_millis, until_millis, &mut out)?;
            std::io::Write::flush(&mut out)?;
            Ok(count)
        });
        match outcome {
            Ok(count) => writer.notice(format!("exported {count} records, unencrypted (for taking elsewhere), to {}", path.display())),
            Err(err) => writer.notice(format!("export failed: {err:#}: {}", path.display())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::parse_time;
    use crate::records::ActivitySession;

    /// An ended XTerm session.
    fn session(session_id: i64, title: &str, start: i64, end: i64, reason: SessionEnd) -> ActivitySession {
        ActivitySession {
            session_id,
            app: "XTerm".into(),
            title: title.into(),
            window_id: 1,
            started_at_millis: start,
            ended_at_millis: Some(end),
            end_reason: Some(reason),
            ..Default::default()
        }
    }

    #[test]
    fn activitywatch_export_has_window_and_afk_buckets() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        crate::capture::db::upsert_session(&conn, &session(1, "build", 1_000, 61_000, SessionEnd::Afk)).unwrap();
        crate::capture::db::upsert_session(&conn, &session(2, "review", 121_000, 131_000, SessionEnd::Switch)).unwrap();
        let mut out = Vec::new();
        let count = write_activitywatch(&conn, 0, 200_000, "host", &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let window = &doc["buckets"]["cowork-window_host"];
        assert_eq!(window["type"], "currentwindow");
        assert_eq!(window["events"][0]["data"]["title"], "build");
        assert_eq!(window["events"][0]["duration"], 60.0);
        let afk = doc["buckets"]["cowork-afk_host"]["events"].as_array().unwrap();
        let statuses: Vec<&str> = afk.iter().map(|e| e["data"]["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["not-afk", "afk", "not-afk"]);
        assert_eq!(afk[1]["duration"], 60.0, "away from the AFK end to the next session");
        assert_eq!(count, 5);

        let mut lines = Vec::new();
        assert_eq!(write_jsonl(&conn, 100_000, 200_000, &mut lines).unwrap(), 1, "--since filters");
        let record: Value = serde_json::from_slice(lines.split(|b| *b == b'\n').next().unwrap()).unwrap();
        assert_eq!(record["title"], "review");
    }

    #[test]
    fn recorded_afk_events_and_browser_urls_are_exported_as_their_own_buckets() {
        use crate::capture::heartbeat::{AfkEvent, AfkStatus, HeldBy};
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let page = ActivitySession {
            session_id: 1,
            app: "Chromium".into(),
            title: "Docs - Chromium".into(),
            window_id: 1,
            started_at_millis: 1_000,
            ended_at_millis: Some(5_000),
            end_reason: Some(SessionEnd::Switch),
            url: Some("docs.example/a".into()),
            url_source: Some(crate::records::UrlSource::Atspi),
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &page).unwrap();
        let present = AfkEvent { id: 7, data: AfkStatus::NotAfk { held_by: Some(HeldBy::Media) }, start_millis: 0, end_millis: 9_000 };
        let away = AfkEvent { id: 8, data: AfkStatus::Afk, start_millis: 9_000, end_millis: 20_000 };
        crate::capture::db::upsert_afk(&conn, &present).unwrap();
        crate::capture::db::upsert_afk(&conn, &away).unwrap();
        let mut out = Vec::new();
        write_activitywatch(&conn, 0, 30_000, "host", &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let afk = doc["buckets"]["cowork-afk_host"]["events"].as_array().unwrap();
        assert_eq!(afk.iter().map(|e| e["data"]["status"].as_str().unwrap()).collect::<Vec<_>>(), ["not-afk", "afk"]);
        assert_eq!(afk[1]["duration"], 11.0);
        let web = &doc["buckets"]["cowork-web_host"];
        assert_eq!(web["type"], "web.tab.current");
        assert_eq!(web["events"][0]["data"]["url"], "docs.example/a");
        let mut lines = Vec::new();
        write_jsonl(&conn, 0, 30_000, &mut lines).unwrap();
        let text = String::from_utf8(lines).unwrap();
        assert!(text.contains(r#""url_source":"atspi""#), "{text}");
        assert!(text.contains(r#""held_by":"media""#), "{text}");
    }

    /// Every bucket's events as `(start, end, data)` in milliseconds.
    fn buckets_of(doc: &Value) -> std::collections::BTreeMap<String, Vec<Span>> {
        doc["buckets"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(id, bucket)| {
                let spans = bucket["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        let start = parse_time(e["timestamp"].as_str().unwrap(), 0).unwrap();
                        let end = start + (e["duration"].as_f64().unwrap() * 1000.0).round() as i64;
                        Span { start, end, data: e["data"].clone() }
                    })
                    .collect();
                (id.clone(), spans)
            })
            .collect()
    }

    fn export_doc(conn: &Connection, since: i64, until: i64) -> Value {
        let mut out = Vec::new();
        write_activitywatch(conn, since, until, "host", &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_sub_range_export_is_the_whole_export_clipped_and_afk_is_derived_the_same_way() {
        use crate::capture::heartbeat::{AfkEvent, AfkStatus};
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        // Before the AFK stream existed: two sessions, the first ended by AFK.
        crate::capture::db::upsert_session(&conn, &session(1, "old build", 10_000, 70_000, SessionEnd::Afk)).unwrap();
        crate::capture::db::upsert_session(&conn, &session(2, "old review", 130_000, 160_000, SessionEnd::Switch)).unwrap();
        // The AFK stream from 200 s: present, then a gap with no AFK event (capture off), then away.
        crate::capture::db::upsert_afk(&conn, &AfkEvent { id: 1, data: AfkStatus::NotAfk { held_by: None }, start_millis: 200_000, end_millis: 260_000 }).unwrap();
        crate::capture::db::upsert_afk(&conn, &AfkEvent { id: 2, data: AfkStatus::Afk, start_millis: 400_000, end_millis: 450_000 }).unwrap();
        crate::capture::db::upsert_session(&conn, &ActivitySession { url: Some("docs.example/a".into()), ..session(3, "docs", 200_000, 260_000, SessionEnd::Switch) })
            .unwrap();
        crate::capture::db::upsert_session(&conn, &session(4, "late", 300_000, 350_000, SessionEnd::Switch)).unwrap();

        let whole = buckets_of(&export_doc(&conn, 0, 500_000));
        let afk: Vec<(i64, i64, &str)> =
            whole["cowork-afk_host"].iter().map(|s| (s.start, s.end, s.data["status"].as_str().unwrap())).collect();
        assert_eq!(
            afk,
            [(10_000, 70_000, "not-afk"), (70_000, 130_000, "afk"), (130_000, 160_000, "not-afk"), (200_000, 260_000, "not-afk"), (400_000, 450_000, "afk")],
            "derived before the stream, recorded from it on; nothing invented for the gap at 300–350 s"
        );
        for (since, until) in [(0, 500_000), (40_000, 140_000), (100_000, 210_000), (290_000, 360_000), (230_000, 420_000), (65_000, 65_000), (72_000, 90_000)] {
            let part = buckets_of(&export_doc(&conn, since, until));
            for id in ["cowork-window_host", "cowork-afk_host", "cowork-web_host"] {
                let expected: Vec<Span> = whole.get(id).into_iter().flatten().filter_map(|s| s.clip(since, until)).collect();
                let got = part.get(id).cloned().unwrap_or_default();
                assert_eq!(got, expected, "{id} in [{since}, {until})");
            }
        }
        // The range 290–360 s holds a session but no AFK event: still no "present" invented there.
        let part = buckets_of(&export_doc(&conn, 290_000, 360_000));
        assert!(part["cowork-afk_host"].is_empty(), "{:?}", part["cowork-afk_host"]);
        assert_eq!(part["cowork-window_host"].len(), 1);
        // Clipped: a session that began before the range starts at the range.
        let part = buckets_of(&export_doc(&conn, 40_000, 140_000));
        assert_eq!((part["cowork-window_host"][0].start, part["cowork-window_host"][0].end), (40_000, 70_000));
        assert_eq!((part["cowork-window_host"][1].start, part["cowork-window_host"][1].end), (130_000, 140_000));
    }
}
