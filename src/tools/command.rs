//! Shell command lines read the way `sh` reads them, for the approval policy
//! (pure, no thread of its own; the agent worker calls it per decision).
//!
//! Two readers:
//! - `simple_argv` recognises the one form an allow rule may match: a single
//!   simple command whose every word is literal (plain characters, single
//!   quotes, double quotes without expansions, backslash escapes). It returns
//!   the argv exactly as `sh` would build it, or None for anything compound,
//!   substituted, expanded or redirected. `canonical` spells an argv back.
//! - `analyse` reads any command line as a POSIX shell (and bash, for the
//!   strings given to `bash -c`) would: quoting, escapes, `$(…)`, backticks,
//!   `${…}` with defaults, here-documents, `~` and `~user`, `$HOME`, `$PWD`,
//!   variables assigned earlier in the line, `cd`, globs and braces. It lists
//!   every simple command the shell would run, also inside substitutions,
//!   `sh -c`, `eval`, `env`, `exec`, `xargs`, `find -exec`, `timeout`, `nohup`
//!   and friends, each with its words expanded as far as they can be known
//!   before running, the directory it runs in, and why any part cannot be
//!   known (a name computed at run time, `eval` of computed text).
//!
//! What cannot be known is never guessed as harmless: the policy asks about
//! it, and checks the known tail of a word that starts unknown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How deep `sh -c`, `eval` and substitutions nest before the reader gives up.
const MAX_NESTING: usize = 8;
/// Words a brace or glob expansion may produce before the reader gives up on it.
const MAX_EXPANSIONS: usize = 512;
/// Directories the reader keeps as "where this command may run".
const MAX_CWDS: usize = 8;

/// Builtins that set or unset variables by name.
const SETS_VARIABLES: &[&str] = &["export", "readonly", "local", "declare", "typeset", "unset", "read", "getopts", "mapfile", "readarray", "printf"];

/// An awk program that runs commands, pipes or writes files.
static AWK_RUNS: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r#"system\s*\(|\|\s*getline|getline\s*<|\|\s*"|print[f]?[^;}]*[>|]|close\s*\(|fflush"#).expect("built-in pattern"));
/// A sed script with `e` (run), `w`/`W` (write) or `r`/`R` (read a file).
static SED_RUNS: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"(^|[;\n{}]|\d|\$)\s*[eEwWrR](\s|$)|/[gpIiMm0-9]*[ew]([\s;}]|$)").expect("built-in pattern"));

/// What the reader knows of the environment a command starts in.
#[derive(Clone, Debug)]
pub struct Env<'a> {
    pub home: &'a Path,
    pub cwd: &'a Path,
    /// The variables the command gets (the shell tool passes PATH, HOME, LANG, USER, TERM).
    pub vars: &'a [(&'a str, String)],
}

/// One word after expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The whole value, when every part of it is known before running.
    pub value: Option<String>,
    /// The known text after the last part that is not (all of it when known).
    pub tail: String,
    /// Produced by a glob that matched files.
    pub globbed: bool,
}

impl Word {
    fn known(value: String) -> Self {
        Word { tail: value.clone(), value: Some(value), globbed: false }
    }

    /// The value, or `…` standing for what is not known, for messages and rules.
    pub fn shown(&self) -> String {
        match &self.value {
            Some(v) => v.clone(),
            None => format!("…{}", self.tail),
        }
    }
}

/// One simple command the shell would run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The program's name as looked up (`/bin/rm` and `"r"m` are `rm`); None: computed at run time.
    pub name: Option<String>,
    /// Every word, the name first.
    pub argv: Vec<Word>,
    /// Commands it was started through (`env`, `xargs`, `sh -c`, `find -exec`, …), outermost first.
    pub via: Vec<String>,
    /// Whether its standard input comes from a pipe, a here-document or a here-string.
    pub stdin_fed: bool,
    /// Where it may run (more than one when a `cd` before it may have failed).
    pub cwds: Vec<PathBuf>,
    /// Whether where it runs cannot be known (a `cd` to a computed place).
    pub cwd_unknown: bool,
}

impl Command {
    /// The words after the name.
    pub fn args(&self) -> &[Word] {
        self.argv.get(1..).unwrap_or_default()
    }

    /// Whether a word is exactly `flag`, or a cluster of short flags holding `letter`.
    pub fn has_flag(&self, long: &[&str], letter: Option<char>) -> bool {
        self.args().iter().filter_map(|w| w.value.as_deref()).any(|arg| {
            long.contains(&arg) || letter.is_some_and(|l| arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(l))
        })
    }

    /// The command as a line, unknown parts shown as `…`.
    pub fn shown(&self) -> String {
        canonical(&self.argv.iter().map(Word::shown).collect::<Vec<_>>())
    }

    /// The same with the program by its name (`/bin/rm` as `rm`).
    pub fn shown_named(&self) -> String {
        let mut words: Vec<String> = self.argv.iter().map(Word::shown).collect();
        if let (Some(name), Some(first)) = (&self.name, words.first_mut()) {
            first.clone_from(name);
        }
        canonical(&words)
    }
}

/// A path-like value named anywhere in the line, with where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub word: Word,
    pub cwds: Vec<PathBuf>,
    pub cwd_unknown: bool,
    /// A redirection writes it (`>`, `>>`, `<>`, `>|`).
    pub written: bool,
}

/// Everything the reader learnt about a command line.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    pub commands: Vec<Command>,
    /// Every word and redirection target, for the own-data and path checks.
    pub named: Vec<Named>,
    /// Why parts cannot be known before running (empty: everything could be read).
    pub opaque: Vec<String>,
    /// Whether the line is more than one simple command of literal words.
    pub compound: bool,
    /// A shell or interpreter reads code from a pipe (`curl … | sh`).
    pub piped_into_interpreter: Option<String>,
}

// ---------------------------------------------------------------------------
// The allow-rule form: one simple command of literal words.

/// Characters a word may hold unquoted and still be taken literally by `sh`.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./:=,+@%^-".contains(c)
}

const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in", "function", "select", "time", "coproc", "[[", "]]", "{",
    "}", "!",
];

