//! `fido exec` as a headless front end: without `--json`, progress lines
//! on stderr as the work happens (each tool call, an approval refused),
//! plain when stderr is not a terminal; `-q` silences them; the answer
//! alone on stdout.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::process::{fido_cmd, run_in};
use crate::common::sse;
use crate::common::{FakeServer, Reply};

/// A model that reads a file, tries to make a directory (refused: the
/// `untrusted` policy asks, and nobody can answer), then answers.
fn server() -> FakeServer {
    FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "call_2",
            "mkdir",
            r#"{"path": "build\u001b]52;c;aGk=\u0007"}"#,
        )])),
        Reply::sse(sse::text_turn("Three words.")),
    ])
}

fn exec(workspace: &std::path::Path, server: &FakeServer, flags: &[&str]) -> Output {
    let mut cmd: Command = fido_cmd();
    cmd.arg("exec")
        .arg("-C")
        .arg(workspace)
        .args(["--approval", "untrusted"])
        .args(flags)
        .arg("--")
        .arg("What is in notes.txt?")
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_in(workspace, cmd, None, Duration::from_secs(60))
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    dir
}

#[test]
fn progress_goes_to_stderr_plain_and_the_answer_alone_to_stdout() {
    let ws = workspace();
    let server = server();
    let output = exec(ws.path(), &server, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Three words.\n");
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("fido: → ") || line.starts_with("fido: approval"))
        .collect();
    assert_eq!(progress.len(), 3, "{stderr}");
    assert_eq!(progress[0], "fido: → read_file notes.txt");
    // The call's summary is sanitised by the engine, then escaped here.
    assert!(progress[1].starts_with("fido: → mkdir build"), "{stderr}");
    assert!(
        progress[2].starts_with("fido: approval refused: mkdir: approval_policy untrusted"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "plain off a terminal: {stderr:?}");
}

#[test]
fn quiet_keeps_stderr_free_of_progress() {
    let ws = workspace();
    let server = server();
    let output = exec(ws.path(), &server, &["-q"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Three words.\n");
    assert!(!stderr.contains("fido: → "), "{stderr}");
    assert!(!stderr.contains("approval refused"), "{stderr}");
}
