//! Grounded context for one chat message (after Layer-1 context): pinned
//! chunks, recent capture not yet embedded, what vector search recalls
//! across namespaces, and — when search found too little — chunks this
//! thread cited before (no duplicates, at most 4). The whole is trimmed to a
//! token budget, dropping the worst match first (weighed against its age:
//! `keep_weight`), put in time order after the pinned ones, and numbered so
//! the answer can cite `[n]`. Also the fixed grounded refusal,
//! and pins: a source row pinned to a thread (`thread_pins`, from a search
//! result's Pin button; the chat lists them with Unpin).

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::Source;
use super::hybrid::ChunkHit;
use crate::memory::tokens::estimate_tokens;

/// Fewer recalled items than this and earlier citations backfill.
pub const ENOUGH_FOUND: usize = 3;
pub const MAX_BACKFILL: usize = 4;
/// Recent capture not yet embedded, newest first, at most this many.
pub const RECENT_UNEMBEDDED: usize = 4;
/// Recency weight halves every this many milliseconds (a week).
const HALF_LIFE_MILLIS: f64 = 7.0 * 86_400_000.0;

/// The answer when grounded mode finds nothing to stand on. Shown, stored,
/// never embedded and never sent back as history.
pub const GROUNDED_REFUSAL: &str = "I can't answer that from what I remember: nothing in your captured activity or our conversations matches it, and grounded mode keeps me from guessing.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Pinned,
    Recent,
    Recalled,
    Backfill,
}

/// One piece of memory offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub chunk_id: Option<i64>,
    pub stream: Source,
    pub source_id: i64,
    pub at_millis: i64,
    /// "app — title" (or the thread's title).
    pub label: String,
    pub text: String,
    pub origin: Origin,
    /// The session, thread or summary a citation opens.
    #[serde(default)]
    pub open_id: Option<i64>,
}

/// What an answer used, numbered as in the prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    pub n: usize,
    pub chunk_id: Option<i64>,
    pub stream: Source,
    pub source_id: i64,
    pub at_millis: i64,
    pub label: String,
    #[serde(default)]
    pub open_id: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assembly {
    pub items: Vec<Item>,
    /// Cut by the budget (the Memory view shows them).
    pub dropped: Vec<Item>,
    /// What each of `items` is worth keeping when a smaller budget cuts (`fit`).
    pub keep: Vec<f64>,
}

impl Item {
    pub fn from_hit(hit: &ChunkHit, origin: Origin) -> Self {
        let label = match &hit.app {
            Some(app) => format!("{app} — {}", hit.title),
            None => hit.title.clone(),
        };
        Item {
            chunk_id: Some(hit.chunk_id),
            stream: hit.stream,
            source_id: hit.source_id,
            at_millis: hit.at_millis,
            label,
            text: hit.body().to_owned(),
            origin,
            open_id: hit.open_id,
        }
    }

    /// One numbered note: when (local time), what kind and where, then the text.
    fn line(&self, n: usize, now_millis: i64) -> String {
        let text: String = self.text.chars().take(600).collect();
        let kind = match self.stream {
            crate::memory::search::Stream::Window => "window",
            crate::memory::search::Stream::Typing => "typed in",
            crate::memory::search::Stream::Clipboard => "copied in",
            crate::memory::search::Stream::Chat => "said in a chat with cowork",
            crate::memory::search::Stream::Summary => "summary",
            crate::memory::search::Stream::Audio => "heard",
            crate::memory::search::Stream::Document => "from the document",
            crate::memory::search::Stream::Screen => "on screen in",
        };
        let when = crate::ids::format_when(self.at_millis, now_millis);
        // A window's text is its title (and URL), already in the label: say it once.
        let title = self.label.split_once(" — ").map_or(self.label.as_str(), |(_, title)| title);
        if self.stream == crate::memory::search::Stream::Window
            && let Some(rest) = text.strip_prefix(title)
        {
            return format!("[{n}] {when} window {}{}\n", self.label, rest.replace('\n', " "));
        }
        format!("[{n}] {when} {kind} {}: {}\n", self.label, text.replace('\n', " "))
    }

    fn same_source(&self, other: &Item) -> bool {
        self.stream == other.stream && self.source_id == other.source_id
    }
}

