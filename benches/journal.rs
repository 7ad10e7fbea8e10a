//! The session journal's cost: the time a step waits for its records to be
//! written (the fsync follows on the writer thread, so a step waits for it
//! only when the previous one is still running), and the time to resume a
//! 10 MB session (read, replay, lock).
//!
//! `cargo bench --bench journal` (`BENCH_RUNS`, default 300 steps and 20
//! resumes). Prints min / p50 / p99 / max of the step wait (p99 only with
//! n ≥ 100) and min / median / max of the resume; exits non-zero when a p50
//! misses its target.

#[path = "support.rs"]
#[allow(dead_code)]
mod support;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use fido::protocol::{Message, ToolCall};
use fido::store::journal::{self, Pick, SessionInfo};
use support::Sorted;

const DEFAULT_STEPS: usize = 300;
const RESUMES: usize = 20;
/// What one step may wait for the journal at p50 (a model step takes
/// hundreds of milliseconds at the least).
const TARGET_STEP_P50: Duration = Duration::from_millis(10);
/// Resuming a 10 MB session at the median.
const TARGET_RESUME_MEDIAN: Duration = Duration::from_millis(250);
const SESSION_BYTES: usize = 10 * 1024 * 1024;

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("journal bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> Result<bool, String> {
    let steps = support::env_count("BENCH_RUNS", DEFAULT_STEPS)?;
    let runtime = support::runtime()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let step_ok = runtime.block_on(step_wait(dir.path(), steps))?;
    let resume_ok = resume_time(dir.path())?;
    Ok(step_ok && resume_ok)
}

fn info() -> SessionInfo {
    SessionInfo {
        workspace: "/bench".into(),
        provider: "openai".into(),
        model: "bench-model".into(),
    }
}

/// One typical step: an assistant message with a call, and a 4 KB result.
fn step(n: usize) -> [Message; 2] {
    let id = format!("call_{n}");
    [
        Message::Assistant {
            content: Some("Reading the next file.".into()),
            tool_calls: vec![ToolCall {
                id: id.clone(),
                name: "read_file".into(),
                arguments: format!(r#"{{"path":"src/file_{n}.rs"}}"#),
            }],
        },
        Message::Tool {
            tool_call_id: id,
            name: "read_file".into(),
            content: "fn body() { let x = 1; }\n".repeat(160),
            is_error: false,
        },
    ]
}

async fn step_wait(root: &std::path::Path, steps: usize) -> Result<bool, String> {
    let journal = journal::create(root, &info(), None).map_err(|e| e.to_string())?;
    let mut messages = vec![
        Message::System {
            content: "system".into(),
        },
        Message::user("go"),
    ];
    let mut waits = Vec::with_capacity(steps);
    for n in 0..steps {
        messages.extend(step(n));
        let start = Instant::now();
        journal.record(0, &messages).await;
        waits.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    journal.close().await;
    let s = Sorted::new(waits);
    let p99 = if s.len() >= 100 {
        format!("{:.2}", s.quantile(0.99))
    } else {
        "n/a (n < 100)".into()
    };
    let target = TARGET_STEP_P50.as_secs_f64() * 1000.0;
    println!(
        "journal step wait (written; the fsync follows on the writer thread), ~4 KB  n={} min {:.2} ms  p50 {:.2} ms  p99 {p99} ms  max {:.2} ms  (target p50 <= {target:.0} ms)",
        s.len(),
        s.min(),
        s.median(),
        s.max()
    );
    support::table_row(
        "journal",
        "a step waits for its ~4 KB of journal records (the fsync follows on the writer thread)",
        &format!("{} (p99 {p99} ms)", support::spread(&s, 2, "ms")),
        &format!("≤ {target:.0} ms p50"),
        "—",
    );
    Ok(support::wall_clock_target(
        "journal step wait p50",
        s.median(),
        support::Bound::AtMost,
        target,
        "ms",
    ))
}

/// Writes a 10 MB journal, then resumes it `RESUMES` times.
fn resume_time(root: &std::path::Path) -> Result<bool, String> {
    let dir = root.join("big");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let id = write_big_session(&dir)?;
    let found = journal::find(&dir, Pick::Id(&id)).map_err(|e| e.to_string())?;
    let bytes = std::fs::metadata(found).map_err(|e| e.to_string())?.len();
    let mut times = Vec::with_capacity(RESUMES);
    let mut messages = 0;
    for _ in 0..RESUMES {
        let start = Instant::now();
        let (journal, replayed) =
            journal::resume(&dir, Pick::Id(&id)).map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        messages = replayed.messages.len();
        drop(journal);
        // The writer thread releases the lock as it ends.
        let deadline = Instant::now() + Duration::from_secs(5);
        while journal::is_running(&journal::find(&dir, Pick::Id(&id)).map_err(|e| e.to_string())?) {
            if Instant::now() > deadline {
                return Err("the journal lock was not released".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let s = Sorted::new(times);
    let target = TARGET_RESUME_MEDIAN.as_secs_f64() * 1000.0;
    println!(
        "resume of a {:.1} MB session ({messages} messages)  n={} min {:.1} ms  median {:.1} ms  max {:.1} ms  (target median <= {target:.0} ms)",
        bytes as f64 / (1024.0 * 1024.0),
        s.len(),
        s.min(),
        s.median(),
        s.max()
    );
    support::table_row(
        "journal",
        &format!(
            "resume of a {:.1} MB session ({messages} messages)",
            bytes as f64 / (1024.0 * 1024.0)
        ),
        &support::spread(&s, 1, "ms"),
        &format!("≤ {target:.0} ms median"),
        "—",
    );
    Ok(support::wall_clock_target(
        "resume median",
        s.median(),
        support::Bound::AtMost,
        target,
        "ms",
    ))
}

fn write_big_session(dir: &std::path::Path) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let journal = journal::create(dir, &info(), None).map_err(|e| e.to_string())?;
        let mut messages = vec![Message::System {
            content: "system".into(),
        }];
        let mut n = 0;
        while std::fs::metadata(journal.path()).map_or(0, |m| m.len() as usize) < SESSION_BYTES {
            messages.push(Message::user(format!("prompt {n}")));
            for _ in 0..20 {
                messages.extend(step(n));
                n += 1;
            }
            journal.record(0, &messages).await;
        }
        let id = journal.id().to_string();
        journal.close().await;
        Ok(id)
    })
}
