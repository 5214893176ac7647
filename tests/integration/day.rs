//! Your day (issue 58): a scripted work week replayed through `cowork capture
//! simulate` into a real database, then `cowork report` — time per project
//! that adds up to the sessions' own durations to the second, attributed by
//! the user's rules and what titles and addresses say.

use std::process::{Command, Stdio};

use super::support::{models_dir, repo_dir, require, run_watching_threads, temp_dir};

fn cowork(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cowork"))
        .env("COWORK_LOG", "warn")
        .env("TZ", "UTC")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

const DAYS: [&str; 5] = ["2026-11-23", "2026-11-24", "2026-11-25", "2026-11-26", "2026-11-27"];

/// The week's script split into days at each `unfocus`, each replayed from 08:30 (UTC);
/// returns each window step's truth: (start ms, end ms, project).
fn replay_week(data: &std::path::Path, week: &std::path::Path) -> Vec<(i64, i64, String)> {
    let text = std::fs::read_to_string(week).unwrap();
    let (mut day, mut lines, mut truth) = (0, Vec::new(), Vec::new());
    let mut t = 0f64;
    let mut project = String::new();
    let mut day_start = cowork::ids::parse_time(&format!("{}T08:30:00Z", DAYS[0]), 0).unwrap();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        lines.push(line.to_owned());
        let step: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(window) = step.get("window") {
            project = window["project"].as_str().unwrap().to_owned();
        } else if let Some(secs) = step.get("work_secs").and_then(|s| s.as_f64()) {
            truth.push((day_start + (t * 1000.0) as i64, day_start + ((t + secs) * 1000.0) as i64, project.clone()));
            t += secs;
        } else if let Some(secs) = step.get("idle_secs").and_then(|s| s.as_f64()) {
            t += secs;
        } else if step.get("unfocus").is_some() {
            let script = data.join(format!("day-{day}.jsonl"));
            std::fs::write(&script, lines.join("\n")).unwrap();
            ok(&cowork(data, &["capture", "simulate", "--start", &format!("{}T08:30:00Z", DAYS[day]), "--script", script.to_str().unwrap()]));
            lines.clear();
            day += 1;
            t = 0.0;
            if day < DAYS.len() {
                day_start = cowork::ids::parse_time(&format!("{}T08:30:00Z", DAYS[day]), 0).unwrap();
            }
        }
    }
    assert_eq!(day, 5, "the week has five days");
    truth
}

/// The development week replayed into a new data directory (`data` in the
/// first) with its rules, and the 0.5B the tests fetch; None without it.
fn dev_week_and_qwen() -> Option<(tempfile::TempDir, std::path::PathBuf, std::path::PathBuf)> {
    let qwen = models_dir().join("qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !require(qwen.is_file(), "the Qwen2.5-Coder-0.5B model") {
        return None;
    }
    let dir = temp_dir();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    replay_week(&data, &repo_dir().join("tests/data/projects-week-dev.jsonl"));
    let rules = std::fs::read_to_string(repo_dir().join("tests/data/projects-week-dev.rules")).unwrap();
    ok(&cowork(&data, &["settings", "set", "projects.rules", &rules]));
    Some((dir, data, qwen))
}

