//! `cargo bench --bench acp`: what `fido acp` costs over `fido exec` for
//! the same session, and how fast a prompt's first text reaches the editor.
//!
//! The session, the same on both sides, against a zero-latency fake OpenAI
//! server with a fresh three-reply script and a fresh workspace: prompt 1
//! ("What does notes.txt say?") is answered by a `read_file` call, then the
//! answer; prompt 2 by a text answer. `fido acp` runs it as an editor would,
//! driven by a raw JSON-RPC client on its stdio (`initialize`,
//! `session/new`, two `session/prompt`, then stdin closed). `fido exec
//! --json` runs it the only way it can: one process per prompt, the second
//! with `--resume --last` (the journaled session of the first). Runs
//! alternate between the two, so both see the same machine load.
//!
//! 1. Wall time, spawn to reaping (for exec both processes added), and
//!    peak RSS (`ru_maxrss` from `wait4`; for exec the larger of its two
//!    processes). Targets: acp ≤ exec + 2 ms at the median of the paired
//!    differences, acp ≤ exec + 2 MiB at the max peak RSS.
//! 2. Prompt 2's latency to its first `agent_message_chunk`: from the
//!    client writing `session/prompt` to it reading the chunk, minus the
//!    server's own share (the request read whole → the first byte of the
//!    answer about to be written, stamped by the in-process server).
//!    Target: ≤ 1 ms at the median.
//!
//! `BENCH_RUNS` sets the runs of each side (default 30; one warm-up run of
//! each is not counted); `FIDO_BIN` another binary. Exit status: 0 when
//! every run worked and every target holds, 1 otherwise.

#[allow(dead_code)]
#[path = "../tests/common/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use server::{FakeServer, Reply};
use support::Sorted;

const DEFAULT_RUNS: usize = 30;
const TARGET_WALL_ADDED_MS: f64 = 2.0;
const TARGET_RSS_ADDED_MIB: f64 = 2.0;
const TARGET_FIRST_CHUNK_MS: f64 = 1.0;
/// A session taking longer than this is killed and counted as a failure.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

const FILE_NAME: &str = "notes.txt";
const FILE_TEXT: &str = "The bench file: seven small words here.\n";
const PROMPT_1: &str = "What does notes.txt say?";
const ANSWER_1: &str = "notes.txt says: The bench file: seven small words here.";
const PROMPT_2: &str = "And in three words?";
const ANSWER_2: &str = "Seven small words.";

/// One `fido acp` session.
struct AcpRun {
    wall_ms: f64,
    rss_kib: u64,
    /// Prompt 2: client's `session/prompt` written → first chunk read.
    first_chunk_ms: f64,
    /// Prompt 2's model request: read whole → answer begun, at the server.
    server_ms: f64,
}

/// The same session through two `fido exec --json` processes.
struct ExecRun {
    wall_ms: f64,
    first_wall_ms: f64,
    rss_kib: u64,
}

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("acp bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the bench; `Ok(false)` when a target was missed.
fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let fido = support::fido_binary("acp")?;
    let home = tempfile::tempdir().map_err(|e| format!("cannot create a temp home: {e}"))?;
    acp_session(&fido, home.path()).map_err(|e| format!("acp warm-up run: {e}"))?;
    exec_session(&fido, home.path()).map_err(|e| format!("exec warm-up run: {e}"))?;
    let mut acp = Vec::with_capacity(runs);
    let mut exec = Vec::with_capacity(runs);
    for run in 1..=runs {
        acp.push(acp_session(&fido, home.path()).map_err(|e| format!("acp run {run}: {e}"))?);
        exec.push(exec_session(&fido, home.path()).map_err(|e| format!("exec run {run}: {e}"))?);
    }
    println!(
        "fido acp against fido exec --json: {runs} runs each of a 2-prompt session (read_file, then an answer; then an answer), {}",
        fido.display()
    );
    let session_ok = report_session(&acp, &exec);
    let chunk_ok = report_first_chunk(&acp);
    Ok(session_ok && chunk_ok)
}

/// Part 1's samples, sorted.
struct SessionFigures {
    acp_wall: Sorted,
    exec_wall: Sorted,
    exec_first: Sorted,
    /// acp − exec (both processes), run by run.
    added: Sorted,
    /// acp − exec's prompt 1 alone, run by run: one process each.
    added_to_first: Sorted,
    acp_rss: Sorted,
    exec_rss: Sorted,
}

