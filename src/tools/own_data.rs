//! cowork's own data directory (database, keys, rules, audit log, skills,
//! MCP configuration, app cache), recognised however a tool's argument spells
//! it: `~`, `$HOME`, `..`, symlinks (the path is resolved), hard links (the
//! file's identity, `st_dev` and `st_ino`, is compared with the data
//! directory's files), `file:` URLs (percent-decoded by the WHATWG parser),
//! paths inside longer text (`--file=/…`, a script's string), and what a
//! server may expand or resolve itself: glob patterns (`~/.local/*/cow*/*.key`,
//! `**/secrets.key`), environment variables (`$XDG_DATA_HOME/cowork`) and
//! percent-encoding.
//!
//! It is also the one place that knows cowork's other ways to its data: its
//! own program (`cowork search` or `cowork export` read everything for
//! whoever runs them), its items in the system keyring (`secret-tool`, the
//! Secret Service over D-Bus), and whether this process was itself started by
//! one of cowork's tools (`started_for_a_tool`), when the CLI refuses to read.
//! Pure checks, called by the policy on the agent thread for every call, by
//! the folders worker, by Undo and by the CLI at start.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::command::normalise;

/// Files of the data directory the identity cache walks at most.
const WALK_LIMIT: usize = 200_000;
/// A file with several names not found in the cache rebuilds it, at most this often.
const REBUILD_EVERY: Duration = Duration::from_millis(500);
/// How old the data directory's listing may be when a pattern is compared with
/// it: walking it (an integration's `node_modules`, the browser's profile) is
/// the dearest part of a decision, and what a pattern would reach has been
/// there for longer than this.
const LISTING_KEPT: Duration = Duration::from_secs(5);

/// The data directory as the checks see it.
#[derive(Clone, Debug)]
pub struct OwnData<'a> {
    /// Resolved (symlinks followed).
    pub data_dir: &'a Path,
    pub home: &'a Path,
}

/// How a path relates to the data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The data directory or something in it (or another name of a file in it).
    Inside,
    /// A folder that holds the data directory, below the home folder.
    Holds,
    /// The home folder or `/`, which hold it too.
    HomeOrRoot,
    Outside,
}