/// The argv of a command line that is one simple command of literal words,
/// exactly as `sh` builds it; None for anything else (an operator, an
/// expansion, a glob, `~`, a redirection, a comment, an assignment, a newline).
pub fn simple_argv(line: &str) -> Option<Vec<String>> {
    let mut argv: Vec<String> = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut word = String::new();
        let mut bare_equals = false;
        while let Some(&c) = chars.peek() {
            match c {
                ' ' | '\t' => break,
                '\'' => {
                    chars.next();
                    loop {
                        match chars.next()? {
                            '\'' => break,
                            '\n' | '\r' | '\0' => return None,
                            other => word.push(other),
                        }
                    }
                }
                '"' => {
                    chars.next();
                    loop {
                        match chars.next()? {
                            '"' => break,
                            '$' | '`' | '\\' | '!' | '\n' | '\r' | '\0' => return None,
                            other => word.push(other),
                        }
                    }
                }
                '\\' => {
                    chars.next();
                    match chars.next()? {
                        '\n' | '\r' | '\0' => return None,
                        other => word.push(other),
                    }
                }
                c if plain(c) => {
                    chars.next();
                    if c == '=' && !bare_equals && argv.is_empty() && is_name(&word) {
                        // `NAME=value cmd`: an assignment, not a command word.
                        return None;
                    }
                    bare_equals |= c == '=';
                    word.push(c);
                }
                c if !c.is_ascii() && !c.is_control() && !c.is_whitespace() => {
                    chars.next();
                    word.push(c);
                }
                _ => return None,
            }
        }
        if argv.is_empty() && (RESERVED.contains(&word.as_str()) || word.is_empty()) {
            return None;
        }
        argv.push(word);
    }
    (!argv.is_empty()).then_some(argv)
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An argv as one line: plain words as they are, the rest single-quoted.
pub fn canonical(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            if !word.is_empty() && word.chars().all(plain) && !(word.starts_with('=')) {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// Lexing.

/// A piece of a word as written.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    /// Quoted or escaped text: taken as it is.
    Lit(String),
    /// Unquoted text: subject to `~`, braces and globs.
    Bare(String),
    /// `$name` or `${…}`.
    Param(Box<Param>),
    /// `$(…)` or backticks: the inner command line.
    Sub { source: String, quoted: bool },
    /// `$((…))`: a number nobody knows yet.
    Arith,
}

#[derive(Clone, Debug, PartialEq)]
struct Param {
    name: String,
    op: ParamOp,
    word: Vec<Part>,
    quoted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ParamOp {
    Plain,
    /// `-` / `:-`: the word when unset (or empty).
    Default,
    /// `=` / `:=`: the word, also assigned, when unset.
    Assign,
    /// `+` / `:+`: the word when set.
    Alternative,
    /// Anything else (`#`, `%`, `/`, length, substrings): not worked out.
    Other,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(Vec<Part>),
    Op(&'static str),
    /// A here-document or here-string's text, for the redirection before it.
    Body(Vec<Part>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dialect {
    /// Debian's `sh` (dash).
    Posix,
    /// bash, zsh, ksh: `$'…'` decodes escapes.
    Bash,
}

const OPERATORS: &[&str] = &[
    "&&", "||", ";;&", ";;", ";&", "|&", "&>>", "&>", "<<<", "<<-", "<<", ">>", ">|", "<>", "<&", ">&", ";", "&", "|", "(", ")", "<", ">", "\n",
];

struct Lexer<'a> {
    chars: Vec<char>,
    at: usize,
    dialect: Dialect,
    /// Here-documents whose bodies start after the next newline: (delimiter,
    /// strip tabs, quoted, the index of the token the body goes into).
    pending: Vec<(String, bool, bool, usize)>,
    tokens: Vec<Token>,
    _text: std::marker::PhantomData<&'a str>,
}

type LexResult<T> = Result<T, String>;

fn lex(source: &str, dialect: Dialect) -> LexResult<Vec<Token>> {
    let mut lexer = Lexer::new(source, dialect);
    lexer.run()?;
    Ok(lexer.tokens)
}

impl Lexer<'_> {
    fn new(source: &str, dialect: Dialect) -> Self {
        Lexer { chars: source.chars().collect(), at: 0, dialect, pending: Vec::new(), tokens: Vec::new(), _text: std::marker::PhantomData }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    fn starts_with(&self, text: &str) -> bool {
        text.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn run(&mut self) -> LexResult<()> {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' => self.at += 1,
                '\\' if self.peek_at(1) == Some('\n') => self.at += 2,
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                _ => {
                    if let Some(op) = OPERATORS.iter().find(|op| self.starts_with(op)) {
                        self.at += op.chars().count();
                        self.tokens.push(Token::Op(op));
                        match *op {
                            "\n" => self.read_bodies()?,
                            "<<" | "<<-" => self.heredoc_start(*op == "<<-")?,
                            _ => {}
                        }
                    } else {
                        let word = self.word(&[])?;
                        self.tokens.push(Token::Word(word));
                    }
                }
            }
        }
        if !self.pending.is_empty() {
            // A here-document with no newline after it: its body is empty.
            self.read_bodies()?;
        }
        Ok(())
    }

    fn heredoc_start(&mut self, strip: bool) -> LexResult<()> {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
        let start = self.at;
        let word = self.word(&[])?;
        let raw: String = self.chars[start..self.at].iter().collect();
        let quoted = raw.contains(['\'', '"', '\\']);
        let delimiter = literal_text(&word);
        self.tokens.push(Token::Body(Vec::new()));
        self.pending.push((delimiter, strip, quoted, self.tokens.len() - 1));
        Ok(())
    }

    fn read_bodies(&mut self) -> LexResult<()> {
        for (delimiter, strip, quoted, index) in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            loop {
                if self.peek().is_none() {
                    break;
                }
                let mut line = String::new();
                while let Some(c) = self.peek() {
                    self.at += 1;
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let check = if strip { line.trim_start_matches('\t') } else { line.as_str() };
                if check == delimiter {
                    break;
                }
                body.push_str(check);
                body.push('\n');
            }
            let parts = if quoted { vec![Part::Lit(body)] } else { heredoc_parts(&body, self.dialect)? };
            self.tokens[index] = Token::Body(parts);
        }
        Ok(())
    }

    /// One word, up to an unquoted blank or operator (or one of `stop`).
    fn word(&mut self, stop: &[char]) -> LexResult<Vec<Part>> {
        let mut parts: Vec<Part> = Vec::new();
        let mut bare = String::new();
        let flush = |parts: &mut Vec<Part>, bare: &mut String| {
            if !bare.is_empty() {
                parts.push(Part::Bare(std::mem::take(bare)));
            }
        };
        while let Some(c) = self.peek() {
            if stop.contains(&c) {
                break;
            }
            match c {
                ' ' | '\t' | '\n' | '\r' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\\' => {
                    self.at += 1;
                    match self.peek() {
                        Some('\n') => self.at += 1,
                        Some(escaped) => {
                            self.at += 1;
                            flush(&mut parts, &mut bare);
                            parts.push(Part::Lit(escaped.to_string()));
                        }
                        None => {}
                    }
                }
                '\'' => {
                    self.at += 1;
                    let mut text = String::new();
                    loop {
                        match self.peek() {
                            None => return Err("a quote (') is not closed".into()),
                            Some('\'') => {
                                self.at += 1;
                                break;
                            }
                            Some(other) => {
                                text.push(other);
                                self.at += 1;
                            }
                        }
                    }
                    flush(&mut parts, &mut bare);
                    parts.push(Part::Lit(text));
                }
                '"' => {
                    self.at += 1;
                    flush(&mut parts, &mut bare);
                    let inner = self.double_quoted()?;
                    parts.extend(inner);
                }
                '`' => {
                    self.at += 1;
                    flush(&mut parts, &mut bare);
                    let source = self.backticks()?;
                    parts.push(Part::Sub { source, quoted: false });
                }
                '$' => {
                    flush(&mut parts, &mut bare);
                    match self.dollar(false)? {
                        Some(part) => parts.push(part),
                        None => bare.push('$'),
                    }
                }
                other => {
                    self.at += 1;
                    bare.push(other);
                }
            }
        }
        flush(&mut parts, &mut bare);
        Ok(parts)
    }

    /// After an opening `"`: up to the closing one.
    fn double_quoted(&mut self) -> LexResult<Vec<Part>> {
        self.quoted_text(false)
    }

    /// Double-quoted text, or a here-document's body (`heredoc`: to the end,
    /// and `"` is an ordinary character).
    fn quoted_text(&mut self, heredoc: bool) -> LexResult<Vec<Part>> {
        let mut parts = Vec::new();
        let mut text = String::new();
        loop {
            match self.peek() {
                None if heredoc => break,
                None => return Err("a quote (\") is not closed".into()),
                Some('"') if !heredoc => {
                    self.at += 1;
                    break;
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some('\n') => self.at += 1,
                        Some(c @ ('$' | '`' | '\\')) => {
                            self.at += 1;
                            text.push(c);
                        }
                        Some('"') if !heredoc => {
                            self.at += 1;
                            text.push('"');
                        }
                        _ => text.push('\\'),
                    }
                }
                Some('`') => {
                    self.at += 1;
                    if !text.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut text)));
                    }
                    let source = self.backticks()?;
                    parts.push(Part::Sub { source, quoted: true });
                }
                Some('$') => match self.dollar(true)? {
                    Some(part) => {
                        if !text.is_empty() {
                            parts.push(Part::Lit(std::mem::take(&mut text)));
                        }
                        parts.push(part);
                    }
                    None => text.push('$'),
                },
                Some(other) => {
                    self.at += 1;
                    text.push(other);
                }
            }
        }
        if !text.is_empty() || parts.is_empty() {
            parts.push(Part::Lit(text));
        }
        Ok(parts)
    }

    /// After an opening backtick: the inner command, its escapes removed.
    fn backticks(&mut self) -> LexResult<String> {
        let mut source = String::new();
        loop {
            match self.peek() {
                None => return Err("a backtick (`) is not closed".into()),
                Some('`') => {
                    self.at += 1;
                    return Ok(source);
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some(c @ ('$' | '`' | '\\')) => {
                            self.at += 1;
                            source.push(c);
                        }
                        _ => source.push('\\'),
                    }
                }
                Some(other) => {
                    self.at += 1;
                    source.push(other);
                }
            }
        }
    }

    /// At a `$`: an expansion, or None when the `$` is literal.
    fn dollar(&mut self, quoted: bool) -> LexResult<Option<Part>> {
        self.at += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.at += 2;
                self.balanced('(', ')', 2)?;
                Ok(Some(Part::Arith))
            }
            Some('(') => {
                self.at += 1;
                let source = self.command_substitution()?;
                Ok(Some(Part::Sub { source, quoted }))
            }
            Some('{') => {
                self.at += 1;
                let start = self.at;
                self.balanced('{', '}', 1)?;
                let inner: String = self.chars[start..self.at - 1].iter().collect();
                Ok(Some(Part::Param(Box::new(braced_param(&inner, quoted, self.dialect)?))))
            }
            Some('\'') if !quoted && self.dialect == Dialect::Bash => {
                self.at += 1;
                let mut raw = String::new();
                loop {
                    match self.peek() {
                        None => return Err("a quote ($') is not closed".into()),
                        Some('\\') => {
                            raw.push('\\');
                            self.at += 1;
                            if let Some(c) = self.peek() {
                                raw.push(c);
                                self.at += 1;
                            }
                        }
                        Some('\'') => {
                            self.at += 1;
                            break;
                        }
                        Some(c) => {
                            raw.push(c);
                            self.at += 1;
                        }
                    }
                }
                Ok(Some(Part::Lit(ansi_c(&raw))))
            }
            // `$"…"` is a translated string: the `$` goes, a double-quoted string follows.
            Some('"') if !quoted && self.dialect == Dialect::Bash => Ok(Some(Part::Lit(String::new()))),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::new();
                while let Some(c) = self.peek().filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
                    name.push(c);
                    self.at += 1;
                }
                Ok(Some(Part::Param(Box::new(Param { name, op: ParamOp::Plain, word: Vec::new(), quoted }))))
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.at += 1;
                Ok(Some(Part::Param(Box::new(Param { name: c.to_string(), op: ParamOp::Plain, word: Vec::new(), quoted }))))
            }
            _ => Ok(None),
        }
    }

    /// Skips to the close of a bracketed text whose opening brackets were read,
    /// minding quotes and nesting.
    fn balanced(&mut self, open: char, close: char, mut depth: usize) -> LexResult<()> {
        while depth > 0 {
            match self.peek() {
                None => return Err(format!("a {open} is not closed")),
                Some('\\') => self.at += 2,
                Some('\'') if open == '{' => {
                    self.at += 1;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.at += 1;
                    }
                    self.at += 1;
                }
                Some('"') => {
                    self.at += 1;
                    self.double_quoted()?;
                }
                Some('$') if self.peek_at(1) == Some('(') && open == '{' => {
                    self.at += 2;
                    self.command_substitution()?;
                }
                Some(c) if c == open => {
                    depth += 1;
                    self.at += 1;
                }
                Some(c) if c == close => {
                    depth -= 1;
                    self.at += 1;
                }
                Some(_) => self.at += 1,
            }
        }
        Ok(())
    }

    /// After `$(`: the inner command line, up to its matching `)`. The inner
    /// line is lexed as a command line would be (quotes, nested
    /// substitutions, `case` patterns with their lone `)`).
    fn command_substitution(&mut self) -> LexResult<String> {
        let start = self.at;
        let mut depth = 1usize;
        let mut cases = 0usize;
        let mut word_start = true;
        loop {
            let Some(c) = self.peek() else { return Err("a $( is not closed".into()) };
            match c {
                '\\' => {
                    self.at += 2;
                    word_start = false;
                }
                '\'' => {
                    self.at += 1;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.at += 1;
                    }
                    if self.peek().is_none() {
                        return Err("a quote (') is not closed".into());
                    }
                    self.at += 1;
                    word_start = false;
                }
                '"' => {
                    self.at += 1;
                    self.double_quoted()?;
                    word_start = false;
                }
                '`' => {
                    self.at += 1;
                    self.backticks()?;
                    word_start = false;
                }
                '$' if self.peek_at(1) == Some('(') => {
                    self.at += 2;
                    if self.peek() == Some('(') {
                        self.at += 1;
                        self.balanced('(', ')', 2)?;
                    } else {
                        self.command_substitution()?;
                    }
                    word_start = false;
                }
                '#' if word_start => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '(' => {
                    depth += 1;
                    self.at += 1;
                    word_start = true;
                }
                ')' => {
                    self.at += 1;
                    if cases > 0 && depth == 1 {
                        word_start = true;
                        continue;
                    }
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.chars[start..self.at - 1].iter().collect());
                    }
                    word_start = true;
                }
                c if c.is_whitespace() || ";&|<>".contains(c) => {
                    self.at += 1;
                    word_start = true;
                }
                _ => {
                    if word_start {
                        let mut word = String::new();
                        let mut at = self.at;
                        while let Some(c) = self.chars.get(at).filter(|c| c.is_ascii_alphanumeric()) {
                            word.push(*c);
                            at += 1;
                        }
                        let ends = self.chars.get(at).is_none_or(|c| c.is_whitespace() || ";&|()".contains(*c));
                        if ends && word == "case" {
                            cases += 1;
                        } else if ends && word == "esac" {
                            cases = cases.saturating_sub(1);
                        }
                    }
                    self.at += 1;
                    word_start = false;
                }
            }
        }
    }
}

/// The text of a word whose parts are all literal (a here-document delimiter).
fn literal_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| match p {
            Part::Lit(t) | Part::Bare(t) => t.clone(),
            _ => String::new(),
        })
        .collect()
}

/// An unquoted here-document's body: expansions and substitutions, as in double quotes.
fn heredoc_parts(text: &str, dialect: Dialect) -> LexResult<Vec<Part>> {
    Lexer::new(text, dialect).quoted_text(true)
}

