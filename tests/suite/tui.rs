//! The interactive TUI (`fido` with no subcommand) end to end: the real
//! binary in a real terminal (a private tmux server), typed at with
//! `send-keys` and read with `capture-pane`, against the fake model server.
//!
//! tmux is required, never optional: when it is missing these tests fail
//! (`.ci/run` installs it).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::process::{ProcessFilter, assert_nothing_left, clean_home, fido_bin, processes};
use crate::common::sse;
use crate::common::{FakeServer, Reply, assert_conversation_invariants, assert_no_processes};

/// How long the screen may take to show what a step expects.
pub(super) const SCREEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A private tmux server (its own socket) with one 140×40 session running
/// `sh`; killed on drop, with everything it runs.
pub(super) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(super) fn start(env: &[(&str, String)]) -> Tmux {
        match Command::new("tmux").arg("-V").output() {
            Ok(output) if output.status.success() => {}
            other => panic!(
                "tmux is required for the TUI end-to-end tests (.ci/run installs it): {other:?}"
            ),
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let tmux = Tmux {
            socket: format!("fido-tui-{}-{nanos}", std::process::id()),
        };
        // The server (and so the shell) gets exactly this environment.
        let mut cmd = tmux.command();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", clean_home())
            .env("XDG_CONFIG_HOME", clean_home())
            .env("LANG", "C.UTF-8")
            .env("TERM", "xterm-256color")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args([
                "new-session",
                "-d",
                "-x",
                "140",
                "-y",
                "40",
                "-s",
                "fido",
                "sh",
            ]);
        let output = cmd.output().unwrap();
        assert!(output.status.success(), "tmux new-session: {output:?}");
        tmux
    }

    /// A tmux whose shell points Fido at the fake model server at
    /// `base_url` (model `test-model`), plus `extra` variables.
    pub(super) fn for_model(base_url: &str, extra: &[(&str, String)]) -> Tmux {
        let mut env = vec![
            ("FIDO_PROVIDER", "openai".to_string()),
            ("FIDO_BASE_URL", base_url.to_string()),
            ("FIDO_MODEL", "test-model".to_string()),
            ("FIDO_API_KEY", "test-key".to_string()),
        ];
        env.extend(extra.iter().cloned());
        Tmux::start(&env)
    }

    pub(super) fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-u", "-L", &self.socket, "-f", "/dev/null"]);
        cmd
    }

    pub(super) fn run(&self, args: &[&str]) -> Output {
        let output = self.command().args(args).output().unwrap();
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        output
    }

    /// Types `text` literally, then Enter.
    pub(super) fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", "fido", "-l", text]);
        self.run(&["send-keys", "-t", "fido", "Enter"]);
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "fido"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    pub(super) fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "fido"]).stdout)
            .into_owned()
    }

    /// Waits until the screen satisfies `ready`; panics with the last screen.
    pub(super) fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SCREEN_TIMEOUT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            if Instant::now() >= deadline {
                panic!("the screen never showed {what} within {SCREEN_TIMEOUT:?}:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The end of every TUI test, once fido was told to quit: nothing is
    /// left, neither under the shell nor working in `ws`.
    pub(super) fn assert_fido_gone(&self, ws: &Path) {
        assert_no_processes(
            ProcessFilter::ChildrenOf(self.shell_pid()),
            Duration::from_secs(10),
        );
        assert_nothing_left(ws);
    }

    pub(super) fn shell_pid(&self) -> u32 {
        let output = self.run(&["display-message", "-p", "-t", "fido", "#{pane_pid}"]);
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

pub(super) fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn plan_items() -> Value {
    json!([
        {"id": "inspect", "title": "Read the parser", "status": "done",
         "details": "tokens and AST", "evidence": ["src/parser.rs:10"]},
        {"id": "implement", "title": "Fix the bug", "status": "in_progress",
         "dependencies": ["inspect"], "next_action": "edit parse_expr"},
        {"id": "verify", "title": "Run the tests", "status": "blocked",
         "dependencies": ["implement"], "next_action": "wait for the CI runner",
         "details": "runner offline"},
    ])
}

#[test]
fn the_plan_panel_follows_the_model_and_plan_clear_and_ctrl_c_twice_quits() {
    let ws = tempfile::tempdir().unwrap();
    let args = json!({"reason": "Parser fix", "items": plan_items()}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "update_plan", &args)])),
        Reply::sse(sse::text_turn("The plan is in place.")),
        // The settle reminder (an item is still in progress) gets one more answer.
        Reply::sse(sse::text_turn(
            "implement is still in progress; verify is blocked.",
        )),
    ]);
    let tmux = Tmux::for_model(&server.base_url(), &[]);
    tmux.type_line("echo shell-ready-$((40+2))");
    tmux.wait_for("the shell", |s| s.contains("shell-ready-42"));

    tmux.type_line(&format!(
        "{} -C {}",
        quoted(Path::new(fido_bin())),
        quoted(ws.path())
    ));
    // The header fills in when the session_started event is drawn, which
    // can be a frame after the empty panel.
    let screen = tmux.wait_for("the empty plan panel and the model in the header", |s| {
        s.contains("No plan yet.") && s.contains("ready") && s.contains("test-model")
    });
    assert!(screen.contains("test-model"), "{screen}");
    let fido: Vec<u32> = processes(ProcessFilter::ChildrenOf(tmux.shell_pid()))
        .into_iter()
        .filter(|p| p.comm == "fido")
        .map(|p| p.pid)
        .collect();
    assert_eq!(fido.len(), 1, "one fido under the shell: {fido:?}");

    tmux.type_line("make a plan for the parser fix");
    let screen = tmux.wait_for("every plan item and the end of the turn", |s| {
        s.contains("Run the tests") && s.contains("verify is blocked") && s.contains("ready")
    });
    for shown in [
        "Plan v1 · 1/3 done",
        "[x] inspect  Read the parser · done",
        "details: tokens and AST",
        "evidence: src/parser.rs:10",
        "[>] implement  Fix the bug · in_progress",
        "depends on: inspect",
        "next: edit parse_expr",
        "[!] verify  Run the tests · blocked",
        "details: runner offline",
        "depends on: implement",
        "next: wait for the CI runner",
        "→ update_plan ✓",
        "plan updated: v1 · 3 items",
        "The plan is in place.",
    ] {
        assert!(
            screen.contains(shown),
            "{shown:?} is not on screen:\n{screen}"
        );
    }
    // The transcript has one line for the plan; the panel has the items.
    assert_eq!(screen.matches("Read the parser").count(), 1, "{screen}");

    tmux.type_line("/plan clear");
    let screen = tmux.wait_for("the cleared plan", |s| {
        s.contains("The plan is empty.") && !s.contains("Read the parser")
    });
    assert!(screen.contains("Plan cleared (version 2)."), "{screen}");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path().join(".fido-plan.json")).unwrap())
            .unwrap();
    assert_eq!(saved["version"], 2);
    assert_eq!(saved["items"], json!([]));

    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("Plan v2"));
    tmux.type_line("echo back-in-shell-$((40+2))");
    tmux.wait_for("the shell answering", |s| s.contains("back-in-shell-42"));
    assert_no_processes(ProcessFilter::Pid(fido[0]), Duration::from_secs(5));

    // The terminal modes are back: line editing and echo, not raw mode.
    let stty = ws.path().join("stty.txt");
    tmux.type_line(&format!("stty -a > {}; echo stty-$((2+3))", quoted(&stty)));
    tmux.wait_for("stty", |s| s.contains("stty-5"));
    let modes = std::fs::read_to_string(&stty).unwrap();
    let flags: Vec<&str> = modes.split([' ', ';', '\n']).collect();
    for flag in ["icanon", "echo", "isig", "opost"] {
        assert!(
            flags.contains(&flag),
            "{flag} is off after fido quit:\n{modes}"
        );
    }

    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        3,
        "one tool call, one answer, one settle answer"
    );
    assert_conversation_invariants(&requests);
    let log = ws.path().join(".fido-state/logs/tui.log");
    assert!(log.exists(), "logs go to {}", log.display());
    tmux.assert_fido_gone(ws.path());
}