impl OwnData<'_> {
    /// How `path` (absolute) relates to the data directory: read lexically
    /// (`..` removed), resolved on disk, and by file identity.
    pub fn reach(&self, path: &Path) -> Reach {
        let lexical = normalise(path);
        let physical = resolve_existing(&lexical);
        if [&lexical, &physical].iter().any(|p| p.starts_with(self.data_dir)) || self.same_file_inside(&physical) {
            return Reach::Inside;
        }
        let holds = |p: &Path| p != self.data_dir && self.data_dir.starts_with(p);
        if holds(&lexical) || holds(&physical) {
            let home = resolve_existing(self.home);
            let top = |p: &Path| p == Path::new("/") || p == self.home || p == home;
            return if top(&lexical) || top(&physical) { Reach::HomeOrRoot } else { Reach::Holds };
        }
        Reach::Outside
    }

    pub fn inside(&self, path: &Path) -> bool {
        self.reach(path) == Reach::Inside
    }

    /// A file that has more than one name and is one of the data directory's files.
    fn same_file_inside(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|meta| self.is_hard_link_inside(&meta))
    }

    /// Whether a file (its metadata, symlinks followed) is another name of one
    /// of the data directory's files.
    pub fn is_hard_link_inside(&self, meta: &std::fs::Metadata) -> bool {
        meta.is_file() && meta.nlink() >= 2 && identities_contain(self.data_dir, (meta.dev(), meta.ino()))
    }

    /// Where a relative `text` could point when the directory it is read in is
    /// not known: into the data directory, if some folder on the way to it
    /// joined with `text` names something that exists there.
    pub fn reachable_from_unknown(&self, text: &str) -> bool {
        let text = text.trim_start_matches('/');
        if text.is_empty() || text == "." || text == ".." {
            return false;
        }
        self.data_dir.ancestors().any(|base| {
            let candidate = normalise(&base.join(text));
            candidate.starts_with(self.data_dir) && std::fs::symlink_metadata(&candidate).is_ok()
        })
    }

    /// A path named inside `text` (an option's value, a script's string, a
    /// `file:` URL) that reaches the data directory.
    pub fn embedded(&self, text: &str, cwd: &Path) -> Option<PathBuf> {
        for url in file_urls(text) {
            if let Some(path) = file_url_path(&url)
                && self.inside(&path)
            {
                return Some(path);
            }
        }
        for token in text.split(|c: char| c.is_whitespace() || "'\"`()[]{}<>,;|&=:".contains(c)) {
            let Some(path) = expand_path_token(token, self.home, cwd) else { continue };
            if self.inside(&path) {
                return Some(path);
            }
        }
        None
    }

    /// A string argument of a tool that does not say what its arguments are
    /// (an MCP server's, a flow's): as a path relative to `bases`, as a
    /// `file:` URL, or with paths inside it; and as the server may read it
    /// before it opens anything: percent-decoded, with its environment
    /// variables expanded, and as a glob pattern it expands. Returns the path
    /// it reaches.
    pub fn in_text(&self, text: &str, bases: &[&Path]) -> Option<PathBuf> {
        self.in_text_at(text, bases, 0)
    }

    fn in_text_at(&self, text: &str, bases: &[&Path], depth: u8) -> Option<PathBuf> {
        if text.len() > 64 * 1024 {
            // Long text: only what it names with an absolute spelling.
            return bases.first().and_then(|cwd| self.embedded(text, cwd));
        }
        let trimmed = text.trim();
        if let Some(path) = file_url_path(trimmed) {
            // A `file:` URL's path may itself be a pattern once decoded.
            let spelled = path.to_string_lossy().into_owned();
            return if self.inside(&path) { Some(path) } else if depth < 6 { self.in_text_at(&spelled, bases, depth + 1) } else { None };
        }
        // What a server may decode before it opens a path: `%2e%2e`, `secrets%2Ekey`, encoded again and again.
        if depth < 6
            && let Some(decoded) = percent_decoded(text)
            && let Some(path) = self.in_text_at(&decoded, bases, depth + 1)
        {
            return Some(path);
        }
        // A string that is JSON a server may parse: the strings in it, not a pattern of braces.
        if depth < 6
            && (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed)
            && (value.is_object() || value.is_array())
        {
            let mut found = None;
            json_strings(&value, &mut |inner| {
                if found.is_none() {
                    found = self.in_text_at(inner, bases, depth + 1);
                }
            });
            return found;
        }
        if !trimmed.is_empty() && !trimmed.contains('\n') {
            for spelled in with_variables(trimmed, self.home) {
                let spelled = spelled.as_str();
                for base in bases {
                    if let Some(path) = expand_path_token(spelled, self.home, base).or_else(|| (!spelled.starts_with('$')).then(|| base.join(spelled)))
                        && self.inside(&path)
                    {
                        return Some(path);
                    }
                }
                if spelled.contains('/') && !spelled.starts_with('/') && !spelled.contains("://") && self.reachable_from_unknown(spelled) {
                    return Some(PathBuf::from(spelled));
                }
                if let Some(hit) = self.pattern_reaches(spelled, bases, Semantics::Strict).filter(|hit| hit.targeted) {
                    return Some(hit.path);
                }
            }
            // A variable whose value cowork does not know: the known end, wherever it starts.
            if let Some(tail) = unknown_variable_tail(trimmed)
                && tail.contains('/')
                && (self.reachable_from_unknown(&tail) || self.pattern_reaches(&format!("**/{}", tail.trim_start_matches('/')), &[], Semantics::Strict).is_some_and(|hit| hit.targeted))
            {
                return Some(PathBuf::from(trimmed));
            }
        }
        bases.first().and_then(|cwd| self.embedded(text, cwd))
    }

    /// A glob pattern a server may expand that reaches the data directory or
    /// something in it. `Strict`: as globs are usually read (`*` and `?`
    /// within one name, `**` across folders); `Loose`: as some servers read
    /// them (Python's `fnmatch`: `*` across folders too). A relative pattern
    /// is tried against each of `bases`, and, when it names a folder
    /// (`cowork/*.key`, `**/secrets.key`), from anywhere on the way to the
    /// data directory. Says what it matches, and whether it targets cowork's
    /// data (`PatternHit::targeted`) or is merely wide enough to take it in.
    pub fn pattern_reaches(&self, text: &str, bases: &[&Path], semantics: Semantics) -> Option<PatternHit> {
        let text = text.trim();
        if !is_pattern(text) || text.contains("://") || text.len() > 4096 {
            return None;
        }
        // (pattern, whether a wide match counts: not for a folder cowork only guesses at)
        let mut patterns: Vec<(String, bool)> = Vec::new();
        match expand_path_token(text, self.home, Path::new("/")) {
            Some(absolute) if !text.starts_with("./") && !text.starts_with("../") => patterns.push((normalise(&absolute).to_string_lossy().into_owned(), true)),
            _ => {
                for base in bases {
                    patterns.push((normalise(&base.join(text)).to_string_lossy().into_owned(), true));
                }
                if text.trim_start_matches("./").contains('/') {
                    // Relative to a folder cowork does not know: any folder on the way.
                    patterns.push((format!("**/{}", text.trim_start_matches("./")), false));
                }
            }
        }
        let entries = data_entries(self.data_dir);
        let data_dir = self.data_dir.to_string_lossy().into_owned();
        let mut wide: Option<PatternHit> = None;
        for (pattern, wide_counts) in patterns {
            // The fixed part before the first wildcard: a folder inside the data directory is reached whatever follows.
            let fixed = &pattern[..pattern.find(['*', '?', '[', '{']).unwrap_or(pattern.len())];
            let fixed_dir = Path::new(fixed.rsplit_once('/').map_or("", |(dir, _)| dir));
            if fixed_dir.is_absolute() && self.inside(fixed_dir) {
                return Some(PatternHit { path: fixed_dir.to_path_buf(), targeted: true });
            }
            let glob = Glob::new(&pattern, semantics);
            // Most patterns part from the way to the data directory in their fixed start: nothing to compare.
            if !glob.may_match_under(&data_dir) {
                continue;
            }
            let candidates = std::iter::once(data_dir.clone()).chain(entries.iter().cloned());
            for candidate in candidates.filter(|c| glob.is_match(c)) {
                let hit = PatternHit { targeted: self.targets(&glob, Path::new(&candidate)), path: PathBuf::from(candidate) };
                if hit.targeted {
                    return Some(hit);
                }
                if wide_counts {
                    wide.get_or_insert(hit);
                }
            }
        }
        wide
    }

    /// Whether a pattern that matches `path` (the data directory or something
    /// in it) needs cowork's own names to do so: it would not match the same
    /// path with the data directory's folder named otherwise, or, for one of
    /// the data directory's own files, with the file named otherwise (its
    /// extension kept). `**/secrets.key` and `~/.local/share/cow*` target it;
    /// `~/**/*.md` and `**/package.json` only take it in.
    fn targets(&self, glob: &Glob, path: &Path) -> bool {
        let Some(parent) = self.data_dir.parent() else { return true };
        let decoy_dir = parent.join("zz-not-cowork-7f3a");
        let below = path.strip_prefix(self.data_dir).unwrap_or(Path::new(""));
        let moved = if below.as_os_str().is_empty() { decoy_dir.clone() } else { decoy_dir.join(below) };
        if !glob.is_match(&moved.to_string_lossy()) {
            return true;
        }
        // The file's own name counts only for cowork's own top-level files (`secrets.key`, `USER.md`):
        // deeper names (`package.json` in an integration's folder) are anyone's.
        if below.as_os_str().is_empty() || below.components().count() > 1 {
            return false;
        }
        let extension = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
        let renamed = path.with_file_name(format!("zz-not-cowork-7f3a{extension}"));
        !glob.is_match(&renamed.to_string_lossy())
    }
}

