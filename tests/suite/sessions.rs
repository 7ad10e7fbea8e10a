//! The session journal through the binary: `fido exec --resume`, `fido
//! sessions`, and crashes (`kill -9`) at the worst moments.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::process::{pids_running, wait_until};
use crate::common::sse;
use crate::common::{
    FakeServer, RecordedRequest, Reply, assert_conversation_invariants, events_of, exec_cmd,
    fido_cmd, parse_events, run_exec, run_with_timeout,
};

const LIMIT: Duration = Duration::from_secs(30);

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn session_id(output: &Output) -> String {
    let events = parse_events(&output.stdout);
    let started = events_of(&events, "session_started");
    started[0]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id in {:?}", started[0]))
        .to_string()
}

fn journal(ws: &Path, id: &str) -> PathBuf {
    ws.join(".fido-state/sessions").join(format!("{id}.jsonl"))
}

/// `fido exec --resume ARGS… PROMPT` against `server`.
fn resume(ws: &Path, server: &FakeServer, resume_args: &[&str], prompt: &str) -> Output {
    let cmd = crate::common::process::exec_cmd_with_flags(ws, server, resume_args, prompt, &[]);
    crate::common::process::run_in(ws, cmd, None, LIMIT)
}

/// The messages of a recorded request, each as its compact JSON text.
fn message_texts(request: &RecordedRequest) -> Vec<String> {
    request.body()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect()
}

#[test]
fn exec_resume_last_sends_the_old_conversation_byte_for_byte() {
    let ws = workspace();
    std::fs::write(ws.path().join("AGENTS.md"), "Cite file:line.\n").unwrap();
    let first = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::text_turn("It lists alpha, beta and gamma.")),
    ]);
    let output = run_exec(ws.path(), &first, "What is in notes.txt?", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let id = session_id(&output);

    // A changed AGENTS.md is for the next new session: the resumed one
    // keeps the system message it was started with.
    std::fs::write(ws.path().join("AGENTS.md"), "Never cite anything.\n").unwrap();
    let second = FakeServer::start(vec![Reply::sse(sse::text_turn("The second is beta."))]);
    let output = resume(
        ws.path(),
        &second,
        &["--resume", "--last"],
        "Which is second?",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(session_id(&output), id, "the same session goes on");
    let events = parse_events(&output.stdout);
    assert_eq!(events_of(&events, "turn_started")[0]["turn"], 2);

    let before = first.model_requests();
    let after = second.model_requests();
    let old = message_texts(before.last().unwrap());
    let new = message_texts(&after[0]);
    assert_eq!(
        new[..old.len()],
        old[..],
        "the resumed request starts with the previous one"
    );
    // Byte for byte, as sent: the previous request's messages are a prefix
    // of the raw body of the resumed one.
    let raw_old = String::from_utf8(before.last().unwrap().raw_body.clone()).unwrap();
    let raw_new = String::from_utf8(after[0].raw_body.clone()).unwrap();
    let prefix = old.join(",");
    assert!(raw_old.contains(&prefix), "compact serialisation assumed");
    assert!(raw_new.contains(&prefix));
    assert!(new[0].contains("Cite file:line."));
    assert!(new[old.len()].contains("It lists alpha, beta and gamma."));
    assert!(new.last().unwrap().contains("Which is second?"));
    assert_conversation_invariants(&after);

    let listed = run_with_timeout(
        {
            let mut cmd = fido_cmd();
            cmd.args(["sessions", "--json", "-C"]).arg(ws.path());
            cmd
        },
        None,
        LIMIT,
    );
    assert!(listed.status.success(), "{}", stderr(&listed));
    let sessions: Vec<Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["turns"], 2);
    assert_eq!(sessions[0]["status"], "ended");
    assert_eq!(sessions[0]["first_prompt"], "What is in notes.txt?");
    assert_eq!(sessions[0]["usage"]["requests"], 3);
}

/// Starts `fido exec` on `server`, waits until the server has seen
/// `requests` model requests (plus `settle`), then kills Fido with SIGKILL.
/// Kills Fido with SIGKILL once the server got `requests` requests and
/// `ready` holds.
fn crash_after(
    ws: &Path,
    server: &FakeServer,
    prompt: &str,
    requests: usize,
    ready: impl Fn() -> bool,
) {
    let mut cmd = exec_cmd(ws, server, prompt, &[]);
    let child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    server.wait_for_requests(requests, LIMIT);
    wait_until("the state to kill Fido in", LIMIT, ready);
    // SAFETY: kill(2) on the pid of our own child, which is not reaped yet.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let output = crate::common::process::wait_in(ws, child, LIMIT);
    assert!(!output.status.success());
}

