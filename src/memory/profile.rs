//! The profile, learned but never silently: from what the user does and says,
//! cowork proposes lines for their profile ("You seem to work on
//! billing-service most mornings — add it to your profile?"), shown in the
//! Memory tab to add or dismiss. Nothing is added without that click, and a
//! dismissed proposal is not made again.
//!
//! From activity: the project names in window titles ("file - project -
//! Visual Studio Code") seen on at least three different mornings of the
//! last two weeks. From conversations: what the user said about themselves
//! in the last 30 days ("I work at…", "I prefer…", "I'm a…").

use rusqlite::Connection;
use serde::{Deserialize, Serialize};


/// Proposals the user dismissed (a JSON list of their texts); the store
/// commands that propose and dismiss are in `commands.rs`.
pub const DISMISSED_KEY: &str = "memory.profile_dismissed";
const DAY: i64 = 86_400_000;
/// Mornings a project must be seen on to be proposed.
const MORNINGS: usize = 3;

/// A line proposed for the profile, with the question that offers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub text: String,
    pub question: String,
}

/// The apps whose titles name a project as "file - project - App".
const PROJECT_APPS: &[&str] = &["Visual Studio Code", "VSCodium", "IntelliJ IDEA", "PyCharm", "Zed", "Sublime Text", "Kate", "GNOME Builder"];

/// A window title's project, where its app names one.
fn project(title: &str) -> Option<String> {
    let parts: Vec<&str> = title.split(" - ").map(str::trim).collect();
    if parts.len() >= 3 && PROJECT_APPS.iter().any(|app| parts[parts.len() - 1].starts_with(app)) {
        let name = parts[parts.len() - 2];
        return (!name.is_empty() && name.len() <= 60).then(|| name.to_owned());
    }
    None
}

/// What the user says about themselves: the sentence, if it is such a statement.
fn self_statement(sentence: &str) -> Option<String> {
    const OPENINGS: &[&str] = &["i work at ", "i work for ", "i work on ", "i work as ", "i'm a ", "i am a ", "i am an ", "i'm an ", "i prefer ", "i live in ", "my name is ", "my role is ", "my job is ", "i usually ", "my team is "];
    let trimmed = sentence.trim().trim_end_matches(['.', '!']).trim();
    let lower = trimmed.to_lowercase();
    (OPENINGS.iter().any(|o| lower.starts_with(o)) && !trimmed.ends_with('?') && trimmed.len() <= 200 && trimmed.split_whitespace().count() >= 4).then(|| format!("{trimmed}."))
}

/// The proposals for now: not in the profile already and not dismissed.
pub fn proposals(conn: &Connection, now_millis: i64) -> rusqlite::Result<Vec<Proposal>> {
    let profile = crate::store::setting(conn, crate::config::keys::PROFILE)?.unwrap_or_default().to_lowercase();
    let dismissed: Vec<String> = crate::store::setting(conn, DISMISSED_KEY)?.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default();
    let mut out: Vec<Proposal> = Vec::new();
    let mut offer = |text: String, question: String| {
        let known = profile.contains(&text.to_lowercase().trim_end_matches('.').to_owned()) || dismissed.contains(&text) || out.iter().any(|p| p.text == text);
        if !known {
            out.push(Proposal { text, question });
        }
    };
    // Mornings (06:00–12:00 local) of the last two weeks, per project.
    let mut days: std::collections::BTreeMap<String, std::collections::BTreeSet<i64>> = Default::default();
    let mut sessions = conn.prepare_cached("SELECT title, started_at_ms FROM activity_sessions WHERE started_at_ms >= ?1")?;
    let rows = sessions.query_map([now_millis - 14 * DAY], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (title, at) = row?;
        let minute = crate::ids::local_minute_of_day(at);
        if let Some(name) = project(&title).filter(|_| (6 * 60..12 * 60).contains(&minute)) {
            days.entry(name).or_default().insert(crate::ids::local_day_start_millis(at));
        }
    }
    let mut ranked: Vec<(String, usize)> = days.into_iter().map(|(name, d)| (name, d.len())).filter(|(_, n)| *n >= MORNINGS).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, _) in ranked.into_iter().take(2) {
        offer(format!("Works on {name} most mornings."), format!("You seem to work on {name} most mornings. Add it to your profile?"));
    }
    let mut said = conn.prepare_cached("SELECT content FROM chat_messages WHERE role = 'user' AND created_at_ms >= ?1 ORDER BY created_at_ms DESC LIMIT 500")?;
    let messages = said.query_map([now_millis - 30 * DAY], |r| r.get::<_, String>(0))?;
    for message in messages {
        for sentence in message?.split_inclusive(['.', '!', '?', '\n']) {
            if let Some(text) = self_statement(sentence) {
                offer(text.clone(), format!("You told me: “{text}” Add it to your profile?"));
            }
        }
    }
    out.truncate(5);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_seen_on_three_mornings_and_what_the_user_said_of_themselves_are_proposed_until_dismissed() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let today = crate::ids::local_day_start_millis(crate::ids::now_millis());
        let now = today + 20 * 3_600_000;
        let at = |day: i64, hour: i64| today - day * DAY + hour * 3_600_000;
        let mut id = 0;
        let mut window = |title: &str, when: i64| {
            id += 1;
            let session = crate::records::ActivitySession { session_id: id, app: "code".into(), title: title.into(), window_id: 1, started_at_millis: when, ..Default::default() };
            crate::capture::db::upsert_session(&conn, &session).unwrap();
        };
        for day in 1..=3 {
            window("main.rs - billing-service - Visual Studio Code", at(day, 9));
        }
        // Twice in the morning, and afternoons don't count.
        window("lib.rs - atlas - Visual Studio Code", at(1, 10));
        window("lib.rs - atlas - Visual Studio Code", at(2, 10));
        for day in 3..=6 {
            window("lib.rs - atlas - Visual Studio Code", at(day, 15));
        }
        window("Inbox - Thunderbird", at(4, 9));
        let thread = crate::records::ChatThread { thread_id: 1, title: "t".into(), updated_at_millis: 0 };
        crate::chat::upsert_thread(&conn, &thread, 0).unwrap();
        let said = |id: i64, text: &str| crate::records::ChatMessage {
            message_id: id,
            thread_id: 1,
            role: crate::records::Role::User,
            content: text.into(),
            context: None,
            status: crate::records::MessageStatus::Done,
            created_at_millis: now - DAY,
            ask_id: None,
            provider: None,
            cost_usd: None,
            citations: None,
            refusal: false,
        };
        crate::chat::upsert_message(&conn, &said(1, "Thanks. I work at Norvik Logistics as an analyst. What is on my calendar?"), None).unwrap();
        crate::chat::upsert_message(&conn, &said(2, "I prefer?"), None).unwrap();
        let texts = |conn: &Connection| proposals(conn, now).unwrap().into_iter().map(|p| p.text).collect::<Vec<_>>();
        assert_eq!(texts(&conn), ["Works on billing-service most mornings.", "I work at Norvik Logistics as an analyst."]);
        let first = &proposals(&conn, now).unwrap()[0];
        assert!(first.question.contains("You seem to work on billing-service most mornings"), "{}", first.question);
        // In the profile already, or dismissed: not proposed again.
        crate::store::set_setting(&conn, crate::config::keys::PROFILE, "Works on billing-service most mornings", 0).unwrap();
        crate::store::set_setting(&conn, DISMISSED_KEY, r#"["I work at Norvik Logistics as an analyst."]"#, 0).unwrap();
        assert!(texts(&conn).is_empty());
    }
}
