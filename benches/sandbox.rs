//! The cost of the command sandbox per `bash_exec`: `true` run through the
//! real tool, unconfined (`danger-full-access`), in `workspace-write`
//! without protected paths, and in `workspace-write` as sessions run it
//! (a git repository, `fido.toml`, `.fido/` and `.fido-state/` bound
//! read-only in a mount namespace per command), interleaved so that all
//! see the same machine load.
//!
//! `cargo bench --bench sandbox` (`BENCH_RUNS`, default 300 each). Prints
//! min / p50 / p99 / max of each and the p50 differences; exits non-zero
//! when the sandbox adds more than its target at p50, or the protected
//! paths more than theirs.

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
/// What the protected paths may add to a sandboxed command at p50.
const TARGET_PROTECTED_P50: Duration = Duration::from_millis(1);

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

/// A workspace as sessions have it: a git repository with a commit,
/// `fido.toml`, `.fido/`.
fn workspace() -> Result<tempfile::TempDir, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = dir.path();
    std::fs::create_dir_all(root.join(".fido/agents")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("fido.toml"), "model = \"m\"\n").map_err(|e| e.to_string())?;
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .map_err(|e| format!("git init: {e}"))?;
    if !status.success() {
        return Err("git init failed".into());
    }
    Ok(dir)
}

/// The three series: no sandbox, the sandbox without protected paths,
/// the sandbox as sessions run it.
fn measure(runs: usize, root: &std::path::Path) -> Result<[Sorted; 3], String> {
    let plain = support::tool_env(root, SandboxMode::DangerFullAccess)?;
    let protected = support::tool_env(root, SandboxMode::WorkspaceWrite)?;
    let mut unprotected = support::tool_env(root, SandboxMode::WorkspaceWrite)?;
    let bare = fido::sandbox::CommandSandbox::prepare(&fido::sandbox::CommandPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network: fido::protocol::NetworkAccess::Off,
        workspace: unprotected.workspace.root.clone(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits: Default::default(),
    })
    .map_err(|e| e.to_string())?;
    unprotected.sandbox = fido::sandbox::SandboxSlot::new(bare.without_protection());
    let envs = [plain, unprotected, protected];
    let catalog = ToolCatalog::standard(fido::plan::PlanFlavour::UpdatePlan);
    let call = ToolCall {
        id: "bench".into(),
        name: "bash_exec".into(),
        arguments: r#"{"command": "true"}"#.into(),
    };
    let runtime = support::runtime()?;
    let series = runtime.block_on(async {
        let mut series: [Vec<(f64, bool)>; 3] = Default::default();
        // Warm-up, then interleaved.
        for _ in 0..10 {
            for env in &envs {
                time(&catalog, &call, env).await;
            }
        }
        for _ in 0..runs {
            for (env, out) in envs.iter().zip(series.iter_mut()) {
                out.push(time(&catalog, &call, env).await);
            }
        }
        series
    });
    if series.iter().flatten().any(|(_, ok)| !ok) {
        return Err("`true` failed in a run".into());
    }
    Ok(series.map(|runs| Sorted::new(runs.into_iter().map(|(ms, _)| ms).collect())))
}

fn row(name: &str, s: &Sorted) {
    println!(
        "{name:<34} n={} min {:.2} ms  p50 {:.2} ms  p99 {} ms  max {:.2} ms",
        s.len(),
        s.min(),
        s.median(),
        p99_of(s),
        s.max()
    );
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let dir = workspace()?;
    let [plain, unprotected, sandboxed] = measure(runs, dir.path())?;
    row("bash_exec `true`, no sandbox", &plain);
    row("bash_exec `true`, no protected paths", &unprotected);
    row("bash_exec `true`, sandboxed", &sandboxed);
    let added = sandboxed.median() - plain.median();
    let target = TARGET_ADDED_P50.as_secs_f64() * 1000.0;
    println!(
        "added by the sandbox at p50: {added:.2} ms (ratio {:.2}x; target <= {target:.1} ms)",
        sandboxed.median() / plain.median()
    );
    let protection = sandboxed.median() - unprotected.median();
    let protection_target = TARGET_PROTECTED_P50.as_secs_f64() * 1000.0;
    println!(
        "added by the protected paths at p50: {protection:.2} ms (target <= {protection_target:.1} ms)"
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
    support::table_row(
        "sandbox",
        "the same: added by the protected paths (mount namespace, read-only binds) at p50",
        &format!(
            "+{protection:.2} ms ({:.2} → {:.2} ms p50, n = {})",
            unprotected.median(),
            sandboxed.median(),
            plain.len()
        ),
        &format!("≤ {protection_target:.0} ms added"),
        &format!("{:.2} ms: the sandbox without them", unprotected.median()),
    );
    let sandbox_ok = support::wall_clock_target(
        "added by the sandbox at p50",
        added,
        support::Bound::AtMost,
        target,
        "ms",
    );
    let protection_ok = support::wall_clock_target(
        "added by the protected paths at p50",
        protection,
        support::Bound::AtMost,
        protection_target,
        "ms",
    );
    Ok(sandbox_ok && protection_ok)
}

fn p99_of(s: &Sorted) -> String {
    if s.len() >= 100 {
        format!("{:.2}", s.quantile(0.99))
    } else {
        "n/a".into()
    }
}