#[test]
fn without_a_usable_provider_fido_says_so_in_one_sentence() {
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = crate::common::fido_cmd();
    cmd.arg("-C").arg(ws.path()).env("FIDO_PROVIDER", "bogus");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("fido: "), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn without_a_terminal_fido_says_so_in_one_sentence() {
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = crate::common::fido_cmd();
    cmd.arg("-C").arg(ws.path()).env("FIDO_PROVIDER", "script");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("interactive terminal"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing drawn on a non-terminal");
}

#[test]
fn the_subagent_bar_shows_a_live_subagent_and_esc_cancels_only_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").unwrap();
    let delegate = json!({"task": "Find what main does"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        // The subagent's first request never gets an answer.
        Reply::stall_forever(vec![]),
        Reply::sse(sse::text_turn("The subagent was cancelled; carrying on.")),
        Reply::sse(sse::text_turn("You are welcome.")),
    ]);
    let tmux = Tmux::for_model(
        &server.base_url(),
        &[("FIDO_DELEGATE_GRACE_MS", "300".into())],
    );
    tmux.type_line(&format!(
        "{} -C {}",
        quoted(Path::new(fido_bin())),
        quoted(ws.path())
    ));
    tmux.wait_for("the UI", |s| s.contains("No plan yet."));
    tmux.type_line("what does main do?");
    let screen = tmux.wait_for("the subagent bar", |s| {
        // The pid arrives with the second `starting` event.
        s.lines()
            .nth(1)
            .is_some_and(|bar| bar.contains("SUBAGENT") && bar.contains("pid "))
            && s.contains("Esc cancel subagent")
    });
    let bar = screen.lines().nth(1).unwrap().to_string();
    assert!(bar.contains("subagent-"), "the bar names the agent: {bar}");
    assert!(bar.contains("▶"), "a running phase: {bar}");
    assert!(screen.contains("→ delegate"), "{screen}");
    server.wait_for_requests(2, SCREEN_TIMEOUT);
    let fido = processes(ProcessFilter::ChildrenOf(tmux.shell_pid()))
        .into_iter()
        .find(|p| p.comm == "fido")
        .expect("fido runs under the shell");
    let subagent = crate::common::process::subagents_of(fido.pid)
        .into_iter()
        .next()
        .expect("the subagent runs below fido");
    assert!(bar.contains(&format!("pid {}", subagent.pid)), "{bar}");

    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("the cancelled outcome and the rest of the turn", |s| {
        s.contains("carrying on.") && s.contains("ready")
    });
    let bar = screen.lines().nth(1).unwrap();
    assert!(
        bar.contains("SUBAGENT") && bar.contains("cancelled"),
        "{screen}"
    );
    // Esc cancelled the subagent only: its process is gone, fido is not.
    assert_no_processes(ProcessFilter::Pid(subagent.pid), Duration::from_secs(10));
    assert!(!processes(ProcessFilter::Pid(fido.pid)).is_empty());

    // The next prompt advances the parent turn: the bar goes.
    tmux.type_line("thanks");
    let screen = tmux.wait_for("the next answer", |s| s.contains("You are welcome."));
    assert!(!screen.contains("SUBAGENT"), "{screen}");
    tmux.type_line("/quit");
    tmux.wait_for("the shell again", |s| !s.contains("You are welcome."));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    // fido (and with it every subagent) is gone.
    tmux.assert_fido_gone(ws.path());
}

/// Starts fido in `ws` inside `tmux` and waits for the ready header.
pub(super) fn start_fido(tmux: &Tmux, ws: &Path) {
    tmux.type_line("echo shell-ready-$((40+2))");
    tmux.wait_for("the shell", |s| s.contains("shell-ready-42"));
    tmux.type_line(&format!(
        "{} -C {}",
        quoted(Path::new(fido_bin())),
        quoted(ws)
    ));
    tmux.wait_for("the ready header", |s| {
        s.contains("ready") && s.contains("test-model")
    });
}

#[test]
fn untrusted_approval_prompts_run_on_y_and_deny_with_a_reason_on_n() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "c1",
            "bash_exec",
            r#"{"command": "echo approved-run > ran.txt"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "c2",
            "bash_exec",
            r#"{"command": "rm -rf build-cache", "escalate": true, "justification": "stale cache"}"#,
        )])),
        Reply::sse(sse::text_turn("All done as you said.")),
    ]);
    let tmux = Tmux::for_model(
        &server.base_url(),
        &[("FIDO_APPROVAL_POLICY", "untrusted".into())],
    );
    start_fido(&tmux, ws.path());
    tmux.type_line("do the two things");
    let screen = tmux.wait_for("the first approval prompt", |s| {
        s.contains("Run this command?") && s.contains("y approve once")
    });
    assert!(screen.contains("$ echo approved-run > ran.txt"), "{screen}");
    assert!(!ws.path().join("ran.txt").exists(), "ran before approval");
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("the escalation prompt", |s| {
        // Its keys answer once it shows them (after a quiet moment).
        s.contains("OUTSIDE the sandbox")
            && s.contains("why: stale cache")
            && s.contains("y approve once")
    });
    assert!(screen.contains("$ rm -rf build-cache"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("ran.txt")).unwrap(),
        "approved-run\n"
    );
    tmux.keys(&["n"]);
    tmux.wait_for("the reason prompt", |s| {
        s.contains("Enter sends the denial")
    });
    tmux.run(&["send-keys", "-t", "fido", "-l", "keep the cache"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the end of the turn", |s| {
        s.contains("All done as you said.")
    });

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    let denied = requests[2]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c2")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(denied.contains("keep the cache"), "{denied}");
    let approved = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(approved.contains("exit code: 0"), "{approved}");
    assert_conversation_invariants(&requests);
    let system = requests[0].messages()[0]["content"].as_str().unwrap();
    assert!(system.contains("Approvals (untrusted)"), "{system}");
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("All done as you said."));
    tmux.assert_fido_gone(ws.path());
}