/// A pattern's match in the data directory (`OwnData::pattern_reaches`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternHit {
    pub path: PathBuf,
    /// The pattern needs cowork's own names to match (refused outright);
    /// otherwise it is only wide enough to take them in (asked).
    pub targeted: bool,
}

/// How loosely a server may read a glob pattern (see `OwnData::pattern_reaches`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    Strict,
    Loose,
}

/// Whether a text holds a character a glob expansion reads as a wildcard.
pub fn is_pattern(text: &str) -> bool {
    // Every dialect's: shell and minimatch globs, bash's and minimatch's extglob
    // (`@(…)`, `!(…)`, `+(…)`), and `\` escapes a server may take away.
    text.contains(['*', '?', '[', '{', '\\']) || ["@(", "!(", "+("].iter().any(|g| text.contains(g))
}

/// The index of the bracket that closes the one opening at `open`
/// (`open_char` … `close_char`, nested ones counted), if any.
fn closing(chars: &[char], open: usize, open_char: char, close_char: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in chars.iter().enumerate().skip(open) {
        if *c == open_char {
            depth += 1;
        } else if *c == close_char {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The index of the `]` that closes a bracket expression opening at `open`:
/// a `]` right after `[`, `[!` or `[^` belongs to it, and so do POSIX classes
/// (`[:alpha:]`, `[=a=]`, `[.a.]`) inside it.
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(chars.get(i), Some('!' | '^')) {
        i += 1;
    }
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    while i < chars.len() {
        match chars[i] {
            '[' if matches!(chars.get(i + 1), Some(':' | '=' | '.')) => {
                let kind = chars[i + 1];
                let close = (i + 2..chars.len().saturating_sub(1)).find(|&j| chars[j] == kind && chars[j + 1] == ']')?;
                i = close + 2;
            }
            ']' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// One piece of a glob pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Char(char),
    /// `*`: any text within one name (any text at all, read loosely).
    Star,
    /// `**`: any text, across folders.
    AnyText,
    /// `**/`: nothing, or any folders and a `/`.
    Folders,
    /// `?` or `[…]`: one character (not `/`, unless read loosely).
    One,
}

/// A glob pattern, read so that it matches at least what any reading of it
/// matches: `[…]` is any one character and `{a,b}` any text (wider is the
/// safe side here). Matched by hand, without compiling anything per call.
#[derive(Clone, Debug)]
struct Glob {
    pieces: Vec<Piece>,
    loose: bool,
}

impl Glob {
    fn new(pattern: &str, semantics: Semantics) -> Glob {
        let mut pieces = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    while chars.get(i) == Some(&'*') {
                        i += 1;
                    }
                    if chars.get(i) == Some(&'/') {
                        i += 1;
                        pieces.push(Piece::Folders);
                    } else {
                        pieces.push(Piece::AnyText);
                    }
                    continue;
                }
                // Extglob (`@(a|b)`, `!(x)`, `+(x)`, `*(x)`, `?(x)`): any text, whatever is inside.
                '@' | '!' | '+' | '*' | '?' if chars.get(i + 1) == Some(&'(') && closing(&chars, i + 1, '(', ')').is_some() => {
                    i = closing(&chars, i + 1, '(', ')').unwrap_or(i);
                    pieces.push(Piece::AnyText);
                }
                '*' => pieces.push(Piece::Star),
                '?' => pieces.push(Piece::One),
                // A bracket expression: one character, whatever it holds; a lone `[` is itself.
                '[' => match class_end(&chars, i) {
                    Some(end) => {
                        i = end;
                        pieces.push(Piece::One);
                    }
                    None => pieces.push(Piece::Char('[')),
                },
                // Braces (nested ones too, `{1..3}` ranges): any text.
                '{' => match closing(&chars, i, '{', '}') {
                    Some(end) => {
                        i = end;
                        pieces.push(Piece::AnyText);
                    }
                    None => pieces.push(Piece::Char('{')),
                },
                '\\' if i + 1 < chars.len() => {
                    i += 1;
                    pieces.push(Piece::Char(chars[i]));
                }
                c => pieces.push(Piece::Char(c)),
            }
            i += 1;
        }
        let pieces = pieces.into_iter().flat_map(|piece| match piece {
            Piece::Char(c) => c.to_lowercase().map(Piece::Char).collect::<Vec<_>>(),
            other => vec![other],
        });
        Glob { pieces: pieces.collect(), loose: semantics == Semantics::Loose }
    }

    /// The text every match starts with.
    fn fixed_start(&self) -> String {
        self.pieces.iter().map_while(|p| if let Piece::Char(c) = p { Some(*c) } else { None }).collect()
    }

    /// Whether some path that starts with `prefix` (a folder) could match:
    /// the fixed start and the folder agree as far as both go.
    fn may_match_under(&self, prefix: &str) -> bool {
        let fixed = self.fixed_start();
        let prefix = prefix.to_lowercase();
        fixed.starts_with(&prefix) || prefix.starts_with(&fixed)
    }

    /// Case does not count: some servers match without it (minimatch's `nocase`).
    fn is_match(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
        let mut failed = HashSet::new();
        self.match_from(0, &text, 0, &mut failed)
    }

    fn match_from(&self, p: usize, text: &[char], t: usize, failed: &mut HashSet<(usize, usize)>) -> bool {
        if failed.contains(&(p, t)) {
            return false;
        }
        let matched = match self.pieces.get(p) {
            None => t == text.len(),
            Some(Piece::Char(c)) => text.get(t) == Some(c) && self.match_from(p + 1, text, t + 1, failed),
            Some(Piece::One) => text.get(t).is_some_and(|c| self.loose || *c != '/') && self.match_from(p + 1, text, t + 1, failed),
            Some(Piece::Star) => {
                let crosses = self.loose;
                (t..=text.len()).take_while(|end| *end == t || crosses || text[*end - 1] != '/').any(|end| self.match_from(p + 1, text, end, failed))
            }
            Some(Piece::AnyText) => (t..=text.len()).any(|end| self.match_from(p + 1, text, end, failed)),
            Some(Piece::Folders) => {
                self.match_from(p + 1, text, t, failed) || (t..text.len()).filter(|end| text[*end] == '/').any(|slash| self.match_from(p + 1, text, slash + 1, failed))
            }
        };
        if !matched {
            failed.insert((p, t));
        }
        matched
    }
}

/// Calls `f` on every string in a JSON value (keys too).
fn json_strings(value: &serde_json::Value, f: &mut impl FnMut(&str)) {
    match value {
        serde_json::Value::String(text) => f(text),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, f)),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
            f(k);
            json_strings(v, f);
        }),
        _ => {}
    }
}

