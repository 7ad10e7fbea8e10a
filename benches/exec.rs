//! `cargo bench --bench exec`: wall time and peak RSS of a short headless
//! session, the numbers the README promises (≤ 30 ms, ≤ 17 MiB).
//!
//! Each run starts `fido exec -C <fresh workspace> <prompt>` against a
//! zero-latency fake OpenAI server with a fresh two-reply script: turn 1
//! asks for `read_file` of a small file, turn 2 answers. Wall time is
//! measured from spawn to reaping; peak RSS is the child's `ru_maxrss` from
//! `wait4`. One warm-up run is not counted. Every run must exit 0, print the
//! scripted answer, and send the file's text back in its second request.
//!
//! The binary is the one cargo built for this bench (`target/release/fido`
//! under `cargo bench`), or `FIDO_BIN`; when it is missing the bench runs
//! `cargo build --release --bin fido` first. `BENCH_RUNS` sets the number of
//! runs (default 30). Exit status: 0 when every run worked and both targets
//! hold, 1 otherwise.

#[allow(dead_code)]
#[path = "../tests/common/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use server::{FakeServer, Reply};

const TARGET_WALL_MS: f64 = 30.0;
const TARGET_RSS_MIB: f64 = 17.0;
const DEFAULT_RUNS: usize = 30;
/// A run taking longer than this is killed and counted as a failure.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

const FILE_NAME: &str = "notes.txt";
const FILE_TEXT: &str = "The bench file: seven small words here.\n";
const PROMPT: &str = "What does notes.txt say?";
const ANSWER: &str = "notes.txt says: The bench file: seven small words here.";

/// What one run cost.
struct Sample {
    wall: Duration,
    max_rss_kib: u64,
}

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("exec bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the bench; `Ok(false)` when a target was missed.
fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let fido = support::fido_binary("exec")?;
    if fido.components().any(|c| c.as_os_str() == "debug") {
        eprintln!(
            "exec bench: warning: {} looks like a debug build; numbers will not mean much",
            fido.display()
        );
    }
    let home = tempfile::tempdir().map_err(|e| format!("cannot create a temp home: {e}"))?;

    run_once(&fido, home.path()).map_err(|e| format!("warm-up run: {e}"))?;
    let mut samples = Vec::with_capacity(runs);
    for run in 1..=runs {
        samples.push(run_once(&fido, home.path()).map_err(|e| format!("run {run}: {e}"))?);
    }

    let wall_ms: Vec<f64> = samples.iter().map(|s| s.wall.as_secs_f64() * 1e3).collect();
    let rss_mib: Vec<f64> = samples
        .iter()
        .map(|s| s.max_rss_kib as f64 / 1024.0)
        .collect();
    let wall = Stats::of(wall_ms);
    let rss = Stats::of(rss_mib);

    println!(
        "fido exec: {runs} runs of a 2-turn session (read_file, then an answer), {}",
        fido.display()
    );
    println!("{:<16}{:>9}{:>9}{:>9}", "", "min", "median", "max");
    println!("{:<16}{}", "wall (ms)", wall);
    println!("{:<16}{}", "peak RSS (MiB)", rss);
    print_limits(&wall, &rss, runs)?;
    let wall_ok = support::wall_clock_target(
        "median wall",
        wall.median,
        support::Bound::AtMost,
        TARGET_WALL_MS,
        "ms",
    );
    let rss_ok = support::steady_target(
        &format!("max peak RSS ≤ {TARGET_RSS_MIB} MiB"),
        rss.max <= TARGET_RSS_MIB,
        &format!("{:.1} MiB", rss.max),
    );
    Ok(wall_ok && rss_ok)
}