#[test]
fn an_untrusted_workspace_file_is_named_in_the_transcript() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("fido.toml"),
        "base_url = \"http://127.0.0.1:9/v1\"\napproval_policy = \"never\"\n",
    )
    .unwrap();
    let server = FakeServer::start(vec![]);
    let tmux = Tmux::for_model(&server.base_url(), &[]);
    start_fido(&tmux, ws.path());
    let screen = tmux.wait_for("the warning", |s| s.contains("is not trusted"));
    assert!(screen.contains("approval_policy, base_url"), "{screen}");
    assert!(screen.contains("If you trust this folder, run"), "{screen}");
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("is not trusted"));
    assert!(server.requests().is_empty());
    tmux.assert_fido_gone(ws.path());
}

#[test]
fn fido_resume_shows_the_old_transcript_and_goes_on_with_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let first = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::text_turn("The notes say alpha and beta.")),
    ]);
    let output = crate::common::run_exec(ws.path(), &first, "Summarise notes.txt", &[]);
    assert!(output.status.success(), "{output:?}");

    let second = FakeServer::start(vec![Reply::sse(sse::text_turn("Beta comes second."))]);
    let tmux = Tmux::for_model(&second.base_url(), &[]);
    tmux.type_line("echo shell-ready-$((40+2))");
    tmux.wait_for("the shell", |s| s.contains("shell-ready-42"));
    tmux.type_line(&format!(
        "{} resume --last -C {}",
        quoted(Path::new(fido_bin())),
        quoted(ws.path())
    ));
    let screen = tmux.wait_for("the restored transcript", |s| {
        s.contains("resumed session") && s.contains("The notes say alpha and beta.")
    });
    assert!(screen.contains("Summarise notes.txt"), "{screen}");
    assert!(screen.contains("notes.txt"), "{screen}");
    tmux.type_line("Which comes second?");
    tmux.wait_for("the new answer", |s| s.contains("Beta comes second."));
    let request = &second.model_requests()[0];
    let messages = request.body()["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["content"] == "The notes say alpha and beta."),
        "the old answer is in the new request: {messages:#?}"
    );
    assert_conversation_invariants(&second.model_requests());
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("Beta comes second."));
    tmux.assert_fido_gone(ws.path());
}