/// A recap no one waits for gives way to a question asked while it is written
/// (issue 58): the real 0.5B writes a day's recap at low priority in the
/// running agent; a question asked once its model work has begun is answered
/// before the recap ends, and the recap is taken up again and written whole.
#[test]
fn a_question_asked_while_the_recap_is_written_is_answered_first_and_the_recap_written_after() {
    use cowork::agent::AgentCommand;
    use cowork::agent::events::AgentEvent;
    use cowork::events::AppEvent;
    use cowork::runtime::RestartPolicy;
    use std::time::{Duration, Instant};
    let Some((_dir, data, qwen)) = dev_week_and_qwen() else { return };
    let db = data.join("cowork.db");
    let (sink, events) = super::support::test_sink();
    let mut store = cowork::workers::spawn_store(db.clone(), sink.clone(), RestartPolicy::default()).unwrap();
    let (mut llm, mut agent) = super::llm_real::real_config(&db);
    (llm.model_path, llm.model_expected, llm.local_limit_tokens, agent.local_limit_tokens) = (qwen, None, cowork::llm::LOCAL_LIMIT_TOKENS, cowork::llm::LOCAL_LIMIT_TOKENS);
    let mut brain = super::llm_real::Brain::spawn((llm, agent), store.commands.clone(), sink, Default::default());
    // A question, and how long it took to its answer's end (and to its first token).
    let ask = |text: &str| {
        let thread = cowork::records::ChatThread { thread_id: cowork::ids::next_id(), title: "test".into(), updated_at_millis: cowork::ids::now_millis() };
        let question = cowork::agent::ChatRequest::new(thread, true, cowork::ids::next_id(), cowork::ids::next_id(), text);
        let answer_id = question.answer_id;
        let asked = Instant::now();
        let mut first = None;
        brain.agent.commands.send(AgentCommand::Chat(question)).unwrap();
        let answered = super::support::wait_for(&events, Duration::from_secs(600), |event| match event {
            AppEvent::Agent(AgentEvent::Token { answer_id: id, .. }) if *id == answer_id => {
                first.get_or_insert_with(|| asked.elapsed());
                None
            }
            AppEvent::Agent(AgentEvent::AnswerFinished { answer_id: id, status, error, .. }) if *id == answer_id => Some((*status, error.clone())),
            _ => None,
        })
        .expect("the question was answered");
        (answered, (first, asked.elapsed()))
    };
    // The CPU time of the low-priority threads (the recap's model work).
    let low_ticks = || -> u64 {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|name| name.starts_with("llm-low")))
            .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
            .map(|stat| stat.rsplit_once(')').unwrap().1.split_whitespace().skip(11).take(2).map(|t| t.parse::<u64>().unwrap()).sum::<u64>())
            .sum()
    };
    // The recap of Monday (noon, UTC: its sessions ran 08:30-17:00 UTC).
    let noon = cowork::ids::parse_time(&format!("{}T12:00:00Z", DAYS[0]), 0).unwrap();
    let (reply, recaps) = crossbeam_channel::bounded(1);
    let asked_at = Instant::now();
    let before = low_ticks();
    let recap = AgentCommand::Recap { period: cowork::day::recap::Period::Day, at_millis: noon, instructions: String::new(), reply: Some(reply) };
    brain.agent.commands.send(recap).unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    // Its model work has begun (half a second of it).
    while low_ticks() < before + 50 {
        assert!(Instant::now() < deadline, "the recap's model work never began");
        assert!(recaps.is_empty(), "the recap ended before it was seen working");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (answered, waited) = ask("Say hello in three words.");
    assert_eq!(answered.0, cowork::records::MessageStatus::Done, "{:?}", answered.1);
    assert!(recaps.is_empty(), "the question waited for the recap to end ({waited:?})");
    let written = recaps.recv_timeout(Duration::from_secs(600)).expect("the recap was taken up again");
    let Ok(cowork::day::recap::Outcome::Written(recap)) = written else { panic!("{written:?}") };
    let text = recap.render();
    eprintln!("the question, asked while the recap was written: {waited:?} to its first token and its end; the recap written in {:?}:\n{text}", asked_at.elapsed());
    // The local day holding Monday noon (UTC): Monday, or Tuesday east of UTC+12 (the suite's zone may be any).
    assert!(text.starts_with("Recap of ") && recap.lines().count() >= 3, "written whole after the question: {text}");
    assert!(brain.shutdown());
    assert!(store.shutdown(cowork::store::StoreCommand::Shutdown, Duration::from_secs(10)));
}

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    // The report's CSV quotes fields with commas and quotes (RFC 4180).
    let mut rows = Vec::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let (mut fields, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    field.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => fields.push(std::mem::take(&mut field)),
                (c, _) => field.push(c),
            }
        }
        fields.push(field);
        rows.push(fields);
    }
    rows
}

