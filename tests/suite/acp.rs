//! `fido acp` as an editor drives it: a real `fido acp` child on stdio,
//! the fake model server, and a client built on the official TypeScript
//! SDK (`tests/acp/client.mjs`, run with node) that checks every frame
//! against the SDK's schemas. The SDK is found through
//! `FIDO_TEST_ACP_NODE_MODULES` (`.ci/run` installs it); without it those
//! tests skip with a message, and fail under `CI=true`. Bad frames and a
//! client that disappears are driven from Rust directly, with raw lines.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::process::{clean_home, fido_bin, remove_fido_env, wait_in};
use crate::common::turns::call;
use crate::common::{FakeServer, Reply, fido_cmd, sse};

/// The node_modules folder holding `@agentclientprotocol/sdk`.
pub(super) fn node_modules(test: &str) -> Option<PathBuf> {
    match std::env::var("FIDO_TEST_ACP_NODE_MODULES") {
        Ok(dir) if Path::new(&dir).join("@agentclientprotocol/sdk").is_dir() => {
            Some(PathBuf::from(dir))
        }
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => panic!(
            "FIDO_TEST_ACP_NODE_MODULES does not hold @agentclientprotocol/sdk; .ci/run installs it"
        ),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "acp::{test}: skipped (set FIDO_TEST_ACP_NODE_MODULES to a node_modules with @agentclientprotocol/sdk; .ci/run installs one)"
            );
            None
        }
    }
}

/// The environment of a `fido acp` against `server`.
pub(super) fn provider_env(cmd: &mut Command, server: &FakeServer) {
    cmd.env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key");
}

/// Runs the TypeScript client with `scenario` (its `fido`, `cwd` and
/// defaults filled in) in `ws`; its report, after checking that every
/// frame validated, every `fido acp` exited 0 and nothing is left.
pub(super) fn run_client(
    modules: &Path,
    ws: &Path,
    server: &FakeServer,
    mut scenario: Value,
) -> Value {
    scenario["fido"] = json!(fido_bin());
    scenario["cwd"] = json!(ws.canonicalize().unwrap());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs");
    let mut cmd = Command::new("node");
    remove_fido_env(&mut cmd);
    cmd.arg(script)
        .arg(scenario.to_string())
        .env("ACP_NODE_MODULES", modules)
        .env("HOME", clean_home())
        .env("XDG_CONFIG_HOME", clean_home())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    provider_env(&mut cmd, server);
    let child = cmd.spawn().expect("node runs");
    let output = wait_in(ws, child, Duration::from_secs(90));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "client failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no report ({e}); stderr: {stderr}"));
    assert_eq!(report["invalid"], json!([]), "frames off the schema");
    for exit in report["exits"].as_array().unwrap() {
        assert_eq!(exit["code"], 0, "fido acp exit: {exit}; stderr: {stderr}");
    }
    report
}

pub(super) fn events<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

pub(super) fn updates<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    events(report, "update")
        .into_iter()
        .map(|e| &e["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

pub(super) fn response<'a>(report: &'a Value, method: &str) -> Vec<&'a Value> {
    report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == method)
        .collect()
}

pub(super) fn message_text(report: &Value) -> String {
    updates(report, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect()
}

pub(super) fn patch_call(id: &str, path: &str, old: &str, new: &str) -> Reply {
    call(
        id,
        "patch",
        json!({"path": path, "edits": [{"old_text": old, "new_text": new}]}),
    )
}

#[test]
fn a_prompt_streams_text_and_tool_calls_with_their_diff() {
    let Some(modules) = node_modules("a_prompt_streams_text_and_tool_calls_with_their_diff") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    let server = FakeServer::start(vec![
        patch_call("c1", "a.txt", "two", "three"),
        Reply::sse(sse::text_turn("Changed two to three.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "prompt": [
            {"type": "text", "text": "Change it"},
            {"type": "resource", "resource": {"uri": "file:///notes.md", "text": "keep it short"}},
        ]}]}),
    );
    let prompt = response(&report, "session/prompt");
    assert_eq!(prompt[0]["result"]["stopReason"], "end_turn", "{report:#}");
    assert_eq!(message_text(&report), "Changed two to three.");
    let file = ws.path().canonicalize().unwrap().join("a.txt");
    let call = updates(&report, "tool_call")[0];
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["status"], "in_progress");
    assert_eq!(call["locations"][0]["path"], json!(file));
    let diff = updates(&report, "tool_call_update")
        .into_iter()
        .find(|u| u["content"][0]["type"] == "diff")
        .expect("a diff update");
    assert_eq!(diff["content"][0]["oldText"], "two");
    assert_eq!(diff["content"][0]["newText"], "three");
    assert_eq!(diff["content"][0]["path"], json!(file));
    assert_eq!(diff["locations"][0]["line"], 2);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\nthree\n"
    );
    // The embedded resource reached the model as prompt text.
    let first = server.model_requests()[0].body().to_string();
    assert!(first.contains("Contents of file:///notes.md"), "{first}");
    assert!(first.contains("keep it short"), "{first}");
}

