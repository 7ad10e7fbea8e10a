//! The durable plan end to end: `update_plan` through the real binary, the
//! state file, restore after restart, compaction, the settle reminder and
//! the local `fido plan` commands.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::compaction;
use crate::common::process::{
    assert_nothing_left, run_in, send_signal, skip_unless_ci, wait_in, wait_until,
};
use crate::common::sse;
use crate::common::{
    FakeServer, History, Reply, assert_conversation_invariants,
    assert_conversation_invariants_with, events_of, exec_cmd, fido_cmd, parse_events, run_exec,
};

const PLAN_FILE: &str = ".fido-plan.json";

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn plan_args(reason: &str, items: Value) -> String {
    json!({"reason": reason, "items": items}).to_string()
}

fn three_items(verify_status: &str) -> Value {
    let mut verify = json!({"id": "verify", "title": "Run the tests", "status": verify_status,
                            "dependencies": ["implement"]});
    if verify_status == "done" {
        verify["evidence"] = json!(["cargo test: 12 passed"]);
    } else {
        verify["next_action"] = json!("run cargo test");
    }
    json!([
        {"id": "inspect", "title": "Read the parser", "status": "done",
         "evidence": ["src/parser.rs:10"], "details": "tokens and AST"},
        {"id": "implement", "title": "Fix the bug", "status": "in_progress",
         "next_action": "edit parse_expr", "dependencies": ["inspect"]},
        verify,
    ])
}

fn saved_plan(ws: &Path) -> Value {
    let text = std::fs::read_to_string(ws.join(PLAN_FILE)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn tool_message<'a>(request: &'a Value, call_id: &str) -> &'a Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool result for {call_id}"))
}

fn tool_json(request: &Value, call_id: &str) -> Value {
    let content = tool_message(request, call_id)["content"].as_str().unwrap();
    serde_json::from_str(content).unwrap_or_else(|e| panic!("not JSON ({e}): {content}"))
}

fn plan_cli(ws: &Path, args: &[&str]) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(ws).arg("plan").args(args);
    run_in(ws, cmd, None, Duration::from_secs(60))
}

fn tool_call(ws: &Path, name: &str, args: &str) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C")
        .arg(ws)
        .args(["tool", "call", name, "--args", args]);
    run_in(ws, cmd, None, Duration::from_secs(60))
}

#[test]
fn every_update_returns_the_complete_state_and_messages0_never_changes() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "p1",
            "update_plan",
            &plan_args("Start", three_items("pending")),
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "p2",
            "update_plan",
            &plan_args("Tests pass", three_items("done").as_array().unwrap().iter().cloned().map(|mut i| {
                if i["id"] == "implement" {
                    i = json!({"id": "implement", "title": "Fix the bug", "status": "done",
                               "evidence": ["src/parser.rs:42 fixed"], "dependencies": ["inspect"]});
                }
                i
            }).collect()),
        )])),
        Reply::sse(sse::text_turn("All done.")),
    ]);
    let output = run_exec(ws.path(), &server, "fix the parser", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        3,
        "no settle reminder once every item is done"
    );
    assert_conversation_invariants(&requests);

    let first = tool_json(requests[1].body(), "p1");
    assert_eq!(first["version"], 1);
    assert_eq!(first["reason"], "Start");
    assert!(first["updatedAt"].as_str().unwrap().ends_with('Z'));
    let items = first["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["details"], "tokens and AST");
    assert_eq!(items[1]["next_action"], "edit parse_expr");
    assert_eq!(items[2]["dependencies"], json!(["implement"]));
    for item in items {
        for field in [
            "id",
            "title",
            "status",
            "details",
            "dependencies",
            "next_action",
            "evidence",
        ] {
            assert!(item.get(field).is_some(), "item misses {field}: {item}");
        }
    }
    assert_eq!(
        first["changes"]["added"],
        json!(["inspect", "implement", "verify"])
    );

    let second = tool_json(requests[2].body(), "p2");
    assert_eq!(second["version"], 2);
    assert_eq!(
        second,
        saved_plan(ws.path()),
        "the last result is exactly the saved state"
    );
    assert_eq!(
        second["changes"]["status_changed"],
        json!(["implement: in_progress → done", "verify: pending → done"])
    );

    let events = parse_events(&output.stdout);
    let updates = events_of(&events, "plan_updated");
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[1]["plan"], second);
    assert_eq!(updates[1]["flavour"], "update_plan");

    // A restart with the saved plan: same system message, the plan arrives
    // as a tool result right after it.
    let restart = FakeServer::start(vec![Reply::sse(sse::text_turn("Plan noted."))]);
    let output = run_exec(ws.path(), &restart, "what is the status?", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let request = &restart.model_requests()[0];
    assert_conversation_invariants(&restart.model_requests());
    let messages = request.messages();
    assert_eq!(
        messages[0],
        requests[0].messages()[0],
        "messages[0] changed across a restart"
    );
    assert_eq!(messages[1]["role"], "assistant");
    let call = &messages[1]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "update_plan");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], call["id"]);
    let restored: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(restored, saved_plan(ws.path()));
    assert_eq!(messages[3]["role"], "user");
    // The system prompt holds no plan text.
    let system = messages[0]["content"].as_str().unwrap();
    assert!(!system.contains("Read the parser") && !system.contains("updatedAt"));
}