#[test]
fn a_scripted_week_is_reported_by_project_to_the_second_and_mostly_right() {
    let data = temp_dir();
    let week = repo_dir().join("tests/data/projects-week-dev.jsonl");
    let truth = replay_week(data.path(), &week);
    let rules = std::fs::read_to_string(repo_dir().join("tests/data/projects-week-dev.rules")).unwrap();
    // A rule that is not one says which line.
    let bad = cowork(data.path(), &["settings", "set", "projects.rules", "Atlas: ok\nno colon"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("line 2"), "{}", String::from_utf8_lossy(&bad.stderr));
    ok(&cowork(data.path(), &["settings", "set", "projects.rules", &rules]));
    // Listed on one line, its lines quoted (not spilling as if they were settings of their own).
    let listed = ok(&cowork(data.path(), &["settings", "list"]));
    assert!(listed.lines().any(|l| l.starts_with("projects.rules = \"# Dana") && l.contains("\\nAtlas: ")), "{listed}");
    assert!(!listed.lines().any(|l| l.starts_with("Atlas:")), "{listed}");

    let csv = ok(&cowork(data.path(), &["report", "--week", "--from", "2026-11-25", "--format", "csv"]));
    let rows = csv_rows(&csv);
    assert_eq!(rows[0], ["date", "project", "start", "end", "seconds", "duration", "app", "title", "url", "session_id", "why"]);
    let rows = &rows[1..];
    // To the second: the rows add up to the sessions' own durations (whole seconds of their clock times).
    let reader = cowork::store::open_read_only(&data.path().join("cowork.db")).unwrap();
    let from = cowork::ids::parse_time("2026-11-23", 0).unwrap();
    let sessions = cowork::capture::db::sessions_between(&reader, from, from + 7 * 86_400_000).unwrap();
    assert!(sessions.len() > 200, "{} sessions", sessions.len());
    let sessions_seconds: i64 = sessions.iter().map(|s| s.ended_at_millis.unwrap() / 1000 - s.started_at_millis / 1000).sum();
    let rows_seconds: i64 = rows.iter().map(|r| r[4].parse::<i64>().unwrap()).sum();
    assert_eq!(rows_seconds, sessions_seconds);
    // Markdown: every project's total and the week's are the rows' sums.
    let md = ok(&cowork(data.path(), &["report", "--week", "--from", "2026-11-23", "--format", "md"]));
    let hms = |s: i64| format!("{}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60);
    assert!(md.lines().any(|l| l.starts_with("| **Total** |") && l.ends_with(&format!(" **{}** |", hms(sessions_seconds)))), "{md}");
    let mut per_project = std::collections::BTreeMap::<&str, i64>::new();
    for row in rows {
        *per_project.entry(row[1].as_str()).or_default() += row[4].parse::<i64>().unwrap();
    }
    assert!(per_project.len() >= 9, "{per_project:?}");
    for (project, seconds) in &per_project {
        assert!(md.lines().any(|l| l.starts_with(&format!("| {} |", project.replace('|', "\\|"))) && l.ends_with(&format!(" **{}** |", hms(*seconds)))), "{project}: {md}");
    }
    // Attributed right: each row against the script's window it overlaps most.
    let (mut right, mut tracked) = (0i64, 0i64);
    let mut wrong = std::collections::BTreeMap::<(String, String), i64>::new();
    for row in rows {
        let (start, end) = (cowork::ids::parse_time(&row[2], 0).unwrap(), cowork::ids::parse_time(&row[3], 0).unwrap());
        let truth = truth.iter().max_by_key(|(a, b, _)| (*b).min(end) - (*a).max(start)).map(|(_, _, p)| if p.is_empty() { "(no project)" } else { p.as_str() }).unwrap();
        let seconds = row[4].parse::<i64>().unwrap();
        tracked += seconds;
        if truth == row[1] {
            right += seconds;
        } else {
            *wrong.entry((truth.to_owned(), row[1].clone())).or_default() += seconds;
        }
    }
    let share = right as f64 / tracked as f64;
    eprintln!("attributed right: {:.1} % of {} h; wrong: {wrong:?}", share * 100.0, tracked / 3600);
    assert!(share >= 0.9, "{:.1} % right; wrong: {wrong:?}", share * 100.0);
    // Each row says why.
    assert!(rows.iter().all(|r| !r[10].is_empty()));
    assert!(rows.iter().any(|r| r[10].starts_with("your rule")), "the rules were used");

    // The text form of one day; a date not of the calendar is refused.
    let day = ok(&cowork(data.path(), &["report", "--from", "2026-11-24"]));
    assert!(day.starts_with("Time by project, Tue 2026-11-24"), "{day}");
    let bad_date = cowork(data.path(), &["report", "--from", "2026-02-30"]);
    assert!(!bad_date.status.success());
}

#[test]
fn a_night_across_the_clocks_change_is_cut_at_local_midnight() {
    // New York's clocks go forward at 02:00 on 2026-03-08 (a POSIX zone: no tzdata needed).
    let data = temp_dir();
    let script = data.path().join("night.jsonl");
    std::fs::write(&script, "{\"window\": {\"app\": \"code\", \"title\": \"a.rs - atlas - Visual Studio Code\"}}\n{\"work_secs\": 14400}\n").unwrap();
    // 23:30 EST on the 7th, for four hours: 30 minutes that day, three and a half hours the next.
    ok(&cowork(data.path(), &["capture", "simulate", "--start", "2026-03-08T04:30:00Z", "--script", script.to_str().unwrap()]));
    let out = Command::new(env!("CARGO_BIN_EXE_cowork"))
        .env("COWORK_LOG", "warn")
        .env("TZ", "EST5EDT,M3.2.0,M11.1.0")
        .arg("--data-dir")
        .arg(data.path())
        .args(["report", "--from", "2026-03-07", "--until", "2026-03-08", "--format", "csv"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let rows = csv_rows(&ok(&out));
    let days: Vec<(&str, &str)> = rows[1..].iter().map(|r| (r[0].as_str(), r[4].as_str())).collect();
    assert_eq!(days, [("2026-03-07", "1800"), ("2026-03-08", "12600")]);
}

#[test]
fn a_title_cannot_become_a_spreadsheet_formula_in_the_report() {
    let data = temp_dir();
    let script = data.path().join("day.jsonl");
    std::fs::write(
        &script,
        "{\"window\": {\"app\": \"firefox\", \"title\": \"=HYPERLINK(\\\"http://evil.example/\\\",\\\"click\\\"), ok\"}}\n{\"work_secs\": 120}\n{\"window\": {\"app\": \"code\", \"title\": \"a.rs - atlas - Visual Studio Code\"}}\n{\"work_secs\": 60}\n",
    )
    .unwrap();
    ok(&cowork(data.path(), &["capture", "simulate", "--start", "2026-11-24T09:00:00Z", "--script", script.to_str().unwrap()]));
    let csv = ok(&cowork(data.path(), &["report", "--from", "2026-11-24", "--format", "csv"]));
    let rows = csv_rows(&csv);
    let hostile = rows.iter().find(|r| r[7].contains("HYPERLINK")).unwrap();
    assert!(hostile[7].starts_with("'="), "{hostile:?}");
    assert_eq!(rows.iter().find(|r| r[1] == "atlas").map(|r| r[4].as_str()), Some("60"));
}

#[test]
fn a_session_a_crash_left_open_counts_until_its_last_heartbeat_and_a_live_one_until_now() {
    use cowork::records::ActivitySession;
    let data = temp_dir();
    ok(&cowork(data.path(), &["settings", "set", "projects.rules", "Atlas: ledger-svc"]));
    let now = cowork::ids::now_millis() / 1000 * 1000;
    let hour = 3_600_000;
    let conn = cowork::store::open_writer(&data.path().join("cowork.db")).unwrap();
    let open = |id: i64, title: &str, start: i64, seen: i64| {
        let session = ActivitySession { session_id: id, app: "code".into(), title: title.into(), window_id: 1, started_at_millis: start, ..ActivitySession::default() };
        cowork::capture::db::upsert_session(&conn, &session).unwrap();
        cowork::capture::db::heartbeat_session(&conn, id, seen).unwrap();
    };
    // cowork crashed an hour after this one opened, and has not run since: one hour, not three.
    open(1, "main.rs - ledger-svc - Visual Studio Code", now - 3 * hour, now - 2 * hour);
    // This one is being recorded (its heartbeat 20 s ago): it runs until now.
    open(2, "notes.md - kestrel - Visual Studio Code", now - 10 * 60_000, now - 20_000);
    drop(conn);
    // (Dates in UTC, as the command's TZ.)
    let date = |at: i64| {
        let (year, month, day) = cowork::ids::civil_from_days(at.div_euclid(86_400_000));
        format!("{year:04}-{month:02}-{day:02}")
    };
    let csv = ok(&cowork(data.path(), &["report", "--from", &date(now - 3 * hour), "--until", &date(now), "--format", "csv"]));
    let rows: Vec<Vec<String>> = csv_rows(&csv).into_iter().skip(1).collect();
    let seconds = |project: &str| rows.iter().filter(|r| r[1] == project).map(|r| r[4].parse::<i64>().unwrap()).sum::<i64>();
    assert_eq!(seconds("Atlas"), 3_600, "{csv}");
    let live = seconds("kestrel");
    assert!((600..=620).contains(&live), "{live} s: {csv}");
}

/// The recap of a replayed day, written by a real local model (the 0.5B the
/// tests fetch) through `cowork recap`, kept in memory: every line of the
/// kept text cites sessions of that day and sits under a project of that
/// day (or Other, or Left open); the keyword search finds it.
#[test]
fn a_days_recap_by_the_local_model_cites_only_that_days_sessions_and_projects_and_is_searchable() {
    let Some((dir, data, _)) = dev_week_and_qwen() else { return };
    let day = DAYS[1];
    let models = models_dir();
    let out = ok(&cowork(&data, &["--models-dir", models.to_str().unwrap(), "recap", "--date", day, "--local-model", "qwen2.5-coder-0.5b-instruct", "--json"]));
    let answer: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(answer["written"], true, "{answer}");
    // The day's sessions and projects, from the export and the report.
    let export = dir.path().join("export.jsonl");
    ok(&cowork(&data, &["export", "--out", export.to_str().unwrap(), "--since", day, "--until", DAYS[2]]));
    let sessions: Vec<i64> = std::fs::read_to_string(&export)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["stream"] == "window" && v["start"].as_str().unwrap().starts_with(day))
        .map(|v| v["session_id"].as_i64().unwrap())
        .collect();
    let report = ok(&cowork(&data, &["report", "--from", day, "--format", "csv"]));
    let projects: Vec<String> = csv_rows(&report).into_iter().skip(1).map(|row| row[1].clone()).collect();
    let text = answer["text"].as_str().unwrap();
    assert!(text.starts_with(&format!("Recap of Tue {day}")), "{text}");
    let (mut section, mut lines) = (String::new(), 0);
    for line in text.lines().skip(1) {
        if let Some(claim) = line.strip_prefix("- ") {
            let (_, cited) = cowork::ids::without_session_refs(claim);
            assert!(!cited.is_empty(), "a line that cites nothing: {line}");
            assert!(cited.iter().all(|id| sessions.contains(id)), "{line} cites a session not of {day}");
            lines += 1;
        } else {
            section = line.rsplit_once(" (").map_or(line, |(name, _)| name).trim_end_matches(':').to_owned();
            assert!(section == "Left open" || section == "Other" || projects.contains(&section), "{section:?} is not a project of {day} ({projects:?})");
        }
    }
    assert!(lines >= 3, "a line per project at least: {text}");
    assert!(!section.is_empty());
    let hits = || -> usize {
        let found: Vec<serde_json::Value> = serde_json::from_str(&ok(&cowork(&data, &["search", "Recap of", "--stream", "summary", "--json"]))).unwrap();
        found.iter().filter(|hit| hit.to_string().contains(day)).count()
    };
    let first = hits();
    assert!(first >= 1, "the recap is in memory");
    // Written again, the day's recap replaces the first: no more of it is found.
    let mut again = Command::new(env!("CARGO_BIN_EXE_cowork"));
    again.env("COWORK_LOG", "warn").env("TZ", "UTC").arg("--data-dir").arg(&data);
    again.args(["--models-dir", models.to_str().unwrap(), "recap", "--date", day, "--local-model", "qwen2.5-coder-0.5b-instruct", "--json"]);
    let (out, threads) = run_watching_threads(again);
    ok(&out);
    assert_eq!(hits(), first);
    // No one waits for a recap: the model wrote it on the low-priority threads (nice 10),
    // which did most of the process's work.
    let low: Vec<_> = threads.iter().filter(|t| t.name.starts_with("llm-low")).collect();
    let low_ticks: u64 = low.iter().map(|t| t.cpu_ticks).sum();
    let all_ticks: u64 = threads.iter().map(|t| t.cpu_ticks).sum();
    assert!(!low.is_empty() && low.iter().all(|t| t.nice == 10), "{threads:?}");
    assert!(low_ticks * 2 > all_ticks, "the low-priority threads used {low_ticks} of {all_ticks} ticks: {threads:?}");
}