/// A text with `%XX` escapes decoded, when it has any.
fn percent_decoded(text: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(text).decode_utf8_lossy();
    (decoded != text).then(|| decoded.into_owned())
}

/// The XDG base folders and their defaults under `home`, as a server started
/// without those variables would fall back to.
fn xdg_default(name: &str, home: &Path) -> Option<PathBuf> {
    Some(match name {
        "XDG_DATA_HOME" => home.join(".local/share"),
        "XDG_CONFIG_HOME" => home.join(".config"),
        "XDG_STATE_HOME" => home.join(".local/state"),
        "XDG_CACHE_HOME" => home.join(".cache"),
        "HOME" => home.to_path_buf(),
        _ => return None,
    })
}

/// A variable's name at the start of `text` (after `$`, `${` or `%`), with what follows it.
fn variable_at(text: &str) -> Option<(&str, Option<&str>, &str)> {
    let ident = |t: &str| t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(t.len());
    if let Some(rest) = text.strip_prefix("${") {
        let end = rest.find('}')?;
        let inner = &rest[..end];
        let (name, default) = match inner.find([':', '-', '=']) {
            Some(at) => (&inner[..at], Some(inner[at..].trim_start_matches([':', '-', '=']))),
            None => (inner, None),
        };
        return Some((name, default, &rest[end + 1..]));
    }
    if let Some(rest) = text.strip_prefix('$') {
        let end = ident(rest);
        return (end > 0).then(|| (&rest[..end], None, &rest[end..]));
    }
    if let Some(rest) = text.strip_prefix('%') {
        let end = rest.find('%')?;
        let name = &rest[..end];
        return (!name.is_empty() && ident(name) == name.len()).then(|| (name, None, &rest[end + 1..]));
    }
    None
}

