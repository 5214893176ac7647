//! Curated hot memory: short facts (≤ 320 characters) pinned by the user or
//! the agent, always in the system prompt. The store worker owns the rows
//! and mirrors them into `USER.md` (facts about the user) and `MEMORY.md`
//! (the agent's notes) in the data directory, between markers; it remembers
//! a hash of what it wrote, so a file that changed since was edited by the
//! user and is read back (its list replaces that file's facts).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MAX_CHARS: usize = 320;
const BEGIN: &str = "<!-- cowork:hot-memory:begin -->";
const END: &str = "<!-- cowork:hot-memory:end -->";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum File {
    /// USER.md: about the user.
    User,
    /// MEMORY.md: the agent's notes.
    Memory,
}

impl File {
    pub const ALL: [File; 2] = [File::User, File::Memory];

    pub fn as_str(self) -> &'static str {
        match self {
            File::User => "user",
            File::Memory => "memory",
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            File::User => "USER.md",
            File::Memory => "MEMORY.md",
        }
    }

    fn hash_key(self) -> String {
        format!("memory.mirror.{}.sha256", self.as_str())
    }

    pub fn path(self, data_dir: &Path) -> PathBuf {
        data_dir.join(self.file_name())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub memory_id: i64,
    pub file: File,
    pub text: String,
    /// "user" or "agent".
    pub pinned_by: String,
    pub created_at_millis: i64,
}

/// A fact's text, checked: one line, 1–320 characters.
pub fn clean(text: &str) -> Result<String, String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.chars().count() {
        0 => Err("a memory cannot be empty".into()),
        n if n > MAX_CHARS => Err(format!("a memory holds at most {MAX_CHARS} characters (this one has {n})")),
        _ => Ok(text),
    }
}

pub fn facts(conn: &Connection) -> rusqlite::Result<Vec<Fact>> {
    conn.prepare_cached("SELECT memory_id, file, text, pinned_by, created_at_ms FROM hot_memory ORDER BY created_at_ms, memory_id")?
        .query_map([], |r| {
            let file: String = r.get(1)?;
            Ok(Fact { memory_id: r.get(0)?, file: if file == "user" { File::User } else { File::Memory }, text: r.get(2)?, pinned_by: r.get(3)?, created_at_millis: r.get(4)? })
        })?
        .collect()
}

pub fn add(conn: &Connection, file: File, text: &str, pinned_by: &str, at_millis: i64) -> Result<i64, String> {
    let text = clean(text)?;
    conn.execute(
        "INSERT INTO hot_memory (file, text, pinned_by, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
        params![file.as_str(), text, pinned_by, at_millis],
    )
    .map_err(|e| e.to_string())?;
    Ok(conn.last_insert_rowid())
}

pub fn remove(conn: &Connection, memory_id: i64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM hot_memory WHERE memory_id = ?1", params![memory_id])
}

/// The file's text for these facts.
pub fn render(file: File, facts: &[Fact]) -> String {
    let heading = match file {
        File::User => "# USER.md: what cowork knows about you",
        File::Memory => "# MEMORY.md: cowork's notes",
    };
    let mut text = format!(
        "{heading}\n\nEdit the list between the markers and cowork reads it back: one fact per line starting with \"- \", at most {MAX_CHARS} characters each.\n\n{BEGIN}\n"
    );
    for fact in facts.iter().filter(|f| f.file == file) {
        text.push_str(&format!("- {}\n", fact.text));
    }
    text.push_str(END);
    text.push('\n');
    text
}

/// The facts listed between the markers, each checked; bad lines are reported, not kept.
pub fn parse(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut facts, mut problems) = (Vec::new(), Vec::new());
    let Some(start) = text.find(BEGIN) else {
        return (facts, vec!["the hot-memory markers are missing; nothing was read".into()]);
    };
    let body = &text[start + BEGIN.len()..];
    let body = &body[..body.find(END).unwrap_or(body.len())];
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let item = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")).unwrap_or(line);
        match clean(item) {
            Ok(fact) => facts.push(fact),
            Err(err) => problems.push(format!("{err}: {}…", item.chars().take(40).collect::<String>())),
        }
    }
    (facts, problems)
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Writes both files from the rows and records what was written.
pub fn write_mirrors(conn: &Connection, data_dir: &Path, at_millis: i64) -> anyhow::Result<()> {
    let all = facts(conn)?;
    for file in File::ALL {
        let text = render(file, &all);
        let path = file.path(data_dir);
        let partial = path.with_extension("md.tmp");
        std::fs::write(&partial, &text)?;
        std::fs::rename(&partial, &path)?;
        crate::store::set_setting(conn, &file.hash_key(), &sha256(&text), at_millis)?;
    }
    Ok(())
}

