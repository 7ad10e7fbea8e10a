//! The `todo` flavour end to end through the real binary: the catalog,
//! `fido tool call todo`, the state file, `fido plan approve|show|clear`,
//! and `fido exec` sessions (events, settle reminder, restore after a
//! restart) against the fake model server.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::compaction;
use crate::common::sse;
use crate::common::{
    FakeServer, Reply, assert_conversation_invariants, events_of, fido_cmd, parse_events, run_exec,
    run_with_timeout,
};

const TODO_FILE: &str = ".fido-todo.json";
const TODO: (&str, &str) = ("FIDO_PLAN_TOOL", "todo");

const PLAN_MD: &str = "# Add widgets

## Summary
Context only, not work.

## Work
- Add the `alpha` module
  - with unit tests
- Wire `beta` into the CLI

Not adopted:
- a rewrite

## Verification
- `make test` passes
";

fn fido(ws: &Path, args: &[&str]) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(ws).args(args).env(TODO.0, TODO.1);
    crate::common::process::run_in(ws, cmd, None, Duration::from_secs(60))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `fido tool call todo --args ARGS`: the printed object and the exit code.
fn todo(ws: &Path, args: Value) -> (Value, Option<i32>) {
    let output = fido(ws, &["tool", "call", "todo", "--args", &args.to_string()]);
    let printed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", stdout(&output), stderr(&output)));
    assert_eq!(printed["tool"], "todo");
    (printed, output.status.code())
}

fn saved(ws: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(ws.join(TODO_FILE)).unwrap()).unwrap()
}