/// `text` with its environment variables (`$X`, `${X}`, `${X:-default}`,
/// `%X%`) replaced by each value a server may give them: cowork's own, the
/// XDG default, the written default. The text itself comes first.
fn with_variables(text: &str, home: &Path) -> Vec<String> {
    let mut out = vec![text.to_owned()];
    if !text.contains(['$', '%']) {
        return out;
    }
    let mut expanded = vec![String::new()];
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['$', '%']) {
            Some(at) => {
                let (before, from) = rest.split_at(at);
                expanded.iter_mut().for_each(|e| e.push_str(before));
                match variable_at(from) {
                    Some((name, default, after)) => {
                        let mut values: Vec<String> = Vec::new();
                        if let Ok(value) = std::env::var(name) {
                            values.push(value);
                        }
                        if let Some(value) = xdg_default(name, home) {
                            values.push(value.to_string_lossy().into_owned());
                        }
                        if let Some(default) = default.filter(|d| !d.is_empty()) {
                            values.extend(with_variables(default, home));
                        }
                        if values.is_empty() {
                            // Unknown: left as written (`unknown_variable_tail` reads what follows).
                            values.push(from[..from.len() - after.len()].to_owned());
                        }
                        values.dedup();
                        expanded = expanded.iter().flat_map(|e| values.iter().map(move |v| format!("{e}{v}"))).take(16).collect();
                        rest = after;
                    }
                    None => {
                        expanded.iter_mut().for_each(|e| e.push_str(&from[..1]));
                        rest = &from[1..];
                    }
                }
            }
            None => {
                expanded.iter_mut().for_each(|e| e.push_str(rest));
                rest = "";
            }
        }
    }
    for e in expanded {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// What follows the last variable of `text` whose value is not known here.
fn unknown_variable_tail(text: &str) -> Option<String> {
    let mut tail = None;
    let mut rest = text;
    while let Some(at) = rest.find(['$', '%']) {
        let from = &rest[at..];
        match variable_at(from) {
            Some((name, _, after)) => {
                if std::env::var_os(name).is_none() && !name.starts_with("XDG_") && name != "HOME" {
                    tail = Some(after.to_owned());
                }
                rest = after;
            }
            None => rest = &from[1..],
        }
    }
    tail
}

/// `~/x`, `~user/x`, `$HOME/x`, `${HOME}/x`, `/x`, `./x`, `../x` as a path; None for anything else.
pub fn expand_path_token(token: &str, home: &Path, cwd: &Path) -> Option<PathBuf> {
    let token = token.trim_matches(|c: char| "'\"".contains(c));
    if token.is_empty() {
        return None;
    }
    for prefix in ["$HOME", "${HOME}"] {
        if let Some(rest) = token.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(home.join(rest.trim_start_matches('/')));
        }
    }
    if let Some(rest) = token.strip_prefix('~') {
        let (user, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let base = if user.is_empty() { home.to_path_buf() } else { super::command::home_of(user)? };
        return Some(base.join(rest));
    }
    if token.starts_with('/') {
        return Some(PathBuf::from(token));
    }
    if token.starts_with("./") || token.starts_with("../") || token == "." || token == ".." {
        return Some(cwd.join(token));
    }
    None
}

/// The `file:` URLs in a text.
fn file_urls(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("file:") {
        let start = from + at;
        let end = text[start..].find(|c: char| c.is_whitespace() || "'\"<>`".contains(c)).map_or(text.len(), |e| start + e);
        out.push(text[start..end].to_owned());
        from = end.max(start + 5);
    }
    out
}

/// The local path of a `file:` URL, read by the WHATWG parser (percent-decoded, `..` resolved).
pub fn file_url_path(text: &str) -> Option<PathBuf> {
    if !text.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:")) {
        return None;
    }
    let url = url::Url::parse(text).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    // A host other than localhost is another machine's file; the path is still read as local by some apps.
    let mut local = url.clone();
    let _ = local.set_host(None);
    local.to_file_path().ok()
}

/// A path with its existing part resolved (symlinks followed) and the rest appended.
pub fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(base) = existing.canonicalize() {
            return rest.iter().rev().fold(base, |p, name| p.join(name));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

// ---------------------------------------------------------------------------
// cowork's own program and its keyring items.

/// The name cowork's program is installed under.
const PROGRAM_NAME: &str = "cowork";

/// The running program, resolved, and its identity (`st_dev`, `st_ino`).
fn own_program() -> Option<&'static (PathBuf, (u64, u64))> {
    static PROGRAM: OnceLock<Option<(PathBuf, (u64, u64))>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let exe = std::fs::canonicalize("/proc/self/exe").or_else(|_| std::env::current_exe()).ok()?;
            let meta = std::fs::metadata("/proc/self/exe").ok()?;
            Some((exe, (meta.dev(), meta.ino())))
        })
        .as_ref()
}

/// Whether a program file is cowork's own: named `cowork`, or the running
/// program under another name (a symlink, a hard link). `cowork search`,
/// `cowork export` or `cowork mcp token` read all of cowork's data for
/// whoever runs them, so a tool never starts it.
pub fn is_cowork_program(path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n == PROGRAM_NAME) {
        return true;
    }
    let Some((exe, identity)) = own_program() else { return false };
    std::fs::canonicalize(path).is_ok_and(|p| p == *exe || p.file_name().is_some_and(|n| n == PROGRAM_NAME))
        || std::fs::metadata(path).is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == *identity)
}

/// Where `program` (a command's first word) is run from: itself when it
/// holds a `/` (relative to each of `cwds`), else each match on `path_var`.
pub fn program_files(program: &str, cwds: &[PathBuf], path_var: &str) -> Vec<PathBuf> {
    if program.contains('/') {
        return if Path::new(program).is_absolute() { vec![PathBuf::from(program)] } else { cwds.iter().map(|cwd| cwd.join(program)).collect() };
    }
    path_var.split(':').filter(|dir| !dir.is_empty()).map(|dir| Path::new(dir).join(program)).filter(|p| p.is_file()).collect()
}

/// How long a PATH lookup's answer is kept: the policy decides many commands
/// a second in a long line, and a program that appears on PATH meanwhile is
/// still refused when it runs (`started_for_a_tool`).
const PROGRAM_LOOKUP_KEPT: Duration = Duration::from_secs(2);

/// Whether a command's first word runs cowork's own program: by name, by
/// where it is found (a path, or each match on `path_var`), by identity.
pub fn runs_cowork(program: &str, name: &str, cwds: &[PathBuf], path_var: &str) -> bool {
    if name == PROGRAM_NAME {
        return true;
    }
    if program.contains('/') {
        return program_files(program, cwds, path_var).iter().any(|p| is_cowork_program(p));
    }
    type Lookups = Mutex<std::collections::HashMap<(String, String), (Instant, bool)>>;
    static LOOKUPS: OnceLock<Lookups> = OnceLock::new();
    let lookups = LOOKUPS.get_or_init(Default::default);
    let key = (program.to_owned(), path_var.to_owned());
    if let Some((at, found)) = lookups.lock().get(&key)
        && at.elapsed() < PROGRAM_LOOKUP_KEPT
    {
        return *found;
    }
    let found = program_files(program, cwds, path_var).iter().any(|p| is_cowork_program(p));
    let mut kept = lookups.lock();
    if kept.len() > 1024 {
        kept.clear();
    }
    kept.insert(key, (Instant::now(), found));
    found
}