#[test]
fn invalid_updates_fail_and_leave_the_file_untouched() {
    let ws = tempfile::tempdir().unwrap();
    let ok = tool_call(
        ws.path(),
        "update_plan",
        &plan_args("Start", three_items("pending")),
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let before = std::fs::read(ws.path().join(PLAN_FILE)).unwrap();
    let bad = [
        (
            json!([{"id": "a", "title": "A", "status": "in_progress", "next_action": "x"},
                {"id": "b", "title": "B", "status": "in_progress", "next_action": "y"}]),
            "in_progress",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "pending", "next_action": "x", "dependencies": ["ghost"]}]),
            "ghost",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "pending", "next_action": "x", "dependencies": ["b"]},
                {"id": "b", "title": "B", "status": "pending", "next_action": "y", "dependencies": ["a"]}]),
            "cycle",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "done"}]),
            "evidence",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "pending"}]),
            "next_action",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "finished", "next_action": "x"}]),
            "finished",
        ),
        (
            json!([{"id": "a", "title": "A", "status": "pending", "next_action": "x"},
                {"id": "a", "title": "B", "status": "pending", "next_action": "y"}]),
            "unique",
        ),
        (json!("not a list"), "array"),
    ];
    for (items, expect) in bad {
        let output = tool_call(ws.path(), "update_plan", &plan_args("Bad", items.clone()));
        assert_eq!(output.status.code(), Some(1), "{items}");
        let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
        let content = printed["content"].as_str().unwrap();
        assert!(
            content.starts_with("Error:") && content.contains(expect),
            "{items}: {content}"
        );
        assert_eq!(
            std::fs::read(ws.path().join(PLAN_FILE)).unwrap(),
            before,
            "{items}"
        );
    }
    // Plan updates are not source edits: nothing in the undo journal.
    let journal = ws.path().join(".fido-state/undo/journal.jsonl");
    let journal = std::fs::read_to_string(journal).unwrap_or_default();
    assert!(!journal.contains("fido-plan"), "{journal}");
}

#[test]
fn tool_call_details_are_the_saved_state() {
    let ws = tempfile::tempdir().unwrap();
    let output = tool_call(
        ws.path(),
        "update_plan",
        &plan_args("Start", three_items("pending")),
    );
    assert!(output.status.success());
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let content: Value = serde_json::from_str(printed["content"].as_str().unwrap()).unwrap();
    assert_eq!(printed["details"], saved_plan(ws.path()));
    assert_eq!(content, saved_plan(ws.path()));
    let shown = plan_cli(ws.path(), &["show", "--json"]);
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown, saved_plan(ws.path()));
}