/// The bar row of `agent_id` on `screen`, if shown.
fn bar_row<'a>(screen: &'a str, agent_id: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|line| line.contains("SUBAGENT") && line.contains(agent_id))
}

/// The pid a bar row names (`pid 1234`).
fn row_pid(row: &str) -> Option<u32> {
    let (_, after) = row.split_once("pid ")?;
    after
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn three_subagents_get_three_rows_and_alt_down_esc_cancels_only_the_focused_one() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").unwrap();
    let tasks = ["t-alpha", "t-beta", "t-gamma"];
    let calls: Vec<(String, String)> = tasks
        .iter()
        .enumerate()
        .map(|(i, task)| (format!("d{i}"), json!({"task": task}).to_string()))
        .collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "delegate", args.as_str()))
        .collect();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&calls)),
        Reply::sse(sse::text_turn("Two reports in, one cancelled.")),
    ]);
    // Each child answers slowly: long enough to be cancelled, short enough
    // for the other two to complete.
    for task in tasks {
        let answer = json!({
            "summary": format!("{task} done"),
            "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []
        })
        .to_string();
        let events = sse::text_turn(&answer);
        let gaps = (events.len() as u32 - 1).max(1);
        server.push_keyed(
            &format!("Task: {task}"),
            Reply::sse_with_delay(events, Duration::from_secs(12) / gaps),
        );
    }
    let tmux = Tmux::for_model(
        &server.base_url(),
        &[("FIDO_DELEGATE_GRACE_MS", "300".into())],
    );
    start_fido(&tmux, ws.path());
    tmux.type_line("investigate three things at once");
    let screen = tmux.wait_for("three bar rows with pids", |s| {
        let rows: Vec<&str> = s.lines().skip(1).take(4).collect();
        rows.iter()
            .take(3)
            .all(|r| r.contains("SUBAGENT") && r.contains("pid "))
            && !rows[3].contains("SUBAGENT")
    });
    let rows: Vec<String> = screen.lines().skip(1).take(3).map(String::from).collect();
    assert!(
        rows[0].contains("SUBAGENT ›subagent-"),
        "the first row has the focus: {screen}"
    );
    let ids: Vec<String> = rows
        .iter()
        .map(|r| {
            let at = r.find("subagent-").unwrap();
            r[at..at + "subagent-".len() + 8].to_string()
        })
        .collect();
    let pids: Vec<u32> = rows.iter().map(|r| row_pid(r).unwrap()).collect();
    assert!(screen.contains("Alt+↑/↓ focus"), "{screen}");

    tmux.keys(&["M-Down"]);
    let focused = ids[1].clone();
    tmux.wait_for("the focus on the second row", |s| {
        bar_row(s, &focused).is_some_and(|r| r.contains("›"))
    });
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("the focused subagent cancelled", |s| {
        bar_row(s, &focused).is_some_and(|r| r.contains("cancelled"))
    });
    // Only the focused one stopped; the other two still run.
    assert_no_processes(ProcessFilter::Pid(pids[1]), Duration::from_secs(10));
    for (id, pid) in [(&ids[0], pids[0]), (&ids[2], pids[2])] {
        let row = bar_row(&screen, id).unwrap();
        assert!(row.contains("▶"), "{id} still runs: {screen}");
        assert!(
            !processes(ProcessFilter::Pid(pid)).is_empty(),
            "{id} was killed"
        );
    }

    let screen = tmux.wait_for("the turn's end", |s| {
        s.contains("one cancelled.") && s.contains("ready")
    });
    for id in [&ids[0], &ids[2]] {
        assert!(
            bar_row(&screen, id).is_some_and(|r| r.contains("✓ completed")),
            "{screen}"
        );
    }
    let requests = server.model_requests();
    let last = requests.last().unwrap();
    for message in last.messages().iter().filter(|m| m["role"] == "tool") {
        let result: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
        let agent = result["identity"]["agent_id"].as_str().unwrap();
        if agent == focused {
            assert_eq!(result["error"]["code"], "cancelled", "{result:#}");
        } else {
            assert_eq!(result["status"], "completed", "{result:#}");
        }
    }

    tmux.type_line("/agents");
    let screen = tmux.wait_for("the /agents list", |s| {
        s.contains("3 subagents this session")
    });
    assert!(
        screen.contains(&format!("{focused}  cancelled")),
        "{screen}"
    );
    tmux.type_line("/quit");
    for pid in pids {
        assert_no_processes(ProcessFilter::Pid(pid), Duration::from_secs(10));
    }
    tmux.assert_fido_gone(ws.path());
}