/// `${…}`'s inside.
fn braced_param(inner: &str, quoted: bool, dialect: Dialect) -> LexResult<Param> {
    if let Some(rest) = inner.strip_prefix('#').filter(|r| !r.is_empty()) {
        return Ok(Param { name: rest.to_owned(), op: ParamOp::Other, word: Vec::new(), quoted });
    }
    let name_len = if inner.starts_with(|c: char| c.is_ascii_digit() || "@*#?$!-".contains(c)) {
        1
    } else {
        inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(inner.len())
    };
    let (name, rest) = inner.split_at(name_len);
    if rest.is_empty() {
        return Ok(Param { name: name.to_owned(), op: ParamOp::Plain, word: Vec::new(), quoted });
    }
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let (op, word) = match rest.chars().next() {
        Some('-') => (ParamOp::Default, &rest[1..]),
        Some('=') => (ParamOp::Assign, &rest[1..]),
        Some('+') => (ParamOp::Alternative, &rest[1..]),
        _ => (ParamOp::Other, ""),
    };
    let mut lexer = Lexer::new(word, dialect);
    let mut parts = Vec::new();
    while lexer.peek().is_some() {
        // Inside `${…}` blanks and operators are text, not separators.
        match lexer.peek() {
            Some(c) if " \t\n;&|()<>".contains(c) => {
                lexer.at += 1;
                parts.push(Part::Lit(c.to_string()));
            }
            _ => parts.extend(lexer.word(&[' ', '\t', '\n', ';', '&', '|', '(', ')', '<', '>'])?),
        }
    }
    Ok(Param { name: name.to_owned(), op, word: parts, quoted })
}

