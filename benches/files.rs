//! `cargo bench --bench files`: the file tools' own cost, end to end
//! through the real tools (`ToolCatalog::invoke`: argument parsing, the
//! path resolved beneath the workspace, the file opened and checked, the
//! work, the result text), each against its physical limit measured in
//! the same run, interleaved call by call:
//!
//! - `read_file` of a 300-line source file four folders deep, against a
//!   bare `std::fs::read` of it by path;
//! - `patch` with one edit in that file (the edit alternates, so every
//!   call writes; the undo entry is journalled), against a bare atomic
//!   write of the same bytes (temp file, fsync, rename, fsync of the
//!   folder);
//! - how soon `read_file` returns once cancelled mid-read of a 1 TiB
//!   sparse file whose line never ends (`tests/suite/hostile_files.rs`
//!   proves that it does, and stops reading).
//!
//! `BENCH_RUNS` (default 1000 reads), `BENCH_RUNS_PATCH` (default 300
//! patches) and `BENCH_RUNS_CANCEL` (default 30 cancels); p99 only where
//! n >= 100. Exit status: 0 when every call succeeded and every median
//! holds its target, else 1.

#[allow(dead_code)]
mod support;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use fido::protocol::{SandboxMode, ToolCall};
use fido::tools::{InvocationContext, ToolCatalog, ToolEnv};
use serde_json::json;
use support::Sorted;
use tokio_util::sync::CancellationToken;

const DEFAULT_READS: usize = 1000;
const DEFAULT_PATCHES: usize = 300;
const DEFAULT_CANCELS: usize = 30;
const FILE: &str = "src/tools/patch/sample.rs";
const LINES: usize = 300;
/// `read_file` of a 10 KB file at p50 (a model step takes hundreds of
/// milliseconds at the least).
const TARGET_READ_P50_MS: f64 = 1.0;
/// What `patch` may add at p50 to a bare atomic write of the same bytes:
/// the undo entry's own writes and fsyncs are most of it.
const TARGET_PATCH_ADDED_P50_MS: f64 = 10.0;
/// From a cancel to `read_file`'s return, mid-read, at p50 (the turn's
/// cancel promise is 200 ms for everything together).
const TARGET_CANCEL_P50_MS: f64 = 50.0;
/// How long each read runs before it is cancelled.
const CANCEL_AFTER_MS: u64 = 100;

fn main() -> ExitCode {
    support::run_async("files", async {
        if bench().await? {
            Ok(())
        } else {
            Err("a target was missed (FAIL above)".into())
        }
    })
}

fn sample() -> String {
    (0..LINES)
        .map(|i| format!("    let value_{i} = compute({i}, \"a line of ordinary code\");\n"))
        .collect()
}

async fn bench() -> Result<bool, String> {
    let reads = support::env_count("BENCH_RUNS", DEFAULT_READS)?;
    let patches = support::env_count("BENCH_RUNS_PATCH", DEFAULT_PATCHES)?;
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let file = dir.path().join(FILE);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("folders: {e}"))?;
    }
    std::fs::write(&file, sample()).map_err(|e| format!("sample file: {e}"))?;
    let env = support::tool_env(dir.path(), SandboxMode::WorkspaceWrite)?;
    let catalog = ToolCatalog::standard(fido::plan::PlanFlavour::UpdatePlan);
    let read_ok = read_bench(&catalog, &env, &file, reads).await?;
    let patch_ok = patch_bench(&catalog, &env, &file, patches).await?;
    let cancels = support::env_count("BENCH_RUNS_CANCEL", DEFAULT_CANCELS)?;
    let cancel_ok = cancel_bench(&catalog, &env, dir.path(), cancels).await?;
    Ok(read_ok && patch_ok && cancel_ok)
}

/// One call through the catalog, in ms; an error result fails the bench.
async fn timed_call(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    name: &str,
    arguments: String,
) -> Result<f64, String> {
    let call = ToolCall {
        id: format!("{name}-call"),
        name: name.into(),
        arguments,
    };
    let start = Instant::now();
    let output = catalog
        .invoke(
            &call,
            env,
            &InvocationContext::main(),
            &[],
            &CancellationToken::new(),
        )
        .await;
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    if !output.ok {
        return Err(format!("{name} failed: {}", output.content));
    }
    Ok(elapsed)
}

async fn read_bench(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    file: &Path,
    runs: usize,
) -> Result<bool, String> {
    let mut calls = Vec::with_capacity(runs);
    let mut bare = Vec::with_capacity(runs);
    let arguments = json!({ "path": FILE }).to_string();
    for run in 0..=runs {
        let elapsed = timed_call(catalog, env, "read_file", arguments.clone()).await?;
        let start = Instant::now();
        let bytes = std::fs::read(file).map_err(|e| format!("bare read: {e}"))?;
        std::hint::black_box(bytes);
        let limit = start.elapsed().as_secs_f64() * 1e3;
        if run > 0 {
            calls.push(elapsed);
            bare.push(limit);
        }
    }
    let (calls, bare) = (Sorted::new(calls), Sorted::new(bare));
    report(
        "read_file",
        &calls,
        &bare,
        "a bare read of the file by path",
    );
    support::table_row(
        "files",
        &format!("`read_file` of a {LINES}-line file four folders deep, end to end"),
        &support::spread(&calls, 3, "ms"),
        &format!("≤ {TARGET_READ_P50_MS} ms p50"),
        &format!(
            "{:.3} ms: a bare read of the file by path ({:.1}×)",
            bare.median(),
            calls.median() / bare.median()
        ),
    );
    Ok(support::wall_clock_target(
        "read_file p50",
        calls.median(),
        support::Bound::AtMost,
        TARGET_READ_P50_MS,
        "ms",
    ))
}

