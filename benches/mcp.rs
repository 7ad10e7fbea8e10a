//! Session start with 3 MCP servers: what Fido adds beyond the servers'
//! own start-up.
//!
//! Each run, interleaved so both see the same load:
//! - **servers alone**: the 3 fixture servers (`tests/fixtures/mcp_fixture.py`)
//!   spawned at once and driven by a minimal hand-written JSON-RPC client
//!   (one thread each: `initialize`, `notifications/initialized`,
//!   `tools/list`) until all three have listed their tools — the servers'
//!   own start-up, with nothing of Fido in it;
//! - **Fido**: `McpHub::start` for the same 3 servers (process groups,
//!   scrubbed environment, the rmcp handshake, the stdout check, the tool
//!   list and the catalog entries), then the catalog built with them.
//!
//! `cargo bench --bench mcp` (`BENCH_RUNS`, default 30). Prints min / p50
//! / max of each and the p50 difference; exits non-zero when Fido adds
//! more than the target at p50.

#[path = "support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fido::mcp::McpHub;
use fido::mcp::McpServerConfig;
use fido::plan::PlanFlavour;
use fido::tools::ToolCatalog;
use support::Sorted;

const DEFAULT_RUNS: usize = 30;
const SERVERS: usize = 3;
/// Tools the fixture lists.
const FIXTURE_TOOLS: usize = 7;
/// What Fido may add to the servers' own start-up at p50 (issue 13).
const TARGET_ADDED_P50: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("mcp bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fixture.py")
}

/// The interpreter itself, not a version manager's shim (pyenv's runs a
/// shell script first, whose cost depends on the environment).
fn python() -> Result<String, String> {
    let output = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if path.is_empty() {
        return Err("python3 did not name its executable".into());
    }
    Ok(path)
}

fn configs(python: &str) -> Vec<McpServerConfig> {
    (0..SERVERS)
        .map(|i| McpServerConfig {
            name: format!("s{i}"),
            command: python.into(),
            args: vec![fixture().display().to_string()],
            env: Default::default(),
            env_policy: Default::default(),
            cwd: None,
            read_only: true,
            startup_timeout: Duration::from_secs(20),
            tool_timeout: Duration::from_secs(20),
            max_restarts: 0,
        })
        .collect()
}

/// One server driven by hand to its tool list; the child is returned, to
/// be reaped after the clock stops (Fido's shutdown is not timed either).
fn raw_server(python: &str) -> Result<std::process::Child, String> {
    // The environment Fido gives a server, so both start alike.
    let mut child = Command::new(python)
        .arg(fixture())
        .env_clear()
        .envs(
            ["PATH", "HOME", "LANG"]
                .iter()
                .filter_map(|key| Some((key, std::env::var(key).ok()?))),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut ask = |text: &str| -> Result<String, String> {
        writeln!(stdin, "{text}").map_err(|e| e.to_string())?;
        lines
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| "the server closed its stdout".to_string())
    };
    ask(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
    )?;
    let listed = ask(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
    )?;
    drop(stdin);
    if listed.contains("\"tools\"") {
        Ok(child)
    } else {
        Err(format!("unexpected answer: {listed}"))
    }
}

/// The 3 servers alone, at once: milliseconds until all have listed.
fn servers_alone(python: &str) -> Result<f64, String> {
    let start = Instant::now();
    let threads: Vec<_> = (0..SERVERS)
        .map(|_| {
            let python = python.to_string();
            std::thread::spawn(move || raw_server(&python))
        })
        .collect();
    let mut children = Vec::new();
    for thread in threads {
        children.push(thread.join().map_err(|_| "a client thread panicked")??);
    }
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    for mut child in children {
        let _ = child.wait();
    }
    Ok(elapsed)
}

/// Fido's start of the same servers: milliseconds (the shutdown after it
/// is not counted).
async fn fido_start(configs: &[McpServerConfig], workspace: &Path) -> Result<f64, String> {
    let start = Instant::now();
    let hub = McpHub::start(configs, workspace).await;
    let catalog = ToolCatalog::with_mcp(PlanFlavour::UpdatePlan, Vec::new(), hub.clone());
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    let tools = hub.tool_specs().len();
    drop(catalog);
    hub.shutdown().await;
    if let Some(warning) = hub.warnings().first() {
        return Err(warning.clone());
    }
    if tools != SERVERS * FIXTURE_TOOLS {
        return Err(format!(
            "{tools} MCP tools listed, expected {}",
            SERVERS * 6
        ));
    }
    Ok(elapsed)
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let python = python()?;
    let configs = configs(&python);
    let runtime = support::runtime()?;
    // Warm-up (page cache, python's bytecode), then interleaved.
    servers_alone(&python)?;
    runtime.block_on(fido_start(&configs, dir.path()))?;
    let mut alone = Vec::with_capacity(runs);
    let mut fido = Vec::with_capacity(runs);
    for _ in 0..runs {
        alone.push(servers_alone(&python)?);
        fido.push(runtime.block_on(fido_start(&configs, dir.path()))?);
    }
    let alone = Sorted::new(alone);
    let fido = Sorted::new(fido);
    let row = |name: &str, s: &Sorted| {
        println!(
            "{name:<34} n={} min {:.1} ms  p50 {:.1} ms  max {:.1} ms",
            s.len(),
            s.min(),
            s.median(),
            s.max()
        );
    };
    row("3 servers alone (raw client)", &alone);
    row("3 servers started by Fido", &fido);
    let added = fido.median() - alone.median();
    let target = TARGET_ADDED_P50.as_secs_f64() * 1000.0;
    println!("added by Fido at p50: {added:.1} ms (target <= {target:.0} ms)");
    support::table_row(
        "mcp",
        "session start with 3 MCP servers: added by Fido over a minimal raw JSON-RPC client",
        &format!(
            "{added:+.1} ms ({:.1} vs {:.1} ms p50, n = {})",
            fido.median(),
            alone.median(),
            fido.len()
        ),
        &format!("≤ {target:.0} ms added"),
        &format!(
            "{:.1} ms: the 3 servers started and listed by the raw client",
            alone.median()
        ),
    );
    Ok(support::wall_clock_target(
        "added by Fido at p50",
        added,
        support::Bound::AtMost,
        target,
        "ms",
    ))
}
