//! The SQL of the inbox and the sources (migration 14). `notifications` is
//! the inbox: every notice enters it first, pending, and keeps its state
//! (shown, accepted, opened, dismissed, expired, closed, or inbox-only with
//! the reason: capped, muted, no notification service). `notify_sources`
//! holds each source's dismissals in a row and its mute. The gate's counters
//! are queries over the inbox (indexed), so they survive a restart by
//! construction.

use rusqlite::{Connection, OptionalExtension, params};

use super::gate::Counts;
use crate::automations::flow::NotifyTier;
use crate::automations::steps::NoticeAction;

/// One notification as the inbox keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub notification_id: i64,
    pub source: String,
    pub tier: NotifyTier,
    pub title: String,
    pub body: String,
    pub action: NoticeAction,
    pub state: String,
    pub reason: Option<String>,
    pub release_at_millis: Option<i64>,
    pub created_at_millis: i64,
    pub shown_at_millis: Option<i64>,
    pub desktop_id: Option<u32>,
    pub closed_at_millis: Option<i64>,
    /// Why it appeared.
    pub why: String,
}

pub fn tier_from(text: &str) -> NotifyTier {
    match text {
        "urgent" => NotifyTier::Urgent,
        "informational" => NotifyTier::Informational,
        _ => NotifyTier::Helpful,
    }
}

pub fn action_text(action: &NoticeAction) -> Option<String> {
    match action {
        NoticeAction::None => None,
        NoticeAction::Approve { call_id } => Some(format!("approve:{call_id}")),
        NoticeAction::Mute { source } => Some(format!("mute:{source}")),
        NoticeAction::RestoreLocal => Some("restore_local:".into()),
        NoticeAction::Listen { since_millis } => Some(format!("listen:{since_millis}")),
        NoticeAction::Task { prompt } => Some(format!("task:{prompt}")),
    }
}

pub fn action_from(text: Option<&str>) -> NoticeAction {
    match text.and_then(|t| t.split_once(':')) {
        Some(("approve", id)) => id.parse().map_or(NoticeAction::None, |call_id| NoticeAction::Approve { call_id }),
        Some(("mute", source)) => NoticeAction::Mute { source: source.to_owned() },
        Some(("restore_local", _)) => NoticeAction::RestoreLocal,
        Some(("task", prompt)) if !prompt.is_empty() => NoticeAction::Task { prompt: prompt.to_owned() },
        Some(("listen", since)) => since.parse().map_or(NoticeAction::None, |since_millis| NoticeAction::Listen { since_millis }),
        _ => NoticeAction::None,
    }
}

const COLUMNS: &str = "notification_id, source, tier, title, body, action, state, reason, release_at_ms, created_at_ms, shown_at_ms, desktop_id, closed_at_ms, why";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let tier: String = r.get(2)?;
    let action: Option<String> = r.get(5)?;
    Ok(Row {
        notification_id: r.get(0)?,
        source: r.get(1)?,
        tier: tier_from(&tier),
        title: r.get(3)?,
        body: r.get(4)?,
        action: action_from(action.as_deref()),
        state: r.get(6)?,
        reason: r.get(7)?,
        release_at_millis: r.get(8)?,
        created_at_millis: r.get(9)?,
        shown_at_millis: r.get(10)?,
        desktop_id: r.get(11)?,
        closed_at_millis: r.get(12)?,
        why: r.get(13)?,
    })
}

pub fn insert(conn: &Connection, n: &Row) -> rusqlite::Result<()> {
    conn.execute(
        &format!("INSERT INTO notifications ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
        params![
            n.notification_id,
            n.source,
            n.tier.as_str(),
            n.title,
            n.body,
            action_text(&n.action),
            n.state,
            n.reason,
            n.release_at_millis,
            n.created_at_millis,
            n.shown_at_millis,
            n.desktop_id,
            n.closed_at_millis,
            n.why
        ],
    )?;
    Ok(())
}

/// What the gate still holds, oldest first.
pub fn pending(conn: &Connection) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM notifications WHERE state = 'pending' ORDER BY created_at_ms, notification_id"))?;
    let rows = stmt.query_map([], row)?;
    rows.collect()
}

/// The inbox, newest first.
pub fn inbox(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM notifications ORDER BY created_at_ms DESC, notification_id DESC LIMIT ?1"))?;
    let rows = stmt.query_map([limit as i64], row)?;
    rows.collect()
}

pub fn by_desktop_id(conn: &Connection, desktop_id: u32) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM notifications WHERE desktop_id = ?1 ORDER BY notification_id"))?;
    let rows = stmt.query_map([desktop_id], row)?;
    rows.collect()
}

pub fn by_id(conn: &Connection, notification_id: i64) -> rusqlite::Result<Option<Row>> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM notifications WHERE notification_id = ?1"), [notification_id], row).optional()
}

