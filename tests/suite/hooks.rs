//! User hooks (`[[hooks.EVENT]]`) end to end: `fido exec --json` against
//! the fake model server, with hook scripts that write what they saw to
//! files outside the workspace.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::common::process::pids_with;
use crate::common::sse;
use crate::common::turns::tool_result;
use crate::common::{
    FakeServer, Reply, assert_conversation_invariants, events_of, parse_events, run_exec,
};

/// A workspace, and a folder beside it for the config and what hooks
/// write.
struct Setup {
    ws: tempfile::TempDir,
    out: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        Setup {
            ws,
            out: tempfile::tempdir().unwrap(),
        }
    }

    fn out(&self, name: &str) -> PathBuf {
        self.out.path().join(name)
    }

    /// Writes the user config with `hooks` (TOML) and returns its path.
    fn user_config(&self, hooks: &str) -> String {
        let path = self.out("config.toml");
        std::fs::write(&path, hooks).unwrap();
        path.display().to_string()
    }

    /// Runs `fido exec` with the user config `hooks`, `extra_env` on top.
    fn run(&self, server: &FakeServer, hooks: &str, extra_env: &[(&str, &str)]) -> Output {
        let config = self.user_config(hooks);
        let mut env = vec![("FIDO_CONFIG", config.as_str())];
        env.extend_from_slice(extra_env);
        run_exec(self.ws.path(), server, "go", &env)
    }
}

/// A `[[hooks.EVENT]]` table.
fn hook(event: &str, matcher: Option<&str>, command: &str, timeout_ms: Option<u64>) -> String {
    let mut table = format!("[[hooks.{event}]]\ncommand = {}\n", toml_string(command));
    if let Some(matcher) = matcher {
        table.push_str(&format!("matcher = {}\n", toml_string(matcher)));
    }
    if let Some(ms) = timeout_ms {
        table.push_str(&format!("timeout_ms = {ms}\n"));
    }
    table
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// The user messages of a request, in order.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

fn finished<'a>(events: &'a [Value], event: &str) -> Vec<&'a Value> {
    events_of(events, "hook_finished")
        .into_iter()
        .filter(|e| e["event"] == event)
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// read_file (call_1) then rm of notes.txt (call_2), then a text answer.
fn read_then_rm() -> FakeServer {
    FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("call_1", "read_file", r#"{"path": "notes.txt"}"#),
            ("call_2", "rm", r#"{"path": "notes.txt"}"#),
        ])),
        Reply::sse(sse::text_turn("done")),
    ])
}

#[test]
fn a_pre_tool_use_hook_exiting_2_refuses_the_matched_call_and_the_model_reads_why() {
    let setup = Setup::new();
    let server = read_then_rm();
    let guard = hook(
        "PreToolUse",
        Some("rm|rmdir"),
        "cat > /dev/null; echo 'notes.txt is precious' >&2; exit 2",
        None,
    );
    let output = setup.run(&server, &guard, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(setup.ws.path().join("notes.txt").exists(), "rm did not run");

    let requests = server.model_requests();
    let next = requests[1].body();
    assert!(
        tool_result(next, "call_1").contains("alpha"),
        "read_file is not matched"
    );
    let refused = tool_result(next, "call_2");
    assert!(
        refused.contains("hook_denied") && refused.contains("notes.txt is precious"),
        "{refused}"
    );
    let events = parse_events(&output.stdout);
    let pre = finished(&events, "PreToolUse");
    assert_eq!(pre.len(), 1, "the matcher selects rm only: {events:#?}");
    assert_eq!(pre[0]["decision"], "deny");
    assert_eq!(pre[0]["status"], "exited");
    assert_eq!(pre[0]["exit_code"], 2);
    assert_eq!(events_of(&events, "hook_started").len(), 1);
}

#[test]
fn a_json_permission_decision_deny_refuses_the_call() {
    let setup = Setup::new();
    let server = read_then_rm();
    let reply = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"json says no"}}"#;
    let guard = hook("PreToolUse", Some("rm"), &format!("echo '{reply}'"), None);
    let output = setup.run(&server, &guard, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(setup.ws.path().join("notes.txt").exists(), "rm did not run");
    let refused = tool_result(server.model_requests()[1].body(), "call_2");
    assert!(refused.contains("json says no"), "{refused}");
}