/// The notes' lines, numbered from 1.
fn lines(items: &[Item], now_millis: i64) -> Vec<String> {
    items.iter().enumerate().map(|(n, item)| item.line(n + 1, now_millis)).collect()
}

fn recency_weight(at_millis: i64, now_millis: i64) -> f64 {
    0.5f64.powf((now_millis - at_millis).max(0) as f64 / HALF_LIFE_MILLIS)
}

/// How much a note is worth its tokens when the budget cuts: its rank (the
/// recalled in search's order, best first, then recent capture, then earlier
/// citations) weighed against its age, so the best match stays unless it is
/// weeks older than the rest (a week halves it; rank 1 is worth half of rank 0).
fn keep_weight(at_millis: i64, rank: usize, now_millis: i64) -> f64 {
    recency_weight(at_millis, now_millis) / (1 + rank) as f64
}

/// Puts the pieces together in order, then trims to `budget_tokens`.
pub fn assemble(pinned: Vec<Item>, recent: Vec<Item>, recalled: Vec<Item>, cited_before: Vec<Item>, budget_tokens: usize, now_millis: i64) -> Assembly {
    let mut items: Vec<Item> = Vec::new();
    let found = recalled.len();
    let push = |item: Item, items: &mut Vec<Item>| {
        if !items.iter().any(|i| i.same_source(&item)) {
            items.push(item);
        }
    };
    for item in pinned.into_iter().chain(recent).chain(recalled) {
        push(item, &mut items);
    }
    if found < ENOUGH_FOUND {
        let mut added = 0;
        for item in cited_before {
            if added == MAX_BACKFILL {
                break;
            }
            if !items.iter().any(|i| i.same_source(&item)) {
                items.push(Item { origin: Origin::Backfill, ..item });
                added += 1;
            }
        }
    }
    // What each is worth keeping when a budget cuts (`keep_weight`); pinned items go last.
    let mut rank = 0;
    let mut keep = vec![f64::INFINITY; items.len()];
    for origin in [Origin::Recalled, Origin::Recent, Origin::Backfill] {
        for (index, item) in items.iter().enumerate().filter(|(_, i)| i.origin == origin) {
            keep[index] = keep_weight(item.at_millis, rank, now_millis);
            rank += 1;
        }
    }
    // Pinned first, the rest in time order, as the log reads: a follow-up
    // question that recalls the same notes finds them in the same order, so
    // the engine's prefix cache holds them and only the question is read.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].origin != Origin::Pinned, items[i].at_millis, items[i].source_id));
    let mut slots: Vec<Option<Item>> = items.into_iter().map(Some).collect();
    let mut assembly = Assembly {
        items: order.iter().filter_map(|&i| slots[i].take()).collect(),
        dropped: Vec::new(),
        keep: order.iter().map(|&i| keep[i]).collect(),
    };
    assembly.fit(budget_tokens, now_millis);
    assembly
}

impl Assembly {
    /// Drops what is least worth keeping (`keep_weight`; an item without a
    /// weight stays) until the notes fit `budget_tokens`: a local question
    /// carries fewer than a cloud one (`agent::notes_budget`). The best one
    /// stays even when it alone is over the budget (a note is at most 600
    /// characters), unless the budget is nothing.
    pub fn fit(&mut self, budget_tokens: usize, now_millis: i64) {
        let cost = |items: &[Item]| lines(items, now_millis).iter().map(|line| estimate_tokens(line)).sum::<usize>();
        while cost(&self.items) > budget_tokens && (self.items.len() > 1 || budget_tokens == 0 && !self.items.is_empty()) {
            let worth = |index: usize| self.keep.get(index).copied().unwrap_or(f64::INFINITY);
            let victim = (0..self.items.len()).min_by(|&a, &b| worth(a).total_cmp(&worth(b))).expect("not empty");
            if self.keep.len() > victim {
                self.keep.remove(victim);
            }
            self.dropped.push(self.items.remove(victim));
        }
    }

    /// The prompt block, numbered for citing; `None` when empty.
    pub fn render(&self, now_millis: i64) -> Option<String> {
        if self.items.is_empty() {
            return None;
        }
        let mut text = String::from("Notes from the user's memory (numbered for citing):\n");
        for line in lines(&self.items, now_millis) {
            text.push_str(&line);
        }
        Some(text)
    }

