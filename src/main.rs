//! The `cowork` binary: argument parsing (clap), logging (`COWORK_LOG`), the
//! panic hook, the process's allocator setting (one glibc malloc arena, set
//! before any thread starts), the instance lock (or handing the request to the
//! cowork that holds it, `desktop::instance`), the database key
//! (`store::key::unlock`, else the locked window), starting the workers, the
//! hotkeys, the trigger socket, the tray and the window placement, and running
//! eframe; after the window closed, Forget everything when the user confirmed
//! it. A subcommand goes to its function in the library (`cowork::commands` and
//! others). The hidden `cowork package-files DIR` writes the man pages and
//! shell completions from the clap definitions (clap_mangen, clap_complete) for
//! the package.
//!
//! No product logic lives here: everything it calls is in the library, so tests
//! reach it.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use cowork::commands;
use cowork::app::{AppOptions, CoworkApp};
use cowork::build_info::LONG_VERSION;
use cowork::config::Paths;
use cowork::desktop::{GlobalHotkeys, HotkeyAction, TrayIcon, default_sidebar_rect};
use cowork::desktop::events::DesktopEvent;
use cowork::models::Manifest;
use cowork::runtime::{EventSink, RestartPolicy, signals};
use cowork::state::AppState;
use cowork::ui::theme::SIDEBAR_WIDTH;
use cowork::workers::{WorkerOptions, Workers};
use crossbeam_channel::bounded;
use egui::{ViewportBuilder, WindowLevel};

