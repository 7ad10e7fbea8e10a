//! `fido acp` driven by `acpx`, a headless ACP client from npm that no one
//! here wrote: a one-shot prompt with a plan and an edit, a permission its
//! `--deny-all` rejects, and a session it resumes after the agent it
//! started has exited (`session/load` from Fido's journal). acpx needs
//! Node 22; both are found through `FIDO_TEST_ACPX_NODE` (the node binary)
//! and `FIDO_TEST_ACPX` (acpx's `dist/cli.js`), which `.ci/run` installs;
//! without them the tests skip with a message, and fail under `CI=true`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::acp::{patch_call, provider_env};
use crate::common::process::{
    assert_nothing_left, fido_bin, remove_fido_env, skip_unless_ci, wait_in,
};
use crate::common::turns::call;
use crate::common::{FakeServer, Reply, sse};

/// The node binary and acpx's entry script, if both are here.
fn acpx_paths(test: &str) -> Option<(PathBuf, PathBuf)> {
    let found = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_file())
    };
    match (found("FIDO_TEST_ACPX_NODE"), found("FIDO_TEST_ACPX")) {
        (Some(node), Some(cli)) => Some((node, cli)),
        _ => {
            skip_unless_ci(
                &format!("acp_acpx::{test}"),
                "set FIDO_TEST_ACPX_NODE (Node 22) and FIDO_TEST_ACPX (acpx's dist/cli.js); .ci/run installs both",
            );
            None
        }
    }
}

/// acpx against `fido acp` in a workspace of its own, the fake model
/// server playing `replies`; acpx keeps its records in a home of its own.
struct Acpx {
    node: PathBuf,
    cli: PathBuf,
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
    server: FakeServer,
}