#[test]
fn every_plan_update_carries_the_whole_plan() {
    let Some(modules) = node_modules("every_plan_update_carries_the_whole_plan") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let items = json!([
        {"id": "read", "title": "Read the code", "status": "done", "evidence": ["src/a.rs:1"]},
        {"id": "fix", "title": "Fix the bug", "status": "in_progress", "next_action": "edit"},
        {"id": "ship", "title": "Ship it", "status": "blocked", "next_action": "wait for review"},
    ]);
    let server = FakeServer::start(vec![
        call(
            "p1",
            "update_plan",
            json!({"reason": "start", "items": items}),
        ),
        Reply::sse(sse::text_turn("Planned.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "text": "plan it"}]}),
    );
    let plan = updates(&report, "plan");
    let last = plan.last().expect("a plan update");
    let entries = last["entries"].as_array().unwrap();
    let statuses: Vec<_> = entries.iter().map(|e| e["status"].clone()).collect();
    assert_eq!(statuses, vec!["completed", "in_progress", "pending"]);
    assert_eq!(entries[1]["content"], "Fix the bug");
    assert_eq!(entries[2]["_meta"]["fido"]["status"], "blocked");
    assert_eq!(entries[2]["_meta"]["fido"]["id"], "ship");
    assert_eq!(last["_meta"]["fido"]["flavour"], "update_plan");
}

#[test]
fn a_rejection_for_the_session_is_asked_once_and_refuses_both_edits() {
    let Some(modules) = node_modules("a_rejection_for_the_session_is_asked_once") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let server = FakeServer::start(vec![
        patch_call("c1", "a.txt", "one", "two"),
        patch_call("c2", "a.txt", "one", "two"),
        Reply::sse(sse::text_turn("Left it.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "args": ["-c", "approval_policy=untrusted", "acp"],
            "permission": "reject_always",
            "steps": [{"do": "new"}, {"do": "prompt", "text": "edit"}],
        }),
    );
    let asked = events(&report, "permission");
    assert_eq!(asked.len(), 1, "{report:#}");
    let params = &asked[0]["params"];
    assert_eq!(params["toolCall"]["toolCallId"], "c1");
    let kinds: Vec<_> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec!["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    let failed = updates(&report, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 2);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n"
    );
}

#[test]
fn cancel_ends_the_turn_with_cancelled() {
    let Some(modules) = node_modules("cancel_ends_the_turn_with_cancelled") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::stall_forever(vec![])]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "text": "wait", "cancelAfterMs": 700}]}),
    );
    let prompt = response(&report, "session/prompt");
    assert_eq!(prompt[0]["result"]["stopReason"], "cancelled", "{report:#}");
    let sent = events(&report, "cancel_sent")[0]["at"].as_u64().unwrap();
    let answered = events(&report, "prompt_answered")[0]["at"]
        .as_u64()
        .unwrap();
    let took = answered - sent;
    let _ = writeln!(
        std::io::stderr(),
        "acp: cancel → prompt answered in {took} ms"
    );
    assert!(took < 1000, "cancel took {took} ms");
}