/// The floor of this work on this machine: starting a process and two
/// HTTP round trips over loopback (the model requests), beside the figures.
fn print_limits(wall: &Stats, rss: &Stats, runs: usize) -> Result<(), String> {
    let exec = support::limits::static_exec(runs.max(30))?;
    let server = FakeServer::start(Vec::new());
    let trip = support::limits::loopback_round_trip(server.addr(), runs.max(30))?;
    let floor = exec.median() + 2.0 * trip.median();
    println!(
        "limit: exec of a static binary {:.2} ms + 2 loopback HTTP round trips {:.2} ms = {floor:.2} ms ({:.1}x of it)",
        exec.median(),
        2.0 * trip.median(),
        wall.median / floor
    );
    support::table_row(
        "exec",
        "`fido exec`, 2-turn session (read_file, then an answer), zero-latency local server: wall",
        &format!(
            "{:.1} ms ({:.1}–{:.1}, n = {runs})",
            wall.median, wall.min, wall.max
        ),
        &format!("≤ {TARGET_WALL_MS} ms median"),
        &format!(
            "{floor:.2} ms: exec of a static binary ({:.2}) + 2 loopback HTTP round trips ({:.2} each); {:.1}×",
            exec.median(),
            trip.median(),
            wall.median / floor
        ),
    );
    support::table_row(
        "exec",
        "the same: peak RSS",
        &format!("{:.1} MiB ({:.1}–{:.1})", rss.median, rss.min, rss.max),
        &format!("≤ {TARGET_RSS_MIB} MiB max"),
        "—",
    );
    Ok(())
}

/// One measured session in a fresh workspace against a fresh server.
fn run_once(fido: &Path, home: &Path) -> Result<Sample, String> {
    let workspace = tempfile::tempdir().map_err(|e| format!("cannot create a workspace: {e}"))?;
    std::fs::write(workspace.path().join(FILE_NAME), FILE_TEXT)
        .map_err(|e| format!("cannot write the workspace file: {e}"))?;
    // Output files live outside the workspace, so fido never sees them.
    let outputs = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
    let stdout_path = outputs.path().join("stdout");
    let stderr_path = outputs.path().join("stderr");
    let open = |path: &Path| {
        File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
    };

    let arguments = format!(r#"{{"path":"{FILE_NAME}"}}"#);
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("call_1", "read_file", &arguments)])),
        Reply::sse(sse::text_turn(ANSWER)),
    ]);

    let mut cmd = Command::new(fido);
    support::remove_fido_env(&mut cmd);
    cmd.arg("exec")
        .arg("-C")
        .arg(workspace.path())
        .arg("--")
        .arg(PROMPT)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key")
        .stdin(Stdio::null())
        .stdout(open(&stdout_path)?)
        .stderr(open(&stderr_path)?);

    let measured = support::run_measured(&mut cmd, RUN_TIMEOUT)?;
    let status = measured.status;

    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let context = || format!("\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    if !measured.exited_zero() {
        return Err(format!(
            "fido did not exit 0 (wait status {status:#x}){}",
            context()
        ));
    }
    if !stdout.contains(ANSWER) {
        return Err(format!("stdout lacks the answer {ANSWER:?}{}", context()));
    }
    let requests = server.model_requests();
    if requests.len() != 2 {
        return Err(format!(
            "expected 2 model requests, got {}{}",
            requests.len(),
            context()
        ));
    }
    let tool_result_has_file = requests[1].messages().iter().any(|m| {
        m.get("role").and_then(|r| r.as_str()) == Some("tool")
            && m.get("content")
                .and_then(|c| c.as_str())
                .is_some_and(|c| c.contains(FILE_TEXT.trim_end()))
    });
    if !tool_result_has_file {
        return Err(format!(
            "the second request carries no tool result with the file's text{}",
            context()
        ));
    }
    Ok(Sample {
        wall: measured.wall,
        max_rss_kib: measured.max_rss_kib,
    })
}

/// Order statistics of a sample (no percentile: n is below 100).
struct Stats {
    min: f64,
    median: f64,
    max: f64,
}

impl Stats {
    fn of(values: Vec<f64>) -> Stats {
        let sorted = support::Sorted::new(values);
        Stats {
            min: sorted.min(),
            median: sorted.median(),
            max: sorted.max(),
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>9.1}{:>9.1}{:>9.1}", self.min, self.median, self.max)
    }
}
