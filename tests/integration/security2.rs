//! The second adversarial review (issue 53, `../shared/research/agent-security-2.md`):
//! offline mode and proxies (T1), followed folders and links (T2), Undo into
//! cowork's data (T3), documents kept before a rule (T4), files replaced
//! without a trash copy (T5), cowork's own program and the keyring (T10, S2),
//! each with variants the review did not show. Against the real binary and
//! real files; every network peer is on loopback. (T6, T7, S1 are in
//! `security2_mcp.rs`; T9 and S4 in `security2_documents.rs`; T8 in
//! `security2_providers.rs`.)

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use super::security::{Lab, Step, calls, text, waiting_call};
use super::support::{HttpRecorder, require, temp_dir};

fn providers(lab: &Lab, extra: Value) {
    let mut list = vec![json!({"name": "scripted", "kind": "openai", "base_url": format!("http://127.0.0.1:{}/v1", lab.model.port), "model": "m"})];
    list.push(extra);
    std::fs::write(lab.data.join("providers.json"), json!({"providers": list}).to_string()).unwrap();
}

/// No proxy variable of the test's own environment leaks into a run.
fn without_proxies(command: &mut Command) -> &mut Command {
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
        command.env_remove(var);
    }
    command
}

// ---------------------------------------------------------------------------
// T1: offline mode and the proxy named in the environment.

#[test]
fn offline_a_loopback_request_never_goes_through_a_proxy_and_a_refusal_names_the_proxy() {
    let lab = Lab::new(vec![Step::Text("the local model answers".into())]);
    let proxy = HttpRecorder::start("502 Bad Gateway");
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    // Every spelling of the proxy variables, and a proxy URL without a scheme.
    for (var, value) in [
        ("http_proxy", proxy_url.clone()),
        ("HTTP_PROXY", proxy_url.clone()),
        ("https_proxy", proxy_url.clone()),
        ("HTTPS_PROXY", proxy_url.clone()),
        ("all_proxy", proxy_url.clone()),
        ("ALL_PROXY", format!("127.0.0.1:{}", proxy.port)),
    ] {
        let out = without_proxies(&mut lab.command(&["--offline", "ask", "--provider", "scripted", "summarise my letter: diagnosis ALPHA-7731"])).env(var, &value).output().unwrap();
        assert!(out.status.success(), "{var}: the local provider answers offline\n{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("the local model answers"), "{var}\n{}", text(&out));
    }
    assert!(proxy.seen().is_empty(), "a loopback request went through the proxy: {:?}", proxy.seen());
    assert!(lab.model.received().contains("ALPHA-7731"), "the local model received the prompt straight");

    // Offline, a remote provider is refused before any connection, and the refusal names where it would have gone.
    providers(&lab, json!({"name": "remote", "kind": "openai", "base_url": "https://api.example.invalid/v1", "model": "x", "api_key_env": "REMOTE_KEY"}));
    let out = without_proxies(&mut lab.command(&["--offline", "ask", "--provider", "remote", "hello"]))
        .env("REMOTE_KEY", "k")
        .env("HTTPS_PROXY", "http://user:pw@10.255.255.1:3128")
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("api.example.invalid through the proxy 10.255.255.1:3128"), "the real destination is named: {said}");
    assert!(!said.contains("pw@"), "the proxy's password is not shown: {said}");

    // Online, a host that is not loopback goes through the proxy, as the environment asks.
    providers(&lab, json!({"name": "remote", "kind": "openai", "base_url": "http://10.255.255.1:9/v1", "model": "x", "api_key_env": "REMOTE_KEY"}));
    let out = without_proxies(&mut lab.command(&["ask", "--provider", "remote", "hello"])).env("REMOTE_KEY", "k").env("http_proxy", &proxy_url).output().unwrap();
    assert!(!out.status.success(), "the proxy answers 502: {}", text(&out));
    assert!(proxy.seen().iter().any(|line| line.contains("10.255.255.1")), "online, the proxy carries the remote request: {:?}", proxy.seen());
}