/// bash's `$'…'` escapes.
fn ansi_c(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('e' | 'E') => out.push('\x1b'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('x') => {
                let hex: String = std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_hexdigit())).take(2).collect();
                if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(c);
                }
            }
            Some(c @ ('u' | 'U')) => {
                let width = if c == 'u' { 4 } else { 8 };
                let hex: String = std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_hexdigit())).take(width).collect();
                if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(c);
                }
            }
            Some(c @ '0'..='7') => {
                let mut octal = c.to_string();
                while octal.len() < 3 {
                    match chars.next_if(|c| ('0'..='7').contains(c)) {
                        Some(d) => octal.push(d),
                        None => break,
                    }
                }
                if let Some(c) = u32::from_str_radix(&octal, 8).ok().and_then(char::from_u32) {
                    out.push(c);
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Reading the tokens into simple commands.

/// A simple command as written, before expansion.
#[derive(Clone, Debug, Default)]
struct Raw {
    assigns: Vec<(String, Vec<Part>)>,
    words: Vec<Vec<Part>>,
    /// (operator, target or body)
    redirects: Vec<(&'static str, Vec<Part>)>,
    /// Nested in a loop, condition, function, group or case.
    depth: usize,
    /// After `|`: its input comes from a pipe.
    piped_in: bool,
    /// Closing scopes (`)`) seen before this command.
    scope: Vec<usize>,
    /// Words that are not a command but are still expanded (`for … in WORDS`, `case WORD`).
    words_only: bool,
}

/// The tokens still to read, with a look ahead.
type Tokens = std::iter::Peekable<std::vec::IntoIter<Token>>;

/// Where `commands_of` is while it reads tokens in order.
#[derive(Default)]
struct Splitter {
    out: Vec<Raw>,
    current: Raw,
    depth: usize,
    scope: Vec<usize>,
    next_scope: usize,
    piped: bool,
    compound: bool,
    /// `case`: 0 outside; 1 reading the subject; 2 reading `in`; 3 reading patterns; 4 in a branch.
    case_state: Vec<u8>,
    /// `for NAME in …`: the next word is a name (1), then `in` and words (2).
    for_state: u8,
}

/// Reads tokens into simple commands, in order, with how deep each is.
fn commands_of(tokens: Vec<Token>) -> (Vec<Raw>, bool) {
    let mut splitter = Splitter::default();
    let mut iter = tokens.into_iter().peekable();
    while let Some(token) = iter.next() {
        match token {
            Token::Word(parts) => splitter.read_word(parts, &mut iter),
            Token::Body(parts) => {
                // A body with no `<<` before it (cannot happen from the lexer): still read.
                splitter.push_words_only(vec![parts]);
            }
            Token::Op(op) => splitter.read_operator(op, &mut iter),
        }
    }
    splitter.finish(splitter.piped);
    let Splitter { out, mut compound, .. } = splitter;
    compound |= out.len() > 1 || out.iter().any(|r| !r.redirects.is_empty() || !r.assigns.is_empty() || r.words_only);
    (out, compound)
}

impl Splitter {
    /// Ends the command being read, if it holds anything, at the current depth and scope.
    fn finish(&mut self, piped: bool) {
        let current = &mut self.current;
        if !current.words.is_empty() || !current.assigns.is_empty() || !current.redirects.is_empty() {
            let mut raw = std::mem::take(current);
            raw.depth = self.depth;
            raw.scope = self.scope.clone();
            raw.piped_in = piped;
            self.out.push(raw);
        }
    }

    /// Records words that are expanded but not run (`case WORD`, `[[ … ]]`, a stray body).
    fn push_words_only(&mut self, words: Vec<Vec<Part>>) {
        self.out.push(Raw { words, words_only: true, depth: self.depth, scope: self.scope.clone(), ..Raw::default() });
    }

    /// Moves the innermost `case` on to `state`.
    fn set_case_state(&mut self, state: u8) {
        if let Some(last) = self.case_state.last_mut() {
            *last = state;
        }
    }

    /// A word: part of a `for` or `case` header, a reserved word, an assignment, a function's name or a command's word.
    fn read_word(&mut self, parts: Vec<Part>, iter: &mut Tokens) {
        let text = literal_text(&parts);
        let plain_word = parts.iter().all(|p| matches!(p, Part::Bare(_)));
        if self.for_state == 1 {
            self.for_state = 2;
            self.out.push(Raw { assigns: vec![(text, vec![Part::Arith])], depth: self.depth + 1, scope: self.scope.clone(), ..Raw::default() });
            return;
        }
        if self.for_state == 2 {
            self.for_word(parts, &text, plain_word);
            return;
        }
        if let Some(state @ 1..=3) = self.case_state.last().copied() {
            self.case_word(state, parts, &text, plain_word);
            return;
        }
        let at_start = self.current.words.is_empty() && self.current.assigns.is_empty();
        if at_start && plain_word && self.reserved_word(&text, iter) {
            return;
        }
        if self.current.words.is_empty()
            && let Some(eq) = assignment(&parts)
        {
            self.current.assigns.push(eq);
            return;
        }
        if self.function_definition(iter) {
            return;
        }
        self.current.words.push(parts);
    }

    /// A word after `for NAME`: `in`, `do`, or one of the words the loop goes over.
    fn for_word(&mut self, parts: Vec<Part>, text: &str, plain_word: bool) {
        if text == "in" && plain_word && self.current.words.is_empty() {
            return;
        }
        if text == "do" && plain_word {
            self.finish(false);
            self.for_state = 0;
            return;
        }
        self.current.words_only = true;
        self.current.words.push(parts);
    }

    /// A word of a `case` header in `state` 1 (the subject), 2 (`in`) or 3 (a pattern).
    fn case_word(&mut self, state: u8, parts: Vec<Part>, text: &str, plain_word: bool) {
        match state {
            1 => {
                self.push_words_only(vec![parts]);
                self.set_case_state(2);
            }
            2 => self.set_case_state(3),
            3 if text == "esac" && plain_word => {
                self.case_state.pop();
                self.depth = self.depth.saturating_sub(1);
            }
            // Patterns are matched, not run or opened.
            _ => {}
        }
    }

    /// A reserved word at a command's start: true when `text` is one (it opens or closes a compound command).
    fn reserved_word(&mut self, text: &str, iter: &mut Tokens) -> bool {
        match text {
            "if" | "while" | "until" | "{" | "!" | "time" | "then" | "else" | "elif" | "do" | "coproc" => {
                self.compound = true;
                if matches!(text, "if" | "while" | "until" | "{") {
                    self.depth += 1;
                }
            }
            "fi" | "done" | "}" => {
                self.compound = true;
                self.depth = self.depth.saturating_sub(1);
            }
            "for" | "select" => {
                self.compound = true;
                self.depth += 1;
                self.for_state = 1;
            }
            "case" => {
                self.compound = true;
                self.depth += 1;
                self.case_state.push(1);
            }
            "esac" => {
                self.depth = self.depth.saturating_sub(1);
                self.case_state.pop();
            }
            "function" => {
                self.compound = true;
                // The name is not a command; the body follows.
                iter.next();
                self.depth += 1;
            }
            "[[" => {
                self.compound = true;
                let mut words = Vec::new();
                for token in iter.by_ref() {
                    match token {
                        Token::Word(p) if literal_text(&p) == "]]" => break,
                        Token::Word(p) => words.push(p),
                        _ => {}
                    }
                }
                self.push_words_only(words);
            }
            _ => return false,
        }
        true
    }

    /// `name() …`: a function definition, whose body follows; true when the tokens ahead make one.
    fn function_definition(&mut self, iter: &mut Tokens) -> bool {
        if self.current.words.is_empty() && self.current.assigns.is_empty() && iter.peek() == Some(&Token::Op("(")) {
            let mut lookahead = iter.clone();
            lookahead.next();
            if lookahead.peek() == Some(&Token::Op(")")) {
                iter.next();
                iter.next();
                self.compound = true;
                self.depth += 1;
                return true;
            }
        }
        false
    }

    /// An operator: a redirection, a pipe, a subshell's bounds, a `case` branch's end, or a list separator.
    fn read_operator(&mut self, op: &'static str, iter: &mut Tokens) {
        match op {
            "<" | ">" | ">>" | ">|" | "<>" | "<&" | ">&" | "&>" | "&>>" | "<<<" => {
                self.drop_fd_word();
                // A redirection with no word after it is a syntax error for sh: nothing is named.
                let target = match iter.next_if(|t| matches!(t, Token::Word(_))) {
                    Some(Token::Word(parts)) => parts,
                    _ => Vec::new(),
                };
                self.current.redirects.push((op, target));
                self.compound = true;
            }
            "<<" | "<<-" => {
                self.drop_fd_word();
                // The body, read by the lexer after the line ends, sits where the delimiter was.
                let body = match iter.next_if(|t| matches!(t, Token::Body(_))) {
                    Some(Token::Body(parts)) => parts,
                    _ => Vec::new(),
                };
                self.current.redirects.push((op, body));
                self.compound = true;
            }
            // `a|b)` in a case: alternative patterns.
            "|" if self.case_state.last() == Some(&3) => {}
            "(" if self.case_state.last() == Some(&3) => {}
            "|" | "|&" => {
                self.finish(self.piped);
                self.piped = true;
                self.compound = true;
            }
            "(" => {
                self.finish(self.piped);
                self.piped = false;
                self.next_scope += 1;
                self.scope.push(self.next_scope);
                self.compound = true;
            }
            ")" => {
                self.finish(self.piped);
                self.piped = false;
                if let Some(state) = self.case_state.last_mut()
                    && *state == 3
                {
                    *state = 4;
                    return;
                }
                self.scope.pop();
                self.compound = true;
            }
            ";;" | ";&" | ";;&" => {
                self.finish(self.piped);
                self.piped = false;
                self.set_case_state(3);
            }
            _ => {
                // ; & && || newline
                self.finish(self.piped);
                self.piped = false;
                self.compound |= op != "\n" || iter.peek().is_some();
            }
        }
    }

    /// Before a redirection, a word of digits was its file descriptor, not an argument.
    fn drop_fd_word(&mut self) {
        if let Some(last) = self.current.words.last()
            && matches!(last.as_slice(), [Part::Bare(t)] if t.chars().all(|c| c.is_ascii_digit()))
        {
            self.current.words.pop();
        }
    }
}

/// `NAME=value` at the start of a command: the name and the value's parts.
fn assignment(parts: &[Part]) -> Option<(String, Vec<Part>)> {
    let Some(Part::Bare(first)) = parts.first() else { return None };
    let eq = first.find('=')?;
    let name = &first[..eq];
    if !is_name(name) {
        return None;
    }
    let mut value = Vec::new();
    let rest = &first[eq + 1..];
    if !rest.is_empty() {
        value.push(Part::Bare(rest.to_owned()));
    }
    value.extend(parts[1..].iter().cloned());
    Some((name.to_owned(), value))
}

// ---------------------------------------------------------------------------
// Expansion.

#[derive(Clone, Debug)]
enum Var {
    Known(String),
    Unknown,
}

/// A subshell's saved directory and variables.
type Saved = (Vec<PathBuf>, bool, HashMap<String, Var>);

/// What a line's commands see while it is read in order.
#[derive(Clone, Debug)]
struct Scope {
    vars: HashMap<String, Var>,
    /// Variables the line assigns inside a loop, condition or function: unknown wherever read there.
    assigned_anywhere: Vec<String>,
    cwds: Vec<PathBuf>,
    cwd_unknown: bool,
    dialect: Dialect,
    /// Globs match names that start with a dot (bash's `dotglob`, zsh's `GLOB_DOTS`).
    dotglob: bool,
}

/// A piece of an expanded word.
#[derive(Clone, Debug)]
enum Seg {
    /// `bare`: unquoted, so glob characters in it are patterns; `split`: the
    /// unquoted result of an expansion, so IFS characters in it split words
    /// (literal text never splits).
    Text { text: String, bare: bool, split: bool },
    Unknown,
}

struct Reader<'a> {
    env: &'a Env<'a>,
    analysis: Analysis,
    nesting: usize,
}

/// Reads a command line as `sh` would, as far as it can be known before it runs.
pub fn analyse(line: &str, env: &Env<'_>) -> Analysis {
    let mut reader = Reader { env, analysis: Analysis::default(), nesting: 0 };
    let mut vars: HashMap<String, Var> = HashMap::new();
    for (name, value) in env.vars {
        vars.insert((*name).to_owned(), Var::Known(value.clone()));
    }
    vars.insert("PWD".into(), Var::Known(env.cwd.to_string_lossy().into_owned()));
    // sh sets IFS itself, whatever the environment says.
    vars.insert("IFS".into(), Var::Known(" \t\n".into()));
    let mut scope = Scope { vars, assigned_anywhere: Vec::new(), cwds: vec![env.cwd.to_path_buf()], cwd_unknown: false, dialect: Dialect::Posix, dotglob: false };
    reader.script(line, &mut scope, &[], false);
    reader.analysis.compound |= simple_argv(line).is_none();
    reader.analysis
}

/// `export`, `unset`, `read`, …: the variables they set (known only outside loops and conditions) or remove.
fn set_variables(command: &str, args: &[Word], scope: &mut Scope, depth: usize) {
    for arg in args {
        let Some(text) = &arg.value else { continue };
        let (var, value) = text.split_once('=').map_or((text.as_str(), None), |(n, v)| (n, Some(v)));
        if !is_name(var) {
            continue;
        }
        match (command, value) {
            ("unset", _) if depth == 0 => {
                scope.vars.remove(var);
            }
            ("export" | "readonly" | "local" | "declare" | "typeset", Some(value)) if depth == 0 => {
                scope.vars.insert(var.to_owned(), Var::Known(value.to_owned()));
            }
            ("export" | "readonly" | "local" | "declare" | "typeset", None) => {}
            _ => {
                scope.vars.insert(var.to_owned(), Var::Unknown);
            }
        }
    }
}

/// A wrapper's options that take a value, so the word after them is not the command it starts.
fn wrapper_options_with_value(name: &str) -> &'static [&'static str] {
    match name {
        "nice" => &["-n", "--adjustment"],
        "ionice" => &["-c", "-n", "-p", "--class", "--classdata"],
        "timeout" => &["-s", "--signal", "-k", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e"],
        "exec" => &["-a"],
        "sudo" | "doas" | "runuser" | "su" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"],
        "flock" => &["-w", "--timeout", "-E", "--conflict-exit-code"],
        "taskset" | "chrt" | "prlimit" => &["-p", "--pid"],
        "systemd-run" => &["-p", "--property", "-u", "--unit", "-E", "--setenv", "--slice", "-M", "--machine", "--working-directory", "--uid", "--gid"],
        "script" => &["-c", "--command", "-T", "-t", "--log-timing", "-I", "-O", "-B"],
        "watch" => &["-n", "--interval", "-d"],
        "strace" | "ltrace" => &["-e", "-o", "-p", "-s", "-u", "-E", "-P", "-a", "-S"],
        _ => &[],
    }
}

impl Reader<'_> {
    fn opaque(&mut self, why: impl Into<String>) {
        let why = why.into();
        if !self.analysis.opaque.contains(&why) {
            self.analysis.opaque.push(why);
        }
    }

    /// Reads a command line in `scope` (its variables and directory change as it goes).
    fn script(&mut self, source: &str, scope: &mut Scope, via: &[String], stdin_fed: bool) {
        if self.nesting >= MAX_NESTING {
            self.opaque("it nests commands deeper than cowork reads");
            return;
        }
        self.nesting += 1;
        match lex(source, scope.dialect) {
            Ok(tokens) => {
                let (raws, compound) = commands_of(tokens);
                self.analysis.compound |= compound;
                // Variables set inside a loop, condition or function are unknown wherever read there.
                for raw in raws.iter().filter(|r| r.depth > 0) {
                    let mut names: Vec<String> = raw.assigns.iter().map(|(n, _)| n.clone()).collect();
                    let first = raw.words.first().map(|w| literal_text(w)).unwrap_or_default();
                    if SETS_VARIABLES.contains(&first.as_str()) {
                        names.extend(raw.words[1..].iter().map(|w| literal_text(w)).map(|w| w.split('=').next().unwrap_or_default().to_owned()).filter(|n| is_name(n)));
                    }
                    for name in names {
                        if !scope.assigned_anywhere.contains(&name) {
                            scope.assigned_anywhere.push(name);
                        }
                    }
                }
                // What a subshell's start saved, restored when it ends: (scope id, (cwds, cwd unknown, variables)).
                let mut saved: Vec<(usize, Saved)> = Vec::new();
                let mut current_scope: Vec<usize> = Vec::new();
                for raw in &raws {
                    // Leaving a subshell: its `cd` and variables end with it.
                    while current_scope.len() > raw.scope.len() || current_scope.iter().zip(&raw.scope).any(|(a, b)| a != b) {
                        let Some(left) = current_scope.pop() else { break };
                        if let Some(position) = saved.iter().rposition(|(id, _)| *id == left) {
                            let (_, (cwds, unknown, vars)) = saved.remove(position);
                            scope.cwds = cwds;
                            scope.cwd_unknown = unknown;
                            scope.vars = vars;
                        }
                    }
                    for id in raw.scope.iter().skip(current_scope.len()) {
                        saved.push((*id, (scope.cwds.clone(), scope.cwd_unknown, scope.vars.clone())));
                        current_scope.push(*id);
                    }
                    self.command(raw, scope, via, stdin_fed);
                }
            }
            Err(err) => {
                self.analysis.compound = true;
                self.opaque(format!("cowork cannot read it: {err}"));
                // Still look at what it names.
                let word = Word { value: None, tail: source.to_owned(), globbed: false };
                self.name(word, scope, false);
            }
        }
        self.nesting -= 1;
    }

    fn name(&mut self, word: Word, scope: &Scope, written: bool) {
        self.analysis.named.push(Named { word, cwds: scope.cwds.clone(), cwd_unknown: scope.cwd_unknown, written });
    }

    fn command(&mut self, raw: &Raw, scope: &mut Scope, via: &[String], stdin_fed: bool) {
        // Assignments first: their values are named, and alone they set variables.
        let mut assigned: Vec<(String, Option<String>)> = Vec::new();
        for (name, value) in &raw.assigns {
            // bash: setting GLOBIGNORE turns dotglob on.
            if name == "GLOBIGNORE" {
                scope.dotglob = true;
            }
            let words = self.expand_assignment(value, scope, raw.depth);
            let joined = join_words(&words);
            for word in words {
                self.name(word, scope, false);
            }
            assigned.push((name.clone(), joined));
        }
        let mut argv: Vec<Word> = Vec::new();
        for parts in &raw.words {
            argv.extend(self.expand(parts, scope, raw.depth, true));
        }
        let mut fed = stdin_fed || raw.piped_in;
        let mut bodies: Vec<Word> = Vec::new();
        for (op, target) in &raw.redirects {
            let expanded = self.expand(target, scope, raw.depth, false);
            let written = matches!(*op, ">" | ">>" | ">|" | "<>" | "&>" | "&>>");
            if matches!(*op, "<<" | "<<-" | "<<<") {
                fed = true;
                bodies.extend(expanded.iter().cloned());
            }
            if matches!(*op, ">&" | "<&") && expanded.iter().all(|w| w.value.as_deref().is_some_and(|v| v == "-" || v.chars().all(|c| c.is_ascii_digit()))) {
                continue;
            }
            for word in expanded {
                self.name(word, scope, written);
            }
        }
        if raw.words_only || argv.is_empty() {
            for word in argv {
                self.name(word, scope, false);
            }
            if raw.words.is_empty() && !raw.words_only {
                for (name, value) in assigned {
                    let var = match value {
                        Some(v) if raw.depth == 0 => Var::Known(v),
                        _ => Var::Unknown,
                    };
                    scope.vars.insert(name, var);
                }
            }
            return;
        }
        for word in &argv {
            self.name(word.clone(), scope, false);
        }
        self.run(argv, scope, via.to_vec(), fed, &bodies, raw.depth);
    }

    /// One command with its expanded words: recorded, then what it starts read too.
    fn run(&mut self, argv: Vec<Word>, scope: &mut Scope, via: Vec<String>, stdin_fed: bool, bodies: &[Word], depth: usize) {
        let name = argv.first().and_then(|w| w.value.as_deref()).map(|v| v.rsplit('/').next().unwrap_or(v).to_owned());
        if name.is_none() {
            self.opaque("the program it runs is computed when it runs");
        }
        self.analysis.commands.push(Command {
            name: name.clone(),
            argv: argv.clone(),
            via: via.clone(),
            stdin_fed,
            cwds: scope.cwds.clone(),
            cwd_unknown: scope.cwd_unknown,
        });
        let Some(name) = name else { return };
        let args: Vec<Word> = argv[1..].to_vec();
        let value = |w: &Word| w.value.clone();
        let mut inner_via = via.clone();
        inner_via.push(name.clone());
        match name.as_str() {
            "cd" | "pushd" => self.cd(&args, scope),
            "popd" => scope.cwd_unknown = true,
            // Options that widen what globs match.
            "shopt" | "setopt" | "set" if args.iter().any(|w| w.value.as_deref().is_none_or(|v| v.to_ascii_lowercase().replace('_', "").contains("dotglob") || v.to_ascii_lowercase().replace('_', "").contains("globdots"))) => {
                scope.dotglob = true;
            }
            _ if SETS_VARIABLES.contains(&name.as_str()) => set_variables(&name, &args, scope, depth),
            "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "posh" | "yash" | "busybox" => {
                let (args, shell) = if name == "busybox" {
                    match args.first().and_then(value) {
                        Some(applet) if matches!(applet.as_str(), "sh" | "ash" | "hush") => (args[1..].to_vec(), applet),
                        Some(_) => {
                            self.run(args.clone(), scope, inner_via, stdin_fed, bodies, depth);
                            return;
                        }
                        None => {
                            self.opaque("busybox runs a program computed when it runs");
                            return;
                        }
                    }
                } else {
                    (args, name.clone())
                };
                self.shell(&shell, &args, scope, inner_via, stdin_fed, bodies);
            }
            "eval" => {
                let text: Option<Vec<String>> = args.iter().map(value).collect();
                match text {
                    Some(words) => {
                        let line = words.join(" ");
                        self.script(&line, scope, &inner_via, stdin_fed);
                    }
                    None => self.opaque("eval runs text computed when it runs"),
                }
            }
            "source" | "." => {
                if let Some(file) = args.first() {
                    self.analysis.named.push(Named { word: file.clone(), cwds: scope.cwds.clone(), cwd_unknown: scope.cwd_unknown, written: false });
                }
                self.opaque(format!("{name} runs the commands of a file cowork does not read"));
            }
            "env" => self.wrapped(&args, &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"], scope, inner_via, stdin_fed, bodies, depth, |rest| {
                rest.iter().position(|w| {
                    w.value.as_deref().is_none_or(|v| !(v.starts_with('-') || (v.contains('=') && is_name(v.split('=').next().unwrap_or_default()))))
                })
            }),
            "exec" | "command" | "builtin" | "nohup" | "setsid" | "time" | "unbuffer" | "chronic" | "catchsegv" | "stdbuf" | "nice" | "ionice" | "chrt" | "taskset"
            | "timeout" | "sudo" | "doas" | "pkexec" | "run0" | "su" | "flock" | "firejail" | "strace" | "ltrace" | "valgrind" | "prlimit" | "cgexec"
            | "systemd-run" | "script" | "watch" | "unshare" | "nsenter" | "chroot" | "xvfb-run" | "dbus-run-session" | "torsocks" | "proxychains"
            | "proxychains4" | "faketime" | "ssh-agent" | "sg" | "newgrp" | "runuser" => {
                if self.wrapper_runs_text(&name, &args, scope, &inner_via, stdin_fed) {
                    return;
                }
                let with_value = wrapper_options_with_value(&name);
                let takes_first_positional = matches!(name.as_str(), "timeout" | "taskset" | "flock" | "chroot" | "sg" | "newgrp");
                self.wrapped(&args, with_value, scope, inner_via, stdin_fed, bodies, depth, |rest| {
                    let mut positional_seen = false;
                    rest.iter().position(|w| match w.value.as_deref() {
                        Some("--") => false,
                        Some(v) if v.starts_with('-') && v.len() > 1 => false,
                        Some(v) if v.contains('=') && name == "sudo" => false,
                        _ if takes_first_positional && !positional_seen => {
                            positional_seen = true;
                            false
                        }
                        _ => true,
                    })
                });
            }
            "xargs" | "parallel" => self.xargs(&args, scope, inner_via, depth),
            "find" => self.find_exec(&args, scope, &inner_via, depth),
            "python" | "python2" | "python3" | "perl" | "ruby" | "node" | "nodejs" | "deno" | "bun" | "php" | "lua" | "luajit" | "Rscript" | "tclsh" | "wish"
            | "expect" | "osascript" | "pwsh" | "julia" | "racket" | "guile" | "ocaml" | "ghci" | "irb" => {
                self.interpreter(&name, &args, stdin_fed, bodies);
            }
            "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => self.awk(&name, &args),
            "sed" | "gsed" => self.sed(&name, &args),
            _ => {}
        }
    }

    /// `su -c`, `script -c`, `watch`, …: reads the command line a wrapper runs given as text; true when it was one.
    fn wrapper_runs_text(&mut self, name: &str, args: &[Word], scope: &mut Scope, via: &[String], stdin_fed: bool) -> bool {
        let value = |w: &Word| w.value.clone();
        if matches!(name, "su" | "runuser" | "sg")
            && let Some(pos) = args.iter().position(|w| matches!(w.value.as_deref(), Some("-c" | "--command")))
        {
            match args.get(pos + 1).and_then(value) {
                Some(line) => self.script(&line, scope, via, stdin_fed),
                None => self.opaque(format!("{name} runs a command computed when it runs")),
            }
            return true;
        }
        if name == "script" {
            if let Some(pos) = args.iter().position(|w| matches!(w.value.as_deref(), Some("-c" | "--command"))) {
                match args.get(pos + 1).and_then(value) {
                    Some(line) => self.script(&line, scope, via, stdin_fed),
                    None => self.opaque("script runs a command computed when it runs"),
                }
            }
            return true;
        }
        if name == "watch" {
            let rest: Option<Vec<String>> = args.iter().skip_while(|w| w.value.as_deref().is_some_and(|v| v.starts_with('-'))).map(value).collect();
            match rest {
                Some(words) => self.script(&words.join(" "), scope, via, stdin_fed),
                None => self.opaque("watch runs a command computed when it runs"),
            }
            return true;
        }
        false
    }

    /// `xargs` and `parallel`: the command they start, the input's words appended, unknown.
    fn xargs(&mut self, args: &[Word], scope: &mut Scope, via: Vec<String>, depth: usize) {
        let with_value = ["-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var", "-j", "--jobs"];
        let mut i = 0;
        while i < args.len() {
            match args[i].value.as_deref() {
                Some(v) if with_value.contains(&v) => i += 2,
                Some(v) if v.starts_with('-') && v.len() > 1 => i += 1,
                _ => break,
            }
        }
        let mut inner: Vec<Word> = args[i..].to_vec();
        if inner.is_empty() {
            inner.push(Word::known("echo".into()));
        }
        // The input's words are appended, unknown.
        inner.push(Word { value: None, tail: String::new(), globbed: false });
        self.run(inner, scope, via, false, &[], depth);
    }

    /// `find`: the commands its `-exec`, `-execdir`, `-ok` and `-okdir` start, each `{}` unknown.
    fn find_exec(&mut self, args: &[Word], scope: &mut Scope, via: &[String], depth: usize) {
        let mut i = 0;
        while i < args.len() {
            if let Some(flag @ ("-exec" | "-execdir" | "-ok" | "-okdir")) = args[i].value.as_deref() {
                let flag = flag.to_owned();
                let end = args[i + 1..].iter().position(|w| matches!(w.value.as_deref(), Some(";" | "+"))).map_or(args.len(), |p| i + 1 + p);
                let inner: Vec<Word> = args[i + 1..end]
                    .iter()
                    .map(|w| if w.value.as_deref().is_some_and(|v| v.contains("{}")) { Word { value: None, tail: String::new(), globbed: false } } else { w.clone() })
                    .collect();
                if !inner.is_empty() {
                    let mut via = via.to_vec();
                    via.push(flag);
                    self.run(inner, scope, via, false, &[], depth);
                }
                i = end + 1;
            } else {
                i += 1;
            }
        }
    }

    /// An interpreter (`python`, `node`, …): code on its command line or fed on standard input is not read.
    fn interpreter(&mut self, name: &str, args: &[Word], stdin_fed: bool, bodies: &[Word]) {
        let code_flags = ["-c", "-e", "-E", "-r", "-p", "--eval", "--print", "--command"];
        let code = args.iter().position(|w| w.value.as_deref().is_some_and(|v| code_flags.contains(&v) || (v.starts_with('-') && !v.starts_with("--") && v.len() > 2 && "ceE".contains(v.chars().last().unwrap_or(' ')))));
        match code {
            Some(_) => self.opaque(format!("{name} runs code given on its command line, which cowork does not read")),
            None if args.iter().all(|w| w.value.as_deref().is_some_and(|v| v.starts_with('-'))) && (stdin_fed || !bodies.is_empty()) => {
                self.opaque(format!("{name} runs code fed to it on standard input"));
                if stdin_fed {
                    self.analysis.piped_into_interpreter.get_or_insert(name.to_owned());
                }
            }
            None => {}
        }
    }

    /// `awk`: a program from a file, computed, or one that runs commands or writes files is opaque.
    fn awk(&mut self, name: &str, args: &[Word]) {
        if args.iter().any(|w| matches!(w.value.as_deref(), Some("-f" | "--file"))) {
            self.opaque(format!("{name} runs a program from a file cowork does not read"));
        }
        let program = args.iter().find(|w| w.value.as_deref().is_none_or(|v| !v.starts_with('-')));
        match program.map(|w| w.value.as_deref()) {
            Some(Some(text)) if AWK_RUNS.is_match(text) => self.opaque(format!("{name}'s program runs commands or writes files")),
            Some(None) => self.opaque(format!("{name}'s program is computed when it runs")),
            _ => {}
        }
    }

    /// `sed`: a script from a file, computed, or one that runs commands or writes files is opaque.
    fn sed(&mut self, name: &str, args: &[Word]) {
        let scripts: Vec<&Word> = match args.iter().position(|w| matches!(w.value.as_deref(), Some("-e" | "--expression"))) {
            Some(_) => args.windows(2).filter(|p| matches!(p[0].value.as_deref(), Some("-e" | "--expression"))).map(|p| &p[1]).collect(),
            None => args.iter().find(|w| w.value.as_deref().is_none_or(|v| !v.starts_with('-'))).into_iter().collect(),
        };
        if args.iter().any(|w| matches!(w.value.as_deref(), Some("-f" | "--file"))) {
            self.opaque(format!("{name} runs a script from a file cowork does not read"));
        }
        for script in scripts {
            match script.value.as_deref() {
                Some(text) if SED_RUNS.is_match(text) => self.opaque(format!("{name}'s script runs commands or writes files")),
                None => self.opaque(format!("{name}'s script is computed when it runs")),
                _ => {}
            }
        }
    }

    /// A wrapper (`env`, `nohup`, `timeout 5`, …): the command it starts is read too.
    #[allow(clippy::too_many_arguments)]
    fn wrapped(
        &mut self,
        args: &[Word],
        with_value: &[&str],
        scope: &mut Scope,
        via: Vec<String>,
        stdin_fed: bool,
        bodies: &[Word],
        depth: usize,
        start: impl Fn(&[Word]) -> Option<usize>,
    ) {
        // Options that take a value take the next word too.
        let mut filtered: Vec<Word> = Vec::new();
        let mut skip_next = false;
        let mut positions: Vec<usize> = Vec::new();
        for (i, word) in args.iter().enumerate() {
            if skip_next {
                skip_next = false;
                continue;
            }
            if word.value.as_deref().is_some_and(|v| with_value.contains(&v)) {
                skip_next = true;
                continue;
            }
            filtered.push(word.clone());
            positions.push(i);
        }
        if via.last().is_some_and(|v| v == "env") {
            // `env -S "cmd args"` splits its argument into a command line.
            if let Some(pos) = args.iter().position(|w| matches!(w.value.as_deref(), Some("-S" | "--split-string"))) {
                match args.get(pos + 1).and_then(|w| w.value.clone()) {
                    Some(line) => self.script(&line, scope, &via, stdin_fed),
                    None => self.opaque("env -S runs a command line computed when it runs"),
                }
                return;
            }
        }
        let Some(at) = start(&filtered) else { return };
        let inner = filtered[at..].to_vec();
        let inner: Vec<Word> = match inner.first().and_then(|w| w.value.as_deref()) {
            Some("--") => inner[1..].to_vec(),
            _ => inner,
        };
        if !inner.is_empty() {
            self.run(inner, scope, via, stdin_fed, bodies, depth);
        }
    }

    /// `sh -c LINE`, `bash script`, `sh` reading standard input.
    fn shell(&mut self, shell: &str, args: &[Word], scope: &mut Scope, via: Vec<String>, stdin_fed: bool, bodies: &[Word]) {
        let dialect = if matches!(shell, "sh" | "dash" | "ash" | "posh") { Dialect::Posix } else { Dialect::Bash };
        let mut i = 0;
        let mut line: Option<Option<String>> = None;
        while i < args.len() {
            match args[i].value.as_deref() {
                Some(v) if v == "-c" || (v.starts_with('-') && !v.starts_with("--") && v.contains('c')) => {
                    line = Some(args.get(i + 1).and_then(|w| w.value.clone()));
                    break;
                }
                Some("--rcfile" | "--init-file") => i += 2,
                // `-o name`, `-euo pipefail`: the option's name follows.
                Some(v) if (v.starts_with('-') || v.starts_with('+')) && !v.starts_with("--") && (v.ends_with('o') || v.ends_with('O')) => i += 2,
                Some(v) if v.starts_with('-') || v.starts_with('+') => i += 1,
                _ => break,
            }
        }
        let mut inner = Scope { dialect, dotglob: scope.dotglob || matches!(shell, "zsh" | "fish"), ..scope.clone() };
        match line {
            Some(Some(line)) => self.script(&line, &mut inner, &via, stdin_fed),
            Some(None) => self.opaque(format!("{shell} -c runs a command line computed when it runs")),
            None if i < args.len() => {
                self.opaque(format!("{shell} runs the commands of a file cowork does not read"));
            }
            None => {
                // Commands from standard input: a here-document is read; a pipe is not known.
                let known: Option<Vec<String>> = bodies.iter().map(|w| w.value.clone()).collect();
                match known {
                    Some(texts) if !texts.is_empty() => {
                        for text in texts {
                            self.script(&text, &mut inner, &via, false);
                        }
                    }
                    _ if stdin_fed => {
                        self.opaque(format!("{shell} runs commands fed to it on standard input"));
                        self.analysis.piped_into_interpreter.get_or_insert(shell.to_owned());
                    }
                    _ => {}
                }
            }
        }
    }

    /// `cd DIR`: later commands run there (or still where they were, if it fails).
    fn cd(&mut self, args: &[Word], scope: &mut Scope) {
        let target = args.iter().find(|w| w.value.as_deref().is_none_or(|v| !v.starts_with('-') || v == "-"));
        let targets: Option<Vec<PathBuf>> = match target {
            None => Some(vec![self.env.home.to_path_buf()]),
            Some(Word { value: Some(dir), .. }) if dir == "-" => None,
            Some(Word { value: Some(dir), .. }) => {
                if Path::new(dir).is_absolute() {
                    Some(vec![PathBuf::from(dir)])
                } else if scope.cwd_unknown {
                    None
                } else {
                    Some(scope.cwds.iter().map(|c| c.join(dir)).collect())
                }
            }
            Some(_) => None,
        };
        match targets {
            Some(targets) => {
                // The `cd` may fail: the command after it runs in either place.
                for target in targets {
                    let lexical = normalise(&target);
                    if !scope.cwds.contains(&lexical) {
                        scope.cwds.push(lexical.clone());
                    }
                    if let Ok(physical) = target.canonicalize()
                        && !scope.cwds.contains(&physical)
                    {
                        scope.cwds.push(physical);
                    }
                }
                if scope.cwds.len() > MAX_CWDS {
                    scope.cwd_unknown = true;
                }
            }
            None => scope.cwd_unknown = true,
        }
        let known = scope.cwds.len() == 1 && !scope.cwd_unknown;
        let pwd = if known { Var::Known(scope.cwds[0].to_string_lossy().into_owned()) } else { Var::Unknown };
        scope.vars.insert("PWD".into(), pwd);
        scope.vars.insert("OLDPWD".into(), Var::Unknown);
    }

    /// A word's expansions: braces, `~`, parameters, substitutions, field splitting, globs.
    fn expand(&mut self, parts: &[Part], scope: &mut Scope, depth: usize, split: bool) -> Vec<Word> {
        let mut out = Vec::new();
        for alternative in brace_expand(parts) {
            let segments = self.segments(&alternative, scope, depth);
            let ifs = match scope.vars.get("IFS") {
                Some(Var::Known(ifs)) => ifs.clone(),
                None => " \t\n".to_owned(),
                Some(Var::Unknown) => {
                    self.opaque("it sets IFS to something computed when it runs");
                    " \t\n".to_owned()
                }
            };
            let fields = if split { split_fields(segments, &ifs) } else { vec![segments] };
            for field in fields {
                out.extend(self.glob(field, scope));
                if out.len() > MAX_EXPANSIONS {
                    self.opaque("it expands to more words than cowork reads");
                    return out;
                }
            }
        }
        out
    }

    /// An assignment's value: `~` and parameters expand, braces and globs do not.
    fn expand_assignment(&mut self, parts: &[Part], scope: &mut Scope, depth: usize) -> Vec<Word> {
        // `~` also expands after each `:` of an assignment (`PATH=~/bin:~/x`).
        let home = match scope.vars.get("HOME") {
            Some(Var::Known(home)) => Some(home.clone()),
            Some(Var::Unknown) => None,
            None => Some(self.env.home.to_string_lossy().into_owned()),
        };
        let parts: Vec<Part> = parts
            .iter()
            .map(|part| match (part, &home) {
                (Part::Bare(text), Some(home)) if text.contains(":~") => {
                    let mut out = String::new();
                    for (i, piece) in text.split(':').enumerate() {
                        if i > 0 {
                            out.push(':');
                            if piece == "~" || piece.starts_with("~/") {
                                out.push_str(home);
                                out.push_str(&piece[1..]);
                                continue;
                            }
                        }
                        out.push_str(piece);
                    }
                    Part::Bare(out)
                }
                (other, _) => other.clone(),
            })
            .collect();
        let segments = self.segments(&parts, scope, depth);
        vec![segments_word(&segments)]
    }

    fn segments(&mut self, parts: &[Part], scope: &mut Scope, depth: usize) -> Vec<Seg> {
        let mut segs: Vec<Seg> = Vec::new();
        for (index, part) in parts.iter().enumerate() {
            match part {
                Part::Lit(text) => segs.push(Seg::Text { text: text.clone(), bare: false, split: false }),
                Part::Bare(text) => {
                    if index == 0 && text.starts_with('~') {
                        let end = text.find('/').unwrap_or(text.len());
                        // `~user` ends at the first slash; a quoted part before it would stop it.
                        let complete = end < text.len() || parts.len() == 1 || !matches!(parts.get(1), Some(Part::Lit(_)));
                        match (complete, tilde(&text[1..end], self.env, scope)) {
                            (true, Some(home)) => {
                                segs.push(Seg::Text { text: home, bare: false, split: false });
                                segs.push(Seg::Text { text: text[end..].to_owned(), bare: true, split: false });
                            }
                            (true, None) => {
                                segs.push(Seg::Unknown);
                                segs.push(Seg::Text { text: text[end..].to_owned(), bare: true, split: false });
                            }
                            (false, _) => segs.push(Seg::Text { text: text.clone(), bare: true, split: false }),
                        }
                    } else {
                        segs.push(Seg::Text { text: text.clone(), bare: true, split: false });
                    }
                }
                Part::Param(param) => segs.extend(self.parameter(param, scope, depth)),
                Part::Sub { source, quoted } => {
                    let mut inner = scope.clone();
                    let before = self.analysis.commands.len();
                    self.script(source, &mut inner, &[], false);
                    let single = lex(source, scope.dialect).is_ok_and(|tokens| tokens.iter().all(|t| matches!(t, Token::Word(_) | Token::Op("\n"))));
                    let output = match &self.analysis.commands[before..] {
                        [only] if single => static_output(only),
                        _ => None,
                    };
                    match output {
                        Some(text) => segs.push(Seg::Text { text, bare: !quoted, split: !quoted }),
                        None => segs.push(Seg::Unknown),
                    }
                }
                Part::Arith => segs.push(Seg::Unknown),
            }
        }
        segs
    }

    fn parameter(&mut self, param: &Param, scope: &mut Scope, depth: usize) -> Vec<Seg> {
        // Special parameters, and variables a loop or function sets, are not known where read.
        let special = param.name.len() == 1 && "@*#?$!-0123456789".contains(param.name.as_str());
        let current = if special || (depth > 0 && scope.assigned_anywhere.contains(&param.name)) {
            Some(Var::Unknown)
        } else {
            scope.vars.get(&param.name).cloned()
        };
        let word = |reader: &mut Self, scope: &mut Scope| reader.segments(&param.word, scope, depth);
        match (param.op, current) {
            (ParamOp::Plain, Some(Var::Known(v))) => vec![Seg::Text { text: v, bare: !param.quoted, split: !param.quoted }],
            (ParamOp::Plain, None) => Vec::new(),
            (ParamOp::Default | ParamOp::Assign, Some(Var::Known(v))) if !v.is_empty() => vec![Seg::Text { text: v, bare: !param.quoted, split: !param.quoted }],
            (ParamOp::Default | ParamOp::Assign, None | Some(Var::Known(_))) => {
                let segs = word(self, scope);
                if param.op == ParamOp::Assign {
                    let known = join_segments(&segs);
                    scope.vars.insert(param.name.clone(), known.map_or(Var::Unknown, Var::Known));
                }
                segs
            }
            (ParamOp::Alternative, Some(Var::Known(_))) => word(self, scope),
            (ParamOp::Alternative, None) => Vec::new(),
            (ParamOp::Default | ParamOp::Assign | ParamOp::Alternative, Some(Var::Unknown)) => {
                // It could be the word: that is read too, for what it names.
                let segs = word(self, scope);
                if let Some(text) = join_segments(&segs) {
                    self.name(Word::known(text), scope, false);
                }
                vec![Seg::Unknown]
            }
            _ => vec![Seg::Unknown],
        }
    }

    /// A field with bare glob characters expands to the files it matches.
    fn glob(&mut self, field: Vec<Seg>, scope: &Scope) -> Vec<Word> {
        let has_unknown = field.iter().any(|s| matches!(s, Seg::Unknown));
        let has_glob = field.iter().any(|s| matches!(s, Seg::Text { text, bare: true, .. } if text.contains(['*', '?', '['])));
        let word = segments_word(&field);
        if has_unknown || !has_glob {
            return vec![word];
        }
        // A pattern of (text, is-pattern) per character.
        let mut pattern: Vec<(char, bool)> = Vec::new();
        for seg in &field {
            if let Seg::Text { text, bare, .. } = seg {
                pattern.extend(text.chars().map(|c| (c, *bare && "*?[".contains(c))));
            }
        }
        let mut matches = Vec::new();
        let bases: Vec<PathBuf> = if pattern.first().is_some_and(|(c, _)| *c == '/') { vec![PathBuf::from("/")] } else { scope.cwds.clone() };
        for base in bases {
            for found in glob_paths(&base, &pattern, scope.dotglob) {
                let shown = if pattern.first().is_some_and(|(c, _)| *c == '/') {
                    found.to_string_lossy().into_owned()
                } else {
                    found.strip_prefix(&base).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| found.to_string_lossy().into_owned())
                };
                if !matches.iter().any(|w: &Word| w.value.as_deref() == Some(shown.as_str())) {
                    matches.push(Word { value: Some(shown.clone()), tail: shown, globbed: true });
                }
                if matches.len() > MAX_EXPANSIONS {
                    self.opaque("a pattern in it matches more files than cowork reads");
                    return matches;
                }
            }
        }
        if matches.is_empty() { vec![word] } else { matches }
    }
}