impl SessionFigures {
    fn of(acp: &[AcpRun], exec: &[ExecRun]) -> SessionFigures {
        let paired = |of: fn(&ExecRun) -> f64| {
            Sorted::new(
                acp.iter()
                    .zip(exec)
                    .map(|(a, e)| a.wall_ms - of(e))
                    .collect(),
            )
        };
        let mib = |kib: u64| kib as f64 / 1024.0;
        SessionFigures {
            acp_wall: Sorted::new(acp.iter().map(|r| r.wall_ms).collect()),
            exec_wall: Sorted::new(exec.iter().map(|r| r.wall_ms).collect()),
            exec_first: Sorted::new(exec.iter().map(|r| r.first_wall_ms).collect()),
            added: paired(|e| e.wall_ms),
            added_to_first: paired(|e| e.first_wall_ms),
            acp_rss: Sorted::new(acp.iter().map(|r| mib(r.rss_kib)).collect()),
            exec_rss: Sorted::new(exec.iter().map(|r| mib(r.rss_kib)).collect()),
        }
    }

    fn print(&self) {
        let rows = [
            ("wall, acp", &self.acp_wall),
            ("wall, exec, both processes", &self.exec_wall),
            ("wall, exec, prompt 1 alone", &self.exec_first),
            ("acp − exec, paired", &self.added),
            ("acp − exec's prompt 1 alone, paired", &self.added_to_first),
        ];
        for (what, sorted) in rows {
            println!("{what}: {}", support::spread(sorted, 2, "ms"));
        }
        println!(
            "ratio of the medians, acp / exec: {:.2}× (/ exec's prompt 1 alone: {:.2}×)",
            self.acp_wall.median() / self.exec_wall.median(),
            self.acp_wall.median() / self.exec_first.median()
        );
        println!(
            "peak RSS, acp: {}",
            support::spread(&self.acp_rss, 1, "MiB")
        );
        println!(
            "peak RSS, exec: {}",
            support::spread(&self.exec_rss, 1, "MiB")
        );
    }
}

/// Part 1: wall and peak RSS of each side, the paired differences, the
/// targets and the table rows.
fn report_session(acp: &[AcpRun], exec: &[ExecRun]) -> bool {
    let figures = SessionFigures::of(acp, exec);
    figures.print();
    let SessionFigures {
        acp_wall,
        exec_wall,
        exec_first,
        added,
        added_to_first,
        acp_rss,
        exec_rss,
    } = &figures;
    let wall_ok = support::wall_clock_target(
        "acp − exec, median of the paired differences",
        added.median(),
        support::Bound::AtMost,
        TARGET_WALL_ADDED_MS,
        "ms",
    );
    let rss_added = acp_rss.max() - exec_rss.max();
    let rss_ok = support::steady_target(
        &format!("max peak RSS, acp ≤ exec + {TARGET_RSS_ADDED_MIB} MiB"),
        rss_added <= TARGET_RSS_ADDED_MIB,
        &format!(
            "{:.1} against {:.1} MiB ({rss_added:+.1})",
            acp_rss.max(),
            exec_rss.max()
        ),
    );
    support::table_row(
        "acp",
        "`fido acp`, 2-prompt session (read_file and an answer, then an answer) from a raw JSON-RPC client, against the same session through 2 `fido exec --json` (the second `--resume --last`), zero-latency local server: wall added",
        &format!(
            "{:+.2} ms ({:+.2}–{:+.2}, n = {}): acp {:.2} ms, exec {:.2} ms ({:.2}×); against exec's prompt 1 alone ({:.2} ms) {:+.2} ms",
            added.median(),
            added.min(),
            added.max(),
            added.len(),
            acp_wall.median(),
            exec_wall.median(),
            acp_wall.median() / exec_wall.median(),
            exec_first.median(),
            added_to_first.median()
        ),
        &format!("≤ +{TARGET_WALL_ADDED_MS} ms median"),
        "—",
    );
    support::table_row(
        "acp",
        "the same: peak RSS, acp against exec (the larger of its 2 processes)",
        &format!(
            "{} against {}",
            support::spread(acp_rss, 1, "MiB"),
            support::spread(exec_rss, 1, "MiB")
        ),
        &format!("≤ +{TARGET_RSS_ADDED_MIB} MiB max"),
        "—",
    );
    wall_ok && rss_ok
}

/// Part 2: prompt → first chunk, minus the server's own share.
fn report_first_chunk(acp: &[AcpRun]) -> bool {
    let client = Sorted::new(acp.iter().map(|r| r.first_chunk_ms).collect());
    let server = Sorted::new(acp.iter().map(|r| r.server_ms).collect());
    let added = Sorted::new(acp.iter().map(|r| r.first_chunk_ms - r.server_ms).collect());
    println!(
        "prompt 2 → first chunk, at the client (ms): {}",
        support::spread(&client, 3, "ms")
    );
    println!(
        "its model request, read → answer begun, at the server (ms): {}",
        support::spread(&server, 3, "ms")
    );
    println!(
        "the difference, Fido's share (ms): {}",
        support::spread(&added, 3, "ms")
    );
    let ok = support::wall_clock_target(
        "prompt → first agent_message_chunk, less the server's share, median",
        added.median(),
        support::Bound::AtMost,
        TARGET_FIRST_CHUNK_MS,
        "ms",
    );
    support::table_row(
        "acp",
        "`session/prompt` written → first `agent_message_chunk` read (prompt 2, text only), less the server's request read → first byte",
        &format!(
            "{} (client {:.3} ms, server {:.3} ms)",
            support::spread(&added, 3, "ms"),
            client.median(),
            server.median()
        ),
        &format!("≤ {TARGET_FIRST_CHUNK_MS} ms median"),
        "—",
    );
    ok
}