/// The attributes of cowork's items in the Secret Service (`secrets.rs`):
/// `application` = `cowork` and a `name`. A search matches an item that has
/// every attribute it names, so a query names only these, or it cannot match one of cowork's.
const KEYRING_ATTRIBUTES: [&str; 2] = ["application", "name"];

/// Why a command reaches cowork's items in the system keyring, if it does:
/// `secret-tool` looking up, searching, clearing or storing by attributes
/// that cowork's items have (an attribute whose value is computed when it
/// runs counts as cowork's), or a D-Bus call to the Secret Service or
/// KWallet, whose answers cowork cannot read beforehand. `values` are the
/// command's words, None where computed when it runs.
pub fn keyring_reach(program: &str, values: &[Option<&str>]) -> Option<String> {
    let words = || values.iter().map(|v| v.unwrap_or(""));
    match program {
        "secret-tool" => {
            let positional: Vec<Option<&str>> = values.iter().copied().filter(|v| v.is_none_or(|v| !v.starts_with('-'))).collect();
            let action = positional.first().copied().flatten().unwrap_or_default();
            if !matches!(action, "lookup" | "search" | "clear" | "store") && positional.first().is_some_and(Option::is_some) {
                return None;
            }
            let pairs = &positional[1.min(positional.len())..];
            let cowork_only = pairs.chunks(2).all(|pair| match pair {
                [Some(key), value] => KEYRING_ATTRIBUTES.contains(key) && (*key != "application" || value.is_none_or(|v| v == PROGRAM_NAME)),
                [None, _] | [None] => true,
                [Some(key)] => KEYRING_ATTRIBUTES.contains(key),
                _ => true,
            });
            cowork_only.then(|| format!("secret-tool {action} may return cowork's keys from the system keyring"))
        }
        // Watching the bus sees every answer the keyring gives cowork (its keys, as it starts).
        "dbus-monitor" => Some("dbus-monitor sees the keyring's answers to cowork, its keys among them".to_owned()),
        "busctl" | "gdbus" if words().any(|w| matches!(w, "monitor" | "capture")) => Some(format!("{program} watching the bus sees the keyring's answers to cowork, its keys among them")),
        "gdbus" | "dbus-send" | "busctl" | "qdbus" | "qdbus6" | "qdbus-qt5" | "qdbus-qt6" | "dbus" | "gdbus-codegen" => {
            let reaches = words().any(|w| {
                let w = w.to_ascii_lowercase();
                w.contains("org.freedesktop.secret") || w.contains("/org/freedesktop/secrets") || w.contains("kwalletd") || w.contains("org.kde.kwallet")
            });
            reaches.then(|| format!("{program} talks to the system keyring, which keeps cowork's keys"))
        }
        "kwallet-query" | "kwalletcli" | "kwallet-query5" | "kwallet-query6" => Some(format!("{program} reads the KDE wallet, which may keep cowork's keys")),
        "keepassxc-cli" if words().any(|w| w.contains("Secret") || w.contains("cowork")) => Some(format!("{program} may read cowork's keys from KeePassXC")),
        _ => None,
    }
}

/// The variable the shell tool and MCP servers get, so cowork's CLI started
/// below them refuses to read its data even where the process tree is lost.
pub const TOOL_CHILD_VAR: &str = "COWORK_TOOL_CHILD";

/// Why this process must not read cowork's data, if it must not: it was
/// started, directly or through other programs, by a running cowork (a shell
/// command of the agent, an MCP server and whatever they start), so an
/// approved `cowork search …` or a copy of the program run by a script cannot
/// read what the policy refuses to tools. Read from the process tree (a
/// parent running cowork's program: the shell tool's guard or cowork itself)
/// and from `TOOL_CHILD_VAR`.
pub fn started_for_a_tool() -> Option<String> {
    if std::env::var_os(TOOL_CHILD_VAR).is_some() {
        return Some(format!("it runs below one of cowork's tools ({TOOL_CHILD_VAR} is set)"));
    }
    let own = own_program().map(|(_, identity)| *identity);
    let mut pid = std::process::id();
    for _ in 0..64 {
        let Some(parent) = parent_of(pid) else { break };
        if parent <= 1 {
            break;
        }
        let exe = Path::new("/proc").join(parent.to_string()).join("exe");
        let named = std::fs::read_link(&exe).ok().is_some_and(|target| {
            let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.trim_end_matches(" (deleted)") == PROGRAM_NAME
        });
        let same = own.is_some_and(|identity| std::fs::metadata(&exe).is_ok_and(|m| (m.dev(), m.ino()) == identity));
        if named || same {
            return Some(format!("it was started by a running cowork (process {parent}), through one of its tools"));
        }
        pid = parent;
    }
    None
}

/// A process's parent, from `/proc/PID/stat` (the field after the command name, which may hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// What the data directory holds, as the checks need it: the identity of
/// each file (for hard links) and every path in it (for patterns).
struct Identities {
    data_dir: PathBuf,
    built: Instant,
    files: HashSet<(u64, u64)>,
    paths: std::sync::Arc<Vec<String>>,
}

fn identities() -> &'static Mutex<Option<Identities>> {
    static CACHE: OnceLock<Mutex<Option<Identities>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(None))
}

/// Whether `(dev, ino)` is a file of the data directory. The set is kept and
/// built again when a file is not in it and the set is older than
/// `REBUILD_EVERY` (a file made since is found on the next try).
fn identities_contain(data_dir: &Path, id: (u64, u64)) -> bool {
    let mut cache = identities().lock();
    let fresh = cache.as_ref().is_some_and(|c| c.data_dir == data_dir);
    if fresh && cache.as_ref().is_some_and(|c| c.files.contains(&id)) {
        return true;
    }
    if fresh && cache.as_ref().is_some_and(|c| c.built.elapsed() < REBUILD_EVERY) {
        return false;
    }
    let built = walk_identities(data_dir);
    let found = built.files.contains(&id);
    *cache = Some(built);
    found
}