/// `session/cancel` while `patch` edits large files, in a session that
/// lives on: each call's status tells the truth about its file, also for
/// the call the cancel caught. Before the commit point (`tools::commit`)
/// the caught call said "cancelled" and its edit landed afterwards.
#[test]
fn a_cancel_during_patches_leaves_each_file_as_its_status_says() {
    let Some(modules) = node_modules("a_cancel_during_patches_leaves_each_file") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let body: String = (0..600_000).map(|i| format!("line {i}\n")).collect();
    let names = ["big0.txt", "big1.txt", "big2.txt", "big3.txt"];
    for name in names {
        std::fs::write(ws.path().join(name), &body).unwrap();
    }
    let args: Vec<String> = names
        .iter()
        .map(|name| {
            json!({"path": name, "edits": [{"old_text": "line 599999", "new_text": "edited"}]})
                .to_string()
        })
        .collect();
    let ids = ["p0", "p1", "p2", "p3"];
    let calls: Vec<(&str, &str, &str)> = ids
        .iter()
        .zip(&args)
        .map(|(id, args)| (*id, "patch", args.as_str()))
        .collect();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&calls)),
        Reply::sse(sse::text_turn("Still here.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [
            {"do": "new"},
            {"do": "prompt", "text": "edit them", "cancelAfterMs": 60},
            {"do": "prompt", "text": "are you there?"},
        ]}),
    );
    let stops: Vec<_> = response(&report, "session/prompt")
        .iter()
        .map(|r| r["result"]["stopReason"].clone())
        .collect();
    assert_eq!(stops, [json!("cancelled"), json!("end_turn")], "{report:#}");
    for (id, name) in ids.iter().zip(names) {
        let last = updates(&report, "tool_call_update")
            .into_iter()
            .rfind(|u| u["toolCallId"] == *id && u["status"].is_string())
            .cloned();
        let changed = std::fs::read_to_string(ws.path().join(name)).unwrap() != body;
        let completed = last.as_ref().is_some_and(|u| u["status"] == "completed");
        assert_eq!(completed, changed, "{name}: {last:?}");
    }
}

#[test]
fn a_cancel_while_a_permission_is_pending_answers_it_and_edits_nothing() {
    let Some(modules) = node_modules("a_cancel_while_a_permission_is_pending") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let server = FakeServer::start(vec![
        patch_call("c1", "a.txt", "one", "two"),
        Reply::sse(sse::text_turn("unused")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "args": ["-c", "approval_policy=untrusted", "acp"],
            "permission": "cancel",
            "steps": [{"do": "new"}, {"do": "prompt", "text": "edit"}],
        }),
    );
    assert_eq!(events(&report, "permission").len(), 1);
    let prompt = response(&report, "session/prompt");
    assert_eq!(prompt[0]["result"]["stopReason"], "cancelled", "{report:#}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n"
    );
}

#[test]
fn a_session_lists_and_loads_after_a_restart() {
    let Some(modules) = node_modules("a_session_lists_and_loads_after_a_restart") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("Hello there.")),
        Reply::sse(sse::text_turn("Still here.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [
            {"do": "new"}, {"do": "prompt", "text": "hi"}, {"do": "restart"},
            {"do": "list"}, {"do": "load", "id": "$session"},
            {"do": "prompt", "text": "again"},
        ]}),
    );
    let id = response(&report, "session/new")[0]["result"]["sessionId"].clone();
    let listed = &response(&report, "session/list")[0]["result"]["sessions"];
    assert_eq!(listed[0]["sessionId"], id, "{report:#}");
    assert_eq!(listed[0]["title"], "hi");
    assert!(response(&report, "session/load")[0]["result"].is_object());
    let users: Vec<_> = updates(&report, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].clone())
        .collect();
    assert_eq!(users, vec!["hi"], "the history replayed");
    assert_eq!(message_text(&report), "Hello there.Hello there.Still here.");
    assert_eq!(report["exits"].as_array().unwrap().len(), 2);
    // The loaded session's next request carries the first turn.
    let second = server.model_requests()[1].body().to_string();
    assert!(second.contains("Hello there."), "{second}");
}