#[test]
fn plan_show_and_clear() {
    let ws = tempfile::tempdir().unwrap();
    let empty = plan_cli(ws.path(), &["show"]);
    assert_eq!(String::from_utf8_lossy(&empty.stdout), "No plan yet.\n");
    tool_call(
        ws.path(),
        "update_plan",
        &plan_args("Start", three_items("pending")),
    );
    let shown = plan_cli(ws.path(), &["show"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    for expected in [
        "Plan v1",
        "Start",
        "inspect",
        "Read the parser",
        "tokens and AST",
        "src/parser.rs:10",
        "implement",
        "edit parse_expr",
        "depends on: inspect",
        "verify",
        "run cargo test",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let cleared = plan_cli(ws.path(), &["clear"]);
    assert!(cleared.status.success());
    assert_eq!(
        String::from_utf8_lossy(&cleared.stdout),
        "Plan cleared (version 2).\n"
    );
    let plan = saved_plan(ws.path());
    assert_eq!(plan["version"], 2);
    assert_eq!(plan["items"], json!([]));
    assert_eq!(
        plan["changes"]["dropped"],
        json!(["inspect", "implement", "verify"])
    );

    // The next session sees the cleared state as its current plan.
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("ok"))]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let messages = server.model_requests()[0].messages().to_vec();
    let restored: Value = serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(restored["version"], 2);
    assert_eq!(restored["items"], json!([]));
}

#[test]
fn settle_reminder_gives_one_more_turn_when_items_are_open() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "p1",
            "update_plan",
            &plan_args("Start", three_items("pending")),
        )])),
        Reply::sse(sse::text_turn("Everything is finished!")),
        Reply::sse(sse::text_turn(
            "Honestly: implement and verify are still open.",
        )),
    ]);
    let output = run_exec(ws.path(), &server, "fix it", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3, "exactly one reminder per prompt");
    assert_conversation_invariants(&requests);
    let reminder = requests[2].messages().last().unwrap().clone();
    assert_eq!(reminder["role"], "user");
    let text = reminder["content"].as_str().unwrap();
    assert!(
        text.contains("implement (in_progress)") && text.contains("edit parse_expr"),
        "{text}"
    );
    assert!(text.contains("verify (pending)"), "{text}");
    assert!(
        !text.contains("inspect ("),
        "done items are not open: {text}"
    );
    assert!(text.contains("Do not report the work as done"), "{text}");
    let events = parse_events(&output.stdout);
    let answers = events_of(&events, "assistant_text");
    assert_eq!(
        answers.last().unwrap()["text"],
        "Honestly: implement and verify are still open."
    );
}

#[test]
fn no_reminder_without_a_plan() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("hi"))]);
    let output = run_exec(ws.path(), &server, "hello", &[]);
    assert!(output.status.success());
    assert_eq!(server.model_requests().len(), 1);
    assert!(
        !ws.path().join(PLAN_FILE).exists(),
        "no plan file without an update"
    );
}

#[test]
fn compaction_carries_the_latest_full_plan_forward() {
    let ws = tempfile::tempdir().unwrap();
    let big = compaction::write_big_file(ws.path());
    std::fs::write(ws.path().join("small.txt"), "tiny\n").unwrap();
    let done_items = json!([{"id": "read", "title": "Read files", "status": "done", "evidence": ["big.txt read"]}]);
    let mut replies = vec![
        Reply::sse(sse::tool_call_turn(&[(
            "p1",
            "update_plan",
            &plan_args("Start", three_items("pending")),
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "p2",
            "update_plan",
            &plan_args("Read first", done_items.clone()),
        )])),
    ];
    replies.extend(compaction::read_big_then_small(
        "small.txt",
        "SUMMARY of the work",
    ));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "read", &compaction::SMALL_CONTEXT);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 6);
    assert_conversation_invariants_with(&requests, History::Compacting);
    let after = requests[5].messages();
    assert_eq!(after[0], requests[0].messages()[0]);
    // The big read is gone; the latest plan result is the newest tool result.
    assert!(!after.iter().any(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.contains(&big[..300]))
    }));
    let last_tool = after.iter().rev().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(last_tool["tool_call_id"], "p2");
    let carried: Value = serde_json::from_str(last_tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(carried, saved_plan(ws.path()));
    assert!(
        !after.iter().any(|m| m["tool_call_id"] == "p1"),
        "only the latest plan result is carried"
    );
}

#[test]
fn a_corrupt_plan_file_is_kept_aside_and_reported() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join(PLAN_FILE),
        "{\"version\": 3, \"items\": [tor",
    )
    .unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("ok"))]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("corrupt"), "{}", stderr(&output));
    let aside: Vec<_> = std::fs::read_dir(ws.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".fido-plan.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(aside[0].path()).unwrap(),
        "{\"version\": 3, \"items\": [tor"
    );
    // No restore pair: the session starts with an empty plan.
    assert_eq!(server.model_requests()[0].messages()[1]["role"], "user");
}