/// Every path in the data directory (files and folders), at most
/// `LISTING_KEPT` old.
fn data_entries(data_dir: &Path) -> std::sync::Arc<Vec<String>> {
    let mut cache = identities().lock();
    if let Some(c) = cache.as_ref().filter(|c| c.data_dir == data_dir && c.built.elapsed() < LISTING_KEPT) {
        return c.paths.clone();
    }
    let built = walk_identities(data_dir);
    let paths = built.paths.clone();
    *cache = Some(built);
    paths
}

fn walk_identities(data_dir: &Path) -> Identities {
    let mut files = HashSet::new();
    let mut paths = Vec::new();
    let mut stack = vec![data_dir.to_path_buf()];
    let mut seen = 0usize;
    'walk: while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                tracing::warn!(limit = WALK_LIMIT, "the data directory has more files than the hard-link check walks");
                break 'walk;
            }
            paths.push(entry.path().to_string_lossy().into_owned());
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                files.insert((meta.dev(), meta.ino()));
            }
        }
    }
    Identities { data_dir: data_dir.to_path_buf(), built: Instant::now(), files, paths: std::sync::Arc::new(paths) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let data = home.join(".local/share/cowork");
        std::fs::create_dir_all(data.join("skills")).unwrap();
        std::fs::write(data.join("secrets.key"), "k").unwrap();
        std::fs::create_dir_all(home.join("notes")).unwrap();
        (dir, home, data)
    }

    #[test]
    fn every_spelling_of_the_data_directory_is_inside() {
        let (_dir, home, data) = setup();
        let own = OwnData { data_dir: &data, home: &home };
        std::os::unix::fs::symlink(&data, home.join("notes/link")).unwrap();
        std::fs::hard_link(data.join("secrets.key"), home.join("notes/k")).unwrap();
        for path in [
            data.join("secrets.key"),
            data.join("skills/new/SKILL.md"),
            home.join("notes/../.local/share/cowork/cowork.db"),
            home.join("notes/link/secrets.key"),
            home.join("notes/k"),
            PathBuf::from(format!("/proc/self/root{}", data.join("secrets.key").display())),
        ] {
            assert_eq!(own.reach(&path), Reach::Inside, "{}", path.display());
        }
        assert_eq!(own.reach(&home.join(".local/share")), Reach::Holds);
        assert_eq!(own.reach(&home), Reach::HomeOrRoot);
        assert_eq!(own.reach(Path::new("/")), Reach::HomeOrRoot);
        assert_eq!(own.reach(&home.join("notes/todo.md")), Reach::Outside);
        // A copy is another file; a second hard link made later is found.
        std::fs::copy(data.join("secrets.key"), home.join("notes/copy")).unwrap();
        assert_eq!(own.reach(&home.join("notes/copy")), Reach::Outside);
        std::fs::write(data.join("later.db"), "x").unwrap();
        std::thread::sleep(REBUILD_EVERY);
        std::fs::hard_link(data.join("later.db"), home.join("notes/later")).unwrap();
        assert!(own.inside(&home.join("notes/later")));
    }

    #[test]
    fn urls_text_and_unknown_places_are_read_too() {
        let (_dir, home, data) = setup();
        let own = OwnData { data_dir: &data, home: &home };
        let encoded = format!("file://{}", data.join("secrets.key").display()).replace("cowork", "cow%6Frk");
        assert_eq!(file_url_path(&encoded), Some(data.join("secrets.key")));
        assert!(own.in_text(&encoded, &[&home]).is_some());
        assert!(own.in_text(&format!("FILE://localhost{}", data.join("x").display()), &[&home]).is_some());
        assert!(own.in_text("~/.local/share/cowork/secrets.key", &[&home]).is_some());
        assert!(own.in_text("$HOME/.local/share/cowork", &[&home]).is_some());
        assert!(own.in_text(".local/share/cowork/secrets.key", &[&home]).is_some());
        assert!(own.in_text("cowork/secrets.key", &[Path::new("/nowhere")]).is_some(), "relative, from somewhere on the way");
        assert!(own.in_text(&format!("open('{}')", data.join("secrets.key").display()), &[&home]).is_some());
        assert!(own.in_text(&format!("--db={}/cowork.db", data.display()), &[&home]).is_some());
        for harmless in ["notes/todo.md", "what is in my notes?", "https://example.com/cowork/secrets.key", "/tmp/x", "secrets", ""] {
            assert!(own.in_text(harmless, &[&home]).is_none(), "{harmless}");
        }
        assert!(own.reachable_from_unknown("secrets.key"));
        assert!(own.reachable_from_unknown("/cowork/skills"));
        assert!(!own.reachable_from_unknown("notes.txt"));
        assert!(!own.reachable_from_unknown("."));
    }

    #[test]
    fn what_a_server_expands_is_read_as_it_would_expand_it() {
        let (_dir, home, data) = setup();
        std::fs::write(data.join("USER.md"), "me").unwrap();
        let own = OwnData { data_dir: &data, home: &home };
        let abs = data.join("secrets.key").display().to_string();
        let reached = [
            // Glob patterns the server expands, every way of writing one.
            "~/.local/share/cow*/secrets.key".to_owned(),
            "~/.local/share/cowork/secrets.k?y".to_owned(),
            "~/.local/share/cowork/[s]ecrets.key".to_owned(),
            "~/.local/share/{cowork,other}/secrets.key".to_owned(),
            "~/.local/**/secrets.key".to_owned(),
            "~/.local/share/cowork/*".to_owned(),
            "~/.local/share/cow*".to_owned(),
            "**/cowork/secrets.key".to_owned(),
            "**/secrets.key".to_owned(),
            abs.replace("secrets", "secr*"),
            format!("file://{}", abs.replace("secrets", "secr%2A")),
            // Variables the server resolves, with cowork's values or the XDG defaults.
            "$XDG_DATA_HOME/cowork/secrets.key".to_owned(),
            "${XDG_DATA_HOME}/cowork/secrets.key".to_owned(),
            "${XDG_DATA_HOME:-~/.local/share}/cowork/secrets.key".to_owned(),
            "${NO_SUCH_VAR_HERE}/cowork/secrets.key".to_owned(),
            "%HOME%/.local/share/cowork/secrets.key".to_owned(),
            // Percent-encoding it decodes.
            abs.replace("secrets.key", "secrets%2Ekey"),
            abs.replace("/cowork/", "%2Fcowork%2F"),
            "~/.local/share/cowork/skills/../secrets.key".to_owned(),
        ];
        for text in &reached {
            assert!(own.in_text(text, &[&home]).is_some(), "{text} reaches the data directory");
        }
        // Every dialect's syntax a server may expand: extglob, POSIX classes, nested braces,
        // escapes it takes away, case it ignores, encoding repeated, JSON it parses.
        for text in [
            "~/.local/share/@(cowork)/secrets.key",
            "~/.local/share/+(cowork)/secrets.key",
            "~/.local/share/!(zzz)/secrets.key",
            "~/.local/share/?(cowork)/secrets.key",
            "~/.local/share/[[:alpha:]]owork/secrets.key",
            "~/.local/share/{x,{cowork,y}}/secrets.key",
            "~/.local/share/cow\\ork/secrets.key",
            "~/.local/share/COWOR?/SECRETS.KEY",
            "~/.local/share/cowork/secrets%25252Ekey",
            "{\"files\": [\"~/.local/share/cowork/secrets.key\"]}",
        ] {
            assert!(own.in_text(text, &[&home]).is_some(), "{text} reaches the data directory");
        }
        for harmless in ["~/Documents/*.md", "*.md", "**/*.pdf", "~/notes/{a,b}.txt", "50% off", "$PATH", "what is 2*3?", "[draft] notes", "~/.local/share/other/*", "{\"title\": \"x\"}", "@(home)"] {
            assert!(own.in_text(harmless, &[&home]).is_none(), "{harmless}");
        }
        // Wide patterns take the data directory in without targeting it (the policy asks for those).
        for wide in ["~/**/*.md", "**/*.md", "~/.local/share/*"] {
            let hit = own.pattern_reaches(wide, &[&home], Semantics::Strict);
            assert!(hit.as_ref().is_some_and(|h| !h.targeted), "{wide}: {hit:?}");
            assert!(own.in_text(wide, &[&home]).is_none(), "{wide} is not refused outright");
        }
        // Read loosely (fnmatch: `*` across folders), a pattern over the home folder may reach it too.
        assert!(own.pattern_reaches("~/*.key", &[&home], Semantics::Strict).is_none());
        assert!(own.pattern_reaches("~/*.key", &[&home], Semantics::Loose).is_some());
        assert!(own.pattern_reaches("~/Documents/*.key", &[&home], Semantics::Loose).is_none());
    }

    #[test]
    fn cowork_s_own_program_is_known_by_name_link_and_identity() {
        let (_dir, home, _data) = setup();
        let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
        std::os::unix::fs::symlink(&exe, home.join("innocent")).unwrap();
        assert!(is_cowork_program(&home.join("innocent")), "a symlink to the running program");
        assert!(is_cowork_program(Path::new("/usr/bin/cowork")), "by its name, installed or not");
        assert!(!is_cowork_program(Path::new("/bin/ls")));
        let found = program_files("innocent", &[], &home.display().to_string());
        assert_eq!(found, vec![home.join("innocent")], "looked up on PATH as the shell does");
        assert_eq!(program_files("./x", std::slice::from_ref(&home), ""), vec![home.join("./x")]);
    }

    #[test]
    fn the_keyring_items_cowork_keeps_are_its_own_data() {
        let words = |line: &str| line.split_whitespace().map(|w| Some(w.to_owned())).collect::<Vec<_>>();
        let reach = |program: &str, line: &str| {
            let owned = words(line);
            let values: Vec<Option<&str>> = owned.iter().map(|w| w.as_deref()).collect();
            keyring_reach(program, &values)
        };
        for line in ["lookup application cowork name database-key", "search --all application cowork", "search name provider:openai", "clear name mcp-serve:token", "search --all --unlock name x"] {
            assert!(reach("secret-tool", line).is_some(), "secret-tool {line}");
        }
        assert!(keyring_reach("secret-tool", &[Some("lookup"), Some("application"), None]).is_some(), "a computed value counts as cowork's");
        for line in ["lookup service github user ana", "search --all application firefox", "store --label=x service y"] {
            assert!(reach("secret-tool", line).is_none(), "secret-tool {line}");
        }
        assert!(reach("gdbus", "call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets --method org.freedesktop.Secret.Service.SearchItems").is_some());
        assert!(reach("busctl", "--user call org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service SearchItems").is_some());
        assert!(reach("dbus-send", "--session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets").is_some());
        assert!(reach("gdbus", "call --session --dest org.freedesktop.Notifications").is_none());
        assert!(reach("kwallet-query", "-r database-key kdewallet").is_some());
    }
}