#[test]
fn kill_9_during_a_streamed_answer_loses_only_that_step() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        // Half an answer, then nothing: Fido is killed while it streams.
        Reply::stall_forever(sse::text_turn("It lists alpha and")[..2].to_vec()),
    ]);
    // The second request is out and the journal holds the first step's
    // tool result: the kill lands in the streamed answer.
    let sessions = ws.path().join(".fido-state/sessions");
    crash_after(ws.path(), &server, "What is in notes.txt?", 2, || {
        std::fs::read_dir(&sessions)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .any(|entry| {
                std::fs::read_to_string(entry.path()).is_ok_and(|text| text.contains("call_1"))
            })
    });

    let listed = run_with_timeout(
        {
            let mut cmd = fido_cmd();
            cmd.args(["sessions", "-C"]).arg(ws.path());
            cmd
        },
        None,
        LIMIT,
    );
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );

    let next = FakeServer::start(vec![Reply::sse(sse::text_turn("Three words."))]);
    let output = resume(ws.path(), &next, &["--last"], "Go on.");
    assert!(output.status.success(), "{}", stderr(&output));
    let crashed = server.model_requests();
    let resumed = next.model_requests();
    let old = message_texts(&crashed[1]);
    let new = message_texts(&resumed[0]);
    assert_eq!(
        new[..old.len()],
        old[..],
        "everything up to the last complete step (the tool result) is back"
    );
    assert!(new.last().unwrap().contains("Go on."));
    assert_conversation_invariants(&resumed);
}

#[test]
fn kill_9_during_a_tool_call_resumes_with_a_result_for_that_call() {
    let ws = workspace();
    let server = FakeServer::start(vec![Reply::sse(sse::tool_call_turn(&[(
        "call_slow",
        "bash_exec",
        r#"{"command": "sleep 29.5"}"#,
    )]))]);
    // Killed while the command runs: seen first, so its absence later
    // means it died with Fido.
    let sleeper = ["sleep", "29.5"];
    crash_after(ws.path(), &server, "Wait a bit.", 1, || {
        !pids_running(&sleeper).is_empty()
    });

    let next = FakeServer::start(vec![Reply::sse(sse::text_turn("Done waiting."))]);
    let output = resume(ws.path(), &next, &["--last"], "Did it finish?");
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &next.model_requests()[0];
    let messages = request.body()["messages"].as_array().unwrap();
    let answered = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_slow")
        .unwrap_or_else(|| panic!("no result for the interrupted call: {messages:#?}"));
    assert!(
        answered["content"]
            .as_str()
            .unwrap()
            .contains("the session ended before this call finished"),
        "{answered}"
    );
    assert_conversation_invariants(&next.model_requests());
    // The command died with Fido.
    wait_until(
        "the command to die with Fido",
        Duration::from_secs(5),
        || pids_running(&sleeper).is_empty(),
    );
}

#[test]
fn a_corrupt_journal_is_an_error_naming_the_line_and_is_left_as_it_is() {
    let ws = workspace();
    let first = FakeServer::start(vec![Reply::sse(sse::text_turn("Hello."))]);
    let output = run_exec(ws.path(), &first, "Hi.", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let id = session_id(&output);
    let path = journal(ws.path(), &id);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, "{\"type\": \"message\", \"message\": {\"role\"");
    let corrupt = lines.join("\n") + "\n";
    std::fs::write(&path, &corrupt).unwrap();

    let next = FakeServer::start(vec![Reply::sse(sse::text_turn("unused"))]);
    let output = resume(ws.path(), &next, &["--resume", &id], "Again.");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("corrupt at line 3"),
        "{}",
        stderr(&output)
    );
    assert!(next.model_requests().is_empty(), "no turn ran");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        corrupt,
        "untouched"
    );

    let missing = resume(ws.path(), &next, &["--resume", "nope"], "Again.");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no session nope"),
        "{}",
        stderr(&missing)
    );
}