fn approve(ws: &Path) -> Output {
    std::fs::write(ws.join("plan.md"), PLAN_MD).unwrap();
    let output = fido(ws, &["plan", "approve", "plan.md"]);
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

#[test]
fn the_catalog_advertises_todo_instead_of_update_plan_at_the_same_place() {
    let ws = tempfile::tempdir().unwrap();
    let names = |env: Option<(&str, &str)>| -> Vec<String> {
        let mut cmd = fido_cmd();
        cmd.arg("-C").arg(ws.path()).args(["tool", "list"]);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let output = run_with_timeout(cmd, None, Duration::from_secs(60));
        assert!(output.status.success(), "{}", stderr(&output));
        let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let default = names(None);
    let todo = names(Some(TODO));
    assert_eq!(default.len(), todo.len());
    let at = default.iter().position(|n| n == "update_plan").unwrap();
    assert_eq!(todo[at], "todo");
    assert!(!todo.contains(&"update_plan".to_string()));
    assert!(!default.contains(&"todo".to_string()));
    for (i, (a, b)) in default.iter().zip(&todo).enumerate() {
        if i != at {
            assert_eq!(a, b);
        }
    }
    // The same through a workspace config file.
    std::fs::write(ws.path().join("fido.toml"), "plan_tool = \"todo\"\n").unwrap();
    assert_eq!(names(None), todo);
    std::fs::write(ws.path().join("fido.toml"), "plan_tool = \"todos\"\n").unwrap();
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(ws.path()).args(["tool", "list"]);
    let output = run_with_timeout(cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("update_plan or todo"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn tool_call_prints_content_and_the_details_envelope_and_state_persists() {
    let ws = tempfile::tempdir().unwrap();
    let (created, code) = todo(
        ws.path(),
        json!({"action": "create", "subject": "Write the parser"}),
    );
    assert_eq!(code, Some(0));
    assert_eq!(created["ok"], true);
    assert_eq!(created["content"], "Created #1: Write the parser (pending)");
    assert_eq!(
        created["details"],
        json!({"action": "create", "params": {"action": "create", "subject": "Write the parser"},
               "tasks": [{"id": 1, "subject": "Write the parser", "status": "pending"}],
               "nextId": 2})
    );
    let (updated, _) = todo(
        ws.path(),
        json!({"action": "update", "id": 1, "status": "in_progress", "activeForm": "writing the parser"}),
    );
    assert_eq!(updated["content"], "Updated #1 (pending → in_progress)");
    assert_eq!(saved(ws.path())["tasks"], updated["details"]["tasks"]);
    assert_eq!(saved(ws.path())["nextId"], 2);

    // An in-band error: exit 1, `Error: …`, details.error, nothing written.
    let before = std::fs::read(ws.path().join(TODO_FILE)).unwrap();
    let (failed, code) = todo(
        ws.path(),
        json!({"action": "update", "id": 1, "status": "completed"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(failed["ok"], false);
    let content = failed["content"].as_str().unwrap();
    assert!(content.starts_with("Error: evidence required to mark a task completed: "));
    assert_eq!(
        format!("Error: {}", failed["details"]["error"].as_str().unwrap()),
        content
    );
    assert_eq!(failed["details"]["tasks"], updated["details"]["tasks"]);
    assert_eq!(std::fs::read(ws.path().join(TODO_FILE)).unwrap(), before);

    let (batch, code) = todo(
        ws.path(),
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "cargo test: 12 passed"},
            {"action": "create", "subject": "Follow up", "blockedBy": [1]},
            {"action": "list"},
        ]}),
    );
    assert_eq!(code, Some(0));
    assert_eq!(
        batch["content"],
        "Applied 3 ops\n[0] Updated #1 (in_progress → completed)\n[1] Created #2: Follow up (pending)\n[2] [completed] #1 Write the parser\n    evidence: cargo test: 12 passed\n[pending] #2 Follow up ⛓ #1"
    );
    assert_eq!(batch["details"]["action"], "batch");
    let (got, _) = todo(ws.path(), json!({"action": "get", "id": 1}));
    assert_eq!(
        got["content"],
        "#1 [completed] Write the parser\n  activeForm: writing the parser\n  blocks: #2\n  evidence: cargo test: 12 passed"
    );

    // The state file is a `.fido-*` file: invisible to the file tools.
    let listed = stdout(&fido(
        ws.path(),
        &["tool", "call", "list_files", "--args", "{}"],
    ));
    assert!(!listed.contains(".fido-todo"), "{listed}");
}

#[test]
fn approve_show_and_clear() {
    let ws = tempfile::tempdir().unwrap();
    assert_eq!(stdout(&fido(ws.path(), &["plan", "show"])), "No tasks\n");
    todo(
        ws.path(),
        json!({"action": "create", "subject": "agent todo"}),
    );
    let approved = approve(ws.path());
    let expected_list = "Plan: Add widgets -- 3/3 plan items open\n\
        [pending] #2 Add the `alpha` module [plan: Work]\n    - with unit tests\n\
        [pending] #3 Wire `beta` into the CLI [plan: Work]\n\
        [pending] #4 `make test` passes [plan: Verification]\n\
        [pending] #1 agent todo\n";
    assert_eq!(
        stdout(&approved),
        format!("Plan approved: Add widgets (3 plan items)\n{expected_list}")
    );
    let state = saved(ws.path());
    assert_eq!(state["plan"]["title"], "Add widgets");
    assert_eq!(state["tasks"][0]["source"], "plan");
    assert_eq!(state["tasks"][0]["planText"], "- with unit tests");
    assert_eq!(stdout(&fido(ws.path(), &["plan", "show"])), expected_list);
    let shown: Value =
        serde_json::from_slice(&fido(ws.path(), &["plan", "show", "--json"]).stdout).unwrap();
    assert_eq!(shown["action"], "list");
    assert_eq!(shown["tasks"], state["tasks"]);
    assert_eq!(shown["plan"], state["plan"]);

    // The same plan again is a no-op.
    let again = fido(ws.path(), &["plan", "approve", "plan.md"]);
    assert!(stdout(&again).starts_with("Plan already approved: Add widgets; nothing changed.\n"));
    assert_eq!(saved(ws.path()), state);

    // Plan-item rules through the tool.
    let (dup, code) = todo(
        ws.path(),
        json!({"action": "create", "subject": "wire `BETA` into the cli"}),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        dup["content"],
        "Error: #3 is already a plan item; update it"
    );
    let (del, _) = todo(ws.path(), json!({"action": "delete", "id": 2}));
    assert_eq!(
        del["content"],
        "Error: #2 is a plan item from the approved plan and can't be deleted: complete it with evidence, or set status deferred with a reason"
    );
    let (deferred, _) = todo(
        ws.path(),
        json!({"action": "update", "id": 3, "status": "deferred", "reason": "needs a design call"}),
    );
    assert_eq!(
        deferred["content"],
        "Updated #3 (pending → deferred). Tell the user this plan item is descoped and why: needs a design call"
    );
    assert_eq!(deferred["details"]["plan"]["title"], "Add widgets");

    let cleared = fido(ws.path(), &["plan", "clear"]);
    assert_eq!(
        stdout(&cleared),
        "Cleared 1 tasks; kept 3 plan items (complete them with evidence or defer them with a reason)\n"
    );
    assert!(
        stdout(&fido(ws.path(), &["plan", "show"]))
            .starts_with("Plan: Add widgets -- 2/3 plan items open\n")
    );

    // A revised plan replaces the plan items; the unchanged deferred item
    // keeps its status and reason.
    std::fs::write(
        ws.path().join("v2.md"),
        "# Add widgets v2\n## Work\n- Wire `beta` into the CLI\n- Document it\n",
    )
    .unwrap();
    let revised = fido(ws.path(), &["plan", "approve", "v2.md"]);
    assert!(revised.status.success(), "{}", stderr(&revised));
    assert_eq!(
        stdout(&fido(ws.path(), &["plan", "show"])),
        "Plan: Add widgets v2 -- 1/2 plan items open\n\
         [deferred] #5 Wire `beta` into the CLI [plan: Work]\n    deferred: needs a design call\n\
         [pending] #6 Document it [plan: Work]\n"
    );
    let missing = fido(ws.path(), &["plan", "approve", "nope.md"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("nope.md"), "{}", stderr(&missing));
}

#[test]
fn exec_publishes_plan_updated_reminds_once_and_restores_after_a_restart() {
    let ws = tempfile::tempdir().unwrap();
    approve(ws.path());
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "t1",
            "todo",
            r#"{"action": "update", "id": 1, "status": "completed", "evidence": "cargo test: 3 passed"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "t2",
            "todo",
            r#"{"action": "update", "id": 3, "status": "deferred", "reason": "CI is down"}"#,
        )])),
        Reply::sse(sse::text_turn("All done!")),
        Reply::sse(sse::text_turn(
            "Honestly: #2 is still open, #3 is deferred.",
        )),
    ]);
    let output = run_exec(ws.path(), &server, "build the widgets", &[TODO]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "exactly one reminder per prompt");
    assert_conversation_invariants(&requests);

    // The restore of the approved plan sits right after the system message.
    let first = requests[0].messages();
    assert_eq!(first[1]["tool_calls"][0]["function"]["name"], "todo");
    assert_eq!(
        first[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"action":"list"}"#
    );
    assert_eq!(first[2]["role"], "tool");
    assert!(
        first[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Plan: Add widgets -- 3/3 plan items open\n")
    );
    assert_eq!(first[3]["role"], "user");
    let system = first[0]["content"].as_str().unwrap();
    assert!(
        !system.contains("alpha"),
        "the plan is never in the system prompt"
    );

    let result = |request: usize, id: &str| -> String {
        requests[request]
            .messages()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(result(1, "t1"), "Updated #1 (pending → completed)");
    assert_eq!(
        result(2, "t2"),
        "Updated #3 (pending → deferred). Tell the user this plan item is descoped and why: CI is down"
    );
    let reminder = requests[3].messages().last().unwrap().clone();
    assert_eq!(reminder["role"], "user");
    assert_eq!(
        reminder["content"],
        "[Fido: plan check] Plan check: the approved plan \"Add widgets\" still has 1/3 items open. Do not tell the user the work is done.\n\
         Open plan items:\n\
         - #2 [Work] Wire `beta` into the CLI\n\
         Keep working on them now. For any item you can't finish in this run: if it is actually done, complete it with evidence; otherwise set status deferred with a reason. Then tell the user exactly which plan items are still open or deferred, and why.\n\
         Deferred plan items (tell the user):\n\
         - #3 [Verification] `make test` passes -- CI is down"
    );

    let events = parse_events(&output.stdout);
    let updates = events_of(&events, "plan_updated");
    assert_eq!(updates.len(), 3, "the restore and two changes");
    assert!(updates.iter().all(|u| u["flavour"] == "todo"));
    assert_eq!(updates[0]["plan"]["action"], "list");
    assert_eq!(updates[2]["plan"]["action"], "update");
    assert_eq!(updates[2]["plan"]["tasks"], saved(ws.path())["tasks"]);
    assert_eq!(updates[2]["plan"]["plan"]["title"], "Add widgets");
    let answers = events_of(&events, "assistant_text");
    assert_eq!(
        answers.last().unwrap()["text"],
        "Honestly: #2 is still open, #3 is deferred."
    );

    // A restart: same system message, the current state as a list result.
    let restart = FakeServer::start(vec![
        Reply::sse(sse::text_turn("Status noted.")),
        Reply::sse(sse::text_turn("Still open: #2.")),
    ]);
    let output = run_exec(ws.path(), &restart, "status?", &[TODO]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let again = restart.model_requests();
    assert_conversation_invariants(&again);
    let messages = again[0].messages();
    assert_eq!(
        messages[0], first[0],
        "messages[0] changed across a restart"
    );
    let restored = messages[2]["content"].as_str().unwrap();
    let (listed, _) = todo(ws.path(), json!({"action": "list"}));
    assert_eq!(restored, listed["content"].as_str().unwrap());
    assert!(restored.contains("    evidence: cargo test: 3 passed"));
    assert!(restored.contains("    deferred: CI is down"));
    let events = parse_events(&output.stdout);
    let updates = events_of(&events, "plan_updated");
    assert_eq!(updates[0]["plan"]["tasks"], saved(ws.path())["tasks"]);
}

#[test]
fn no_reminder_without_open_plan_items() {
    let ws = tempfile::tempdir().unwrap();
    // Agent todos alone never trigger the reminder.
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "t1",
            "todo",
            r#"{"action": "create", "subject": "loose end"}"#,
        )])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[TODO]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(server.model_requests().len(), 2);
    let first = server.model_requests()[0].messages().to_vec();
    assert_eq!(
        first[1]["role"], "user",
        "nothing to restore before a first save"
    );
}