/// Another process holds the plan lock: the turn's `update_plan` waits for
/// it off the runtime, so the TUI keeps drawing what is typed, and Ctrl+C
/// ends the turn while the lock is still held, not after the 5 s bounded
/// wait.
#[test]
fn the_tui_keeps_drawing_and_takes_ctrl_c_while_another_process_holds_the_plan_lock() {
    let ws = tempfile::tempdir().unwrap();
    let mut holder = super::plan::hold_plan_lock(ws.path());
    let args = json!({"reason": "Locked out", "items": plan_items()}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "update_plan", &args)])),
        Reply::sse(sse::text_turn("unreachable")),
    ]);
    let tmux = Tmux::for_model(&server.base_url(), &[]);
    start_fido(&tmux, ws.path());
    let fido = processes(ProcessFilter::ChildrenOf(tmux.shell_pid()))
        .pop()
        .expect("fido runs under the shell");
    tmux.type_line("plan it");
    server.wait_for_requests(1, SCREEN_TIMEOUT);
    super::plan::wait_until_waiting_for_the_lock(fido.pid, ws.path());
    tmux.keys(&["-l", "typed-while-locked"]);
    tmux.wait_for("the text typed while the lock is held", |s| {
        s.contains("typed-while-locked")
    });
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("the interrupted turn", |s| s.contains("turn 1 interrupted"));
    // Causal, not timed: the lock is still held, and the call did not end
    // in the error a lock wait ends with (the one on screen is the start's
    // restore of the plan, before the turn).
    assert!(holder.try_wait().unwrap().is_none(), "the holder let go");
    assert_eq!(screen.matches("locked by").count(), 1, "{screen}");
    assert_eq!(server.model_requests().len(), 1, "no request after Ctrl+C");
    tmux.keys(&["C-u", "C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("test-model"));
    tmux.assert_fido_gone(ws.path());
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!ws.path().join(".fido-plan.json").exists());
}