/// `~` (HOME) or `~user` (their home from the password database).
fn tilde(user: &str, env: &Env<'_>, scope: &Scope) -> Option<String> {
    match user {
        "" => match scope.vars.get("HOME") {
            Some(Var::Known(home)) => Some(home.clone()),
            Some(Var::Unknown) => None,
            None => Some(env.home.to_string_lossy().into_owned()),
        },
        "+" => match scope.vars.get("PWD") {
            Some(Var::Known(pwd)) => Some(pwd.clone()),
            _ => None,
        },
        "-" => None,
        name => home_of(name).map(|p| p.to_string_lossy().into_owned()),
    }
}

/// A user's home directory from the password database.
pub fn home_of(user: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(user).ok()?;
    let mut buf = vec![0 as libc::c_char; 16_384];
    // SAFETY: a zeroed passwd is a valid out-parameter for getpwnam_r.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; the buffer outlives the reads below.
    let rc = unsafe { libc::getpwnam_r(name.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buf`, NUL-terminated by getpwnam_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(pwd.pw_dir) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
}

/// What `echo`, `printf '%s'` and `pwd` print, when a substitution is only that.
fn static_output(command: &Command) -> Option<String> {
    let argv: Vec<String> = command.argv.iter().map(|w| w.value.clone()).collect::<Option<_>>()?;
    if !command.via.is_empty() {
        return None;
    }
    let text = match command.name.as_deref()? {
        "pwd" if argv.len() == 1 && !command.cwd_unknown && command.cwds.len() == 1 => command.cwds[0].to_string_lossy().into_owned(),
        "echo" => {
            let (newline, words) = if argv.get(1).is_some_and(|a| a == "-n") { (false, &argv[2..]) } else { (true, &argv[1..]) };
            if words.iter().any(|w| w.contains('\\')) {
                return None;
            }
            let mut text = words.join(" ");
            if newline {
                text.push('\n');
            }
            text
        }
        "printf" if argv.len() >= 2 && (argv[1] == "%s" || !argv[1].contains(['%', '\\'])) => {
            if argv[1] == "%s" { argv[2..].concat() } else { argv[1].clone() }
        }
        _ => return None,
    };
    // A substitution drops trailing newlines.
    Some(text.trim_end_matches('\n').to_owned())
}

fn join_segments(segs: &[Seg]) -> Option<String> {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Text { text, .. } => out.push_str(text),
            Seg::Unknown => return None,
        }
    }
    Some(out)
}

fn join_words(words: &[Word]) -> Option<String> {
    let values: Option<Vec<String>> = words.iter().map(|w| w.value.clone()).collect();
    values.map(|v| v.join(" "))
}

fn segments_word(segs: &[Seg]) -> Word {
    let mut tail = String::new();
    let mut known = true;
    for seg in segs {
        match seg {
            Seg::Text { text, .. } => tail.push_str(text),
            Seg::Unknown => {
                known = false;
                tail.clear();
            }
        }
    }
    Word { value: known.then(|| tail.clone()), tail, globbed: false }
}

/// Field splitting: unquoted expansions split on blanks (quoted text never does).
fn split_fields(segs: Vec<Seg>, ifs: &str) -> Vec<Vec<Seg>> {
    let separator = |c: char| ifs.contains(c);
    // An unquoted expansion that yields nothing leaves no word; a quoted one leaves an empty word.
    let quoted = segs.iter().any(|s| matches!(s, Seg::Text { bare: false, .. }));
    let mut fields: Vec<Vec<Seg>> = vec![Vec::new()];
    for seg in segs {
        match seg {
            Seg::Text { text, split: true, .. } if text.contains(separator) => {
                let pieces: Vec<&str> = text.split(separator).collect();
                for (i, piece) in pieces.iter().enumerate() {
                    if i > 0 && !fields.last().is_some_and(Vec::is_empty) {
                        fields.push(Vec::new());
                    }
                    if !piece.is_empty() {
                        fields.last_mut().expect("one field").push(Seg::Text { text: (*piece).to_owned(), bare: true, split: false });
                    }
                }
            }
            other => fields.last_mut().expect("one field").push(other),
        }
    }
    fields.retain(|f| !f.is_empty() && !f.iter().all(|s| matches!(s, Seg::Text { text, bare: true, .. } if text.is_empty())));
    if fields.is_empty() && quoted {
        fields.push(vec![Seg::Text { text: String::new(), bare: false, split: false }]);
    }
    fields
}

/// Brace expansion (`{a,b}`, `{1..3}`) over a word's bare characters, as bash does it.
fn brace_expand(parts: &[Part]) -> Vec<Vec<Part>> {
    #[derive(Clone)]
    enum Item {
        Char(char),
        Other(Part),
    }
    let mut items: Vec<Item> = Vec::new();
    for part in parts {
        match part {
            Part::Bare(text) => items.extend(text.chars().map(Item::Char)),
            other => items.push(Item::Other(other.clone())),
        }
    }
    fn regroup(items: &[Item]) -> Vec<Part> {
        let mut out: Vec<Part> = Vec::new();
        for item in items {
            match item {
                Item::Char(c) => match out.last_mut() {
                    Some(Part::Bare(text)) => text.push(*c),
                    _ => out.push(Part::Bare(c.to_string())),
                },
                Item::Other(part) => out.push(part.clone()),
            }
        }
        out
    }
    fn expand(items: Vec<Item>, out: &mut Vec<Vec<Item>>) {
        if out.len() > MAX_EXPANSIONS {
            out.push(items);
            return;
        }
        // The first `{` with a matching `}` and a top-level comma or `..` between.
        for open in 0..items.len() {
            if !matches!(items[open], Item::Char('{')) {
                continue;
            }
            let mut depth = 0;
            let mut commas = Vec::new();
            let mut close = None;
            for (i, item) in items.iter().enumerate().skip(open) {
                match item {
                    Item::Char('{') => depth += 1,
                    Item::Char('}') => {
                        depth -= 1;
                        if depth == 0 {
                            close = Some(i);
                            break;
                        }
                    }
                    Item::Char(',') if depth == 1 => commas.push(i),
                    _ => {}
                }
            }
            let Some(close) = close else { continue };
            let (head, tail) = (&items[..open], &items[close + 1..]);
            let mut alternatives: Vec<Vec<Item>> = Vec::new();
            if commas.is_empty() {
                let inner: String = items[open + 1..close].iter().map(|i| if let Item::Char(c) = i { *c } else { '\u{0}' }).collect();
                if let Some((a, b)) = inner.split_once("..") {
                    let range: Vec<String> = match (a.parse::<i64>(), b.parse::<i64>()) {
                        (Ok(a), Ok(b)) if (a - b).abs() <= MAX_EXPANSIONS as i64 => {
                            if a <= b { (a..=b).map(|n| n.to_string()).collect() } else { (b..=a).rev().map(|n| n.to_string()).collect() }
                        }
                        _ => match (a.chars().collect::<Vec<_>>().as_slice(), b.chars().collect::<Vec<_>>().as_slice()) {
                            ([x], [y]) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
                                let (lo, hi) = if x <= y { (*x, *y) } else { (*y, *x) };
                                (lo..=hi).map(|c| c.to_string()).collect()
                            }
                            _ => Vec::new(),
                        },
                    };
                    for value in range {
                        alternatives.push(value.chars().map(Item::Char).collect());
                    }
                }
                if alternatives.is_empty() {
                    continue;
                }
            } else {
                let mut start = open + 1;
                for &comma in commas.iter().chain(std::iter::once(&close)) {
                    alternatives.push(items[start..comma].to_vec());
                    start = comma + 1;
                }
            }
            for alternative in alternatives {
                let mut next = head.to_vec();
                next.extend(alternative);
                next.extend_from_slice(tail);
                expand(next, out);
            }
            return;
        }
        out.push(items);
    }
    let mut out = Vec::new();
    expand(items, &mut out);
    out.iter().map(|items| regroup(items)).collect()
}

/// The files a pattern matches from `base`, as sh matches them (`dotglob`:
/// names that start with a dot too).
fn glob_paths(base: &Path, pattern: &[(char, bool)], dotglob: bool) -> Vec<PathBuf> {
    // Split into components on '/'.
    let mut components: Vec<Vec<(char, bool)>> = vec![Vec::new()];
    for &(c, special) in pattern {
        if c == '/' && !special {
            components.push(Vec::new());
        } else {
            components.last_mut().expect("one component").push((c, special));
        }
    }
    let mut current: Vec<PathBuf> = vec![base.to_path_buf()];
    for component in components.iter() {
        if component.is_empty() {
            continue;
        }
        let mut next = Vec::new();
        let is_pattern = component.iter().any(|(_, s)| *s);
        for dir in &current {
            if !is_pattern {
                let name: String = component.iter().map(|(c, _)| *c).collect();
                next.push(dir.join(name));
                continue;
            }
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            for entry in entries.flatten().take(20_000) {
                let name = entry.file_name().to_string_lossy().into_owned();
                // A leading dot is matched only by a dot in the pattern (POSIX), unless dotglob is on.
                let hidden_ok = dotglob || !name.starts_with('.') || component.first().is_some_and(|(c, special)| *c == '.' && !special);
                if hidden_ok && name != "." && name != ".." && name_matches(component, &name) {
                    next.push(dir.join(name));
                }
            }
            if next.len() > MAX_EXPANSIONS {
                break;
            }
        }
        current = next;
    }
    current.retain(|p| std::fs::symlink_metadata(p).is_ok());
    current
}

/// Whether `name` matches a glob component (`*`, `?`, `[…]`, `[!…]`).
fn name_matches(pattern: &[(char, bool)], name: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    fn go(p: &[(char, bool)], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some(('*', true)) => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some(('?', true)) => !n.is_empty() && go(&p[1..], &n[1..]),
            Some(('[', true)) => {
                let Some(&c) = n.first() else { return false };
                let mut i = 1;
                let negate = matches!(p.get(1), Some(('!' | '^', _)));
                if negate {
                    i += 1;
                }
                let mut matched = false;
                let mut first = true;
                while i < p.len() && (first || p[i].0 != ']') {
                    first = false;
                    if i + 2 < p.len() && p[i + 1].0 == '-' && p[i + 2].0 != ']' {
                        if p[i].0 <= c && c <= p[i + 2].0 {
                            matched = true;
                        }
                        i += 3;
                    } else {
                        if p[i].0 == c {
                            matched = true;
                        }
                        i += 1;
                    }
                }
                if i >= p.len() {
                    // No closing bracket: a literal '['.
                    return c == '[' && go(&p[1..], &n[1..]);
                }
                matched != negate && go(&p[i + 1..], &n[1..])
            }
            Some((c, _)) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(pattern, &name)
}

/// `a/./b/../c` → `a/c`, without touching the file system.
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_for(home: &Path) -> (Vec<(&'static str, String)>, PathBuf) {
        (vec![("HOME", home.to_string_lossy().into_owned()), ("USER", "ana".into()), ("PATH", "/usr/bin:/bin".into())], home.to_path_buf())
    }

    fn read(line: &str, home: &Path) -> Analysis {
        let (vars, cwd) = env_for(home);
        analyse(line, &Env { home, cwd: &cwd, vars: &vars })
    }

    fn names(a: &Analysis) -> Vec<String> {
        a.commands.iter().map(|c| c.name.clone().unwrap_or_else(|| "?".into())).collect()
    }

    fn values(a: &Analysis) -> Vec<String> {
        a.named.iter().filter_map(|n| n.word.value.clone()).collect()
    }

    #[test]
    fn the_allow_form_is_one_simple_command_of_literal_words() {
        assert_eq!(simple_argv("git status --short"), Some(vec!["git".into(), "status".into(), "--short".into()]));
        assert_eq!(simple_argv("  git   'status'  \"x y\" a\\ b"), Some(vec!["git".into(), "status".into(), "x y".into(), "a b".into()]));
        assert_eq!(simple_argv(r#""rm" -rf x"#).unwrap()[0], "rm");
        assert_eq!(simple_argv(r"r\m -rf x").unwrap()[0], "rm");
        for line in [
            "git status; touch a",
            "git status & touch b",
            "git status && x",
            "git status | head",
            "git status |& head",
            "git status > /tmp/x",
            "git status < x",
            "git status $(whoami)",
            "git status `whoami`",
            "git status\nls",
            "git status\rls",
            "cat ~/x",
            "cat *.txt",
            "cat a?",
            "cat [ab]",
            "echo $HOME",
            "echo \"$HOME\"",
            "echo {a,b}",
            "PAGER=x git log",
            "git status # hi",
            "if true",
            "! true",
            "echo 'unclosed",
            "( ls )",
            "",
            "   ",
        ] {
            assert_eq!(simple_argv(line), None, "{line:?}");
        }
        // A word with '=' later is a plain argument.
        assert_eq!(simple_argv("make CC=gcc").unwrap(), vec!["make", "CC=gcc"]);
        assert_eq!(canonical(&["git".into(), "commit".into(), "-m".into(), "it's done".into()]), r"git commit -m 'it'\''s done'");
        assert_eq!(simple_argv(&canonical(&["a b".into(), "$x".into(), "".into()])).unwrap(), vec!["a b", "$x", ""]);
    }

    #[test]
    fn commands_are_found_in_every_place_the_shell_runs_them() {
        let home = Path::new("/home/ana");
        let cases: &[(&str, &[&str])] = &[
            ("git status & touch b", &["git", "touch"]),
            ("git status |& rm -rf x", &["git", "rm"]),
            ("a\nb", &["a", "b"]),
            // A substitution runs before the command it is part of.
            ("echo $(rm -rf x)", &["rm", "echo"]),
            ("echo `rm -rf x`", &["rm", "echo"]),
            ("echo \"$(rm -rf x)\"", &["rm", "echo"]),
            ("eval 'rm -rf x'", &["eval", "rm"]),
            ("env FOO=1 rm -rf x", &["env", "rm"]),
            ("env -i -u X rm -rf x", &["env", "rm"]),
            ("exec rm -rf x", &["exec", "rm"]),
            ("xargs rm -rf", &["xargs", "rm"]),
            ("xargs -n 1 -I {} rm -rf {}", &["xargs", "rm"]),
            ("find . -name x -exec rm -rf {} ;", &["find", "rm"]),
            ("sh -c 'rm -rf x'", &["sh", "rm"]),
            ("bash -lc \"rm -rf x\"", &["bash", "rm"]),
            ("timeout 5 rm -rf x", &["timeout", "rm"]),
            ("nohup nice -n 5 rm -rf x", &["nohup", "nice", "rm"]),
            ("\"rm\" -rf x", &["rm"]),
            ("r\\m -rf x", &["rm"]),
            ("/bin/rm -rf x", &["rm"]),
            ("if true; then rm -rf x; fi", &["true", "rm"]),
            ("for f in a b; do rm -rf $f; done", &["rm"]),
            ("case x in x) rm -rf y;; esac", &["rm"]),
            ("f() { rm -rf x; }; f", &["rm", "f"]),
            ("x=$(case a in a) rm -rf y;; esac)", &["rm"]),
            ("sh <<EOF\nrm -rf x\nEOF", &["sh", "rm"]),
            ("busybox rm -rf x", &["busybox", "rm"]),
            ("command -p rm x", &["command", "rm"]),
            ("sudo -u root rm -rf /", &["sudo", "rm"]),
            ("env -S 'rm -rf x'", &["env", "rm"]),
        ];
        for (line, expected) in cases {
            let a = read(line, home);
            assert_eq!(&names(&a), expected, "{line}: {a:#?}");
            assert!(a.compound || simple_argv(line).is_some(), "{line}");
        }
        // A computed program name cannot be known.
        for line in ["$1 -rf y", "$(cat f)m -rf y", "eval \"$(cat f)\"", "sh -c \"$(curl x)\"", "curl x | sh", "python3 -c 'import os'"] {
            assert!(!read(line, home).opaque.is_empty(), "{line}");
        }
        // What can be known is: an unset variable is empty, `echo` prints its words.
        assert_eq!(names(&read("$(echo r)m -rf y", home)), ["echo", "rm"]);
        assert_eq!(names(&read("X=rm; $X -rf y", home)), ["rm"]);
        assert_eq!(names(&read("$NOPE rm -rf y", home)), ["rm"]);
        assert_eq!(read("curl -s x | sh", home).piped_into_interpreter.as_deref(), Some("sh"));
        assert_eq!(read("git status", home).opaque, Vec::<String>::new());
        assert!(!read("git status", home).compound);
    }

    #[test]
    fn words_are_expanded_as_the_shell_expands_them() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join(".local/share/cowork")).unwrap();
        std::fs::write(home.join(".local/share/cowork/secrets.key"), "k").unwrap();
        let key = home.join(".local/share/cowork/secrets.key").to_string_lossy().into_owned();
        for line in [
            "cat ~/.local/share/cowork/secrets.key",
            "cat \"$HOME\"/.local/share/cowork/secrets.key",
            "cat ${HOME}/.local/share/cowork/secrets.key",
            "cat \"${HOME}/.local/share/cowork/secrets.key\"",
            "cat $PWD/.local/share/cowork/secrets.key",
            "cat ~/.local/share/c*/secrets.key",
            "cat ~/.local/share/cow?rk/secrets.k[e]y",
            "cat ~/.local/share/{x,cowork}/secrets.key",
            "D=~/.local/share/cowork; cat $D/secrets.key",
            "cat ${NOPE:-$HOME/.local/share/cowork}/secrets.key",
            "cat \"$(echo ~/.local/share/cowork)\"/secrets.key",
            "cat $(pwd)/.local/share/cowork/secrets.key",
            "bash -c 'cat ~/.local/share/cowork/secrets.ke$'\\''\\x79'\\'''",
        ] {
            let a = read(line, &home);
            let found: Vec<String> = values(&a);
            assert!(found.iter().any(|v| v == &key || Path::new(v) == Path::new(&key)), "{line}: {found:?}");
        }
        // `cd` moves where relative words point.
        let a = read("cd .local/share && cat cowork/secrets.key", &home);
        let cat = a.commands.iter().find(|c| c.name.as_deref() == Some("cat")).unwrap();
        assert!(cat.cwds.contains(&home.join(".local/share")), "{cat:?}");
        let a = read("(cd /tmp); cat x", &home);
        assert_eq!(a.commands.iter().find(|c| c.name.as_deref() == Some("cat")).unwrap().cwds, vec![home.clone()]);
        assert!(read("cd \"$(cat f)\"; cat x", &home).commands.iter().any(|c| c.cwd_unknown));
        // A variable assigned in a loop is unknown wherever the loop reads it.
        let a = read("for i in 1 2; do cat $X/secrets.key; X=/tmp; done", &home);
        let cat = a.commands.iter().find(|c| c.name.as_deref() == Some("cat")).unwrap();
        assert_eq!(cat.argv[1].value, None);
        assert_eq!(cat.argv[1].tail, "/secrets.key");
        // `~user` is that user's home.
        let root = home_of("root").unwrap();
        assert!(values(&read("cat ~root/x", &home)).contains(&root.join("x").to_string_lossy().into_owned()));
    }

    #[test]
    fn odd_lines_do_not_panic_and_say_they_cannot_be_read() {
        let home = Path::new("/home/ana");
        for line in ["echo 'x", "echo \"x", "echo $(x", "echo `x", "echo ${x", "cat <<", ")))", "((((", "a >", "fi done esac", "${", "$((1+", "\\", "x=$(", "case"] {
            let _ = read(line, home);
        }
        assert!(!read("echo 'x", home).opaque.is_empty());
    }
}