#[derive(Parser)]
#[command(name = "cowork", version = LONG_VERSION, about = "A light, private desktop sidecar")]
struct Cli {
    /// Where cowork.db lives (default: the XDG data directory)
    #[arg(long, env = "COWORK_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Where the models are (default: <data dir>/models, else the source tree's models/)
    #[arg(long, env = "COWORK_MODELS_DIR", global = true)]
    models_dir: Option<PathBuf>,
    /// X display to capture (default: $DISPLAY)
    #[arg(long, global = true)]
    display: Option<String>,
    /// Render the sidebar to this PNG after start-up, then quit
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// Offline: no network connection except to loopback (refused ones are logged)
    #[arg(long, global = true)]
    offline: bool,
    /// Open the quick prompt (in the cowork already running for this data directory, if one is)
    #[arg(long)]
    quick_prompt: bool,
    /// Started at login (the autostart entry): only the tray icon when Settings says so
    #[arg(long)]
    autostart: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum GnomeExtensionAction {
    /// Copy it into your extensions folder for this program and enable it (log out and in once after)
    Install {
        /// The GNOME Shell version to install for (default: the running one's)
        #[arg(long)]
        shell_version: Option<String>,
    },
    /// Disable it and remove its folder
    Remove,
    /// Whether it is installed and whether GNOME Shell runs it
    Status,
    /// GNOME before 48 (no GlobalShortcuts portal): add cowork's hotkeys to
    /// GNOME's custom keyboard shortcuts, running `cowork trigger …` (press only:
    /// push-to-talk becomes tap to start, tap to stop)
    AddShortcuts,
    /// Remove cowork's custom keyboard shortcuts (yours stay)
    RemoveShortcuts,
}

#[derive(Subcommand)]
enum DocumentsAction {
    /// Print a document's text by page, slide, sheet or section
    Read {
        path: std::path::PathBuf,
        /// Pages, slides or sections, e.g. 1-3,7
        #[arg(long)]
        pages: Option<String>,
        #[arg(long)]
        sheet: Option<String>,
        /// A cell range, e.g. A1:D20
        #[arg(long)]
        cells: Option<String>,
        #[arg(long, default_value_t = 200_000)]
        max_chars: usize,
        /// One JSON object: kind, title, parts (number, label, text, note)
        #[arg(long)]
        json: bool,
    },
    /// Keep a document searchable in memory (as an attachment is)
    Add { path: std::path::PathBuf },
    /// The documents kept in memory
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget a document kept in memory (its text, chunks and vectors)
    Forget { id: i64 },
    /// Write a document (DOCX, XLSX, Markdown, CSV, PDF) from Markdown text on stdin
    Write {
        path: std::path::PathBuf,
        /// Replace the file if it exists (its earlier version goes to the trash)
        #[arg(long)]
        replace: bool,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Check the display, database, models, workers and native libraries
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Answer a question headlessly with the local model, streaming to stdout
    Ask {
        /// One or more questions, asked in turn with the model loaded once
        #[arg(required = true, num_args = 1..)]
        question: Vec<String>,
        /// Also print the context sent with each question (to stderr)
        #[arg(long)]
        show_context: bool,
        /// Ask the questions in one thread, each a follow-up of the one before
        #[arg(long, conflicts_with = "provider")]
        follow_up: bool,
        /// Keep neither the questions nor the answers (like <no-memory>)
        #[arg(long, conflicts_with = "provider")]
        forget: bool,
        /// Load the local model and prefill the prompt head before the first question, as the
        /// app keeps it prefilled, and report how long that took
        #[arg(long, conflicts_with = "provider")]
        warm: bool,
        /// Print one JSON object per answer (text, first token, tokens/s) instead of streaming;
        /// with --agent, each QUESTION is a task of its own and its line has the steps and calls
        /// (nothing is asked: a call that needs approval stays waiting)
        #[arg(long)]
        json: bool,
        /// Ask a configured provider (providers.json in the data directory) instead of the local model
        #[arg(long)]
        provider: Option<String>,
        /// The provider's model to use (default: the one configured)
        #[arg(long, requires = "provider")]
        model: Option<String>,
        /// Answer with this local chat model from the manifest (default: the first that fits this machine)
        #[arg(long, conflicts_with = "provider")]
        local_model: Option<String>,
        /// Work on the task with tools (the agent). On a terminal each approval
        /// is a y/N question; without one, a call that needs approval is printed
        /// and cowork exits with status 3 (decide it with `cowork approve`).
        /// With --json and --follow-up, the tasks are one thread
        #[arg(long)]
        agent: bool,
    },
    /// Decide a tool call that waits for approval, and continue its task
    Approve {
        /// The call's id (printed by `cowork ask --agent`, shown in `cowork audit`)
        #[arg(required_unless_present = "continue_operation")]
        call: Option<i64>,
        /// Deny it instead
        #[arg(long)]
        deny: bool,
        /// Continue an operation a guardrail paused
        #[arg(long = "continue", value_name = "OPERATION")]
        continue_operation: Option<i64>,
    },
    /// List the agent's tools with their risk
    Tools {
        #[arg(long)]
        json: bool,
    },
    /// The approval rules: list, add, remove
    Rules {
        #[command(subcommand)]
        action: RulesAction,
    },
    /// Put back what the last agent task deleted, moved, replaced or created
    /// (from the trash), or the task given
    Undo {
        #[arg(long, value_name = "OPERATION")]
        operation: Option<i64>,
    },
    /// Read the text in pictures (PNG, JPEG, GIF, WebP) or in a window on the screen (X11) by OCR
    Ocr {
        /// Picture files to read
        files: Vec<std::path::PathBuf>,
        /// An X11 window by id (`xdotool getactivewindow`); the privacy rules decide first
        #[arg(long, conflicts_with = "focused")]
        window: Option<u32>,
        /// The focused X11 window; the privacy rules decide first
        #[arg(long)]
        focused: bool,
        /// Save the window's pixels as read (PNG) here
        #[arg(long, value_name = "PNG")]
        save: Option<std::path::PathBuf>,
        /// One JSON object per picture or window: text, confidence, milliseconds
        #[arg(long)]
        json: bool,
        /// Read the window's accessibility tree instead (as the screen-text stream does first), no OCR
        #[arg(long, conflicts_with = "save")]
        accessible: bool,
    },
    /// Documents: read one as the agent does, keep one searchable in memory, list or forget them
    Documents {
        #[command(subcommand)]
        action: DocumentsAction,
    },
    /// The audit log of every tool call, newest first
    Audit {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print one call's whole result (the chat shows its first 64 KB)
        #[arg(long, value_name = "CALL")]
        output: Option<i64>,
    },
    /// Transcribe WAV files on the device (Whisper with its VAD and guards)
    Transcribe {
        #[arg(required = true, num_args = 1..)]
        files: Vec<std::path::PathBuf>,
        /// A speech model of the manifest (default: whisper-tiny-en)
        #[arg(long)]
        model: Option<String>,
        /// One JSON object per file: text, confidence, timings, segments
        #[arg(long)]
        json: bool,
        /// Whisper's full 30 s encoder window even for short clips
        #[arg(long)]
        full_context: bool,
        /// Skip the voice activity detector
        #[arg(long)]
        no_vad: bool,
    },
    /// Verify, fetch or convert the bundled models
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Export history as JSON Lines or ActivityWatch bucket JSON
    Export {
        /// jsonl or activitywatch
        #[arg(long, default_value = "jsonl")]
        format: cowork::export::Format,
        #[arg(long)]
        out: PathBuf,
        /// Start: YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ, or a span back from now (15m, 2h, 1d); default: everything
        #[arg(long)]
        since: Option<String>,
        /// End, same forms; default: now
        #[arg(long)]
        until: Option<String>,
    },
    /// Delete captured activity and chat messages in a range, including from disk
    Delete {
        /// The last 15m, 1h, 1d (any span)
        #[arg(long, conflicts_with_all = ["since", "until"])]
        last: Option<String>,
        #[arg(long, requires = "until")]
        since: Option<String>,
        #[arg(long, requires = "since")]
        until: Option<String>,
    },
    /// Capture tools
    Capture {
        #[command(subcommand)]
        action: CaptureAction,
    },
    /// MCP servers: import another assistant's configuration, list them
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// List the tools of an MCP server started as `-- PROGRAM ARGS…`
    McpTools {
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Embedding and the vector indexes: embed now, status, retry failed jobs
    Memory {
        #[command(subcommand)]
        action: MemoryAction,
    },
    /// Search everything captured and said (windows, typing, clipboard, chat,
    /// summaries, what listen mode heard, documents, screen text) by keywords and by meaning
    Search {
        query: String,
        /// From this time (2026-11-22, 2026-11-22T09:00:00Z, or 2h/1d back)
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        until: Option<String>,
        /// Only this app (WM_CLASS, case-insensitive)
        #[arg(long)]
        app: Option<String>,
        /// Only these streams: window, typing, clipboard, chat, summary, audio, document, screen (repeatable)
        #[arg(long)]
        stream: Vec<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of lines
        #[arg(long)]
        json: bool,
    },
    /// Time per project: today, a day, a week (Monday to Sunday) or a span of days,
    /// as text, Markdown or CSV (one row per stretch of work, to invoice from)
    Report {
        /// The week (of --from, or this one)
        #[arg(long)]
        week: bool,
        /// First day, YYYY-MM-DD (default: today)
        #[arg(long)]
        from: Option<String>,
        /// Last day, YYYY-MM-DD (included)
        #[arg(long)]
        until: Option<String>,
        #[arg(long, value_enum, default_value = "text")]
        format: commands::report::ReportFormat,
    },
    /// The calendars' events of today (or of the next days); --refresh reads the
    /// calendars named in Settings (calendar.sources) first and says how each went
    Calendar {
        /// Read every calendar now (files, addresses, CalDAV accounts)
        #[arg(long)]
        refresh: bool,
        /// Days from today (1: today only)
        #[arg(long, default_value_t = 1)]
        days: u32,
        /// The events as JSON
        #[arg(long)]
        json: bool,
    },
    /// Write the recap of today (or a day, or a week) now and keep it in memory:
    /// per project what was done and left open, each line with its sources
    Recap {
        /// The week (of --date, or this one)
        #[arg(long)]
        week: bool,
        /// A day of the recap, YYYY-MM-DD (default: today)
        #[arg(long)]
        date: Option<String>,
        /// More to tell the model (added after the recap's own instructions)
        #[arg(long, default_value = "")]
        instructions: String,
        /// A chat model of the manifest by name
        #[arg(long)]
        local_model: Option<String>,
        /// Print JSON: the recap with its sources, dropped lines and time taken
        #[arg(long)]
        json: bool,
    },
    /// Write the note of a call from what listen mode heard between two times
    /// (a summary, decisions and action items, each citing what was said) and keep it
    MeetingNote {
        /// The call's start (YYYY-MM-DDTHH:MM:SSZ, or 1h for an hour ago)
        #[arg(long)]
        start: String,
        /// Its end
        #[arg(long)]
        end: String,
        #[arg(long, default_value = "a call")]
        title: String,
        /// A chat model of the manifest by name
        #[arg(long)]
        local_model: Option<String>,
        /// Print JSON: the note with the transcript lines each part stands on
        #[arg(long)]
        json: bool,
    },
    /// Tell the running sidebar what a hotkey would: quick-prompt, pause,
    /// talk-press, talk-release (bind these in the compositor on Wayland)
    Trigger {
        /// quick-prompt, pause, talk-press, talk-release, talk-tap or show
        what: String,
    },
    /// GNOME on Wayland: install, remove or check cowork's GNOME Shell extension
    /// (it tells cowork, and nothing else, which window has the focus)
    GnomeExtension {
        #[command(subcommand)]
        action: GnomeExtensionAction,
    },
    /// Read or change any setting the Settings tab edits: list, get, set, reset
    Settings {
        #[command(subcommand)]
        action: SettingsAction,
    },
    /// Store, list or delete secrets (API keys) in the secret store
    Secrets {
        #[command(subcommand)]
        action: SecretsAction,
    },
    /// Flows cowork runs by itself: list, run, history, export, import, remove, enable, disable
    Automations {
        #[command(subcommand)]
        action: AutomationsAction,
    },
    /// Apps in the sidebar's Apps tab: install (with what its code can do), list, remove, render
    Apps {
        #[command(subcommand)]
        action: AppsAction,
    },
    /// Start cowork when you log in (an XDG autostart entry), or stop that
    Autostart {
        /// on, off or status
        #[arg(value_parser = ["on", "off", "status"])]
        state: String,
    },
    /// Remove everything cowork keeps for this data directory: the history,
    /// chats, memory, models, apps, settings, its secrets in the system secret
    /// store and the autostart entry. Lists what goes and asks first
    ForgetEverything {
        /// Do not ask (needed without a terminal)
        #[arg(long)]
        yes: bool,
    },
    /// Write the man pages and shell completions into DIR (the package build runs this)
    #[command(hide = true)]
    PackageFiles { dir: PathBuf },
}

#[derive(Subcommand)]
enum AppsAction {
    /// Install or update an app from a folder or a zip; prints what its code can do and asks first
    Install {
        path: PathBuf,
        /// Grant an optional capability its code imports: ai or http
        #[arg(long = "grant")]
        grants: Vec<String>,
        /// Install without asking
        #[arg(long)]
        yes: bool,
    },
    /// The installed apps
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an app with its storage and the chats it opened
    Remove { app_id: String },
    /// The agent drafts an app without code from your words (checked before it is printed)
    Describe {
        description: String,
        /// Then show what it reads and install it
        #[arg(long)]
        install: bool,
        /// Install without asking
        #[arg(long)]
        yes: bool,
    },
    /// Print an app's view (JSON) after the given actions, read through the real lane
    Render {
        app_id: String,
        /// A message for the app's handle, e.g. '{"type":"action","id":"refresh"}'
        #[arg(long = "action")]
        actions: Vec<String>,
    },
}

#[derive(Subcommand)]
enum AutomationsAction {
    /// Each flow with its trigger, last run and next time
    List {
        #[arg(long)]
        json: bool,
    },
    /// Run a flow now and print its steps (exit status 3: a step waits for approval)
    Run {
        name: String,
        /// An input as name=value (the value as JSON when it reads as JSON)
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// How long to wait for the run to end, in seconds
        #[arg(long, default_value_t = 600)]
        wait_secs: u64,
        /// While a step waits for approval, keep waiting (Accept on its notification continues it)
        #[arg(long)]
        keep_waiting: bool,
    },
    /// A flow's newest runs, each step with its input, output, decision and error
    History {
        name: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// The agent drafts a flow from your words (checked before it is printed)
    Describe {
        description: String,
        /// Save the draft as well
        #[arg(long)]
        save: bool,
    },
    /// Flows as JSON ({"flows": [...]}), all or one
    Export {
        name: Option<String>,
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
    /// Flows from a JSON file (checked first: nothing is saved unless all are valid)
    Import { file: std::path::PathBuf },
    /// Remove a flow and its history
    Remove { name: String },
    Enable { name: String },
    Disable { name: String },
}

#[derive(Subcommand)]
enum RulesAction {
    List,
    /// Add a rule, e.g. `cowork rules add run_command --action allow --target command --pattern 'git status.*' --example '{"command":"git status"}'`
    Add {
        /// A tool name, or * for every tool
        tool: String,
        /// allow, ask or deny
        #[arg(long)]
        action: String,
        /// What the pattern looks at: command, path, url, or a JSON pointer such as /query
        #[arg(long, requires = "pattern")]
        target: Option<String>,
        /// A regular expression over the whole value
        #[arg(long, requires = "target")]
        pattern: Option<String>,
        /// Hold until this time (YYYY-MM-DD, RFC 3339, or a span from now such as 2h)
        #[arg(long)]
        until: Option<String>,
        /// The JSON arguments of a call the rule is meant for (required for allow rules)
        #[arg(long)]
        example: Option<String>,
    },
    Remove { id: i64 },
}

#[derive(Subcommand)]
enum MemoryAction {
    /// Embed everything waiting now (resumes interrupted jobs from their checkpoints)
    Embed,
    /// How much is embedded and what waits
    Status,
    /// Put failed embedding jobs back in the queue
    Retry,
}

#[derive(Subcommand)]
enum McpAction {
    /// Add the servers of a Claude Desktop / Claude Code JSON file, a Zed
    /// settings.json or a Codex config.toml to mcp-servers.json (their env
    /// and header values go to the secret store). A server whose values name
    /// a secret ("secret:…") is refused, and so is one that wants a variable
    /// of cowork's environment (Codex's bearer_token_env_var) not named with --allow-env
    Import {
        file: std::path::PathBuf,
        /// Let a server have this variable of cowork's environment as its bearer
        /// token (Codex's bearer_token_env_var; repeatable; never a COWORK_* variable
        /// or a provider's key variable)
        #[arg(long, value_name = "NAME")]
        allow_env: Vec<String>,
    },
    /// The configured servers: transport, timeouts, enabled tools
    List,
    /// Connect to a configured server on its own: protocol version, tools,
    /// connect and round-trip time, and its recent stderr (exit 1 if it fails)
    Test { name: String },
    /// Serve what cowork remembers, read-only, to other assistants: tools
    /// search_memory, recent_activity, current_context and get_session, and
    /// today's timeline as a resource. stdio by default (for a client's
    /// mcpServers entry: `"command": "cowork", "args": ["mcp", "serve"]`).
    /// A client reads nothing until you allow it in the sidebar, or here
    Serve {
        /// Streamable HTTP on this loopback address instead (e.g. 127.0.0.1:7480;
        /// port 0 picks one, printed on stdout). Clients send the bearer token
        /// `cowork mcp token` prints
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Allow the client that names itself NAME without asking (repeatable)
        #[arg(long, value_name = "NAME")]
        allow: Vec<String>,
        /// How long a call from a client you have not answered yet waits for your answer
        #[arg(long, value_name = "SECONDS", default_value_t = cowork::mcp::serve::CONSENT_WAIT.as_secs())]
        consent_wait: u64,
    },
    /// Print the bearer token of `cowork mcp serve --http` (made on first use, kept in the secret store)
    Token,
    /// Sign in to an HTTP server with OAuth: your browser opens its sign-in
    /// page ($BROWSER, else xdg-open), the answer comes back on loopback, and
    /// the tokens go to the secret store (refreshed when they run out)
    Login { name: String },
    /// Forget a server's OAuth sign-in
    Logout { name: String },
}

#[derive(Subcommand)]
enum SettingsAction {
    /// Every setting with its value and what it does
    List {
        #[arg(long)]
        json: bool,
    },
    /// One setting's value
    Get { key: String },
    /// Check a value as the sidebar does and store it
    Set { key: String, value: String },
    /// Back to the default
    Reset { key: String },
}

#[derive(Subcommand)]
enum SecretsAction {
    /// Store a secret read from standard input (never from the command line),
    /// e.g. `cowork secrets set provider:openai < key.txt`
    Set { name: String },
    /// List the stored secrets, masked
    List,
    /// Delete a secret
    Delete { name: String },
}

#[derive(Subcommand)]
enum CaptureAction {
    /// Capture without the sidebar until SIGTERM or Ctrl+C
    Run,
    /// Replay a scripted day (JSON Lines) through the firewall, tracker and store
    Simulate {
        #[arg(long)]
        script: PathBuf,
        /// When the replay starts (default: so that it ends now)
        #[arg(long)]
        start: Option<String>,
        /// Replay the script this many times back to back
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        /// Print `committed N` each time a batch of sessions is durably in the database
        #[arg(long)]
        progress: bool,
    },
}

#[derive(Subcommand)]
enum ModelsAction {
    /// Check every model file's size and sha256
    Verify,
    /// Download every model file from its upstream URL (resumable), then make the converted files
    Fetch {
        /// Replace https://huggingface.co in upstream URLs with this base URL
        #[arg(long)]
        mirror: Option<String>,
        /// Also install this optional model (e.g. whisper-base); repeatable
        #[arg(long = "with", value_name = "NAME")]
        with: Vec<String>,
        /// Install only these models (what the first run's local brain downloads); repeatable
        #[arg(long = "only", value_name = "NAME", conflicts_with = "with")]
        only: Vec<String>,
    },
    /// Make every converted model file: Whisper CTranslate2 → ggml, Qwen's Q5_0 tensors → Q8_0 (lossless)
    #[command(alias = "convert-whisper")]
    Convert,
    /// Add a GGUF chat model you already have (checked, measured and recorded; the file stays where it is)
    Add { path: PathBuf },
    /// List the models a configured provider offers, with context window and price where known
    Cloud {
        /// The provider's name in providers.json (openai, anthropic, gemini, ollama, …)
        provider: String,
        /// Answer with this model from now on (it must be on the list)
        #[arg(long = "use", value_name = "MODEL")]
        choose: Option<String>,
        /// One JSON object per model
        #[arg(long)]
        json: bool,
    },
}

/// One glibc malloc arena for the whole process, set before any thread starts.
///
/// glibc gives each thread that allocates under contention its own arena (up
/// to 8 per core), and memory freed into an arena stays there. The local model
/// allocates and frees tens of MB of activations per layer on the engine thread
/// and both rayon workers, so three arenas each kept their own high-water mark:
/// SmolLM2's peak RSS over three short questions and a 2,000-token one was
/// 471–473 MB with the default and 384–396 MB with one arena, Qwen's 926–941
/// against 903–904 MB, with the same first-token and decode times
/// (docs/engine.md, "Inference patches", peak RSS). Small allocations still
/// come from each thread's lock-free cache, and two cores leave little to
/// contend for.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; no thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn main() -> ExitCode {
    let process_started = Instant::now();
    // Times in the UI follow the user's locale (12 or 24 hours); only LC_TIME is read.
    // SAFETY: no other thread exists yet.
    unsafe { libc::setlocale(libc::LC_TIME, c"".as_ptr()) };
    one_malloc_arena();
    let cli = Cli::parse();
    // mistralrs must never reach for a model hub: every model is a local file.
    // SAFETY: no other thread exists yet.
    unsafe { std::env::set_var("HF_HUB_OFFLINE", "1") };
    init_logging();
    // A command's reader may stop early (`cowork audit | head -1`): see `stdout_reader_gone`.
    let command = cli.command.is_some();
    install_panic_hook(command);
    match run(cli, process_started) {
        Ok(code) => code,
        Err(err) if command && broken_stdout(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cowork: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("COWORK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,mistralrs_core=error,mistralrs=warn,candle_core=warn,eframe=warn,egui_glow=warn,winit=warn,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

/// Logs panics through tracing (with the thread name, which is the worker name)
/// before the default hook prints them; the supervisor then restarts the worker.
///
/// For a `command`, `println!` on the main thread to a reader that has gone
/// (`cowork audit | head -1`) ends the process quietly with status 0, as ripgrep
/// does: the reader took what it wanted, and a script under `set -o pipefail`
/// should not fail for it. Only that: SIGPIPE stays ignored (Rust's default), so
/// a write to an MCP server's stdin, the shell tool's child or a socket that was
/// closed is an error its caller handles, never the end of cowork; the sidebar
/// and the workers' threads are not touched by this.
fn install_panic_hook(command: bool) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let message = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied());
        // std's own words when `print!` fails (its `print_to`), and the reader really gone.
        if command && thread.name() == Some("main") && message.is_some_and(|m| m.starts_with("failed printing to stdout")) && stdout_reader_gone() {
            std::process::exit(0);
        }
        tracing::error!(thread = thread.name().unwrap_or("unnamed"), "panic: {info}");
        default(info);
    }));
}

/// Whether a command failed only because its reader went away: a broken pipe
/// in the error, and standard output's reader gone (not a pipe to a child).
fn broken_stdout(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) && stdout_reader_gone()
}

/// Whether nothing reads standard output any more: Linux reports POLLERR on
/// a pipe's write end once its read end is closed (POLLHUP for a socket).
fn stdout_reader_gone() -> bool {
    let mut out = libc::pollfd { fd: libc::STDOUT_FILENO, events: 0, revents: 0 };
    // SAFETY: one valid pollfd and its count; a timeout of 0 never waits.
    let ready = unsafe { libc::poll(&mut out, 1, 0) };
    ready == 1 && out.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

fn run(cli: Cli, process_started: Instant) -> anyhow::Result<ExitCode> {
    // Reads nothing of the user's: the package build runs it.
    if let Some(Command::PackageFiles { dir }) = &cli.command {
        package_files(dir)?;
        return Ok(ExitCode::SUCCESS);
    }
    // cowork's own program reads all of its data for whoever runs it: never for
    // a command one of cowork's tools started (an approved `cowork search …`,
    // a copy of the program a script runs, an MCP server's child).
    if let Some(why) = cowork::tools::own_data::started_for_a_tool() {
        anyhow::bail!("cowork does not run for a program one of its own tools started ({why}): its data is out of every tool's reach");
    }
    let paths = Paths::resolve(cli.data_dir.clone(), cli.models_dir.clone())?;
    // One cowork per data directory: a second sidebar hands its request to the
    // running one (show it, or open the quick prompt) and ends.
    let _instance = match &cli.command {
        None | Some(Command::Capture { action: CaptureAction::Run }) => match claim_instance(&paths, &cli)? {
            Some(lock) => Some(lock),
            None => return Ok(ExitCode::SUCCESS),
        },
        _ => None,
    };
    // The database's key before anything opens it: found (or made for a new
    // database), and a plaintext database from an older cowork encrypted.
    // Without it the sidebar shows why and nothing else starts; a command
    // stops with the same words. Doctor reports it among its checks. The
    // commands below read nothing of the database (a trigger runs at every
    // press of a compositor binding; forgetting needs no key).
    let without_key = matches!(
        cli.command,
        Some(Command::Doctor { .. } | Command::Tools { .. } | Command::Autostart { .. } | Command::Trigger { .. } | Command::ForgetEverything { .. })
    );
    if !without_key
        && let Err(problem) = cowork::store::key::unlock(&paths.db_path())
    {
        if cli.command.is_none() {
            return run_locked(&paths, problem);
        }
        return Err(problem.into());
    }
    // Offline before anything can open a connection: the flag, or the saved switch.
    if cli.offline || cowork::workers::read_settings(&paths).0.offline {
        cowork::net::OutboundGate::global().set_offline(true);
    }
    match cli.command {
        Some(command) => run_command(command, &paths, cli.display),
        None => {
            let options = SidebarOptions { display: cli.display, screenshot: cli.screenshot, quick_prompt: cli.quick_prompt, autostart: cli.autostart };
            run_sidebar(&paths, options, process_started)
        }
    }
}

/// Runs a subcommand: one arm per command, a function per family of them.
fn run_command(command: Command, paths: &Paths, display: Option<String>) -> anyhow::Result<ExitCode> {
    match command {
        Command::Doctor { json } => {
            let checks = commands::doctor::run_checks(paths, display.as_deref());
            let healthy = commands::doctor::print(&checks, json)?;
            Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Ask { question, provider, model, local_model, agent: true, json, forget, follow_up, warm, .. } => {
            let brain = brain_choice(provider, model, local_model.as_deref());
            run_ask_agent(paths, &question, brain, local_model.as_deref(), json, forget, follow_up, warm)
        }
        Command::Ask { question, show_context, provider: Some(provider), model, json, .. } => run_ask_provider(paths, &question, &provider, model.as_deref(), show_context, json),
        Command::Ask { question, show_context, provider: None, local_model, follow_up, forget, json, warm, .. } => {
            let options = commands::ask::AskOptions { show_context, local_model, follow_up, forget, json, warm };
            commands::ask::ask(paths, &question, &options)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Approve { call, deny, continue_operation } => run_approve(paths, call, deny, continue_operation),
        Command::Tools { json } => {
            commands::agent::tools(json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Rules { action } => run_rules(paths, action),
        Command::Automations { action } => run_automations(paths, action),
        Command::Apps { action } => run_apps(paths, action),
        Command::Undo { operation } => commands::documents::undo(paths, operation),
        Command::Documents { action } => run_documents(paths, action),
        Command::Ocr { files, window, focused, save, json, accessible } => commands::documents::ocr(paths, &files, window, focused, save.as_deref(), json, accessible),
        Command::Audit { output: Some(call), .. } => {
            commands::agent::call_output(paths, call)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { json, limit, output: None } => {
            commands::agent::audit(paths, json, limit)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Transcribe { files, model, json, full_context, no_vad } => {
            let options = commands::voice::TranscribeOptions { files, model, json, full_context, no_vad };
            let all_read = commands::voice::transcribe(paths, options)?;
            Ok(if all_read { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Models { action } => run_models(paths, action),
        Command::Export { format, out, since, until } => run_export(paths, format, &out, since.as_deref(), until.as_deref()),
        Command::Delete { last, since, until } => run_delete(paths, last, since, until),
        Command::Capture { action } => run_capture(paths, action, display),
        Command::McpTools { command } => {
            commands::mcp_tools(&command)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { week, from, until, format } => {
            commands::report::print(paths, &commands::report::Span { week, from, until }, format)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Calendar { refresh, days, json } => {
            let all_read = commands::calendar::calendar(paths, &commands::calendar::CalendarOptions { refresh, days, json })?;
            Ok(if all_read { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Recap { week, date, instructions, local_model, json } => {
            commands::recap::recap(paths, &commands::recap::RecapOptions { week, date, instructions, local_model, json })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::MeetingNote { start, end, title, local_model, json } => {
            commands::recap::meeting_note(paths, (&start, &end), &title, local_model.as_deref(), json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { query, since, until, app, stream, limit, json } => {
            let filters = search_filters(since, until, app, &stream)?;
            run_search(paths, &query, &filters, limit, json)
        }
        Command::Memory { action } => run_memory(paths, action),
        Command::Mcp { action } => run_mcp(paths, action),
        Command::Trigger { what } => run_trigger(paths, &what),
        Command::GnomeExtension { action } => run_gnome_extension(paths, action),
        Command::Settings { action } => run_settings(paths, action),
        Command::Secrets { action } => run_secrets(paths, action),
        Command::Autostart { state } => run_autostart(paths, &state),
        Command::ForgetEverything { yes } => forget_everything(paths, yes),
        Command::PackageFiles { .. } => unreachable!("handled before the data directory is resolved"),
    }
}

/// The brain `cowork ask --agent` names (None: the router decides).
fn brain_choice(provider: Option<String>, model: Option<String>, local_model: Option<&str>) -> Option<cowork::agent::BrainChoice> {
    match (provider, local_model) {
        (Some(name), _) => Some(cowork::agent::BrainChoice::Provider { name, model }),
        (None, Some(_)) => Some(cowork::agent::BrainChoice::Local),
        (None, None) => None,
    }
}

/// `cowork ask --agent`: the tasks worked on with tools, by a provider's model or a local one.
#[allow(clippy::too_many_arguments)]
fn run_ask_agent(paths: &Paths, question: &[String], brain: Option<cowork::agent::BrainChoice>, local_model: Option<&str>, json: bool, forget: bool, follow_up: bool, warm: bool) -> anyhow::Result<ExitCode> {
    if (follow_up || warm) && !json {
        anyhow::bail!("--agent --follow-up and --agent --warm need --json (without it the words are one task)");
    }
    let status = if json {
        commands::agent::ask_agent_json(paths, question, brain, local_model, forget, follow_up, warm)?
    } else {
        let task = question.join(" ");
        commands::agent::ask_agent(paths, &if forget { format!("<no-memory> {task}") } else { task }, brain, local_model)?
    };
    Ok(ExitCode::from(status))
}

/// `cowork ask --provider`: one question answered by a configured provider, streamed as text.
fn run_ask_provider(paths: &Paths, question: &[String], provider: &str, model: Option<&str>, show_context: bool, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        anyhow::bail!("--json with --provider needs --agent (a plain provider answer streams as text)");
    }
    if show_context {
        eprintln!("--show-context: nothing captured is sent to a provider yet");
    }
    if question.len() > 1 {
        anyhow::bail!("--provider answers one question at a time");
    }
    commands::ask::ask_provider(paths, provider, model, &question[0])?;
    Ok(ExitCode::SUCCESS)
}

/// `cowork approve`: decides a waiting call, or continues a paused operation.
fn run_approve(paths: &Paths, call: Option<i64>, deny: bool, continue_operation: Option<i64>) -> anyhow::Result<ExitCode> {
    let status = match (continue_operation, call) {
        (Some(operation), _) => commands::agent::continue_operation(paths, operation)?,
        (None, Some(call)) => commands::agent::approve(paths, call, deny)?,
        (None, None) => anyhow::bail!("give a call id, or --continue OPERATION"),
    };
    Ok(ExitCode::from(status))
}

/// `cowork rules …`: lists, adds or removes approval rules.
fn run_rules(paths: &Paths, action: RulesAction) -> anyhow::Result<ExitCode> {
    match action {
        RulesAction::List => commands::agent::rules_list(paths)?,
        RulesAction::Add { tool, action, target, pattern, until, example } => {
            let until = rule_until(until.as_deref())?;
            let id = commands::agent::rules_add(paths, &tool, &action, target.as_deref(), pattern.as_deref(), until, example.as_deref())?;
            println!("added rule {id}");
        }
        RulesAction::Remove { id } => commands::agent::rules_remove(paths, id)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A rule's `--until` in milliseconds: a span (30s, 2h, 3d) counts forward from now, dates are dates; a time already past is refused.
fn rule_until(until: Option<&str>) -> anyhow::Result<Option<i64>> {
    let now = cowork::ids::now_millis();
    let until = until
        .map(|t| match cowork::ids::parse_span_millis(t.trim()) {
            Some(span) => Ok(now + span),
            None => cowork::ids::parse_time(t, now),
        })
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if let Some(at) = until
        && at <= now
    {
        anyhow::bail!("--until {} is already past", cowork::ids::rfc3339(at));
    }
    Ok(until)
}

/// `cowork automations …`: the flows cowork runs by itself.
fn run_automations(paths: &Paths, action: AutomationsAction) -> anyhow::Result<ExitCode> {
    use commands::automations as a;
    match action {
        AutomationsAction::List { json } => a::list(paths, json)?,
        AutomationsAction::Run { name, inputs, wait_secs, keep_waiting } => {
            let code = a::run(paths, &name, a::parse_inputs(&inputs)?, std::time::Duration::from_secs(wait_secs), keep_waiting)?;
            return Ok(ExitCode::from(code as u8));
        }
        AutomationsAction::History { name, limit } => a::history(paths, &name, limit)?,
        AutomationsAction::Describe { description, save } => a::describe(paths, &description, save)?,
        AutomationsAction::Export { name, output } => a::export(paths, name.as_deref(), output.as_deref())?,
        AutomationsAction::Import { file } => a::import(paths, &file)?,
        AutomationsAction::Remove { name } => a::remove(paths, &name)?,
        AutomationsAction::Enable { name } => a::set_enabled(paths, &name, true)?,
        AutomationsAction::Disable { name } => a::set_enabled(paths, &name, false)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork apps …`: the apps of the sidebar's Apps tab.
fn run_apps(paths: &Paths, action: AppsAction) -> anyhow::Result<ExitCode> {
    use commands::apps as a;
    match action {
        AppsAction::Install { path, grants, yes } => a::install(paths, &path, &grants, yes)?,
        AppsAction::List { json } => a::list(paths, json)?,
        AppsAction::Remove { app_id } => a::remove(paths, &app_id)?,
        AppsAction::Describe { description, install, yes } => a::describe(paths, &description, install, yes)?,
        AppsAction::Render { app_id, actions } => a::render(paths, &app_id, &actions)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork documents …`: reads, writes, keeps or forgets documents.
fn run_documents(paths: &Paths, action: DocumentsAction) -> anyhow::Result<ExitCode> {
    match action {
        DocumentsAction::Read { path, pages, sheet, cells, max_chars, json } => {
            commands::documents::read(&path, cowork::documents::Selection { pages, sheet, cells }, max_chars, json)
        }
        DocumentsAction::Add { path } => commands::documents::add(paths, &path),
        DocumentsAction::List { json } => commands::documents::list(paths, json),
        DocumentsAction::Forget { id } => commands::documents::forget(paths, id),
        DocumentsAction::Write { path, replace } => commands::documents::write(&path, replace),
    }
}

/// `cowork models …`: verifies, fetches, converts or adds local models, or lists a provider's.
fn run_models(paths: &Paths, action: ModelsAction) -> anyhow::Result<ExitCode> {
    let manifest = Manifest::bundled()?;
    std::fs::create_dir_all(&paths.models_dir)?;
    match action {
        ModelsAction::Verify => commands::models::verify(&manifest, &paths.models_dir)?,
        ModelsAction::Fetch { mirror, with, only } => commands::models::fetch_upstream(&manifest, &paths.models_dir, mirror, &with, &only)?,
        ModelsAction::Convert => cowork::models::convert::convert_all(&manifest, &paths.models_dir)?,
        ModelsAction::Cloud { provider, choose, json } => commands::models::cloud(paths, &provider, choose.as_deref(), json)?,
        ModelsAction::Add { path } => {
            paths.ensure_data_dir()?;
            let (model, preflight) = cowork::models::user::add(&paths.data_dir, &path, cowork::llm::memory::meminfo())?;
            println!("added {} ({}, {} bytes, sha256 {})", model.name, model.architecture, model.size, model.sha256);
            if let Some(preflight) = preflight {
                println!("memory preflight: {}", preflight.describe());
            }
            println!("answer with it: cowork ask --local-model {} \"...\", or choose it in Settings → Models", model.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork export`: history from `since` (default: everything) until `until` (default: now) into `out`.
fn run_export(paths: &Paths, format: cowork::export::Format, out: &std::path::Path, since: Option<&str>, until: Option<&str>) -> anyhow::Result<ExitCode> {
    let now = cowork::ids::now_millis();
    let since = since.map(|t| cowork::ids::parse_time(t, now)).transpose().map_err(anyhow::Error::msg)?;
    let until = until.map(|t| cowork::ids::parse_time(t, now)).transpose().map_err(anyhow::Error::msg)?;
    let count = commands::export(paths, format, since.unwrap_or(i64::MIN), until.unwrap_or(now + 1), out)?;
    eprintln!("exported {count} records, unencrypted (for taking elsewhere), to {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// `cowork delete`: the last span, or from `since` to `until`.
fn run_delete(paths: &Paths, last: Option<String>, since: Option<String>, until: Option<String>) -> anyhow::Result<ExitCode> {
    let now = cowork::ids::now_millis();
    let (since, until) = match (last, since, until) {
        (Some(span), _, _) => {
            let span = cowork::ids::parse_span_millis(&span)
                .ok_or_else(|| anyhow::anyhow!("--last takes a span such as 15m, 1h or 1d"))?;
            (now - span, now + 1)
        }
        (None, Some(since), Some(until)) => (
            cowork::ids::parse_time(&since, now).map_err(anyhow::Error::msg)?,
            cowork::ids::parse_time(&until, now).map_err(anyhow::Error::msg)?,
        ),
        _ => anyhow::bail!("give --last SPAN, or --since and --until"),
    };
    let deleted = commands::delete(paths, since, until)?;
    eprintln!("deleted {} sessions and {} messages", deleted.sessions, deleted.messages);
    Ok(ExitCode::SUCCESS)
}

/// `cowork capture …`: capture without the sidebar, or replay a scripted day.
fn run_capture(paths: &Paths, action: CaptureAction, display: Option<String>) -> anyhow::Result<ExitCode> {
    match action {
        CaptureAction::Run => commands::capture_run(paths, display)?,
        CaptureAction::Simulate { script, start, repeat, progress } => {
            let now = cowork::ids::now_millis();
            let start = start.as_deref().map(|t| cowork::ids::parse_time(t, now)).transpose().map_err(anyhow::Error::msg)?;
            let stats = commands::simulate(paths, &script, start, repeat, progress)?;
            eprintln!(
                "replayed {} sessions, {} typed chunks, {} clipboard events ({} windows excluded by the firewall, {} AFK periods)",
                stats.sessions, stats.chunks, stats.clips, stats.excluded_windows, stats.afk_periods
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork search`'s filters: times, the app, and the streams by name.
fn search_filters(since: Option<String>, until: Option<String>, app: Option<String>, stream: &[String]) -> anyhow::Result<cowork::memory::search::Filters> {
    let now = cowork::ids::now_millis();
    let time = |t: Option<String>| t.map(|t| cowork::ids::parse_time(&t, now)).transpose().map_err(anyhow::Error::msg);
    let streams = stream
        .iter()
        .map(|s| {
            cowork::memory::search::Stream::parse(s)
                .ok_or_else(|| anyhow::anyhow!("unknown stream {s:?}: window, typing, clipboard, chat, summary or audio"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(cowork::memory::search::Filters { since_millis: time(since)?, until_millis: time(until)?, app, streams })
}

/// `cowork search`: the hits as lines (or JSON), and how they were found on stderr.
fn run_search(paths: &Paths, query: &str, filters: &cowork::memory::search::Filters, limit: usize, json: bool) -> anyhow::Result<ExitCode> {
    let (outcome, load_millis) = commands::memory::search(paths, query, filters, limit)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome.hits)?);
    } else {
        for hit in &outcome.hits {
            println!(
                "{}  {:<9} {:<14} {}  {}",
                cowork::ids::rfc3339(hit.at_millis),
                hit.stream.as_str(),
                hit.app.as_deref().unwrap_or("-"),
                hit.title,
                hit.snippet.replace('\n', " ")
            );
        }
    }
    match &outcome.keyword_only {
        Some(why) => eprintln!("{} hits, keyword matches only: {why}", outcome.hits.len()),
        None => eprintln!(
            "{} hits: keywords {:.1} ms and meaning {:.1} ms in parallel (model and indexes loaded in {load_millis:.0} ms)",
            outcome.hits.len(),
            outcome.keyword_millis,
            outcome.vector_millis
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork memory …`: embeds now, reports what is embedded, or retries failed jobs.
fn run_memory(paths: &Paths, action: MemoryAction) -> anyhow::Result<ExitCode> {
    match action {
        MemoryAction::Embed => {
            let embedded = commands::memory::embed_now(paths)?;
            println!("embedded {embedded} chunks");
        }
        MemoryAction::Status => {
            let p = commands::memory::status(paths)?;
            println!("embedded chunks   {}", p.chunks_embedded);
            println!("waiting chunks    {}", p.chunks_waiting);
            println!("queued rows       {}", p.queued_rows);
            println!("unfinished jobs   {}", p.jobs_pending);
            println!("failed jobs       {}{}", p.jobs_failed, p.last_error.map(|e| format!(" (last: {e})")).unwrap_or_default());
        }
        MemoryAction::Retry => println!("{} failed jobs queued again", commands::memory::retry_failed(paths)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork mcp …`: the MCP servers cowork uses, and the one it serves.
fn run_mcp(paths: &Paths, action: McpAction) -> anyhow::Result<ExitCode> {
    match action {
        McpAction::Import { file, allow_env } => commands::mcp_import(paths, &file, &allow_env)?,
        McpAction::List => commands::mcp_list(paths)?,
        McpAction::Test { name } => {
            if !commands::mcp_test(paths, &name)? {
                return Ok(ExitCode::FAILURE);
            }
        }
        McpAction::Serve { http, allow, consent_wait } => {
            paths.ensure_data_dir()?;
            let options = cowork::mcp::serve::ServeOptions { http, allow, consent_wait: std::time::Duration::from_secs(consent_wait) };
            cowork::mcp::serve::serve(paths, options)?;
        }
        McpAction::Token => {
            paths.ensure_data_dir()?;
            println!("{}", cowork::mcp::serve::token(&paths.data_dir)?);
        }
        McpAction::Login { name } => {
            paths.ensure_data_dir()?;
            commands::mcp_login(paths, &name)?;
        }
        McpAction::Logout { name } => {
            if cowork::mcp::oauth::sign_out(&name, &paths.data_dir)? {
                println!("forgot the sign-in of {name}");
            } else {
                println!("there was no sign-in kept for {name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork trigger`: tells the running sidebar what a hotkey would.
fn run_trigger(paths: &Paths, what: &str) -> anyhow::Result<ExitCode> {
    use cowork::desktop::trigger::{Trigger, send, socket_path};
    let Some(trigger) = Trigger::parse(what) else {
        anyhow::bail!("unknown trigger {what:?}: one of {}", Trigger::names());
    };
    send(&socket_path(&paths.data_dir), trigger).map_err(|err| anyhow::anyhow!(err))?;
    Ok(ExitCode::SUCCESS)
}

/// `cowork gnome-extension …`: installs, removes or checks the GNOME Shell extension and shortcuts.
fn run_gnome_extension(paths: &Paths, action: GnomeExtensionAction) -> anyhow::Result<ExitCode> {
    let message = match action {
        GnomeExtensionAction::Install { shell_version } => cowork::desktop::gnome::install_here(shell_version.as_deref()),
        GnomeExtensionAction::Remove => cowork::desktop::gnome::remove_here(),
        GnomeExtensionAction::Status => Ok(cowork::desktop::gnome::status_here()),
        GnomeExtensionAction::AddShortcuts => {
            let settings = cowork::workers::read_settings(paths).0;
            cowork::desktop::gnome::add_shortcuts_here(&settings.quick_prompt_hotkey, &settings.pause_hotkey, &settings.voice.hotkey)
        }
        GnomeExtensionAction::RemoveShortcuts => cowork::desktop::gnome::remove_shortcuts_here(),
    }
    .map_err(|err| anyhow::anyhow!(err))?;
    println!("{message}");
    Ok(ExitCode::SUCCESS)
}

/// `cowork settings …`: lists, reads, changes or resets a setting.
fn run_settings(paths: &Paths, action: SettingsAction) -> anyhow::Result<ExitCode> {
    match action {
        SettingsAction::List { json } => commands::settings::list(paths, json)?,
        SettingsAction::Get { key } => commands::settings::get(paths, &key)?,
        SettingsAction::Set { key, value } => commands::settings::set(paths, &key, &value)?,
        SettingsAction::Reset { key } => commands::settings::reset(paths, &key)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork secrets …`: stores (from stdin), lists or deletes secrets.
fn run_secrets(paths: &Paths, action: SecretsAction) -> anyhow::Result<ExitCode> {
    let secrets = cowork::secrets::Secrets::open(&paths.data_dir)?;
    match action {
        SecretsAction::Set { name } => {
            let mut value = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut value)?;
            let value = value.trim();
            secrets.set(&name, value)?;
            eprintln!("stored {name} ({}) in {}", cowork::secrets::mask(value), secrets.describe());
        }
        SecretsAction::List => {
            eprintln!("secrets in {}", secrets.describe());
            for (name, masked) in secrets.list()? {
                println!("{name}\t{masked}");
            }
        }
        SecretsAction::Delete { name } => {
            if !secrets.delete(&name)? {
                anyhow::bail!("no secret {name:?} in {}", secrets.describe());
            }
            eprintln!("deleted {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cowork autostart on|off|status`.
fn run_autostart(paths: &Paths, state: &str) -> anyhow::Result<ExitCode> {
    use cowork::desktop::autostart;
    let message = match state {
        "status" => match autostart::entry_path() {
            Some(path) if autostart::enabled_at(&path) && autostart::targets(&path, paths.data_dir_if_not_default()) => {
                format!("cowork starts when you log in ({})", path.display())
            }
            _ => "cowork does not start when you log in".to_owned(),
        },
        on => autostart::set(on == "on", paths.data_dir_if_not_default()).map_err(|err| anyhow::anyhow!(err))?,
    };
    println!("{message}");
    Ok(ExitCode::SUCCESS)
}

/// Takes the data directory's instance lock; when another cowork holds it,
/// hands this start's request to it (`None`: nothing more to do here).
fn claim_instance(paths: &Paths, cli: &Cli) -> anyhow::Result<Option<cowork::desktop::instance::InstanceLock>> {
    use cowork::desktop::instance::{Claim, claim, hand_over};
    use cowork::desktop::trigger::Trigger;
    paths.ensure_data_dir()?;
    let kind = if cli.command.is_some() { "capture" } else { "sidebar" };
    let (pid, holder) = match claim(&paths.data_dir, kind)? {
        Claim::First(lock) => return Ok(Some(lock)),
        Claim::Running { pid, kind } => (Claim::holder(pid), kind),
    };
    if cli.command.is_some() {
        anyhow::bail!("cowork already runs for {} ({pid}): it captures already", paths.data_dir.display());
    }
    // `cowork capture run` has no window to show and listens for nothing.
    if holder.as_deref() == Some("capture") {
        anyhow::bail!("`cowork capture run` ({pid}) captures into {}: stop it to open the sidebar", paths.data_dir.display());
    }
    // A login autostart after the user started cowork by hand: nothing to do.
    if cli.autostart {
        eprintln!("cowork already runs for {} ({pid})", paths.data_dir.display());
        return Ok(None);
    }
    let trigger = if cli.quick_prompt { Trigger::QuickPrompt } else { Trigger::Show };
    // A cowork that has just started listens once its key is found and its workers run (seconds at a login).
    hand_over(&paths.data_dir, trigger, Duration::from_secs(30))
        .map_err(|err| anyhow::anyhow!("cowork already runs for {} ({pid}) but did not take the request: {err}", paths.data_dir.display()))?;
    eprintln!("cowork already runs for {} ({pid}): {}", paths.data_dir.display(), if cli.quick_prompt { "opened its quick prompt" } else { "showed its sidebar" });
    Ok(None)
}

/// `cowork forget-everything`: refuses while cowork runs on the data
/// directory, lists what goes, asks (or takes --yes), removes it.
fn forget_everything(paths: &Paths, yes: bool) -> anyhow::Result<ExitCode> {
    use cowork::desktop::instance::{Claim, claim};
    let _lock = match claim(&paths.data_dir, "forget")? {
        Claim::First(lock) => lock,
        Claim::Running { pid, .. } => anyhow::bail!(
            "cowork runs for {} ({}): quit it first (tray → Quit), or use Settings → Your data → Forget everything",
            paths.data_dir.display(),
            Claim::holder(pid)
        ),
    };
    let inventory = cowork::commands::forget::inventory(paths);
    if let Some(reason) = &inventory.refusal {
        anyhow::bail!("{reason}");
    }
    println!("This removes, for good:");
    for line in inventory.describe() {
        println!("  - {line}");
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!("nothing was removed: confirm with --yes when there is no terminal to ask on");
        }
        print!("Type \"forget\" to remove all of this: ");
        std::io::Write::flush(&mut std::io::stdout())?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if answer.trim() != "forget" {
            println!("nothing was removed");
            return Ok(ExitCode::FAILURE);
        }
    }
    println!("{}", cowork::commands::forget::forget(paths, &inventory)?);
    Ok(ExitCode::SUCCESS)
}

/// The man pages (cowork.1 and one per subcommand, `cowork-ask.1`…) and the
/// bash, zsh and fish completions, generated from the clap definitions.
fn package_files(dir: &std::path::Path) -> anyhow::Result<()> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let man = dir.join("man");
    let completions = dir.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&completions)?;
    clap_mangen::generate_to(Cli::command(), &man)?;
    let command = Cli::command();
    for (shell, file) in [(Shell::Bash, "cowork"), (Shell::Zsh, "_cowork"), (Shell::Fish, "cowork.fish")] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut command.clone(), "cowork", &mut out);
        std::fs::write(completions.join(file), out)?;
    }
    Ok(())
}

/// The window that says the history cannot be opened; Try again that finds
/// the key starts cowork afresh in this process (the same arguments).
fn run_locked(paths: &Paths, problem: cowork::store::key::KeyError) -> anyhow::Result<ExitCode> {
    tracing::error!("{problem}");
    let app = cowork::ui::locked::LockedApp::new(paths.db_path(), &problem);
    let unlocked = app.unlocked.clone();
    let options = eframe::NativeOptions {
        viewport: ViewportBuilder::default().with_title("cowork").with_app_id("cowork").with_inner_size([420.0, 260.0]),
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    eframe::run_native("cowork", options, Box::new(move |_cc| Ok(Box::new(app))))
        .map_err(|err| anyhow::anyhow!("cannot open a window to say so ({err}): {problem}"))?;
    if unlocked.load(std::sync::atomic::Ordering::SeqCst) {
        use std::os::unix::process::CommandExt;
        let exe = std::env::current_exe()?;
        let err = std::process::Command::new(exe).args(std::env::args_os().skip(1)).exec();
        anyhow::bail!("cannot start cowork again: {err}");
    }
    Ok(ExitCode::FAILURE)
}

/// How the sidebar was started.
struct SidebarOptions {
    display: Option<String>,
    screenshot: Option<PathBuf>,
    /// Open the quick prompt once the window is up.
    quick_prompt: bool,
    /// Started at login: only the tray icon when the user chose so.
    autostart: bool,
}

fn run_sidebar(paths: &Paths, options: SidebarOptions, process_started: Instant) -> anyhow::Result<ExitCode> {
    let SidebarOptions { display, screenshot, quick_prompt, autostart } = options;
    let manifest = Manifest::bundled()?;
    let (events_tx, events) = bounded(4096);
    let (sink, egui_ctx) = repaint_sink(events_tx);
    let display_for_hotkeys = display.clone();
    let (workers, settings, warnings) = Workers::start(
        paths,
        WorkerOptions {
            capture: true,
            display,
            chat_model: cowork::workers::chat_model(&manifest, paths),
            policy: RestartPolicy::default(),
            require_consent: true,
            automations: true,
        },
        sink.clone(),
    )?;
    signals::spawn_signal_thread(sink.runtime_only())?;
    let added_models = cowork::models::user::list(&paths.data_dir).unwrap_or_default();
    let model_speeds = cowork::llm::speed::Speeds::load(&cowork::llm::speed::path(&paths.data_dir)).all();
    let mut state = AppState { settings: settings.clone(), setting_warnings: warnings, added_models, model_speeds, ..AppState::default() };
    let desktop = cowork::desktop::session::for_display(display_for_hotkeys.as_deref(), settings.desktop_accessibility);
    if let Some(dirs) = directories::BaseDirs::new()
        && let Err(err) = cowork::desktop::appearance::spawn(dirs.config_dir().to_owned(), sink.narrow())
    {
        tracing::warn!(%err, "the desktop's light or dark preference is not followed");
    }
    let hotkeys = start_hotkeys(&desktop, &settings, &sink, &mut state);
    // Compositor bindings (`cowork trigger …`) reach this process through its socket, on any desktop.
    let trigger = match cowork::desktop::trigger::TriggerServer::spawn(cowork::desktop::trigger::socket_path(&paths.data_dir), sink.narrow()) {
        Ok(server) => Some(server),
        Err(err) => {
            state.notice(format!("`cowork trigger` will not reach this window: {err}"));
            None
        }
    };
    let placement = desktop.state(cowork::desktop::session::Capability::SidebarPlacement).clone();
    let placer = sidebar_placer(&desktop, &placement);
    let under_xwayland = !desktop.x11_decides() && desktop.xwayland && placer.is_none();
    let tray = match TrayIcon::spawn(settings.privacy.paused, sink.narrow()) {
        Ok(tray) => Some(tray),
        Err(err) => {
            tracing::info!("{err:#}");
            None
        }
    };
    // Started at login with "only the tray icon" chosen: the window is
    // unmapped and the tray's Show (or a second `cowork`) maps it. A tray item
    // registers on any session bus but is seen only where a tray host (a
    // StatusNotifierWatcher) runs; stock GNOME has none, and hiding there would
    // leave nothing to click: the sidebar opens.
    let tray_shown = tray.is_some() && desktop.tray_host;
    let hidden = autostart && settings.start_in_tray && tray_shown;
    // The first run's pages until they are finished or skipped.
    state.setup.open = !settings.setup_done;
    state.setup.autostart = cowork::desktop::autostart::entry_path()
        .is_some_and(|entry| cowork::desktop::autostart::enabled_at(&entry) && cowork::desktop::autostart::targets(&entry, paths.data_dir_if_not_default()));
    state.setup.tray = tray_shown;
    let forget_on_exit = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if quick_prompt {
        sink.send(cowork::events::AppEvent::Desktop(DesktopEvent::QuickPromptHotkey));
    }
    let [x, y, width, height] = settings
        .sidebar_geometry
        .or_else(|| default_sidebar_rect(SIDEBAR_WIDTH))
        .unwrap_or([0.0, 0.0, SIDEBAR_WIDTH, 800.0]);
    let options = sidebar_window([x, y], [width, height], under_xwayland);
    if under_xwayland {
        tracing::info!("the sidebar runs under XWayland: {}", placement.text());
    }
    if let Some(placer) = &placer {
        placer.place(cowork::desktop::place::PlaceCommand::Sidebar { width: width as i32 });
    }
    let channels = workers.channels(events, sink.clone());
    let models = cowork::ui::settings::model_views(&manifest, &paths.models_dir);
    let app_options = AppOptions {
        screenshot,
        process_started: Some(process_started),
        export_dir: paths.data_dir.clone(),
        models_dir: paths.models_dir.clone(),
        start_hidden: hidden,
        forget_on_exit: forget_on_exit.clone(),
        autostart_entry: None,
    };
    let result = eframe::run_native(
        "cowork",
        options,
        Box::new(move |cc| {
            let _ = egui_ctx.set(cc.egui_ctx.clone());
            cc.egui_ctx.set_visuals(egui::Visuals::dark());
            Ok(Box::new(CoworkApp::new(channels, state, models, app_options).with_tray(tray).with_placer(placer)))
        }),
    );
    drop(hotkeys);
    drop(trigger);
    workers.shutdown(Duration::from_secs(5));
    drop(sink);
    // Settings → Your data → Forget everything, confirmed: now that nothing holds the files.
    if forget_on_exit.load(std::sync::atomic::Ordering::SeqCst) {
        let inventory = cowork::commands::forget::inventory(paths);
        let said = cowork::commands::forget::forget(paths, &inventory)?;
        tracing::info!("{said}");
    }
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) => anyhow::bail!("cannot open the sidebar window: {err} (is there a display? `cowork doctor` checks)"),
    }
}

/// The sink over the UI's channel, and the slot its repaint hook reads: workers
/// start before the window exists, and the slot is filled in once it does.
fn repaint_sink(events_tx: crossbeam_channel::Sender<cowork::events::AppEvent>) -> (EventSink<cowork::events::AppEvent>, Arc<OnceLock<egui::Context>>) {
    let egui_ctx: Arc<OnceLock<egui::Context>> = Arc::new(OnceLock::new());
    let wake_ctx = egui_ctx.clone();
    let sink = EventSink::new(events_tx, move || {
        if let Some(ctx) = wake_ctx.get() {
            ctx.request_repaint();
        }
    });
    (sink, egui_ctx)
}

/// Global hotkeys: key grabs on an X session (under XWayland they would fire
/// only while an X app has focus), else the desktop portal's GlobalShortcuts
/// where the desktop offers it; Wayland also binds `cowork trigger …` in the
/// compositor. What cannot be set up becomes a notice.
fn start_hotkeys(desktop: &cowork::desktop::session::Report, settings: &cowork::config::Settings, sink: &EventSink<cowork::events::AppEvent>, state: &mut AppState) -> Option<GlobalHotkeys> {
    if !desktop.x11_decides() {
        let hotkeys_state = desktop.state(cowork::desktop::session::Capability::Hotkeys);
        tracing::info!("global hotkeys: {}", hotkeys_state.text());
        // The desktop portal's GlobalShortcuts where the desktop offers it (press and release).
        if hotkeys_state.is_ok() {
            let shortcuts = cowork::desktop::portal::shortcuts(&settings.quick_prompt_hotkey, &settings.pause_hotkey, &settings.voice.hotkey);
            if let Err(err) = cowork::desktop::portal::spawn(shortcuts, sink.narrow()) {
                state.notice(format!("global shortcuts unavailable: {err}"));
            }
        }
        return None;
    }
    let bindings = [
        (settings.quick_prompt_hotkey.as_str(), HotkeyAction::QuickPrompt),
        (settings.pause_hotkey.as_str(), HotkeyAction::TogglePause),
        (settings.voice.hotkey.as_str(), HotkeyAction::Voice),
    ];
    match GlobalHotkeys::register(&bindings, sink.narrow()) {
        Ok((hotkeys, errors)) => {
            for error in errors {
                state.notice(error);
            }
            Some(hotkeys)
        }
        Err(err) => {
            state.notice(format!("global hotkeys unavailable: {err:#}"));
            None
        }
    }
}

/// What places the sidebar where winit cannot (Wayland): the compositor's IPC,
/// KWin's or GNOME's scripting; None where nothing can (the sidebar then runs
/// under XWayland so it can stay on top) or on X11, where winit places it.
fn sidebar_placer(desktop: &cowork::desktop::session::Report, placement: &cowork::desktop::session::CapState) -> Option<cowork::desktop::place::Placer> {
    use cowork::desktop::place::Placer;
    use cowork::desktop::session::Family;
    let ipc = desktop.wayland.as_ref().and_then(|target| target.ipc.clone()).filter(|_| placement.is_ok() && !desktop.x11_decides());
    let kwin_places = desktop.family == Family::Kde && placement.is_ok();
    let gnome_places = desktop.family == Family::Gnome && placement.is_ok();
    match ipc {
        Some(ipc) => Placer::spawn(ipc).map_err(|err| tracing::warn!("place: {err}")).ok(),
        None if kwin_places => Placer::spawn_kwin().map_err(|err| tracing::warn!("place: {err}")).ok(),
        None if gnome_places => Placer::spawn_gnome().map_err(|err| tracing::warn!("place: {err}")).ok(),
        None => None,
    }
}

/// The sidebar's window: always on top at `position` and `size`, on X11 through XWayland when asked.
fn sidebar_window(position: [f32; 2], size: [f32; 2], under_xwayland: bool) -> eframe::NativeOptions {
    eframe::NativeOptions {
        viewport: ViewportBuilder::default()
            .with_title("cowork")
            .with_app_id("cowork")
            .with_inner_size(size)
            .with_position(position)
            .with_min_inner_size([320.0, 320.0])
            .with_icon(cowork::ui::theme::window_icon())
            .with_window_level(WindowLevel::AlwaysOnTop),
        renderer: eframe::Renderer::Glow,
        event_loop_builder: under_xwayland.then(|| {
            Box::new(|builder: &mut eframe::EventLoopBuilder<eframe::UserEvent>| {
                use winit::platform::x11::EventLoopBuilderExtX11;
                builder.with_x11();
            }) as eframe::EventLoopBuilderHook
        }),
        ..Default::default()
    }
}
