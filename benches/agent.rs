//! The agent's own work per step, model time excluded: the runner's decision
//! (`operation::next`), and for each of the step's three calls the schema
//! check, `classify` (paths resolved, symlinks followed) and the policy's
//! decision; then the step's records in a real SQLite file (the operation
//! with its conversation, and each call) as the store worker writes them.
//! The bound is 1 ms a step. The agent also logs the figure it
//! measures around each real model call (`agent step … overhead_micros=`).
//! Issue 38's bound: the policy's decision stays within 1 ms a call with the
//! shell reader in place, for a plain command, a hostile compound one and an
//! MCP call whose every string is checked as a path.

use std::time::Duration;

use cowork::agent::operation::{self, Limits, State};
use cowork::agent::store::{self as agent_store, AgentWrite, CallRow, OperationRow};
use cowork::brains::{Role, Turn};
use cowork::tools::{Origin, policy, registry};
use cowork::tools::files::FilesEnv;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn state() -> State {
    let mut state = State { tools: registry::cloud_set(0).iter().map(|t| t.to_string()).collect(), started_at_millis: 0, ..State::default() };
    state.push(Turn::new(Role::System, cowork::agent::AGENT_PROMPT), Origin::Instructions);
    state.push(Turn::new(Role::User, "find what I worked on this morning and save a summary to notes/today.md"), Origin::User);
    for i in 0..8 {
        state.push(Turn::new(Role::Assistant, format!("Looking at step {i}.")), Origin::Instructions);
        state.push(Turn::new(Role::Tool, "- 09:24 for 8m · firefox — LH1723 Munich to Lisbon\n".repeat(20)), Origin::Capture);
    }
    state
}

fn step(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("notes")).unwrap();
    std::fs::create_dir_all(home.path().join(".local/share/cowork")).unwrap();
    let env = FilesEnv { cwd: home.path().to_owned(), home: home.path().to_owned(), data_dir: home.path().join(".local/share/cowork") };
    let state = state();
    let limits = Limits::default();
    let calls: Vec<(&str, Value)> = vec![
        ("search_memory", json!({"query": "budget review"})),
        ("write_file", json!({"path": "notes/today.md", "content": "Budget review, flight LH1723."})),
        ("run_command", json!({"command": "git -C notes commit -am today"})),
    ];
    let rules: Vec<policy::Rule> = Vec::new();
    let origins = state.origins();
    let always_ask: Vec<String> = Vec::new();

    let db = home.path().join("cowork.db");
    let conn = cowork::store::open_writer(&db).unwrap();
    let mut row = OperationRow::running(1, Some(1), Some(2), "find what I worked on".into(), "local".into(), 0);
    row.state = serde_json::to_string(&state).unwrap();

    let mut group = c.benchmark_group("agent");
    group.sample_size(50).measurement_time(Duration::from_secs(10));
    group.bench_function("decide_one_step_of_three_calls", |b| {
        b.iter(|| {
            let next = operation::next(&state, &[], 9, false, &limits, 1_000);
            let mut decided = 0;
            for (tool, args) in &calls {
                registry::validate(tool, args).unwrap();
                let classified = registry::classify(tool, args, &env).unwrap();
                let ctx = policy::Context { operation_id: 1, now_millis: 1_000, data_dir: &env.data_dir, home: &env.home, cwd: &env.cwd, origins: &origins, always_ask: &always_ask };
                decided += policy::decide(&classified.call(tool, args), &rules, &ctx).why.len();
            }
            (next, decided)
        })
    });
    // One call each, with the command read as sh reads it (issue 38): the bound is 1 ms a call.
    let allow = vec![policy::Rule {
        id: 1,
        tool: "run_command".into(),
        action: policy::Action::Allow,
        pattern: Some(policy::Pattern::new(policy::Target::Command, "git status --short").unwrap()),
        scope: policy::Scope::Always,
    }];
    let ctx = policy::Context { operation_id: 1, now_millis: 1_000, data_dir: &env.data_dir, home: &env.home, cwd: &env.cwd, origins: &origins, always_ask: &always_ask };
    for (name, command) in [
        ("decide_a_simple_command_under_an_allow_rule", "git status --short"),
        (
            "decide_a_hostile_compound_command",
            "cd .local/share && D=$(printf %s \"$HOME\"); for f in notes/*; do git status & \"rm\" -rf \"$f\" | xargs -n1 sh -c 'cat ~/.local/sha*/cowork/*.db' ; done; eval \"$(echo ls)\" <<EOF\n$HOME/{a,b}\nEOF",
        ),
    ] {
        let args = json!({"command": command});
        group.bench_function(name, |b| {
            b.iter(|| {
                let classified = registry::classify("run_command", &args, &env).unwrap();
                policy::decide(&classified.call("run_command", &args), &allow, &ctx).why.len()
            })
        });
    }
    // An MCP call, whose every string argument is read as a possible path.
    let mcp_args = json!({"query": "quarterly numbers", "paths": ["notes/today.md", "~/Documents/report.txt", "file:///tmp/x"], "options": {"depth": 3, "note": "see ./notes and $HOME/Documents"}});
    let mcp = registry::Classified { risk: cowork::tools::Risk::Sensitive, untyped: true, ..registry::Classified::default() };
    group.bench_function("decide_an_mcp_call_reading_every_string", |b| b.iter(|| policy::decide(&mcp.call("mcp__fs__search", &mcp_args), &rules, &ctx).why.len()));
    // What a server may expand itself (issue 53): patterns, variables, percent-encoding, against the data directory's files.
    std::fs::write(env.data_dir.join("secrets.key"), "k").unwrap();
    std::fs::write(env.data_dir.join("USER.md"), "me").unwrap();
    let expanded_args = json!({"path": "~/notes", "pattern": "**/*.md", "also": ["~/.local/*/cow*/*.key", "$XDG_DATA_HOME/x/%2e%2e/y", "{a,b}/[c]d?.txt"]});
    group.bench_function("decide_an_mcp_call_with_patterns_and_variables", |b| b.iter(|| policy::decide(&mcp.call("mcp__fs__search", &expanded_args), &rules, &ctx).why.len()));
    // A command whose program is looked up on PATH and compared with cowork's own.
    let args = json!({"command": "xargs -n1 helper search < notes/list.txt"});
    group.bench_function("decide_a_command_looked_up_as_cowork_s_own_program", |b| {
        b.iter(|| {
            let classified = registry::classify("run_command", &args, &env).unwrap();
            policy::decide(&classified.call("run_command", &args), &rules, &ctx).why.len()
        })
    });
    let mut id = 10;
    group.bench_function("record_one_step_in_sqlite", |b| {
        b.iter(|| {
            agent_store::apply(&conn, &AgentWrite::Operation(row.clone())).unwrap();
            for (tool, args) in &calls {
                id += 1;
                let call = CallRow {
                    call_id: id,
                    operation_id: 1,
                    step: 9,
                    model_call_id: format!("call_{id}"),
                    tool: (*tool).to_owned(),
                    arguments: args.clone(),
                    risk: cowork::tools::Risk::Sensitive,
                    status: cowork::agent::events::CallStatus::Waiting,
                    why: "ask unless a rule allows it".into(),
                    decided_by: Some("policy: default".into()),
                    output: None,
                    is_error: false,
                    created_at_millis: 1_000,
                    started_at_millis: None,
                    finished_at_millis: None,
                    expires_at_millis: Some(301_000),
                    images: Vec::new(),
                };
                agent_store::apply(&conn, &AgentWrite::Call(call)).unwrap();
            }
        })
    });
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