#[test]
fn a_system_message_is_shown_to_the_person_and_never_reaches_the_model() {
    let setup = Setup::new();
    let server = read_then_rm();
    let reply = r#"{"systemMessage":"checked by the house guard"}"#;
    let guard = hook(
        "PreToolUse",
        Some("read_file"),
        &format!("echo '{reply}'"),
        None,
    );
    let output = setup.run(&server, &guard, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        stderr(&output).contains("PreToolUse hook `echo"),
        "stderr: {}",
        stderr(&output)
    );
    assert!(stderr(&output).contains(": checked by the house guard"));
    let events = parse_events(&output.stdout);
    let pre = finished(&events, "PreToolUse");
    assert_eq!(pre.len(), 1, "{events:#?}");
    assert_eq!(pre[0]["decision"], "none");
    assert_eq!(pre[0]["message"], "checked by the house guard");
    // The call ran, and the model never saw the message.
    assert!(!setup.ws.path().join("notes.txt").exists(), "rm ran");
    let next = server.model_requests()[1].body().to_string();
    assert!(!next.contains("house guard"), "{next}");
}

#[test]
fn a_post_tool_use_formatter_runs_after_patch_and_its_context_reaches_the_model() {
    let setup = Setup::new();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "patch",
            r#"{"path": "notes.txt", "edits": [{"old_text": "beta", "new_text": "gamma"}]}"#,
        )])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let formatter = hook(
        "PostToolUse",
        Some("patch"),
        r#"echo "// formatted" >> notes.txt; echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"the formatter reflowed notes.txt"}}'"#,
        None,
    );
    let lint = hook(
        "PostToolUse",
        Some("patch"),
        "echo 'lint: gamma is not a word' >&2; exit 2",
        None,
    );
    let output = setup.run(&server, &(formatter + &lint), &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let notes = std::fs::read_to_string(setup.ws.path().join("notes.txt")).unwrap();
    assert_eq!(notes, "alpha\ngamma\n// formatted\n");
    let requests = server.model_requests();
    let next = requests[1].body();
    assert!(tool_result(next, "call_1").contains("notes.txt"));
    let users = user_messages(next);
    let last = users.last().unwrap();
    assert!(
        last.contains("PostToolUse") && last.contains("the formatter reflowed notes.txt"),
        "{users:#?}"
    );
    assert!(
        last.contains("objected") && last.contains("lint: gamma is not a word"),
        "{users:#?}"
    );
    assert_conversation_invariants(&requests);
    // After the tool result: the last message of the request.
    assert_eq!(
        next["messages"].as_array().unwrap().last().unwrap()["role"],
        "user"
    );
}