/// A fresh workspace with the file, and a server with the session's script.
fn fixture() -> Result<(tempfile::TempDir, FakeServer), String> {
    let workspace = tempfile::tempdir().map_err(|e| format!("cannot create a workspace: {e}"))?;
    std::fs::write(workspace.path().join(FILE_NAME), FILE_TEXT)
        .map_err(|e| format!("cannot write the workspace file: {e}"))?;
    let arguments = format!(r#"{{"path":"{FILE_NAME}"}}"#);
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("call_1", "read_file", &arguments)])),
        Reply::sse(sse::text_turn(ANSWER_1)),
        Reply::sse(sse::text_turn(ANSWER_2)),
    ]);
    Ok((workspace, server))
}

/// `fido SUBCOMMAND` with a clean environment pointed at `server`.
fn fido_command(fido: &Path, home: &Path, server: &FakeServer) -> Command {
    let mut cmd = Command::new(fido);
    support::remove_fido_env(&mut cmd);
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key");
    cmd
}

/// Checks what the server saw of a session: three model requests, the
/// file's text in the second (the tool result), prompt 1 still in the third.
fn check_requests(server: &FakeServer) -> Result<(), String> {
    let requests = server.model_requests();
    if requests.len() != 3 {
        return Err(format!("expected 3 model requests, got {}", requests.len()));
    }
    let carries = |index: usize, role: &str, text: &str| {
        requests[index].messages().iter().any(|m| {
            m.get("role").and_then(Value::as_str) == Some(role)
                && m.get("content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.contains(text))
        })
    };
    if !carries(1, "tool", FILE_TEXT.trim_end()) {
        return Err("the second request carries no tool result with the file's text".into());
    }
    if !carries(2, "user", PROMPT_1) || !carries(2, "user", PROMPT_2) {
        return Err("the third request lacks prompt 1 or prompt 2".into());
    }
    Ok(())
}

/// One measured `fido acp` session in a fresh workspace.
fn acp_session(fido: &Path, home: &Path) -> Result<AcpRun, String> {
    let (workspace, server) = fixture()?;
    let outputs = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let stderr_path = outputs.path().join("stderr");
    let stderr = File::create(&stderr_path).map_err(|e| format!("cannot create stderr: {e}"))?;
    let mut cmd = fido_command(fido, home, &server);
    cmd.arg("acp")
        .current_dir(workspace.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut watched = support::Watched::spawn(&mut cmd, RUN_TIMEOUT)?;
    let driven =
        AcpClient::take(watched.child_mut()).and_then(|client| client.drive(workspace.path()));
    let measured = watched.reap()?;
    let context = || {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        format!("\n--- stderr\n{stderr}")
    };
    let (first_chunk_ms, text) = driven.map_err(|e| format!("{e}{}", context()))?;
    if !measured.exited_zero() {
        return Err(format!(
            "fido acp did not exit 0 (wait status {:#x}){}",
            measured.status,
            context()
        ));
    }
    if text != [ANSWER_1, ANSWER_2].concat() {
        return Err(format!("the chunks say {text:?}{}", context()));
    }
    check_requests(&server).map_err(|e| format!("{e}{}", context()))?;
    let served = server.model_requests_served_at();
    let server_ms = (served[2].answering - served[2].received).as_secs_f64() * 1e3;
    Ok(AcpRun {
        wall_ms: measured.wall.as_secs_f64() * 1e3,
        rss_kib: measured.max_rss_kib,
        first_chunk_ms,
        server_ms,
    })
}

/// The same session through `fido exec --json`, one process per prompt.
fn exec_session(fido: &Path, home: &Path) -> Result<ExecRun, String> {
    let (workspace, server) = fixture()?;
    let first = exec_prompt(
        fido,
        home,
        &server,
        workspace.path(),
        PROMPT_1,
        ANSWER_1,
        false,
    )?;
    let second = exec_prompt(
        fido,
        home,
        &server,
        workspace.path(),
        PROMPT_2,
        ANSWER_2,
        true,
    )?;
    check_requests(&server)?;
    Ok(ExecRun {
        wall_ms: (first.wall + second.wall).as_secs_f64() * 1e3,
        first_wall_ms: first.wall.as_secs_f64() * 1e3,
        rss_kib: first.max_rss_kib.max(second.max_rss_kib),
    })
}

/// One `fido exec --json` of `prompt`, which must exit 0 and print `answer`.
fn exec_prompt(
    fido: &Path,
    home: &Path,
    server: &FakeServer,
    workspace: &Path,
    prompt: &str,
    answer: &str,
    resume: bool,
) -> Result<support::Measured, String> {
    // Output files live outside the workspace, so fido never sees them.
    let outputs = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let open = |name: &str| {
        File::create(outputs.path().join(name)).map_err(|e| format!("cannot create {name}: {e}"))
    };
    let mut cmd = fido_command(fido, home, server);
    cmd.args(["exec", "--json", "-C"]).arg(workspace);
    if resume {
        cmd.args(["--resume", "--last"]);
    }
    cmd.arg("--")
        .arg(prompt)
        .stdin(Stdio::null())
        .stdout(open("stdout")?)
        .stderr(open("stderr")?);
    let measured = support::run_measured(&mut cmd, RUN_TIMEOUT)?;
    let read = |name: &str| std::fs::read_to_string(outputs.path().join(name)).unwrap_or_default();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    if !measured.exited_zero() || !stdout.contains(answer) {
        return Err(format!(
            "fido exec (resume: {resume}) exited with wait status {:#x}, answer {answer:?} {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            measured.status,
            if stdout.contains(answer) {
                "printed"
            } else {
                "missing"
            },
        ));
    }
    Ok(measured)
}

/// A raw JSON-RPC client on the agent's stdio: one JSON object a line.
struct AcpClient {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    text: String,
}

impl AcpClient {
    fn take(child: &mut Child) -> Result<AcpClient, String> {
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        Ok(AcpClient {
            stdin,
            stdout: BufReader::new(stdout),
            text: String::new(),
        })
    }

    /// The whole session; closing stdin at the end asks the agent to exit.
    /// Prompt 2's time to its first chunk (ms) and every chunk's text.
    fn drive(mut self, workspace: &Path) -> Result<(f64, String), String> {
        self.request(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )?;
        let cwd = workspace
            .canonicalize()
            .map_err(|e| format!("canonicalize: {e}"))?;
        let created = self.request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))?;
        let session = created["sessionId"]
            .as_str()
            .ok_or_else(|| format!("session/new answered {created}"))?
            .to_owned();
        self.prompt(2, &session, PROMPT_1)?;
        let first_chunk = self.prompt(3, &session, PROMPT_2)?;
        let first_chunk = first_chunk.ok_or("prompt 2 streamed no agent_message_chunk")?;
        drop(self.stdin);
        Ok((first_chunk.as_secs_f64() * 1e3, self.text))
    }

    /// Sends `session/prompt`, reads to its `end_turn`; the time from
    /// writing it to reading its first `agent_message_chunk`, if any.
    fn prompt(&mut self, id: u64, session: &str, text: &str) -> Result<Option<Duration>, String> {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let sent = self.send(id, "session/prompt", params)?;
        let mut first_chunk = None;
        loop {
            let frame = self.frame()?;
            if frame.get("method").and_then(Value::as_str) == Some("session/update") {
                let update = &frame["params"]["update"];
                if update["sessionUpdate"] == "agent_message_chunk" {
                    first_chunk.get_or_insert_with(|| sent.elapsed());
                    self.text
                        .push_str(update["content"]["text"].as_str().unwrap_or(""));
                }
            } else if frame.get("method").is_some() {
                return Err(format!("the agent asked something: {frame}"));
            } else if frame["id"] == id {
                let stop = &frame["result"]["stopReason"];
                if stop != "end_turn" {
                    return Err(format!("prompt {id} ended with {frame}"));
                }
                return Ok(first_chunk);
            }
        }
    }

    /// Sends a request and waits for its result (no updates expected).
    fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value, String> {
        self.send(id, method, params)?;
        loop {
            let frame = self.frame()?;
            if frame["id"] == id && frame.get("method").is_none() {
                return frame
                    .get("result")
                    .cloned()
                    .ok_or_else(|| format!("{method} answered {frame}"));
            }
        }
    }

    /// Writes one request line; the instant its write began.
    fn send(&mut self, id: u64, method: &str, params: Value) -> Result<Instant, String> {
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        let sent = Instant::now();
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot write {method}: {e}"))?;
        Ok(sent)
    }

    /// The next frame, which must be JSON-RPC.
    fn frame(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| format!("cannot read stdout: {e}"))?;
        if read == 0 {
            return Err("the agent closed stdout".into());
        }
        let frame: Value =
            serde_json::from_str(&line).map_err(|e| format!("not JSON ({e}): {line:?}"))?;
        if frame["jsonrpc"] != "2.0" {
            return Err(format!("not JSON-RPC 2.0: {line:?}"));
        }
        Ok(frame)
    }
}