#[test]
fn concurrent_writers_never_lose_or_tear_an_update() {
    let ws = tempfile::tempdir().unwrap();
    let per_writer = 15;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let args = plan_args(
                &format!("writer {w}"),
                json!([{"id": format!("w{w}"), "title": "T", "status": "pending", "next_action": "go"}]),
            );
            let script = format!(
                "for i in $(seq {per_writer}); do {} -C {} tool call update_plan --args '{}' >/dev/null || exit 1; done",
                crate::common::process::fido_bin(),
                ws.path().display(),
                args
            );
            let mut cmd = std::process::Command::new("bash");
            cmd.arg("-c").arg(script).env("HOME", crate::common::process::clean_home());
            cmd.spawn().unwrap()
        })
        .collect();
    for mut writer in writers {
        assert!(writer.wait().unwrap().success());
    }
    assert_nothing_left(ws.path());
    let plan = saved_plan(ws.path());
    assert_eq!(
        plan["version"],
        2 * per_writer,
        "every update under the lock counts"
    );
}

/// The temp files a plan writer leaves in `ws` while it writes.
fn plan_temp_files(ws: &Path) -> BTreeSet<String> {
    std::fs::read_dir(ws)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

/// Kills `child` (a plan writer in `ws`): odd rounds at an instant that
/// moves from before start-up to after the write, even rounds the moment
/// a new temp file shows that its write is under way.
fn kill_writer(mut child: std::process::Child, ws: &Path, round: u32, before: &BTreeSet<String>) {
    if round % 2 == 1 {
        std::thread::sleep(Duration::from_micros(400 * u64::from(round)));
    } else {
        let deadline = Instant::now() + Duration::from_secs(60);
        while matches!(child.try_wait(), Ok(None))
            && plan_temp_files(ws).difference(before).next().is_none()
        {
            assert!(
                Instant::now() < deadline,
                "the writer neither wrote nor ended"
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn killing_a_writer_at_any_instant_leaves_old_or_new_state() {
    let ws = tempfile::tempdir().unwrap();
    let args = |n: u32| {
        plan_args(
            &format!("round {n}"),
            json!([{"id": "a", "title": "x".repeat(100), "status": "pending", "next_action": format!("step {n}")}]),
        )
    };
    assert!(
        tool_call(ws.path(), "update_plan", &args(0))
            .status
            .success()
    );
    let mut previous = "round 0".to_string();
    // Rounds whose kill landed mid-write: the writer's temp file is left.
    let mut mid_write = 0;
    for round in 1..=25u32 {
        let before = plan_temp_files(ws.path());
        let mut cmd = fido_cmd();
        cmd.arg("-C")
            .arg(ws.path())
            .args(["tool", "call", "update_plan", "--args", &args(round)])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        kill_writer(cmd.spawn().unwrap(), ws.path(), round, &before);
        if plan_temp_files(ws.path())
            .difference(&before)
            .next()
            .is_some()
        {
            mid_write += 1;
        }
        let plan = saved_plan(ws.path());
        let reason = plan["reason"].as_str().unwrap().to_string();
        assert!(
            reason == format!("round {round}") || reason == previous,
            "after round {round} the plan is neither the old nor the new one: {plan}"
        );
        assert_eq!(
            plan["items"][0]["next_action"],
            format!("step {}", &reason[6..])
        );
        previous = reason;
    }
    assert!(mid_write > 0, "no kill landed in the middle of a write");
    // A killed writer may leave its temp file, never a torn plan; the temp
    // names stay `.fido-*` and so invisible to the tools.
    let leftovers = plan_temp_files(ws.path());
    assert!(
        leftovers
            .iter()
            .all(|n| n.starts_with(".fido-plan.json.tmp-")),
        "{leftovers:?}"
    );
}

/// The lock of the plan of `ws`: under `.fido-state/`, not in the checkout.
pub(super) fn plan_lock(ws: &Path) -> std::path::PathBuf {
    ws.join(".fido-state/locks/.fido-plan.json.lock")
}

/// A python3 process that holds the plan lock of `ws` until killed (it
/// holds the lock itself, so killing it releases it and leaves nothing).
pub(super) fn hold_plan_lock(ws: &Path) -> std::process::Child {
    let lock = plan_lock(ws);
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import fcntl, sys, time\n\
             f = open(sys.argv[1], 'a')\n\
             fcntl.flock(f, fcntl.LOCK_EX)\n\
             print('held', flush=True)\n\
             time.sleep(60)\n",
        )
        .arg(&lock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    holder
}

/// Blocks until process `pid` has the plan lock of `ws` open: once the
/// model was asked, its `update_plan` call has started and waits for the
/// lock (before that, the start's restore of the plan opens it too).
pub(super) fn wait_until_waiting_for_the_lock(pid: u32, ws: &Path) {
    let lock = plan_lock(ws);
    let lock = lock.canonicalize().unwrap_or(lock);
    wait_until(
        "fido to open the plan lock",
        Duration::from_secs(30),
        || {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == lock))
        },
    );
}

/// Another process holds the plan lock for longer than anyone waits: the
/// wait runs off the runtime, so SIGINT still ends `fido exec` at once.
/// Causal, not timed: the holder still holds the lock when fido has exited,
/// and the call's result is not the error a lock wait ends with.
#[test]
fn sigint_ends_exec_promptly_while_another_process_holds_the_plan_lock() {
    let ws = tempfile::tempdir().unwrap();
    let mut holder = hold_plan_lock(ws.path());
    let args = plan_args("Locked out", three_items("pending"));
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "update_plan", &args)])),
        Reply::sse(sse::text_turn("unreachable")),
    ]);
    let child = exec_cmd(ws.path(), &server, "plan it", &[])
        .spawn()
        .unwrap();
    // Fido's start gave up restoring the locked plan before the model was
    // asked; the call it answered then opens the lock again.
    server.wait_for_requests(1, Duration::from_secs(30));
    wait_until_waiting_for_the_lock(child.id(), ws.path());
    send_signal(child.id(), libc::SIGINT);
    let output = wait_in(ws.path(), child, Duration::from_secs(30));
    let still_held = holder.try_wait().unwrap().is_none();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(still_held, "the holder let go before fido exited");
    let events = parse_events(&output.stdout);
    let results = events_of(&events, "tool_result");
    assert_eq!(results.len(), 1, "the started call gets a result");
    assert_eq!(results[0]["ok"], false, "{}", results[0]);
    assert!(
        !results[0].to_string().contains("locked by"),
        "the call waited the lock out: {}",
        results[0]
    );
    assert!(!ws.path().join(".fido-plan.json").exists());
}