#[test]
fn a_hook_sees_the_protocol_fields_on_stdin_and_no_api_key_in_its_environment() {
    let setup = Setup::new();
    let server = read_then_rm();
    let (stdin_file, env_file) = (setup.out("stdin.json"), setup.out("env.txt"));
    let spy = hook(
        "PreToolUse",
        Some("read_file"),
        &format!(
            "cat > {}; env > {}",
            stdin_file.display(),
            env_file.display()
        ),
        None,
    );
    let output = setup.run(
        &server,
        &spy,
        &[
            ("OPENAI_API_KEY", "sk-openai-secret"),
            ("MY_API_KEY", "sk-mine"),
        ],
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let env = std::fs::read_to_string(&env_file).unwrap();
    for secret in ["test-key", "sk-openai-secret", "sk-mine"] {
        assert!(!env.contains(secret), "{secret} reached the hook:\n{env}");
    }
    assert!(env.contains("FIDO_PROJECT_DIR="), "{env}");
    let stdin: Value = serde_json::from_slice(&std::fs::read(&stdin_file).unwrap()).unwrap();
    assert_eq!(stdin["hook_event_name"], "PreToolUse");
    assert_eq!(stdin["tool_name"], "read_file");
    assert_eq!(
        stdin["tool_input"],
        serde_json::json!({"path": "notes.txt"})
    );
    assert_eq!(stdin["tool_use_id"], "call_1");
    let cwd = setup.ws.path().canonicalize().unwrap();
    assert_eq!(stdin["cwd"], cwd.display().to_string());
    assert!(
        stdin["session_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{stdin}"
    );
    assert!(stdin["transcript_path"].as_str().is_some(), "{stdin}");
}

#[test]
fn a_hung_hook_is_killed_with_its_group_and_the_turn_goes_on() {
    let setup = Setup::new();
    let server = read_then_rm();
    // `/proc/<pid>/cmdline` separates arguments with NULs: the number
    // alone matches the `sleep`s and their `sh` wrapper alike.
    let marker = "1000.25";
    let hung = hook(
        "PreToolUse",
        Some("read_file"),
        &format!("sleep {marker} & sleep {marker}"),
        Some(300),
    );
    let output = setup.run(&server, &hung, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        pids_with(marker).is_empty(),
        "left behind: {:?}",
        pids_with(marker)
    );
    let events = parse_events(&output.stdout);
    let pre = finished(&events, "PreToolUse");
    assert_eq!(pre[0]["status"], "timed_out", "{pre:#?}");
    assert_eq!(pre[0]["decision"], "none");
    // A failed hook blocks nothing: the call ran.
    assert!(tool_result(server.model_requests()[1].body(), "call_1").contains("alpha"));
}

#[test]
fn a_crashing_or_flooding_hook_is_a_non_blocking_error_with_a_notice() {
    let setup = Setup::new();
    let server = read_then_rm();
    let hooks = [
        hook("PreToolUse", Some("read_file"), "kill -SEGV $$", None),
        hook(
            "PreToolUse",
            Some("read_file"),
            "head -c 5000000 /dev/zero | tr '\\0' x; head -c 5000000 /dev/zero >&2; exit 1",
            None,
        ),
    ]
    .concat();
    let output = setup.run(&server, &hooks, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let events = parse_events(&output.stdout);
    let pre = finished(&events, "PreToolUse");
    assert_eq!(pre.len(), 2, "{pre:#?}");
    assert_eq!(pre[0]["status"], "killed");
    assert!(
        pre[0]["message"].as_str().unwrap().contains("signal 11"),
        "{pre:#?}"
    );
    assert_eq!(pre[1]["exit_code"], 1);
    assert!(
        stderr(&output).contains("failed (ignored)"),
        "{}",
        stderr(&output)
    );
    let flood = pre[1]["message"].as_str().unwrap();
    assert!(flood.len() < 1000, "the notice is short: {flood}");
    assert!(tool_result(server.model_requests()[1].body(), "call_1").contains("alpha"));
}

#[test]
fn an_untrusted_workspace_hook_is_ignored_with_the_warning_and_a_trusted_one_runs() {
    let setup = Setup::new();
    let marker = setup.out("ran");
    let table = hook(
        "PreToolUse",
        None,
        &format!("touch {}", marker.display()),
        None,
    );
    std::fs::write(setup.ws.path().join("fido.toml"), &table).unwrap();
    let config_home = setup.out("xdg");
    let xdg = config_home.display().to_string();
    let server = read_then_rm();
    let output = run_exec(setup.ws.path(), &server, "go", &[("XDG_CONFIG_HOME", &xdg)]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(!marker.exists(), "an untrusted workspace's hook ran");
    assert!(
        stderr(&output).contains("ignored: hooks."),
        "{}",
        stderr(&output)
    );

    fido::config::TrustStore::in_dir(&config_home.join("fido"))
        .trust(setup.ws.path())
        .unwrap();
    let server = read_then_rm();
    let output = run_exec(setup.ws.path(), &server, "go", &[("XDG_CONFIG_HOME", &xdg)]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(marker.exists(), "the trusted workspace's hook did not run");
}

/// The `content` of every message of a request, by role.
fn messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("").to_string();
            (role, m["content"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

#[test]
fn session_start_and_user_prompt_submit_add_context_before_the_prompt_and_stop_runs() {
    let setup = Setup::new();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("done"))]);
    let (session, prompt, stop) = (
        setup.out("session"),
        setup.out("prompt.json"),
        setup.out("stop.json"),
    );
    let hooks = [
        hook(
            "SessionStart",
            None,
            &format!("cat > {}; echo 'session note'", session.display()),
            None,
        ),
        hook(
            "UserPromptSubmit",
            None,
            &format!("cat > {}; echo 'branch is main'", prompt.display()),
            None,
        ),
        hook(
            "Stop",
            Some("*"),
            &format!("cat > {}", stop.display()),
            None,
        ),
    ]
    .concat();
    let output = setup.run(&server, &hooks, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let first = messages(server.model_requests()[0].body());
    assert_eq!(first.len(), 4, "{first:#?}");
    assert_eq!(first[0].0, "system");
    assert_eq!(
        first[1],
        (
            "user".into(),
            "[Fido: context from the user's SessionStart hook: session note]".into()
        )
    );
    assert_eq!(
        first[2],
        (
            "user".into(),
            "[Fido: context from the user's UserPromptSubmit hook: branch is main]".into()
        )
    );
    assert_eq!(first[3], ("user".into(), "go".into()));
    assert_conversation_invariants(&server.model_requests());
    let read = |path: &PathBuf| -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    assert_eq!(read(&session)["source"], "startup");
    assert_eq!(read(&prompt)["prompt"], "go");
    let stopped = read(&stop);
    assert_eq!(stopped["hook_event_name"], "Stop");
    assert_eq!(stopped["stop_hook_active"], false);
    assert_eq!(stopped["last_assistant_message"], "done");
}

#[test]
fn a_blocking_user_prompt_submit_hook_keeps_the_prompt_from_the_model() {
    let setup = Setup::new();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("never asked"))]);
    let guard = hook(
        "UserPromptSubmit",
        None,
        "echo 'no prompts on fridays' >&2; exit 2",
        None,
    );
    let output = setup.run(&server, &guard, &[]);
    assert!(!output.status.success(), "a blocked prompt fails the run");
    assert!(
        server.model_requests().is_empty(),
        "the prompt reached the model"
    );
    let events = parse_events(&output.stdout);
    let errors = events_of(&events, "error");
    assert!(
        errors.iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .contains("no prompts on fridays")),
        "{events:#?}"
    );
}

#[test]
fn a_stop_hook_that_blocks_continues_the_turn_with_its_reason_at_most_three_times() {
    let setup = Setup::new();
    let flag = setup.out("blocked-once");
    // Blocks once, then lets the turn end.
    let once = hook(
        "Stop",
        None,
        &format!(
            "if [ -e {0} ]; then exit 0; fi; touch {0}; echo 'run the tests first' >&2; exit 2",
            flag.display()
        ),
        None,
    );
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("done")),
        Reply::sse(sse::text_turn("tests pass, done")),
    ]);
    let output = setup.run(&server, &once, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let (role, last) = messages(requests[1].body()).pop().unwrap();
    assert_eq!(role, "user");
    assert!(
        last.contains("Stop hook") && last.contains("run the tests first"),
        "{last}"
    );

    // One that always blocks: three continuations, then the turn ends.
    let always = hook("Stop", None, "echo 'never done' >&2; exit 2", None);
    let replies = (0..6)
        .map(|i| Reply::sse(sse::text_turn(&format!("answer {i}"))))
        .collect();
    let server = FakeServer::start(replies);
    let output = setup.run(&server, &always, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(server.model_requests().len(), 4);
    let events = parse_events(&output.stdout);
    assert_eq!(finished(&events, "Stop").len(), 4);
}

#[test]
fn a_pre_tool_use_ask_is_denied_in_a_headless_run() {
    let setup = Setup::new();
    let server = read_then_rm();
    let ask = hook(
        "PreToolUse",
        Some("rm"),
        r#"echo '{"decision":"ask","reason":"sure?"}'"#,
        None,
    );
    let output = setup.run(&server, &ask, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(setup.ws.path().join("notes.txt").exists(), "rm did not run");
    let refused = tool_result(server.model_requests()[1].body(), "call_2");
    assert!(refused.contains("PreToolUse hook asked"), "{refused}");
}

const FINAL_JSON: &str = r#"{"summary": "notes has alpha", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

#[test]
fn tool_hooks_fire_for_the_parents_calls_and_not_a_subagents_and_subagent_hooks_run_in_the_parent()
{
    let setup = Setup::new();
    let (pre_log, sub_log) = (setup.out("pre.log"), setup.out("sub.log"));
    let hooks = [
        hook(
            "PreToolUse",
            Some("read_file"),
            &format!("cat >> {}; echo >> {0}", pre_log.display()),
            None,
        ),
        hook(
            "SubagentStart",
            None,
            &format!("cat >> {}; echo >> {0}", sub_log.display()),
            None,
        ),
        hook(
            "SubagentStop",
            None,
            &format!("cat >> {}; echo >> {0}", sub_log.display()),
            None,
        ),
    ]
    .concat();
    let delegate = serde_json::json!({"task": "Read notes.txt"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "p1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        Reply::sse(sse::tool_call_turn(&[(
            "s1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.run(&server, &hooks, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        server.model_requests().len(),
        5,
        "stderr: {}",
        stderr(&output)
    );
    let lines = |path: &PathBuf| -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let pre = lines(&pre_log);
    let ids: Vec<&str> = pre
        .iter()
        .map(|p| p["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p1"], "the child's read_file (s1) ran no hook");
    let sub = lines(&sub_log);
    assert_eq!(sub.len(), 2, "{sub:#?}");
    assert_eq!(sub[0]["hook_event_name"], "SubagentStart");
    assert_eq!(sub[0]["task"], "Read notes.txt");
    assert_eq!(sub[1]["hook_event_name"], "SubagentStop");
    assert_eq!(sub[1]["agent_id"], sub[0]["agent_id"]);
    assert_eq!(sub[1]["status"], "completed");
    assert_eq!(sub[1]["summary"], "notes has alpha");
}

#[test]
fn a_pre_tool_use_hook_on_delegate_vetoes_the_delegation() {
    let setup = Setup::new();
    let veto = hook(
        "PreToolUse",
        Some("delegate"),
        "echo 'no subagents today' >&2; exit 2",
        None,
    );
    let delegate = serde_json::json!({"task": "Read notes.txt"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.run(&server, &veto, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "no subagent asked the model");
    let refused = tool_result(requests[1].body(), "d1");
    assert!(refused.contains("no subagents today"), "{refused}");
}

#[test]
fn a_pre_compact_hook_runs_before_an_automatic_compaction() {
    let setup = Setup::new();
    crate::common::compaction::write_big_file(setup.ws.path());
    let server = FakeServer::start(crate::common::compaction::read_big_then_small(
        "notes.txt",
        "the summary",
    ));
    let seen = setup.out("compact.json");
    let spy = hook(
        "PreCompact",
        None,
        &format!("cat > {}", seen.display()),
        None,
    );
    let mut env = crate::common::compaction::SMALL_CONTEXT.to_vec();
    env.push(("FIDO_COMPACT_STRATEGY", "summarize"));
    let output = setup.run(&server, &spy, &env);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let events = parse_events(&output.stdout);
    assert!(!events_of(&events, "compacted").is_empty(), "{events:#?}");
    let stdin: Value = serde_json::from_slice(&std::fs::read(&seen).unwrap()).unwrap();
    assert_eq!(stdin["hook_event_name"], "PreCompact");
    assert_eq!(stdin["trigger"], "auto");
}

#[test]
fn in_the_terminal_a_hooks_ask_is_the_approval_prompt_and_a_failing_hook_one_line() {
    use super::tui::{Tmux, start_fido};
    let setup = Setup::new();
    let hooks = [
        hook(
            "PreToolUse",
            Some("read_file"),
            r#"echo '{"decision":"ask","reason":"secrets nearby"}'"#,
            None,
        ),
        hook("Stop", None, "echo broken >&2; exit 1", None),
    ]
    .concat();
    let config = setup.user_config(&hooks);
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "c1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::text_turn("read it all")),
    ]);
    let tmux = Tmux::for_model(&server.base_url(), &[("FIDO_CONFIG", config)]);
    start_fido(&tmux, setup.ws.path());
    tmux.type_line("read the notes");
    let screen = tmux.wait_for("the hook's approval prompt", |s| {
        s.contains("A hook asks: run this tool call?") && s.contains("y approve once")
    });
    assert!(screen.contains("hook: secrets nearby"), "{screen}");
    tmux.keys(&["y"]);
    // The Stop hook runs last: its notice marks the end of the turn.
    tmux.wait_for("the Stop hook's notice", |s| {
        s.contains("read it all")
            && s.contains("Stop hook `echo broken >&2; exit 1` failed (ignored)")
    });
    // The turn ends right after it; a Ctrl+C during it would interrupt.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let requests = server.model_requests();
    assert!(tool_result(requests[1].body(), "c1").contains("alpha"));
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("read it all"));
    tmux.assert_fido_gone(setup.ws.path());
}

#[test]
fn permission_request_hooks_approve_or_deny_what_the_policy_would_ask_in_a_headless_run() {
    let setup = Setup::new();
    let seen = setup.out("permission.json");
    let hooks = [
        hook(
            "PermissionRequest",
            Some("bash_exec"),
            &format!(
                r#"cat > {}; echo '{{"hookSpecificOutput":{{"hookEventName":"PermissionRequest","decision":{{"behavior":"allow"}}}}}}'"#,
                seen.display()
            ),
            None,
        ),
        hook(
            "PermissionRequest",
            Some("rm"),
            "echo 'keep the notes' >&2; exit 2",
            None,
        ),
    ]
    .concat();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("c1", "bash_exec", r#"{"command": "echo hi > ran.txt"}"#),
            ("c2", "rm", r#"{"path": "notes.txt"}"#),
        ])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.run(&server, &hooks, &[("FIDO_APPROVAL_POLICY", "untrusted")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        setup.ws.path().join("ran.txt").exists(),
        "the hook approved the command"
    );
    assert!(
        setup.ws.path().join("notes.txt").exists(),
        "the hook denied rm"
    );
    let next = server.model_requests()[1].body().clone();
    let refused = tool_result(&next, "c2");
    assert!(
        refused.contains("hook_denied") && refused.contains("keep the notes"),
        "{refused}"
    );
    let stdin: Value = serde_json::from_slice(&std::fs::read(&seen).unwrap()).unwrap();
    assert_eq!(stdin["hook_event_name"], "PermissionRequest");
    assert_eq!(stdin["tool_name"], "bash_exec");
    assert_eq!(stdin["tool_use_id"], "c1");
    assert_eq!(stdin["request"]["type"], "command");
    assert_eq!(stdin["request"]["command"], "echo hi > ran.txt");
}

#[test]
fn sigint_during_a_running_hook_kills_it_and_exits_130() {
    use crate::common::exec_cmd;
    use crate::common::process::{send_signal, wait_in, wait_until};
    let setup = Setup::new();
    let started = setup.out("started");
    // The number alone matches the `sleep` and its `sh` wrapper alike.
    let marker = "1000.75";
    let slow = hook(
        "UserPromptSubmit",
        None,
        &format!("touch {}; sleep {marker}", started.display()),
        None,
    );
    let config = setup.user_config(&slow);
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("never asked"))]);
    let child = exec_cmd(setup.ws.path(), &server, "go", &[("FIDO_CONFIG", &config)])
        .spawn()
        .unwrap();
    let fido = child.id();
    wait_until(
        "the hook to start",
        std::time::Duration::from_secs(20),
        || started.exists(),
    );
    wait_until(
        "the hook's sleep to start",
        std::time::Duration::from_secs(20),
        || !crate::common::process::pids_running(&["sleep", marker]).is_empty(),
    );
    send_signal(fido, libc::SIGINT);
    let output = wait_in(setup.ws.path(), child, std::time::Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(130),
        "stderr: {}",
        stderr(&output)
    );
    assert!(
        pids_with(marker).is_empty(),
        "left behind: {:?}",
        pids_with(marker)
    );
    assert!(server.model_requests().is_empty());
}