#[test]
fn a_corrupt_state_file_is_kept_aside_and_reported() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(TODO_FILE), "{\"tasks\": [tor").unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("ok"))]);
    let output = run_exec(ws.path(), &server, "hi", &[TODO]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stderr(&output).contains("corrupt"), "{}", stderr(&output));
    assert_eq!(server.model_requests()[0].messages()[1]["role"], "user");
    let aside = std::fs::read_dir(ws.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".fido-todo.json.corrupt-")
        })
        .count();
    assert_eq!(aside, 1);
}

#[test]
fn compaction_carries_the_complete_todo_list_forward() {
    let ws = tempfile::tempdir().unwrap();
    compaction::write_big_file(ws.path());
    std::fs::write(ws.path().join("small.txt"), "tiny\n").unwrap();
    let mut replies = vec![
        Reply::sse(sse::tool_call_turn(&[(
            "t1",
            "todo",
            r#"{"action": "create", "subject": "Read files"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "t2",
            "todo",
            r#"{"action": "update", "id": 1, "status": "completed", "evidence": "big.txt read"}"#,
        )])),
    ];
    replies.extend(compaction::read_big_then_small(
        "small.txt",
        "SUMMARY of the work",
    ));
    let server = FakeServer::start(replies);
    let output = run_exec(
        ws.path(),
        &server,
        "read",
        &[
            TODO,
            compaction::SMALL_CONTEXT[0],
            compaction::SMALL_CONTEXT[1],
        ],
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 6);
    crate::common::assert_conversation_invariants_with(
        &requests,
        crate::common::History::Compacting,
    );
    let after = requests[5].messages();
    // Not the one-line `Updated #1` result: the complete current list, as
    // the newest tool result, with its internal matching call.
    let last_tool = after.iter().rev().find(|m| m["role"] == "tool").unwrap();
    let call_id = last_tool["tool_call_id"].as_str().unwrap();
    let call = after
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|c| c["id"] == call_id)
        .unwrap();
    assert_eq!(call["function"]["name"], "todo");
    let content = last_tool["content"].as_str().unwrap();
    assert!(
        content.contains("Read files") && content.contains("completed"),
        "{content}"
    );
    assert!(
        !after
            .iter()
            .any(|m| m["tool_call_id"] == "t1" || m["tool_call_id"] == "t2")
    );
}

#[test]
fn concurrent_processes_never_lose_a_task() {
    let ws = tempfile::tempdir().unwrap();
    let per_writer = 10;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let script = format!(
                "for i in $(seq {per_writer}); do {} -C {} tool call todo --args \"{{\\\"action\\\":\\\"create\\\",\\\"subject\\\":\\\"w{w} $i\\\"}}\" >/dev/null || exit 1; done",
                crate::common::process::fido_bin(),
                ws.path().display(),
            );
            let mut cmd = std::process::Command::new("bash");
            cmd.arg("-c")
                .arg(script)
                .env("HOME", crate::common::process::clean_home())
                .env(TODO.0, TODO.1);
            cmd.spawn().unwrap()
        })
        .collect();
    for mut writer in writers {
        assert!(writer.wait().unwrap().success());
    }
    let state = saved(ws.path());
    let tasks = state["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2 * per_writer);
    let mut ids: Vec<i64> = tasks.iter().map(|t| t["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=2 * per_writer as i64).collect::<Vec<_>>());
    assert_eq!(state["nextId"], 2 * per_writer + 1);
}