impl Acpx {
    /// `None` (the test skips) where acpx or Node 22 is missing.
    fn start(test: &str, replies: Vec<Reply>) -> Option<Acpx> {
        let (node, cli) = acpx_paths(test)?;
        Some(Acpx {
            node,
            cli,
            ws: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            server: FakeServer::start(replies),
        })
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    /// Runs acpx and checks it exited 0 (`--deny-all` runs that refused
    /// a permission exit 5, acpx's "permission denied"). `agent_args` go
    /// to `fido` before `acp`, `args` to acpx.
    fn run(&self, agent_args: &str, args: &[&str]) -> Output {
        self.run_expecting(agent_args, args, 0)
    }

    fn run_expecting(&self, agent_args: &str, args: &[&str], code: i32) -> Output {
        let agent = format!("{} {agent_args} acp", fido_bin());
        let mut cmd = Command::new(&self.node);
        remove_fido_env(&mut cmd);
        cmd.arg(&self.cli)
            .args(["--agent", &agent, "--cwd"])
            .arg(self.ws())
            // The session's agent exits a second after its last prompt.
            .args(["--ttl", "1", "--format", "json", "--timeout", "60"])
            .args(args)
            .current_dir(self.ws())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        provider_env(&mut cmd, &self.server);
        let child = cmd.spawn().expect("node runs");
        let output = wait_in(self.ws(), child, Duration::from_secs(90));
        assert!(
            output.status.code() == Some(code),
            "acpx {args:?} failed ({:?}): {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        output
    }
}

/// The JSON-RPC frames acpx printed, both ways.
fn frames(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn updates<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn requests<'a>(frames: &'a [Value], method: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["method"] == method).collect()
}

/// The stop reason of the prompt's response.
fn stop_reason(frames: &[Value]) -> Value {
    let id = requests(frames, "session/prompt")[0]["id"].clone();
    frames
        .iter()
        .find(|f| f["id"] == id && f.get("result").is_some())
        .map(|f| f["result"]["stopReason"].clone())
        .unwrap_or(Value::Null)
}

/// A plan whose first step is under way.
fn plan_call() -> Reply {
    call(
        "p1",
        "update_plan",
        json!({"reason": "start", "items": [
            {"id": "change", "title": "Change the file", "status": "in_progress", "next_action": "patch a.txt"},
            {"id": "tell", "title": "Say what changed", "status": "pending", "next_action": "answer"},
        ]}),
    )
}

/// The same plan, done (a turn does not end on a plan still under way).
fn plan_done_call() -> Reply {
    call(
        "p2",
        "update_plan",
        json!({"reason": "done", "items": [
            {"id": "change", "title": "Change the file", "status": "done", "evidence": ["a.txt line 2 reads three"]},
            {"id": "tell", "title": "Say what changed", "status": "done", "evidence": ["said so"]},
        ]}),
    )
}

#[test]
fn acpx_runs_a_prompt_with_a_plan_and_an_edit_shown_as_a_diff() {
    let replies = vec![
        plan_call(),
        patch_call("c1", "a.txt", "two", "three"),
        plan_done_call(),
        Reply::sse(sse::text_turn("Changed two to three.")),
    ];
    let Some(acpx) = Acpx::start("a_prompt_with_a_plan_and_an_edit", replies) else {
        return;
    };
    std::fs::write(acpx.ws().join("a.txt"), "one\ntwo\n").unwrap();
    let output = acpx.run("", &["--approve-all", "exec", "Change two to three"]);
    let frames = frames(&output);
    assert_eq!(stop_reason(&frames), "end_turn", "{frames:#?}");
    let plan = updates(&frames, "plan");
    assert!(!plan.is_empty(), "no plan update: {frames:#?}");
    let entries = plan[0]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{plan:#?}");
    assert_eq!(entries[0]["status"], "in_progress");
    let done = plan.last().unwrap()["entries"].as_array().unwrap();
    assert!(done.iter().all(|e| e["status"] == "completed"), "{plan:#?}");
    let diff = updates(&frames, "tool_call_update")
        .into_iter()
        .find(|u| u["content"][0]["type"] == "diff")
        .expect("a diff update");
    assert_eq!(diff["content"][0]["oldText"], "two");
    assert_eq!(diff["content"][0]["newText"], "three");
    assert_eq!(
        std::fs::read_to_string(acpx.ws().join("a.txt")).unwrap(),
        "one\nthree\n"
    );
}

#[test]
fn acpx_deny_all_rejects_an_edit_fido_asked_about() {
    let replies = vec![
        patch_call("c1", "a.txt", "one", "two"),
        Reply::sse(sse::text_turn("Left it.")),
    ];
    let Some(acpx) = Acpx::start("deny_all_rejects_an_edit", replies) else {
        return;
    };
    std::fs::write(acpx.ws().join("a.txt"), "one\n").unwrap();
    let output = acpx.run_expecting(
        "-c approval_policy=untrusted",
        &["--deny-all", "exec", "Change one to two"],
        5,
    );
    let frames = frames(&output);
    let asked = requests(&frames, "session/request_permission");
    assert_eq!(asked.len(), 1, "{frames:#?}");
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "c1");
    let failed = updates(&frames, "tool_call_update")
        .into_iter()
        .any(|u| u["toolCallId"] == "c1" && u["status"] == "failed");
    assert!(failed, "{frames:#?}");
    assert_eq!(
        std::fs::read_to_string(acpx.ws().join("a.txt")).unwrap(),
        "one\n"
    );
    // The model heard the refusal.
    let last = acpx.server.model_requests()[1].body().to_string();
    assert!(last.contains("denied"), "{last}");
}

#[test]
fn acpx_resumes_a_session_after_its_agent_exited() {
    let replies = vec![
        Reply::sse(sse::text_turn("The first answer.")),
        Reply::sse(sse::text_turn("The second answer.")),
    ];
    let Some(acpx) = Acpx::start("resumes_a_session", replies) else {
        return;
    };
    acpx.run("", &["sessions", "new"]);
    let first = frames(&acpx.run("", &["prompt", "remember the word pelican"]));
    assert_eq!(stop_reason(&first), "end_turn", "{first:#?}");
    // The session's agent (and acpx's owner of it) exit once idle.
    assert_nothing_left(acpx.ws());
    let second = frames(&acpx.run("", &["prompt", "which word?"]));
    assert_eq!(requests(&second, "session/load").len(), 1, "{second:#?}");
    assert_eq!(stop_reason(&second), "end_turn", "{second:#?}");
    let requests = acpx.server.model_requests();
    assert_eq!(requests.len(), 2);
    let resumed = requests[1].body().to_string();
    assert!(
        resumed.contains("remember the word pelican") && resumed.contains("The first answer."),
        "the second request lacks the first turn: {resumed}"
    );
}