/// Held longer than the bounded wait: a clear tool error, and the turn
/// goes on.
#[test]
fn a_plan_lock_held_too_long_is_a_clear_tool_error() {
    let ws = tempfile::tempdir().unwrap();
    let mut holder = hold_plan_lock(ws.path());
    let args = plan_args("Locked out", three_items("pending"));
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "update_plan", &args)])),
        Reply::sse(sse::text_turn("The plan file is busy.")),
    ]);
    let output = run_exec(ws.path(), &server, "plan it", &[]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.model_requests();
    let result = tool_message(requests[1].body(), "p1")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        result.contains("plan file locked by") && result.contains("for more than 5 s"),
        "{result}"
    );
}

/// A tmpfs of `size` mounted on a fresh folder, unmounted on drop; `None`
/// where this process may not mount (not root).
struct TinyDisk {
    dir: tempfile::TempDir,
}

impl TinyDisk {
    fn mount(size: &str) -> Option<TinyDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(TinyDisk { dir })
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_read_only_workspace_during_a_plan_write_is_a_clear_error_and_the_old_plan_stays() {
    // Root ignores file modes, not a read-only mount.
    let Some(disk) = TinyDisk::mount("1m") else {
        skip_unless_ci(
            "plan::a_read_only_workspace_during_a_plan_write_is_a_clear_error_and_the_old_plan_stays",
            "cannot mount a tmpfs here (needs root)",
        );
        return;
    };
    let ws = disk.dir.path();
    let call = |reason: &str| {
        tool_call(
            ws,
            "update_plan",
            &plan_args(reason, three_items("pending")),
        )
    };
    let first = call("before the remount");
    assert!(first.status.success(), "stderr: {}", stderr(&first));
    let before = std::fs::read(ws.join(PLAN_FILE)).unwrap();
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(ws)
        .status()
        .unwrap();
    assert!(remounted.success(), "cannot remount the tmpfs read-only");
    let second = call("on a read-only disk");
    assert_refused_and_kept(ws, &second, "Read-only file system", &before);
}

/// A plan write that failed: the error names `cause`, and the old plan is
/// there byte for byte.
fn assert_refused_and_kept(ws: &Path, output: &std::process::Output, cause: &str, before: &[u8]) {
    assert!(!output.status.success(), "the write succeeded");
    let message = format!(
        "{}{}",
        stderr(output),
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        message.contains(cause),
        "the error does not say what failed: {message}"
    );
    assert_eq!(
        std::fs::read(ws.join(PLAN_FILE)).unwrap(),
        before,
        "the old plan was not kept whole"
    );
}

#[test]
fn a_full_disk_during_a_plan_write_is_a_clear_error_and_the_old_plan_stays() {
    let Some(disk) = TinyDisk::mount("256k") else {
        skip_unless_ci(
            "plan::a_full_disk_during_a_plan_write_is_a_clear_error_and_the_old_plan_stays",
            "cannot mount a tmpfs here (needs root)",
        );
        return;
    };
    let ws = disk.dir.path();
    let call = |items: Value| tool_call(ws, "update_plan", &plan_args("disk test", items));
    let first =
        call(json!([{"id": "a", "title": "First", "status": "pending", "next_action": "go"}]));
    assert!(first.status.success(), "stderr: {}", stderr(&first));
    let before = std::fs::read(ws.join(PLAN_FILE)).unwrap();
    // Fill the disk: the write stops at ENOSPC.
    let mut filler = std::fs::File::create(ws.join("filler")).unwrap();
    let block = vec![b'x'; 4096];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    drop(filler);
    // More than the block the filler could not write.
    let (title, next) = ("t".repeat(110), "n".repeat(110));
    let items: Vec<Value> = (0..20)
        .map(|i| json!({"id": format!("i{i}"), "title": title, "status": "pending", "next_action": next}))
        .collect();
    let second = call(Value::Array(items));
    assert_refused_and_kept(ws, &second, "No space left on device", &before);
}

/// `fido exec` (which reads the plan at start and updates it) and `fido
/// tool call update_plan` leave nothing in a fresh repository but the
/// plan itself: the lock is under `.fido-state/`, which ignores itself.
#[test]
fn exec_and_update_plan_leave_only_the_plan_in_a_fresh_repository() {
    let ws = tempfile::tempdir().unwrap();
    crate::common::git(ws.path(), &["init", "-q"]);
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "p1",
            "update_plan",
            &plan_args("Start", three_items("pending")),
        )])),
        Reply::sse(sse::text_turn("planned")),
        // The settle reminder's turn: items are open.
        Reply::sse(sse::text_turn("still planned")),
    ]);
    let output = run_exec(ws.path(), &server, "plan it", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = tool_call(
        ws.path(),
        "update_plan",
        &plan_args("Again", three_items("pending")),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let status = crate::common::git(
        ws.path(),
        &[
            "status",
            "--porcelain=v1",
            "--untracked-files=all",
            "--ignored=no",
        ],
    );
    assert_eq!(status, "?? .fido-plan.json\n");
    assert!(plan_lock(ws.path()).is_file());
}

/// The lock another process takes is the one under `.fido-state/`: while
/// it is held, an update waits, then says so; once it is free, the update
/// goes through.
#[test]
fn a_process_holding_the_plan_lock_under_fido_state_keeps_updates_waiting() {
    let ws = tempfile::tempdir().unwrap();
    let mut holder = hold_plan_lock(ws.path());
    let args = plan_args("Locked out", three_items("pending"));
    let output = tool_call(ws.path(), "update_plan", &args);
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains("plan file locked by another process for more than 5 s"),
        "{printed}\n{}",
        stderr(&output)
    );
    assert!(
        !ws.path().join(PLAN_FILE).exists(),
        "written under a held lock"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let output = tool_call(ws.path(), "update_plan", &args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(saved_plan(ws.path())["version"], 1);
}