    pub fn citations(&self) -> Vec<Citation> {
        self.items
            .iter()
            .enumerate()
            .map(|(n, i)| Citation {
                n: n + 1,
                chunk_id: i.chunk_id,
                stream: i.stream,
                source_id: i.source_id,
                at_millis: i.at_millis,
                label: i.label.clone(),
                open_id: i.open_id,
            })
            .collect()
    }
}

/// Chunks as items, by id (pins, earlier citations).
fn items_by_chunk(conn: &Connection, chunk_ids: &[i64], origin: Origin) -> rusqlite::Result<Vec<Item>> {
    let found: Vec<(i64, f32)> = chunk_ids.iter().map(|id| (*id, 1.0)).collect();
    let hits = super::hybrid::resolve(conn, &found, &crate::memory::search::Filters::default(), 0.0)?;
    Ok(hits.iter().map(|h| Item::from_hit(h, origin)).collect())
}

pub fn pinned(conn: &Connection, thread_id: i64) -> rusqlite::Result<Vec<Item>> {
    let ids: Vec<i64> = conn
        .prepare_cached("SELECT chunk_id FROM thread_pins WHERE thread_id = ?1")?
        .query_map(params![thread_id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    items_by_chunk(conn, &ids, Origin::Pinned)
}

/// Pins a source row (a session, typed text, a copy, a message, a summary)
/// to a thread: its chunks then come first in every answer there. A row not
/// yet cut into chunks is cut now. Returns how many chunks it pinned; 0 when
/// the row is gone (deleted) or was pinned already.
pub fn pin_source(conn: &Connection, thread_id: i64, source: Source, source_id: i64, now_millis: i64) -> rusqlite::Result<usize> {
    super::jobs::chunk_now(conn, source, source_id, now_millis)?;
    conn.prepare_cached(
        "INSERT INTO thread_pins (thread_id, chunk_id)
         SELECT ?1, chunk_id FROM memory_chunks c WHERE source = ?2 AND source_id = ?3
            AND NOT EXISTS (SELECT 1 FROM thread_pins p WHERE p.thread_id = ?1 AND p.chunk_id = c.chunk_id)",
    )?
    .execute(params![thread_id, source.as_str(), source_id])
}

/// Takes a source row's chunks off a thread's pins; returns how many.
pub fn unpin_source(conn: &Connection, thread_id: i64, source: Source, source_id: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM thread_pins WHERE thread_id = ?1
            AND chunk_id IN (SELECT chunk_id FROM memory_chunks WHERE source = ?2 AND source_id = ?3)",
    )?
    .execute(params![thread_id, source.as_str(), source_id])
}

/// Chunks this thread's answers cited, newest answer first.
pub fn cited_before(conn: &Connection, thread_id: i64) -> rusqlite::Result<Vec<Item>> {
    let lists: Vec<String> = conn
        .prepare_cached("SELECT citations FROM chat_messages WHERE thread_id = ?1 AND citations IS NOT NULL ORDER BY created_at_ms DESC")?
        .query_map(params![thread_id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let ids: Vec<i64> = lists
        .iter()
        .filter_map(|json| serde_json::from_str::<Vec<Citation>>(json).ok())
        .flatten()
        .filter_map(|c| c.chunk_id)
        .collect();
    items_by_chunk(conn, &ids, Origin::Backfill)
}

/// The newest captured rows that are not embedded yet (still queued, or
/// chunked and waiting), so a question about the last seconds is grounded too.
pub fn recent_unembedded(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<Item>> {
    let mut items = Vec::new();
    let queued: Vec<(String, i64)> = conn
        .prepare_cached("SELECT source, source_id FROM embed_queue WHERE source IN ('window', 'typing', 'clipboard', 'audio', 'screen') ORDER BY source_id DESC LIMIT ?1")?
        .query_map(params![limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (source, id) in queued {
        let Some(stream) = Source::parse(&source) else { continue };
        if let Some((at, pieces)) = super::jobs::source_pieces(conn, stream, id)?
            && let Some(first) = pieces.into_iter().next()
        {
            let (label, text) = first.split_once(": ").map_or((String::new(), first.clone()), |(l, t)| (l.to_owned(), t.to_owned()));
            let open_id = match stream {
                Source::Window => Some(id),
                // What was on screen opens at the window session it was seen in.
                Source::Screen => conn.query_row("SELECT session_id FROM screen_texts WHERE screen_id = ?1", params![id], |r| r.get(0)).ok().flatten(),
                _ => None,
            };
            items.push(Item { chunk_id: None, stream, source_id: id, at_millis: at, label, text, origin: Origin::Recent, open_id });
        }
    }
    let waiting: Vec<i64> = conn
        .prepare_cached("SELECT chunk_id FROM memory_chunks INDEXED BY memory_chunks_waiting WHERE vector IS NULL AND namespace = 'activity' ORDER BY at_ms DESC LIMIT ?1")?
        .query_map(params![limit as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    items.extend(items_by_chunk(conn, &waiting, Origin::Recent)?);
    items.sort_by_key(|item| std::cmp::Reverse(item.at_millis));
    items.truncate(limit);
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: i64, at: i64, origin: Origin, words: usize) -> Item {
        Item { chunk_id: Some(id), stream: Source::Window, source_id: id, at_millis: at, label: format!("app — {id}"), text: "word ".repeat(words), origin, open_id: Some(id) }
    }

    #[test]
    fn a_note_says_a_window_title_once_and_keeps_typed_text_whole_when_the_title_has_colons() {
        let now = 100 * 86_400_000;
        let title = "Write: Re: Offsite venue - Thunderbird";
        let hit = |stream: Source, text: String| super::super::hybrid::ChunkHit {
            chunk_id: 1,
            stream,
            source_id: 1,
            at_millis: now,
            app: Some("Thunderbird".into()),
            title: title.into(),
            text,
            score: 1.0,
            open_id: None,
        };
        let typed = Item::from_hit(&hit(Source::Typing, format!("Typed in Thunderbird ({title}): Hi Priya, please book the hotel.")), Origin::Recalled);
        assert_eq!(typed.text, "Hi Priya, please book the hotel.");
        let line = typed.line(1, now);
        assert!(line.ends_with(&format!("typed in Thunderbird — {title}: Hi Priya, please book the hotel.\n")), "{line}");
        let window = Item::from_hit(&hit(Source::Window, format!("Window in Thunderbird: {title} (imap://mail)")), Origin::Recalled);
        let line = window.line(2, now);
        assert!(line.ends_with(&format!("window Thunderbird — {title} (imap://mail)\n")), "{line}");
        assert_eq!(line.matches("Offsite venue").count(), 1, "{line}");
    }

    #[test]
    fn order_dedup_backfill_and_trimming_by_rank_and_age() {
        let now = 100 * 86_400_000;
        let day = 86_400_000;
        // Plenty recalled: no backfill; a duplicate of a pinned source appears once.
        let a = assemble(vec![item(1, now - 90 * day, Origin::Pinned, 5)], vec![], vec![item(1, 0, Origin::Recalled, 5), item(2, now, Origin::Recalled, 5), item(3, now, Origin::Recalled, 5), item(4, now, Origin::Recalled, 5)], vec![item(9, now, Origin::Backfill, 5)], 10_000, now);
        assert_eq!(a.items.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert_eq!(a.items[0].origin, Origin::Pinned);
        // Too little found: earlier citations fill in, at most 4, no duplicates.
        let cited: Vec<Item> = (10..20).map(|id| item(id, now, Origin::Backfill, 5)).chain([item(2, now, Origin::Backfill, 5)]).collect();
        let b = assemble(vec![], vec![item(30, now, Origin::Recent, 5)], vec![item(2, now, Origin::Recalled, 5)], cited, 10_000, now);
        assert_eq!(b.items.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![2, 10, 11, 12, 13, 30], "one time: by row");
        assert!(b.items[1..5].iter().all(|i| i.origin == Origin::Backfill));
        // Over budget: the worse matches go first (the weeks-old one before the new one),
        // the best match stays, and so does the pinned one, though it is oldest.
        let c = assemble(
            vec![item(1, now - 300 * day, Origin::Pinned, 40)],
            vec![],
            vec![item(2, now - day, Origin::Recalled, 40), item(3, now - 30 * day, Origin::Recalled, 40), item(4, now, Origin::Recalled, 40)],
            vec![],
            150,
            now,
        );
        assert_eq!(c.items.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(c.dropped.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![3, 4]);
        let text = c.render(now).unwrap();
        assert!(text.contains("[1] ") && text.contains("[2] ") && !text.contains("[3] "), "{text}");
        assert_eq!(c.citations()[1].source_id, 2);
        // A best match weeks older than the next loses to it; recent capture and earlier citations rank after what search found.
        let d = assemble(vec![], vec![item(5, now, Origin::Recent, 40)], vec![item(6, now - 30 * day, Origin::Recalled, 40), item(7, now, Origin::Recalled, 40)], vec![], 75, now);
        assert_eq!(d.items.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![7]);
        assert_eq!(d.dropped.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![6, 5]);
        // What is kept reads in time order, whatever search's order: two questions recalling the same notes send them alike.
        let e = assemble(vec![], vec![], vec![item(8, now, Origin::Recalled, 5), item(9, now - day, Origin::Recalled, 5)], vec![], 1_000, now);
        let f = assemble(vec![], vec![], vec![item(9, now - day, Origin::Recalled, 5), item(8, now, Origin::Recalled, 5)], vec![], 1_000, now);
        assert_eq!(e.items.iter().map(|i| i.source_id).collect::<Vec<_>>(), vec![9, 8]);
        assert_eq!(e.render(now), f.render(now));
        // A smaller budget later (a local question's) cuts by the same worth: the best match stays, wherever it sits.
        let mut e = e;
        e.fit(estimate_tokens(&e.items[1].line(1, now)), now);
        assert_eq!((e.items[0].source_id, e.dropped.iter().map(|i| i.source_id).collect::<Vec<_>>()), (8, vec![9]));
        assert_eq!(e.keep.len(), e.items.len());
        assert!(assemble(vec![], vec![], vec![], vec![], 100, now).render(now).is_none());
    }
    #[test]
    fn a_pinned_source_is_cut_into_chunks_at_once_and_leaves_with_its_row() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        let session = |id: i64, title: &str| crate::records::ActivitySession {
            session_id: id,
            app: "chromium".into(),
            title: title.into(),
            window_id: 1,
            started_at_millis: id * 1000,
            ..Default::default()
        };
        crate::capture::db::upsert_session(&conn, &session(1, "Booking.com: Hotel Adlon, 3 nights")).unwrap();
        crate::capture::db::upsert_session(&conn, &session(2, "Weather in Berlin")).unwrap();
        let thread = crate::records::ChatThread { thread_id: 7, title: "Trip".into(), updated_at_millis: 0 };
        crate::chat::upsert_thread(&conn, &thread, 0).unwrap();
        // Still queued (nothing embedded yet): pinning cuts it into chunks now.
        assert_eq!(pin_source(&conn, 7, Source::Window, 1, 5).unwrap(), 1);
        assert_eq!(pin_source(&conn, 7, Source::Window, 1, 5).unwrap(), 0, "pinned once");
        let queued: i64 = conn.query_row("SELECT count(*) FROM embed_queue", [], |r| r.get(0)).unwrap();
        assert_eq!(queued, 1, "only the pinned session left the queue");
        let pins = pinned(&conn, 7).unwrap();
        assert_eq!(pins.iter().map(|i| (i.source_id, i.origin)).collect::<Vec<_>>(), vec![(1, Origin::Pinned)]);
        assert!(pins[0].text.contains("Hotel Adlon"), "{pins:?}");
        assert!(pinned(&conn, 8).unwrap().is_empty(), "pins belong to their thread");
        // Unpinning, then pinning again and deleting the session: no pin outlives its row.
        assert_eq!(unpin_source(&conn, 7, Source::Window, 1).unwrap(), 1);
        assert!(pinned(&conn, 7).unwrap().is_empty());
        pin_source(&conn, 7, Source::Window, 1, 6).unwrap();
        conn.execute("DELETE FROM activity_sessions WHERE session_id = 1", []).unwrap();
        assert!(pinned(&conn, 7).unwrap().is_empty());
        let left: i64 = conn.query_row("SELECT count(*) FROM thread_pins", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 0);
        assert_eq!(pin_source(&conn, 7, Source::Window, 1, 7).unwrap(), 0, "a deleted row cannot be pinned");
    }
}