/// The gate's counters for a notification of `tier` from `source`.
pub fn counts(conn: &Connection, tier: NotifyTier, source: &str, now_millis: i64) -> rusqlite::Result<Counts> {
    let hour_ago = now_millis - 3_600_000;
    let (tier_shown, tier_first): (u32, Option<i64>) = conn.query_row(
        "SELECT count(*), min(shown_at_ms) FROM notifications WHERE tier = ?1 AND shown_at_ms > ?2",
        params![tier.as_str(), hour_ago],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let source_last: Option<i64> = conn.query_row("SELECT max(shown_at_ms) FROM notifications WHERE source = ?1 AND shown_at_ms IS NOT NULL", [source], |r| r.get(0))?;
    let any_last: Option<i64> = conn.query_row("SELECT max(shown_at_ms) FROM notifications WHERE shown_at_ms IS NOT NULL", [], |r| r.get(0))?;
    let muted: bool = conn.query_row("SELECT muted FROM notify_sources WHERE source = ?1", [source], |r| r.get(0)).optional()?.unwrap_or(false);
    Ok(Counts { tier_shown_last_hour: tier_shown, tier_first_in_hour_millis: tier_first, source_last_shown_millis: source_last, any_last_shown_millis: any_last, source_muted: muted })
}

/// The gate's word on a notification still in its hands.
pub fn set_gate(conn: &Connection, notification_id: i64, state: &str, reason: &str, release_at_millis: Option<i64>) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE notifications SET state = ?2, reason = ?3, release_at_ms = ?4 WHERE notification_id = ?1",
        params![notification_id, state, reason, release_at_millis],
    )?;
    Ok(())
}

pub fn mark_shown(conn: &Connection, ids: &[i64], desktop_id: u32, now_millis: i64) -> rusqlite::Result<()> {
    for id in ids {
        conn.execute(
            "UPDATE notifications SET state = 'shown', reason = NULL, release_at_ms = NULL, shown_at_ms = ?2, desktop_id = ?3 WHERE notification_id = ?1",
            params![id, now_millis, desktop_id],
        )?;
    }
    Ok(())
}

/// What became of a shown notification (a later close does not undo an action taken).
pub fn close(conn: &Connection, notification_id: i64, state: &str, now_millis: i64) -> rusqlite::Result<bool> {
    let changed = conn.execute(
        "UPDATE notifications SET state = ?2, closed_at_ms = ?3 WHERE notification_id = ?1 AND state IN ('shown', 'pending', 'inbox')",
        params![notification_id, state, now_millis],
    )?;
    Ok(changed > 0)
}

/// A dismissal: returns how many in a row the source has now.
pub fn dismissed(conn: &Connection, source: &str) -> rusqlite::Result<u32> {
    conn.execute(
        "INSERT INTO notify_sources (source, dismissals_in_a_row, dismissed_total) VALUES (?1, 1, 1)
         ON CONFLICT (source) DO UPDATE SET dismissals_in_a_row = dismissals_in_a_row + 1, dismissed_total = dismissed_total + 1",
        [source],
    )?;
    conn.query_row("SELECT dismissals_in_a_row FROM notify_sources WHERE source = ?1", [source], |r| r.get(0))
}

/// The user acted on one: the row of dismissals ends.
pub fn acted(conn: &Connection, source: &str) -> rusqlite::Result<()> {
    conn.execute("UPDATE notify_sources SET dismissals_in_a_row = 0 WHERE source = ?1", [source])?;
    Ok(())
}

/// Whether muting was proposed for `source` since `since_millis`; records a new proposal when not.
pub fn propose_mute(conn: &Connection, source: &str, since_millis: i64, now_millis: i64) -> rusqlite::Result<bool> {
    let last: Option<i64> = conn.query_row("SELECT mute_proposed_at_ms FROM notify_sources WHERE source = ?1", [source], |r| r.get(0)).optional()?.flatten();
    if last.is_some_and(|at| at >= since_millis) {
        return Ok(false);
    }
    conn.execute("UPDATE notify_sources SET mute_proposed_at_ms = ?2 WHERE source = ?1", params![source, now_millis])?;
    Ok(true)
}

pub fn set_muted(conn: &Connection, source: &str, muted: bool) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO notify_sources (source, muted) VALUES (?1, ?2) ON CONFLICT (source) DO UPDATE SET muted = excluded.muted, dismissals_in_a_row = 0",
        params![source, muted],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_queries_over_the_inbox() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let new = |id: i64, source: &str| Row {
            notification_id: id,
            source: source.into(),
            tier: NotifyTier::Helpful,
            title: "t".into(),
            body: String::new(),
            action: NoticeAction::Approve { call_id: 9 },
            state: "pending".into(),
            reason: None,
            release_at_millis: None,
            created_at_millis: id,
            shown_at_millis: None,
            desktop_id: None,
            closed_at_millis: None,
            why: "Why: a test".into(),
        };
        insert(&conn, &new(1, "flow:a")).unwrap();
        insert(&conn, &new(2, "flow:b")).unwrap();
        mark_shown(&conn, &[1], 77, 10_000).unwrap();
        let counts = counts(&conn, NotifyTier::Helpful, "flow:a", 20_000).unwrap();
        assert_eq!((counts.tier_shown_last_hour, counts.source_last_shown_millis, counts.any_last_shown_millis), (1, Some(10_000), Some(10_000)));
        assert_eq!(super::counts(&conn, NotifyTier::Helpful, "flow:a", 10_000 + 3_600_001).unwrap().tier_shown_last_hour, 0, "an hour later");
        assert_eq!(pending(&conn).unwrap().len(), 1);
        assert_eq!(by_desktop_id(&conn, 77).unwrap()[0].action, NoticeAction::Approve { call_id: 9 });
        assert_eq!((dismissed(&conn, "flow:a").unwrap(), dismissed(&conn, "flow:a").unwrap()), (1, 2));
        acted(&conn, "flow:a").unwrap();
        assert_eq!(dismissed(&conn, "flow:a").unwrap(), 1);
        assert!(propose_mute(&conn, "flow:a", 0, 5).unwrap());
        assert!(!propose_mute(&conn, "flow:a", 0, 6).unwrap(), "asked once");
        set_muted(&conn, "flow:a", true).unwrap();
        assert!(super::counts(&conn, NotifyTier::Helpful, "flow:a", 0).unwrap().source_muted);
    }
}