async fn patch_bench(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    file: &Path,
    runs: usize,
) -> Result<bool, String> {
    let limit_dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut calls = Vec::with_capacity(runs);
    let mut bare = Vec::with_capacity(runs);
    for run in 0..=runs {
        let (old, new) = if run % 2 == 0 {
            ("let value_150 =", "let value_150b =")
        } else {
            ("let value_150b =", "let value_150 =")
        };
        let arguments = json!({
            "path": FILE,
            "edits": [{"old_text": old, "new_text": new}],
        })
        .to_string();
        let elapsed = timed_call(catalog, env, "patch", arguments).await?;
        let written = std::fs::read(file).map_err(|e| format!("the file after call {run}: {e}"))?;
        let limit = support::limits::atomic_write(limit_dir.path(), &written, 1)?;
        if run > 0 {
            calls.push(elapsed);
            bare.push(limit.median());
        }
    }
    let (calls, bare) = (Sorted::new(calls), Sorted::new(bare));
    report("patch", &calls, &bare, "a bare atomic write");
    support::table_row(
        "files",
        &format!(
            "`patch`, one edit in a {LINES}-line file four folders deep, end to end with the undo entry and the atomic write"
        ),
        &support::spread(&calls, 2, "ms"),
        &format!("≤ {TARGET_PATCH_ADDED_P50_MS} ms p50 over the bare write"),
        &format!(
            "{:.2} ms: the same bytes written, fsynced and renamed ({:.1}×)",
            bare.median(),
            calls.median() / bare.median()
        ),
    );
    Ok(support::wall_clock_target(
        "patch adds at p50 to the bare write",
        calls.median() - bare.median(),
        support::Bound::AtMost,
        TARGET_PATCH_ADDED_P50_MS,
        "ms",
    ))
}

fn report(tool: &str, calls: &Sorted, bare: &Sorted, limit: &str) {
    let p99 = |s: &Sorted| {
        if s.len() >= 100 {
            format!("{:.3}", s.quantile(0.99))
        } else {
            "n/a".into()
        }
    };
    println!("{tool}, {} calls", calls.len());
    println!(
        "{:<36}{:>9}{:>9}{:>9}{:>9}",
        "", "min", "median", "p99", "max"
    );
    for (name, s) in [
        (format!("{tool} call (ms)"), calls),
        (format!("{limit} (ms)"), bare),
    ] {
        println!(
            "{name:<36}{:>9.3}{:>9.3}{:>9}{:>9.3}",
            s.min(),
            s.median(),
            p99(s),
            s.max()
        );
    }
}

/// A file whose first lines are short and whose last line never ends in
/// practice: 1 TiB, sparse.
fn endless_line(dir: &Path) -> Result<(), String> {
    let file =
        std::fs::File::create(dir.join("endless.txt")).map_err(|e| format!("endless: {e}"))?;
    std::io::Write::write_all(&mut &file, "short line\n".repeat(1000).as_bytes())
        .map_err(|e| format!("endless: {e}"))?;
    file.set_len(1 << 40).map_err(|e| format!("endless: {e}"))
}

/// One `read_file` past the short lines, cancelled after
/// [`CANCEL_AFTER_MS`]: ms from the cancel to its return.
async fn cancelled_read(catalog: &ToolCatalog, env: &ToolEnv) -> Result<f64, String> {
    let call = ToolCall {
        id: "read-cancelled".into(),
        name: "read_file".into(),
        arguments: json!({"path": "endless.txt", "offset": 1100}).to_string(),
    };
    let cancel = CancellationToken::new();
    let context = InvocationContext::main();
    let read = catalog.invoke(&call, env, &context, &[], &cancel);
    tokio::pin!(read);
    let cancelled_at = tokio::select! {
        output = &mut read => return Err(format!("read_file ended before the cancel: {}", output.content)),
        () = tokio::time::sleep(std::time::Duration::from_millis(CANCEL_AFTER_MS)) => {
            cancel.cancel();
            Instant::now()
        }
    };
    let output = read.await;
    let elapsed = cancelled_at.elapsed().as_secs_f64() * 1e3;
    if !output.content.contains("cancelled") {
        return Err(format!("read_file was not cancelled: {}", output.content));
    }
    Ok(elapsed)
}

async fn cancel_bench(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    dir: &Path,
    runs: usize,
) -> Result<bool, String> {
    endless_line(dir)?;
    let mut waits = Vec::with_capacity(runs);
    for _ in 0..runs {
        waits.push(cancelled_read(catalog, env).await?);
    }
    let waits = Sorted::new(waits);
    println!(
        "read_file cancelled mid-read: returns {:.2} ms after the cancel (median of {runs})",
        waits.median()
    );
    support::table_row(
        "files",
        "`read_file` of a never-ending line, cancelled mid-read: the cancel to its return",
        &support::spread(&waits, 2, "ms"),
        &format!("≤ {TARGET_CANCEL_P50_MS} ms p50"),
        "—",
    );
    Ok(support::wall_clock_target(
        "read_file returns after a cancel, p50",
        waits.median(),
        support::Bound::AtMost,
        TARGET_CANCEL_P50_MS,
        "ms",
    ))
}