#[test]
fn offline_a_loopback_search_service_and_an_mcp_server_are_reached_straight_not_through_a_proxy() {
    let mut lab = Lab::new(vec![]);
    let proxy = HttpRecorder::start("502 Bad Gateway");
    let searx = HttpRecorder::start("200 OK");
    lab.script(vec![calls(&[("web_search", json!({"query": "symptoms of ALPHA-7731"}))]), Step::Text("done".into())]);
    lab.settings(&[("web.search_provider", "searxng"), ("web.search_url", &format!("http://127.0.0.1:{}", searx.port))]);
    let out = lab.run(&["rules", "add", "web_search", "--action", "allow", "--example", r#"{"query":"x"}"#]);
    assert!(out.status.success(), "{}", text(&out));
    let out = without_proxies(&mut lab.command(&["--offline", "ask", "--agent", "look up my condition"])).env("ALL_PROXY", format!("http://127.0.0.1:{}", proxy.port)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(searx.seen().iter().any(|l| l.contains("ALPHA-7731")), "the loopback search service got the query: {:?}", searx.seen());

    // An MCP server over HTTP on loopback (reqwest, not ureq): straight as well.
    let sink = HttpRecorder::start("404 Not Found");
    std::fs::write(lab.data.join("mcp-servers.json"), json!({"mcpServers": {"local": {"url": format!("http://127.0.0.1:{}/mcp", sink.port)}}}).to_string()).unwrap();
    let _ = without_proxies(&mut lab.command(&["--offline", "mcp", "test", "local"])).env("https_proxy", format!("http://127.0.0.1:{}", proxy.port)).env("http_proxy", format!("http://127.0.0.1:{}", proxy.port)).output().unwrap();
    assert!(!sink.seen().is_empty(), "the MCP server was reached");
    assert!(proxy.seen().is_empty(), "nothing went through the proxy: {:?}", proxy.seen());
}

// ---------------------------------------------------------------------------
// T10, S2: cowork's own program and the keyring.

/// A bin folder with `cowork` in it (as the package installs it) and `helper`, another name for it.
fn cowork_on_path(lab: &Lab) -> String {
    let bin = lab.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cowork")).unwrap();
    std::os::unix::fs::symlink(&exe, bin.join("cowork")).unwrap();
    std::os::unix::fs::symlink(&exe, bin.join("helper")).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

fn captured_patient_portal(lab: &Lab) {
    let conn = cowork::store::open_writer(&lab.db()).unwrap();
    let now = cowork::ids::now_millis();
    let session = cowork::records::ActivitySession {
        session_id: 4242,
        app: "firefox".into(),
        title: "Oncology results for Ana Lima - patient portal".into(),
        window_id: 1,
        started_at_millis: now - 600_000,
        ended_at_millis: Some(now - 60_000),
        ..Default::default()
    };
    cowork::capture::db::upsert_session(&conn, &session).unwrap();
}

#[test]
fn cowork_s_own_program_and_its_keyring_items_are_out_of_every_tool_s_reach() {
    let mut lab = Lab::new(vec![]);
    lab.settings(&[("consent.scripted.activity", "never")]);
    captured_patient_portal(&lab);
    let path = cowork_on_path(&lab);
    let refused = [
        "cowork search oncology --limit 5",
        "cowork export --format jsonl --out /dev/stdout",
        "cowork mcp token",
        "cowork secrets list",
        "env cowork search oncology",
        "sh -c 'cowork search oncology'",
        "echo oncology | xargs cowork search",
        "timeout 20 cowork search oncology",
        "\"co\"work search oncology",
        "$HOME/bin/cowork search oncology",
        "helper search oncology",
        "cowork approve 1",
        "cowork rules add run_command --action allow --target command --pattern .*",
        "secret-tool search --all application cowork",
        "secret-tool lookup name database-key",
        "gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets --method org.freedesktop.Secret.Service.SearchItems {}",
    ];
    for line in refused {
        lab.script(vec![calls(&[("run_command", json!({"command": line}))]), Step::Text("done".into())]);
        let out = lab.command(&["ask", "--agent", "what did I look at today?"]).env("PATH", &path).output().unwrap();
        assert_ne!(out.status.code(), Some(3), "{line}: refused, not asked\n{}", text(&out));
        let (_, decision, why) = lab.outcomes().into_iter().rev().find(|(key, ..)| key == line).unwrap_or_else(|| panic!("{line} not in the audit log"));
        assert_eq!(decision, "deny", "{line}: {why}");
        assert!(why.contains("cowork's own data"), "{line}: {why}");
        assert!(!lab.model.received().contains("Ana Lima"), "{line}: captured history reached a provider without consent");
    }

    // A name the policy cannot know before it runs (a link made in the same line): it asks; approved,
    // cowork's program started below its tool refuses to read anything.
    let line = format!("ln -sf {} ~/bin/tool && ~/bin/tool search oncology", std::fs::canonicalize(env!("CARGO_BIN_EXE_cowork")).unwrap().display());
    lab.script(vec![calls(&[("run_command", json!({"command": line}))]), Step::Text("done".into())]);
    let out = lab.command(&["ask", "--agent", "what did I look at today?"]).env("PATH", &path).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let call = waiting_call(&out);
    let approved = lab.command(&["approve", &call.to_string()]).env("PATH", &path).output().unwrap();
    let received = lab.model.received();
    assert!(!received.contains("Ana Lima"), "an approved copy of the program read captured history:\n{}", text(&approved));
    assert!(received.contains("does not run for a program one of its own tools started"), "the refusal reached the model as the tool's output:\n{received}");

    // The marker alone is enough (a process tree broken by a double fork keeps the variable).
    let out = lab.command(&["search", "oncology"]).env("COWORK_TOOL_CHILD", "1").output().unwrap();
    assert!(!out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("Ana Lima"), "{}", text(&out));
    // The user's own terminal is not a tool: the same command works there.
    let out = lab.command(&["search", "oncology"]).env_remove("COWORK_TOOL_CHILD").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Ana Lima"), "{}", text(&out));
}

// ---------------------------------------------------------------------------
// T2: followed folders and links that appear after the walk.

#[test]
fn a_followed_folder_never_reads_a_file_from_elsewhere_through_a_link() {
    let root = temp_dir();
    let root = root.path().canonicalize().unwrap();
    let docs = root.join("Documents");
    std::fs::create_dir_all(docs.join("projects")).unwrap();
    std::fs::create_dir_all(root.join(".ssh")).unwrap();
    std::fs::create_dir_all(root.join("Taxes")).unwrap();
    std::fs::write(root.join(".ssh/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----\nSSHKEYMATERIAL42\n").unwrap();
    std::fs::write(root.join("Taxes/return-2025.txt"), "Tax return: taxable income TAXWORDONE\n").unwrap();
    std::fs::write(root.join("Taxes/return-2024.txt"), "Tax return: taxable income TAXWORDTWO\n").unwrap();
    std::fs::write(root.join("Taxes/letter.md"), "Letter TAXWORDTHREE\n").unwrap();
    std::fs::write(docs.join("projects/okapi.md"), "The okapi project starts in May.\n").unwrap();
    // There at the start: the walk passes these over.
    std::os::unix::fs::symlink(root.join(".ssh/id_ed25519"), docs.join("projects/present-at-start.txt")).unwrap();
    let (data, workers) = super::support::following(&docs, Some(&format!("**/.*/**\n{}/Taxes/**", root.display())));
    let found = |word: &str| super::support::found_titles(data.path(), word).len();
    let eventually = |what: &str, check: &dyn Fn() -> bool| assert!(super::support::eventually(Duration::from_secs(20), check), "{what}");
    eventually("the folder's own document is kept", &|| found("okapi") > 0);
    // Links arrive (a cloned repository, an unpacked archive): relative and absolute symlinks, a hard
    // link, a symlinked folder with a file written into its target, a file replaced by a link.
    std::os::unix::fs::symlink("../../.ssh/id_ed25519", docs.join("projects/deploy-notes.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("Taxes/return-2025.txt"), docs.join("projects/summary.txt")).unwrap();
    std::fs::hard_link(root.join("Taxes/return-2024.txt"), docs.join("projects/hard.txt")).unwrap();
    std::os::unix::fs::symlink(root.join("Taxes"), docs.join("linked")).unwrap();
    std::fs::write(root.join("Taxes/new.md"), "TAXWORDFOUR\n").unwrap();
    std::fs::remove_file(docs.join("projects/okapi.md")).unwrap();
    std::os::unix::fs::symlink(root.join(".ssh/id_ed25519"), docs.join("projects/okapi.md")).unwrap();
    // A document written after them: once it is kept, every event before it has been handled.
    std::fs::write(docs.join("projects/sentinel.md"), "The heron sentinel.\n").unwrap();
    eventually("a new document is still kept", &|| found("heron") > 0);
    eventually("a kept file replaced by a link is forgotten", &|| found("okapi") == 0);
    for word in ["SSHKEYMATERIAL42", "TAXWORDONE", "TAXWORDTWO", "TAXWORDTHREE", "TAXWORDFOUR"] {
        assert_eq!(found(word), 0, "{word} was read into memory through a link");
    }
    workers.shutdown(Duration::from_secs(5));
}

#[test]
fn a_bind_mount_inside_a_followed_folder_is_not_walked() {
    let root_user = unsafe { libc::geteuid() } == 0;
    if !require(root_user && super::support::have_program("unshare") && super::support::have_program("mount"), "root, unshare and mount (a private mount namespace)") {
        return;
    }
    let root = temp_dir();
    let root = root.path().canonicalize().unwrap();
    let docs = root.join("Documents");
    std::fs::create_dir_all(docs.join("bound")).unwrap();
    std::fs::create_dir_all(root.join("Private")).unwrap();
    std::fs::write(docs.join("okapi.md"), "The okapi project starts in May.\n").unwrap();
    std::fs::write(root.join("Private/return.txt"), "Tax return BINDWORD77\n").unwrap();
    let data = temp_dir();
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    cowork::store::set_setting(&conn, "memory.document_folders", &docs.display().to_string(), 0).unwrap();
    drop(conn);
    let flows = data.path().join("flows.json");
    std::fs::write(&flows, r#"{"flows": [{"name": "hold", "description": "keeps the headless workers up", "trigger": {"kind": "manual"}, "steps": [{"id": "wait", "kind": "delay", "seconds": 4}]}]}"#).unwrap();
    let cowork = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_cowork")).env("COWORK_LOG", "warn").arg("--data-dir").arg(data.path()).args(args).output().unwrap();
    let out = cowork(&["automations", "import", flows.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    // In a mount namespace of its own: the bind mount exists for this cowork only, and goes with it.
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", r#"mount --bind "$1" "$2" && exec "$3" --data-dir "$4" automations run hold"#, "sh"])
        .arg(root.join("Private"))
        .arg(docs.join("bound"))
        .arg(env!("CARGO_BIN_EXE_cowork"))
        .arg(data.path())
        .env("COWORK_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let search = |word: &str| String::from_utf8_lossy(&cowork(&["search", word]).stdout).into_owned();
    assert!(search("okapi").contains("okapi"), "the followed folder's own document was kept");
    assert!(!search("BINDWORD77").contains("BINDWORD77"), "a folder bind-mounted into the followed folder was read");
}

// ---------------------------------------------------------------------------
// T3: Undo, checked when it happens.

#[test]
fn undo_never_writes_into_cowork_s_data_through_a_swapped_folder_or_an_edited_trash_entry() {
    let mut lab = Lab::new(vec![]);
    std::fs::create_dir_all(lab.home.join("inbox/cowork/skills/helper")).unwrap();
    std::fs::create_dir_all(lab.home.join("Downloads")).unwrap();
    std::fs::write(lab.home.join("inbox/cowork/skills/helper/SKILL.md"), "---\nname: helper\ndescription: x\n---\nRUN:touch /tmp/never\n").unwrap();
    let approve = |lab: &Lab, out: &Output| {
        let call = waiting_call(out);
        let approved = lab.run(&["approve", &call.to_string()]);
        assert!(approved.status.success(), "{}", text(&approved));
    };
    // A: a move, then the folder it came from replaced by a link into ~/.local/share.
    lab.script(vec![calls(&[("move_path", json!({"from": "~/inbox/cowork/skills", "to": "~/Downloads/skills"}))]), Step::Text("moved".into())]);
    approve(&lab, &lab.run(&["ask", "--agent", "tidy my inbox"]));
    assert!(lab.home.join("Downloads/skills/helper/SKILL.md").exists());
    std::fs::rename(lab.home.join("inbox"), lab.home.join("inbox.old")).unwrap();
    std::os::unix::fs::symlink(lab.home.join(".local/share"), lab.home.join("inbox")).unwrap();
    let out = lab.run(&["undo"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not where it was"), "{}", text(&out));
    assert!(!lab.data.join("skills/helper").exists(), "Undo wrote a skill into cowork's data directory");
    assert!(lab.home.join("Downloads/skills/helper/SKILL.md").exists(), "nothing was lost");
    std::fs::remove_file(lab.home.join("inbox")).unwrap();

    // B: a deletion, then its trash entry edited to say it came from the data directory.
    std::fs::create_dir_all(lab.home.join("notes")).unwrap();
    std::fs::write(lab.home.join("notes/evil.md"), "---\nname: evil2\ndescription: x\n---\nRUN:touch /tmp/never\n").unwrap();
    lab.script(vec![calls(&[("delete_path", json!({"path": "~/notes/evil.md"}))]), Step::Text("deleted".into())]);
    approve(&lab, &lab.run(&["ask", "--agent", "clean my notes"]));
    let info_dir = lab.home.join(".local/share/Trash/info");
    let info = std::fs::read_dir(&info_dir).unwrap().flatten().map(|e| e.path()).find(|p| p.to_string_lossy().contains("evil")).unwrap();
    let entry = std::fs::read_to_string(&info).unwrap();
    let forged: String = entry.lines().map(|l| if l.starts_with("Path=") { format!("Path={}\n", lab.data.join("skills/evil2/SKILL.md").display()) } else { format!("{l}\n") }).collect();
    std::fs::write(&info, forged).unwrap();
    let out = lab.run(&["undo"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("now says it came from"), "{}", text(&out));
    assert!(!lab.data.join("skills/evil2").exists(), "Undo restored a trashed file into cowork's data directory");

    // C: a file the task created, then its folder swapped for a link to the data directory, where a
    // file of the same name is cowork's: Undo must not trash cowork's file.
    std::fs::create_dir_all(lab.home.join("work")).unwrap();
    lab.script(vec![calls(&[("write_file", json!({"path": "~/work/USER.md", "content": "draft"}))]), Step::Text("written".into())]);
    approve(&lab, &lab.run(&["ask", "--agent", "write a draft"]));
    std::fs::write(lab.data.join("USER.md"), "cowork's profile of the user\n").unwrap();
    std::fs::rename(lab.home.join("work"), lab.home.join("work.old")).unwrap();
    std::os::unix::fs::symlink(&lab.data, lab.home.join("work")).unwrap();
    let out = lab.run(&["undo"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(lab.data.join("USER.md")).unwrap(), "cowork's profile of the user\n", "Undo trashed cowork's own file");
    std::fs::remove_file(lab.home.join("work")).unwrap();

    // D: the trash's own folder replaced by a link into the data directory: nothing goes to the trash through it.
    let trash_files = lab.home.join(".local/share/Trash/files");
    std::fs::rename(&trash_files, lab.home.join("trash-files.old")).unwrap();
    std::fs::create_dir_all(lab.data.join("skills")).unwrap();
    std::os::unix::fs::symlink(lab.data.join("skills"), &trash_files).unwrap();
    std::fs::create_dir_all(lab.home.join("notes/helper2")).unwrap();
    std::fs::write(lab.home.join("notes/helper2/SKILL.md"), "---\nname: helper2\ndescription: x\n---\nRUN:touch /tmp/never\n").unwrap();
    lab.script(vec![calls(&[("delete_path", json!({"path": "~/notes/helper2", "recursive": true}))]), Step::Text("deleted".into())]);
    let out = lab.run(&["ask", "--agent", "clean my notes"]);
    let call = waiting_call(&out);
    let _ = lab.run(&["approve", &call.to_string()]);
    assert!(!lab.data.join("skills/helper2").exists(), "the trash followed a link into cowork's data");
    assert!(lab.home.join("notes/helper2/SKILL.md").exists(), "nothing was lost");
    assert!(lab.model.received().contains("is a link, not a trash folder"), "the model was told why");
}

// ---------------------------------------------------------------------------
// T5: what replaces or edits a file keeps the old one, and an allow rule never replaces one.

#[test]
fn write_file_and_edit_file_keep_what_they_change_and_an_allow_rule_never_replaces_a_file() {
    let mut lab = Lab::new(vec![]);
    let budget = lab.home.join("Documents/budget.md");
    std::fs::write(&budget, "# Budget\n\nBUDGET-ORIGINAL-TEXT\n").unwrap();
    // A: approved once, a write over a file: the card says what it replaces, Undo puts it back.
    lab.script(vec![calls(&[("write_file", json!({"path": "~/Documents/budget.md", "content": "x"}))]), Step::Text("done".into())]);
    let out = lab.run(&["ask", "--agent", "fix my budget"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let card = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(card.contains("replaces a 31-byte file last changed today"), "the card says what it replaces: {card}");
    let approved = lab.run(&["approve", &waiting_call(&out).to_string()]);
    assert!(approved.status.success(), "{}", text(&approved));
    assert_eq!(std::fs::read_to_string(&budget).unwrap(), "x");
    let out = lab.run(&["undo"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&budget).unwrap(), "# Budget\n\nBUDGET-ORIGINAL-TEXT\n", "Undo put the original back");

    // B: the user's allow rule for writes under ~/Documents never replaces a file that exists; a new one it writes.
    let pattern = format!("{}/.*", lab.home.join("Documents").display());
    let out = lab.run(&["rules", "add", "write_file", "--action", "allow", "--target", "path", "--pattern", &pattern, "--example", r#"{"path":"~/Documents/new.md","content":"x"}"#]);
    assert!(out.status.success(), "{}", text(&out));
    for path in ["~/Documents/budget.md", "~/Documents/../Documents/budget.md"] {
        lab.script(vec![calls(&[("write_file", json!({"path": path, "content": "replaced"}))]), Step::Text("done".into())]);
        let out = lab.run(&["ask", "--agent", "update the budget note"]);
        assert_eq!(out.status.code(), Some(3), "{path}: asked, whatever the rule says\n{}", text(&out));
        assert!(std::fs::read_to_string(&budget).unwrap().contains("BUDGET-ORIGINAL-TEXT"), "{path}: replaced without asking");
    }
    // Through a link to the file: the file it leads to is what is replaced, and that asks too.
    std::os::unix::fs::symlink(&budget, lab.home.join("Documents/link.md")).unwrap();
    lab.script(vec![calls(&[("write_file", json!({"path": "~/Documents/link.md", "content": "replaced"}))]), Step::Text("done".into())]);
    assert_eq!(lab.run(&["ask", "--agent", "update the note"]).status.code(), Some(3));
    assert!(std::fs::read_to_string(&budget).unwrap().contains("BUDGET-ORIGINAL-TEXT"));
    lab.script(vec![calls(&[("write_file", json!({"path": "~/Documents/fresh.md", "content": "new"}))]), Step::Text("done".into())]);
    let out = lab.run(&["ask", "--agent", "write a new note"]);
    assert_eq!(out.status.code(), Some(0), "a new file under the rule is written: {}", text(&out));

    // C: an edit runs under its rule, and is undone.
    let out = lab.run(&["rules", "add", "edit_file", "--action", "allow", "--target", "path", "--pattern", &pattern, "--example", r#"{"path":"~/Documents/budget.md","find":"a","replace":"b"}"#]);
    assert!(out.status.success(), "{}", text(&out));
    lab.script(vec![calls(&[("edit_file", json!({"path": "~/Documents/budget.md", "find": "ORIGINAL", "replace": "EDITED"}))]), Step::Text("done".into())]);
    let out = lab.run(&["ask", "--agent", "edit the budget"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(std::fs::read_to_string(&budget).unwrap().contains("BUDGET-EDITED-TEXT"));
    let out = lab.run(&["undo"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(std::fs::read_to_string(&budget).unwrap().contains("BUDGET-ORIGINAL-TEXT"), "the edit was undone");
    // An "edit" whose text to find is the whole file replaces it: asked, whatever the rule.
    let whole = std::fs::read_to_string(&budget).unwrap();
    lab.script(vec![calls(&[("edit_file", json!({"path": "~/Documents/budget.md", "find": whole, "replace": "gone"}))]), Step::Text("done".into())]);
    let out = lab.run(&["ask", "--agent", "edit the budget"]);
    assert_eq!(out.status.code(), Some(3), "a whole-file edit is a replacement: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("replaces a"), "{}", text(&out));

    // S4 through the files tools: CSV the agent writes keeps no formula (a byte-order mark and `sep=` included).
    lab.script(vec![calls(&[("write_file", json!({"path": "~/Documents/r.csv", "content": "sep=|\n\u{feff}=HYPERLINK(\"http://127.0.0.1:9/?\"&B2),data\r\n@SUM(A1),-3.5\n"}))]), Step::Text("done".into())]);
    let out = lab.run(&["ask", "--agent", "save the table"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let csv = std::fs::read_to_string(lab.home.join("Documents/r.csv")).unwrap();
    assert!(csv.starts_with("'sep=") && csv.contains("'\u{feff}=HYPERLINK") && csv.contains("'@SUM") && csv.contains(",-3.5"), "{csv:?}");
}

// ---------------------------------------------------------------------------
// T4: documents kept before a rule or an exclusion for their folder.

#[test]
fn documents_kept_before_a_rule_or_an_exclusion_are_withheld_from_other_assistants() {
    let Some(python) = super::mcp::mcp_python() else { return };
    let lab = Lab::new(vec![]);
    for (dir, name, body) in [
        ("Medical", "letter.md", "# Letter\n\nThe biopsy confirms an early-stage oncology finding.\n"),
        ("Private/tax", "return.md", "# Return\n\nThe oncology clinic invoice is deductible.\n"),
        ("Downloads", "statement-mybank.example.md", "# Statement\n\nOverdraft after the oncology bill.\n"),
        ("Documents", "plants.md", "# Plants\n\nThe oncology ward has plants too.\n"),
    ] {
        std::fs::create_dir_all(lab.home.join(dir)).unwrap();
        let path = lab.home.join(dir).join(name);
        std::fs::write(&path, body).unwrap();
        let out = lab.run(&["documents", "add", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
    }
    // Later: a title rule, an excluded folder, a denied domain named in a path.
    lab.settings(&[
        ("privacy.denied_titles", "(?i)medical"),
        ("memory.document_exclude", &format!("**/.*/**\n{}/Private/**", lab.home.display())),
        ("privacy.denied_domains", "mybank.example"),
    ]);
    let args: Vec<String> = ["--data-dir", lab.data.to_str().unwrap(), "--models-dir", super::support::models_dir().to_str().unwrap(), "mcp", "serve", "--allow", "tester"].map(String::from).to_vec();
    let ops = vec![json!(["call", "search_memory", {"query": "oncology", "limit": 20}]), json!(["call", "search_memory", {"query": "biopsy", "limit": 20}])];
    let results = super::mcp::py_client(&python, &lab.home, json!({"client": "tester", "command": env!("CARGO_BIN_EXE_cowork"), "args": args, "ops": ops}));
    let served: String = results.iter().map(|r| super::mcp::call_text(r).0).collect::<Vec<_>>().join("\n");
    for secret in ["biopsy", "deductible", "Overdraft"] {
        assert!(!served.contains(secret), "a document the rules now cover was served ({secret}):\n{served}");
    }
    assert!(served.contains("plants too"), "a document no rule covers is still served:\n{served}");
}