/// A `fido acp` child driven with raw lines.
struct RawAgent {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl RawAgent {
    fn start(ws: &Path, server: &FakeServer) -> RawAgent {
        let mut cmd = fido_cmd();
        cmd.arg("acp")
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        provider_env(&mut cmd, server);
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        RawAgent {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next frame: every line on stdout must be JSON-RPC.
    fn frame(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let frame: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        frame
    }

    /// The response to request `id` (updates before it are skipped).
    fn response(&mut self, id: u64) -> Value {
        loop {
            let frame = self.frame();
            if frame["id"] == id && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    fn initialize(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#);
        assert_eq!(self.response(0)["result"]["protocolVersion"], 1);
    }

    fn new_session(&mut self, ws: &Path) -> String {
        let cwd = ws.canonicalize().unwrap();
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": cwd, "mcpServers": []}})
            .to_string(),
        );
        let answer = self.response(1);
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }
}

#[test]
fn bad_frames_get_json_rpc_errors_and_lose_nothing() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("Fine."))]);
    let mut agent = RawAgent::start(ws.path(), &server);
    agent.initialize();
    agent.send("{not json");
    assert_eq!(agent.frame()["error"]["code"], -32700);
    agent.send(r#"{"jsonrpc":"2.0","id":7,"method":"fido/unknown","params":{}}"#);
    assert_eq!(agent.response(7)["error"]["code"], -32601);
    agent.send(r#"{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}"#);
    let unknown = agent.response(8);
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown session")
    );
    agent.send(r#"{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#);
    assert_eq!(agent.response(9)["error"]["code"], -32602);
    // The connection still works after all of it.
    let session = agent.new_session(ws.path());
    agent.send(
        &json!({"jsonrpc": "2.0", "id": 10, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}})
        .to_string(),
    );
    assert_eq!(agent.response(10)["result"]["stopReason"], "end_turn");
    drop(agent.stdin);
    let output = wait_in(ws.path(), agent.child, Duration::from_secs(30));
    assert!(output.status.success());
}

#[test]
fn a_client_that_disappears_mid_command_leaves_no_process_and_a_whole_journal() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        call("b1", "bash_exec", json!({"command": "sleep 120"})),
        Reply::sse(sse::text_turn("unused")),
    ]);
    let mut agent = RawAgent::start(ws.path(), &server);
    agent.initialize();
    let session = agent.new_session(ws.path());
    agent.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "sleep"}]}})
        .to_string(),
    );
    // Wait until the command runs (its tool call is announced).
    loop {
        let frame = agent.frame();
        if frame["params"]["update"]["sessionUpdate"] == "tool_call" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let gone = Instant::now();
    drop(agent.stdin);
    drop(agent.stdout);
    let output = wait_in(ws.path(), agent.child, Duration::from_secs(30));
    let _ = writeln!(
        std::io::stderr(),
        "acp: client gone → fido acp exited in {} ms",
        gone.elapsed().as_millis()
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The journal holds the turn and reads back.
    let mut list = fido_cmd();
    list.arg("-C")
        .arg(ws.path())
        .args(["sessions", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let listed = wait_in(ws.path(), list.spawn().unwrap(), Duration::from_secs(30));
    let line: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(line["id"], session.as_str());
    assert_ne!(line["status"], "unreadable", "{line}");
    assert_eq!(line["first_prompt"], "sleep");
}

#[test]
fn reasoning_streams_as_thought_chunks_and_stays_out_of_the_conversation() {
    let Some(modules) = node_modules("reasoning_streams_as_thought_chunks") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let reasoning = |field: &str, text: &str| sse::data(&sse::chunk(json!({ field: text }), None));
    let mut events = vec![
        reasoning("reasoning_content", "The user greets; "),
        reasoning("reasoning", "answer briefly."),
    ];
    events.extend(sse::text_turn("Hello."));
    let server = FakeServer::start(vec![
        Reply::sse(events),
        Reply::sse(sse::text_turn("Again.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "text": "hi"}, {"do": "prompt", "text": "more"}]}),
    );
    let thoughts: String = updates(&report, "agent_thought_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(thoughts, "The user greets; answer briefly.");
    assert_eq!(message_text(&report), "Hello.Again.");
    // The reasoning is not sent back to the model with the next prompt.
    let second = server.model_requests()[1].body().to_string();
    assert!(second.contains("Hello."), "{second}");
    assert!(!second.contains("The user greets"), "{second}");
}

/// How a turn ends reaches the editor as ACP's own stop reasons: a model
/// that refuses (OpenAI's `refusal`) ends it `refusal`, its words shown;
/// an answer that stays cut off at the output limit after Fido asked the
/// model to finish it twice ends it `max_tokens`. Neither is an error.
#[test]
fn a_refusal_and_an_answer_cut_off_for_good_are_their_stop_reasons() {
    let Some(modules) = node_modules("a_refusal_and_an_answer_cut_off") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let refusal = vec![
        sse::data(&sse::chunk(
            json!({"role": "assistant", "refusal": "I can't "}),
            None,
        )),
        sse::data(&sse::chunk(json!({"refusal": "help with that."}), None)),
        sse::data(&sse::chunk(json!({}), Some("stop"))),
        sse::done(),
    ];
    let cut = || {
        Reply::sse(vec![
            sse::data(&sse::chunk(
                json!({"role": "assistant", "content": "It is"}),
                None,
            )),
            sse::data(&sse::chunk(json!({}), Some("length"))),
            sse::done(),
        ])
    };
    let server = FakeServer::start(vec![Reply::sse(refusal), cut(), cut(), cut()]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "text": "do it"}, {"do": "prompt", "text": "go on"}]}),
    );
    let stops: Vec<_> = response(&report, "session/prompt")
        .iter()
        .map(|r| r["result"]["stopReason"].clone())
        .collect();
    assert_eq!(stops, [json!("refusal"), json!("max_tokens")], "{report:#}");
    assert!(
        message_text(&report).starts_with("I can't help with that."),
        "{report:#}"
    );
    // Asked to finish twice, then the turn ended: four requests in all.
    assert_eq!(server.model_requests().len(), 4);
}

#[test]
fn the_engines_slash_commands_are_offered_and_answered() {
    let Some(modules) = node_modules("the_engines_slash_commands_are_offered_and_answered") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let server = FakeServer::start(vec![
        patch_call("c1", "a.txt", "one", "two"),
        Reply::sse(sse::text_turn("Changed.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [
            {"do": "new"},
            {"do": "prompt", "text": "change it"},
            {"do": "prompt", "text": "/undo"},
            {"do": "prompt", "text": "/status"},
            {"do": "prompt", "text": "/model"},
        ]}),
    );
    let offered = updates(&report, "available_commands_update");
    let names: Vec<_> = offered[0]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in ["undo", "status", "compact", "plan", "diff", "subagents"] {
        assert!(names.contains(&name), "{names:?}");
    }
    // Each command is answered by the engine, not the model: one model
    // request (and its follow-up) for the prompt, none for the commands.
    assert_eq!(server.model_requests().len(), 2);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n",
        "/undo reverted the edit"
    );
    let prompts = response(&report, "session/prompt");
    assert!(
        prompts
            .iter()
            .all(|p| p["result"]["stopReason"] == "end_turn")
    );
    let text = message_text(&report);
    assert!(text.contains("undone: "), "{text}");
    assert!(text.contains("approval policy: on-request"), "{text}");
    assert!(text.contains("usage: /model NAME"), "{text}");
}

/// A session mode is the sandbox and the approval policy together: after
/// a switch from `auto` to `read-only` the same command can no longer
/// write, and a patch that ran unasked before now asks first. The model
/// hears of the switch with its next prompt.
#[test]
fn a_mode_switch_changes_what_commands_and_edits_may_do() {
    let Some(modules) = node_modules("a_mode_switch_changes_what_commands_and_edits_may_do") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let write = |id: &str, file: &str| {
        call(
            id,
            "bash_exec",
            json!({"command": format!("echo made > {file}")}),
        )
    };
    let server = FakeServer::start(vec![
        patch_call("p1", "a.txt", "one", "two"),
        write("b1", "before.txt"),
        Reply::sse(sse::text_turn("Done.")),
        write("b2", "after.txt"),
        patch_call("p2", "a.txt", "two", "three"),
        Reply::sse(sse::text_turn("Could not.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "permission": "reject_once",
            "steps": [
                {"do": "new"}, {"do": "prompt", "text": "edit and write"},
                {"do": "mode", "mode": "read-only"},
                {"do": "prompt", "text": "again"},
                {"do": "prompt", "text": "/status"},
            ],
        }),
    );
    let modes = &response(&report, "session/new")[0]["result"]["modes"];
    assert_eq!(modes["currentModeId"], "auto", "{report:#}");
    let ids: Vec<_> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, vec!["read-only", "auto", "full-access"]);
    assert!(response(&report, "session/set_mode")[0]["result"].is_object());
    let switched = updates(&report, "current_mode_update");
    assert_eq!(switched.len(), 1, "{report:#}");
    assert_eq!(switched[0]["currentModeId"], "read-only");
    // Before the switch: both ran unasked. After it: the command's write
    // was stopped by the read-only sandbox, the patch asked (and was
    // rejected).
    assert!(ws.path().join("before.txt").exists());
    assert!(!ws.path().join("after.txt").exists());
    let asked = events(&report, "permission");
    assert_eq!(asked.len(), 1, "{report:#}");
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "p2");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "two\n"
    );
    let requests = server.model_requests();
    let first = requests[0].body().to_string();
    let after = requests[3].body().to_string();
    assert!(!first.contains("switched this session"), "{first}");
    assert!(after.contains("switched this session"), "{after}");
    assert!(after.contains("Sandbox (read-only)"), "{after}");
    let status = message_text(&report);
    assert!(status.contains("sandbox: read-only"), "{status}");
}