/// A hand-edited file: which, its facts now, and the lines that were not kept (why).
pub type Edit = (File, Vec<String>, Vec<String>);

/// What the user changed in the files since they were written, per file:
/// the new list of facts (and problems with lines that were not kept).
/// A file that is missing or unchanged gives nothing.
pub fn edited(conn: &Connection, data_dir: &Path) -> rusqlite::Result<Vec<Edit>> {
    let mut out = Vec::new();
    for file in File::ALL {
        let Ok(text) = std::fs::read_to_string(file.path(data_dir)) else { continue };
        let written = crate::store::setting(conn, &file.hash_key())?;
        if written.as_deref() == Some(sha256(&text).as_str()) {
            continue;
        }
        let (facts, problems) = parse(&text);
        out.push((file, facts, problems));
    }
    Ok(out)
}

/// Replaces a file's facts with the list read back from it (as pinned by the user).
pub fn replace(conn: &Connection, file: File, texts: &[String], at_millis: i64) -> rusqlite::Result<()> {
    let tx = crate::store::write_transaction(conn)?;
    tx.execute("DELETE FROM hot_memory WHERE file = ?1", params![file.as_str()])?;
    for (i, text) in texts.iter().enumerate() {
        tx.execute(
            "INSERT INTO hot_memory (file, text, pinned_by, created_at_ms) VALUES (?1, ?2, 'user', ?3)",
            params![file.as_str(), text, at_millis + i as i64],
        )?;
    }
    tx.commit()
}

/// Splits `<remember>…</remember>` pins out of an answer: (the answer without them, the facts).
pub fn take_pins(answer: &str) -> (String, Vec<String>) {
    let (mut rest, mut pins) = (String::new(), Vec::new());
    let mut text = answer;
    while let Some(start) = text.find("<remember>") {
        rest.push_str(&text[..start]);
        let after = &text[start + "<remember>".len()..];
        match after.find("</remember>") {
            Some(end) => {
                if let Ok(fact) = clean(&after[..end]) {
                    pins.push(fact);
                }
                text = &after[end + "</remember>".len()..];
            }
            None => {
                text = after;
                break;
            }
        }
    }
    rest.push_str(text);
    (rest.trim().to_owned(), pins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_mirror_into_files_and_user_edits_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        add(&conn, File::User, "Prefers answers in British English", "user", 1).unwrap();
        add(&conn, File::Memory, "The user's team ships on Thursdays", "agent", 2).unwrap();
        assert!(add(&conn, File::User, &"x".repeat(321), "user", 3).unwrap_err().contains("at most 320"));
        assert!(add(&conn, File::User, "   ", "user", 3).is_err());
        write_mirrors(&conn, dir.path(), 10).unwrap();
        let user = std::fs::read_to_string(dir.path().join("USER.md")).unwrap();
        assert!(user.contains("- Prefers answers in British English") && !user.contains("Thursdays"), "{user}");
        assert!(std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap().contains("- The user's team ships on Thursdays"));
        assert!(edited(&conn, dir.path()).unwrap().is_empty(), "what cowork wrote is not an edit");
        // The user edits USER.md by hand: one fact changed, one too long.
        let edited_text = user.replace("British English", "Australian English").replace(END, &format!("- {}\n{END}", "y".repeat(400)));
        std::fs::write(dir.path().join("USER.md"), edited_text).unwrap();
        let changes = edited(&conn, dir.path()).unwrap();
        assert_eq!(changes.len(), 1);
        let (file, texts, problems) = &changes[0];
        assert_eq!((*file, texts.clone()), (File::User, vec!["Prefers answers in Australian English".to_owned()]));
        assert!(problems[0].contains("at most 320"), "{problems:?}");
        replace(&conn, *file, texts, 20).unwrap();
        write_mirrors(&conn, dir.path(), 21).unwrap();
        let all = facts(&conn).unwrap();
        assert_eq!(all.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(), vec!["The user's team ships on Thursdays", "Prefers answers in Australian English"]);
        assert!(edited(&conn, dir.path()).unwrap().is_empty());
        assert!(parse("no markers").1[0].contains("markers are missing"));
        let (answer, pins) = take_pins("Noted. <remember>Works from Porto on Fridays</remember> Anything else?");
        assert_eq!((answer.as_str(), pins), ("Noted.  Anything else?", vec!["Works from Porto on Fridays".to_owned()]));
    }
}
