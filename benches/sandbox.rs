//! The cost of the command sandbox per `bash_exec`: `true` run through the
//! real tool, unconfined (`danger-full-access`) and in `workspace-write`,
//! interleaved so that both see the same machine load.
//!
//! `cargo bench --bench sandbox` (`BENCH_RUNS`, default 300 each). Prints
//! min / p50 / p99 / max of each and the p50 difference; exits non-zero
//! when the sandbox adds more than the target at p50.

#[path = "support.rs"]
#[allow(dead_code)]
mod support;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use fido::protocol::{SandboxMode, ToolCall};
use fido::tools::{InvocationContext, ToolCatalog, ToolEnv};
use support::Sorted;
use tokio_util::sync::CancellationToken;

const DEFAULT_RUNS: usize = 300;
/// What the sandbox may add to one command at p50.
const TARGET_ADDED_P50: Duration = Duration::from_millis(2);

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("sandbox bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// One `bash_exec` invocation: milliseconds, and whether it succeeded.
async fn time(catalog: &ToolCatalog, call: &ToolCall, env: &ToolEnv) -> (f64, bool) {
    let start = Instant::now();
    let out = catalog
        .invoke(
            call,
            env,
            &InvocationContext::main(),
            &[],
            &CancellationToken::new(),
        )
        .await;
    (start.elapsed().as_secs_f64() * 1000.0, out.ok)
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let plain = support::tool_env(dir.path(), SandboxMode::DangerFullAccess)?;
    let sandboxed = support::tool_env(dir.path(), SandboxMode::WorkspaceWrite)?;
    let catalog = ToolCatalog::standard(fido::plan::PlanFlavour::UpdatePlan);
    let call = ToolCall {
        id: "bench".into(),
        name: "bash_exec".into(),
        arguments: r#"{"command": "true"}"#.into(),
    };
    let runtime = support::runtime()?;
    let (plain_ms, sandboxed_ms) = runtime.block_on(async {
        let mut plain_ms = Vec::with_capacity(runs);
        let mut sandboxed_ms = Vec::with_capacity(runs);
        // Warm-up, then interleaved.
        for _ in 0..10 {
            time(&catalog, &call, &plain).await;
            time(&catalog, &call, &sandboxed).await;
        }
        for _ in 0..runs {
            plain_ms.push(time(&catalog, &call, &plain).await);
            sandboxed_ms.push(time(&catalog, &call, &sandboxed).await);
        }
        (plain_ms, sandboxed_ms)
    });
    if plain_ms.iter().chain(&sandboxed_ms).any(|(_, ok)| !ok) {
        return Err("`true` failed in a run".into());
    }
    let plain = Sorted::new(plain_ms.into_iter().map(|(ms, _)| ms).collect());
    let sandboxed = Sorted::new(sandboxed_ms.into_iter().map(|(ms, _)| ms).collect());
    let row = |name: &str, s: &Sorted| {
        let p99 = if s.len() >= 100 {
            format!("{:.2}", s.quantile(0.99))
        } else {
            "n/a (n < 100)".into()
        };
        println!(
            "{name:<28} n={} min {:.2} ms  p50 {:.2} ms  p99 {p99} ms  max {:.2} ms",
            s.len(),
            s.min(),
            s.median(),
            s.max()
        );
    };
    row("bash_exec `true`, no sandbox", &plain);
    row("bash_exec `true`, sandboxed", &sandboxed);
    let added = sandboxed.median() - plain.median();
    let target = TARGET_ADDED_P50.as_secs_f64() * 1000.0;
    println!(
        "added by the sandbox at p50: {added:.2} ms (ratio {:.2}x; target <= {target:.1} ms)",
        sandboxed.median() / plain.median()
    );
    support::table_row(
        "sandbox",
        "`bash_exec` of `true` through the real tool: added by workspace-write at p50",
        &format!(
            "+{added:.2} ms ({:.2} → {:.2} ms p50; p99 {} → {}, n = {})",
            plain.median(),
            sandboxed.median(),
            p99_of(&plain),
            p99_of(&sandboxed),
            plain.len()
        ),
        &format!("≤ {target:.0} ms added"),
        &format!("{:.2} ms: the same command with no sandbox", plain.median()),
    );
    Ok(support::wall_clock_target(
        "added by the sandbox at p50",
        added,
        support::Bound::AtMost,
        target,
        "ms",
    ))
}

fn p99_of(s: &Sorted) -> String {
    if s.len() >= 100 {
        format!("{:.2}", s.quantile(0.99))
    } else {
        "n/a".into()
    }
}