/// Full access in a folder that is not trusted is refused with the
/// reason, and so is a mode the session does not offer; the session stays
/// in its mode and says nothing of a switch.
#[test]
fn a_mode_the_workspace_forbids_is_refused_with_why() {
    let Some(modules) = node_modules("a_mode_the_workspace_forbids_is_refused_with_why") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [
            {"do": "new"},
            {"do": "mode", "mode": "full-access"},
            {"do": "mode", "mode": "plan"},
            {"do": "prompt", "text": "/status"},
        ]}),
    );
    let answers = response(&report, "session/set_mode");
    assert_eq!(answers[0]["type"], "error", "{report:#}");
    assert_eq!(answers[0]["code"], -32602);
    let why = answers[0]["message"].as_str().unwrap();
    assert!(why.contains("mode full-access refused"), "{why}");
    assert!(why.contains("not trusted"), "{why}");
    assert_eq!(answers[1]["code"], -32602);
    assert!(
        answers[1]["message"]
            .as_str()
            .unwrap()
            .contains("unknown mode: plan")
    );
    assert!(updates(&report, "current_mode_update").is_empty());
    assert!(message_text(&report).contains("sandbox: workspace-write"));
}

/// A client that offers its files is asked for them: `read_file` shows
/// the editor's unsaved buffer, not the disk, once Fido's own checks
/// passed (a path outside the workspace is refused before anything is
/// asked); a file the editor cannot give is read from the disk.
#[test]
fn a_read_returns_the_clients_buffer_not_the_disk() {
    let Some(modules) = node_modules("a_read_returns_the_clients_buffer_not_the_disk") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "on disk one\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "on disk b\n").unwrap();
    let read = |id: &str, path: &str| call(id, "read_file", json!({ "path": path }));
    let server = FakeServer::start(vec![
        read("r1", "a.txt"),
        read("r2", "b.txt"),
        read("r3", "../outside.txt"),
        Reply::sse(sse::text_turn("Read.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "buffers": {"a.txt": "unsaved one\nunsaved two\n"},
            "steps": [{"do": "new"}, {"do": "prompt", "text": "read them"}],
        }),
    );
    let root = ws.path().canonicalize().unwrap();
    let asked: Vec<_> = events(&report, "read")
        .iter()
        .map(|e| e["params"]["path"].clone())
        .collect();
    assert_eq!(
        asked,
        vec![json!(root.join("a.txt")), json!(root.join("b.txt"))],
        "{report:#}"
    );
    let requests = server.model_requests();
    let buffer = requests[1].body().to_string();
    assert!(buffer.contains("unsaved two"), "{buffer}");
    assert!(!buffer.contains("on disk one"), "{buffer}");
    let disk = requests[2].body().to_string();
    assert!(disk.contains("on disk b"), "{disk}");
    let outside = requests[3].body().to_string();
    assert!(outside.contains("outside"), "{outside}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "on disk one\n"
    );
    // Each read names the line it starts at, so the editor can follow.
    let followed: Vec<Value> = updates(&report, "tool_call_update")
        .iter()
        .filter_map(|u| u.get("locations").cloned())
        .collect();
    for name in ["a.txt", "b.txt"] {
        let at = json!([{"path": root.join(name), "line": 1}]);
        assert!(followed.contains(&at), "{followed:?}");
    }
}

/// A client that writes files is given every edit of an existing file:
/// `patch` applies the edits to the editor's buffer (its unsaved text,
/// not the disk's), sends the new text with `fs/write_text_file`, and
/// keeps the buffer's old text in the undo log; a file the editor has no
/// buffer of is edited from the disk and still written through it; a new
/// file is created on the disk; a path Fido refuses is never sent.
#[test]
fn an_edit_goes_through_the_clients_buffer_and_lands_in_the_undo_log() {
    let Some(modules) =
        node_modules("an_edit_goes_through_the_clients_buffer_and_lands_in_the_undo_log")
    else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "on disk one\non disk two\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "b one\n").unwrap();
    let server = FakeServer::start(vec![
        patch_call("p1", "a.txt", "unsaved two", "edited two"),
        patch_call("p2", "b.txt", "b one", "b edited"),
        call(
            "p3",
            "patch",
            json!({"path": "c.txt", "content": "new file\n"}),
        ),
        patch_call("p4", "../outside.txt", "x", "y"),
        Reply::sse(sse::text_turn("Edited.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "buffers": {"a.txt": "unsaved one\nunsaved two\n"},
            "writes": true,
            "steps": [{"do": "new"}, {"do": "prompt", "text": "edit them"}],
        }),
    );
    let root = ws.path().canonicalize().unwrap();
    let written: Vec<_> = events(&report, "write")
        .iter()
        .map(|e| (e["params"]["path"].clone(), e["params"]["content"].clone()))
        .collect();
    assert_eq!(
        written,
        vec![
            (
                json!(root.join("a.txt")),
                json!("unsaved one\nedited two\n")
            ),
            (json!(root.join("b.txt")), json!("b edited\n")),
        ],
        "{report:#}"
    );
    let disk = |name: &str| std::fs::read_to_string(ws.path().join(name)).ok();
    assert_eq!(disk("a.txt").as_deref(), Some("on disk one\non disk two\n"));
    assert_eq!(disk("c.txt").as_deref(), Some("new file\n"));
    let results = server.model_requests()[4].body().to_string();
    assert!(results.contains("Edited a.txt"), "{results}");
    assert!(results.contains("outside"), "{results}");
    // Undo, newest first: the new file goes, then each edit is undone to
    // the text it was made on, the buffer's for `a.txt`.
    for _ in 0..3 {
        let mut cmd = fido_cmd();
        cmd.arg("undo").arg("-C").arg(ws.path());
        let undo = crate::common::process::run_with_timeout(cmd, None, Duration::from_secs(30));
        assert!(
            undo.status.success(),
            "{}",
            String::from_utf8_lossy(&undo.stderr)
        );
    }
    assert_eq!(disk("c.txt"), None);
    assert_eq!(disk("a.txt").as_deref(), Some("unsaved one\nunsaved two\n"));
}

/// The model is a session config option: a select of what the server
/// lists, with the session's model first. Picking another switches the
/// model from the next request on; a model the select does not offer and
/// an option Fido does not have are refused; `/model NAME` typed as a
/// prompt moves the select too.
#[test]
fn the_model_is_a_config_option_whose_switch_reaches_the_next_request() {
    let Some(modules) =
        node_modules("the_model_is_a_config_option_whose_switch_reaches_the_next_request")
    else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("One.")),
        Reply::sse(sse::text_turn("Two.")),
    ]);
    server.route(
        "GET",
        "/v1/models",
        r#"{"object": "list", "data": [{"id": "other-model"}, {"id": "test-model"}, {"id": "bad\nname"}]}"#,
    );
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [
            {"do": "new"},
            {"do": "prompt", "text": "first"},
            {"do": "config", "id": "model", "value": "other-model"},
            {"do": "config", "id": "model", "value": "made-up-model"},
            {"do": "config", "id": "effort", "value": "high"},
            {"do": "prompt", "text": "second"},
            {"do": "prompt", "text": "/model third-model"},
        ]}),
    );
    let offered = &response(&report, "session/new")[0]["result"]["configOptions"][0];
    assert_eq!(offered["id"], "model", "{report:#}");
    assert_eq!(offered["category"], "model");
    assert_eq!(offered["currentValue"], "test-model");
    let values: Vec<_> = offered["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].clone())
        .collect();
    assert_eq!(values, vec!["test-model", "other-model"]);
    let answers = response(&report, "session/set_config_option");
    assert_eq!(
        answers[0]["result"]["configOptions"][0]["currentValue"], "other-model",
        "{report:#}"
    );
    assert_eq!(answers[1]["code"], -32602);
    assert!(
        answers[1]["message"]
            .as_str()
            .unwrap()
            .contains("made-up-model is not one of the models offered")
    );
    assert_eq!(answers[2]["code"], -32602);
    assert!(
        answers[2]["message"]
            .as_str()
            .unwrap()
            .contains("unknown config option: effort")
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "{report:#}");
    assert_eq!(requests[0].body()["model"], "test-model");
    assert_eq!(requests[1].body()["model"], "other-model");
    let moved = updates(&report, "config_option_update");
    assert_eq!(moved.len(), 1, "{report:#}");
    assert_eq!(moved[0]["configOptions"][0]["currentValue"], "third-model");
}
