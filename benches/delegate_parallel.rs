//! `cargo bench --bench delegate_parallel`: what running subagents in
//! parallel costs, through the library (`Supervisor`, the code path of the
//! `delegate` tool) spawning the real `fido __subagent`.
//!
//! 1. wall time of 4 parallel subagents against 1, with a model that takes
//!    `BENCH_MODEL_MS` (default 1000) per request: each child makes one
//!    request; the ratio of the medians is the figure (target < 1.3).
//! 2. overhead per extra parallel subagent: with a zero-latency model,
//!    (p50 wall of 4 parallel subagents - p50 wall of 1) / 3.
//!
//! `BENCH_RUNS` (default 10) runs per case. Fewer than 100 runs: medians
//! only, no p99. Every result is checked (completed); a wrong one ends the
//! bench with exit status 1.

#[allow(dead_code)]
#[path = "../tests/common/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fido::plan::PlanFlavour;
use fido::protocol::delegate::DelegateArgs;
use fido::protocol::delegate::DelegateStatus;
use fido::provider::HttpPolicy;
use fido::provider::openai::OpenAiProvider;
use fido::subagent::supervisor::{DelegationSettings, Supervisor};
use fido::tools::ToolCatalog;
use fido::tools::delegate::{DelegationRequest, Delegator};
use server::{FakeServer, Reply};
use support::Sorted;
use tokio_util::sync::CancellationToken;

const TARGET_RATIO: f64 = 1.3;
const FINAL: &str = r#"{"summary": "s", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

type BenchResult<T> = Result<T, String>;

fn main() -> ExitCode {
    support::run_async("delegate_parallel", bench())
}

async fn bench() -> BenchResult<()> {
    let fido = support::subagent_program("delegate_parallel")?;
    let runs = support::env_count("BENCH_RUNS", 10)?;
    let model_ms = support::env_count("BENCH_MODEL_MS", 1000)? as u64;
    let model = Duration::from_millis(model_ms);

    let one = walls(&fido, 1, model, runs).await?;
    let four = walls(&fido, 4, model, runs).await?;
    let ratio = four.median() / one.median();
    println!(
        "model {model_ms} ms/request, {runs} runs: 1 subagent median {:.0} ms, 4 parallel median {:.0} ms (max {:.0}), ratio {ratio:.3} (target < {TARGET_RATIO})",
        one.median(),
        four.median(),
        four.max()
    );

    let fast_one = walls(&fido, 1, Duration::ZERO, runs).await?;
    let fast_four = walls(&fido, 4, Duration::ZERO, runs).await?;
    let per_extra = (fast_four.median() - fast_one.median()) / 3.0;
    println!(
        "zero-latency model, {runs} runs: 1 subagent median {:.1} ms, 4 parallel median {:.1} ms; overhead per extra parallel subagent (p50 of 4 - p50 of 1) / 3 = {per_extra:.1} ms",
        fast_one.median(),
        fast_four.median(),
    );
    support::table_row(
        "delegate_parallel",
        &format!(
            "4 parallel subagents against 1, model {model_ms} ms per request: ratio of the medians"
        ),
        &format!(
            "{ratio:.2}× ({:.0} / {:.0} ms, n = {runs})",
            four.median(),
            one.median()
        ),
        &format!("< {TARGET_RATIO}×"),
        "1.0×: the four wait on the model side by side",
    );
    support::table_row(
        "delegate_parallel",
        "the same, zero-latency model: added per extra parallel subagent",
        &format!(
            "{per_extra:.1} ms (1: {:.1} ms, 4: {:.1} ms)",
            fast_one.median(),
            fast_four.median()
        ),
        "—",
        "—",
    );
    if ratio >= TARGET_RATIO {
        println!("FAIL: 4 parallel / 1 = {ratio:.3}, target < {TARGET_RATIO}");
        return Err("a target was missed".into());
    }
    Ok(())
}

/// Wall times (ms) of `runs` rounds of `parallel` delegations started
/// together, each child's one model request taking `model`.
async fn walls(
    program: &Path,
    parallel: usize,
    model: Duration,
    runs: usize,
) -> BenchResult<Sorted> {
    let workspace = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    std::fs::write(workspace.path().join("main.rs"), "fn main() {}\n")
        .map_err(|e| format!("workspace: {e}"))?;
    let server = FakeServer::start(Vec::new());
    let supervisor = supervisor(program, workspace.path(), &server, parallel).await?;
    let messages = support::parent_messages(parallel);
    let mut walls = Vec::with_capacity(runs);
    for run in 0..runs {
        for _ in 0..parallel {
            server.push_reply(slow_reply(model));
        }
        // Each round is a parent turn of its own (delegate_max_per_turn).
        supervisor.begin_turn();
        let cancel = CancellationToken::new();
        let started = Instant::now();
        let results = futures_util::future::join_all((0..parallel).map(|i| {
            let call_id = format!("d{i}");
            let supervisor = &supervisor;
            let messages = &messages;
            let cancel = &cancel;
            async move {
                supervisor
                    .delegate(DelegationRequest {
                        call_id: &call_id,
                        args: DelegateArgs::for_task("look"),
                        parent_messages: messages,
                        cancel,
                        tools: None,
                    })
                    .await
            }
        }))
        .await;
        walls.push(started.elapsed().as_secs_f64() * 1000.0);
        for result in results {
            if result.status != DelegateStatus::Completed {
                return Err(format!("run {run}: {result:?}"));
            }
        }
    }
    supervisor.shutdown(Duration::from_secs(5)).await;
    Ok(Sorted::new(walls))
}

fn slow_reply(total: Duration) -> Reply {
    let events = sse::text_turn(FINAL);
    let gaps = (events.len() as u32 - 1).max(1);
    Reply::sse_with_delay(events, total / gaps)
}

async fn supervisor(
    program: &Path,
    workspace: &Path,
    server: &FakeServer,
    concurrency: usize,
) -> BenchResult<Supervisor> {
    let policy = HttpPolicy {
        max_retries: 0,
        ..HttpPolicy::default()
    };
    let provider = OpenAiProvider::new(server.base_url(), Some("k".into()), "m".into(), policy)
        .map_err(|e| format!("provider: {e}"))?;
    let (sink, mut events) = fido::protocol::event_queue::channel();
    // Nobody reads the events here; drain them so they do not pile up.
    tokio::spawn(async move { while events.recv().await.is_some() {} });
    let mut settings = DelegationSettings::defaults(workspace.to_path_buf(), program.to_path_buf());
    settings.limits.concurrency = concurrency as u32;
    Supervisor::start(
        settings,
        fido::provider::gateway::Gateway::new(Arc::new(provider), 4),
        ToolCatalog::standard(PlanFlavour::UpdatePlan),
        sink,
    )
    .await
    .map_err(|e| format!("supervisor: {e}"))
}
