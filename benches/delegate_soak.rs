//! `cargo bench --bench delegate_soak`: many cycles of 4 parallel subagents
//! through one `Supervisor` (the code path of the `delegate` tool) spawning
//! the real `fido __subagent`, and whether the parent stays flat.
//!
//! 1. spawn → cancel, `BENCH_SOAK_CYCLES` (default 1000) cycles: each starts
//!    4 delegations together against a model server that never answers, and
//!    cancels them by agent id at different moments: at the first
//!    lifecycle event (while it spawns and shakes hands), once its pid is
//!    known (the handshake), when its model request reaches the parent
//!    (`reasoning`), and while that request stalls at the server. The
//!    moments rotate over the call slots from cycle to cycle. Each result
//!    must be `cancelled`.
//! 2. spawn → complete, `BENCH_SOAK_COMPLETE_CYCLES` (default 1000, 0 to
//!    skip): 4 delegations that each get a final answer. The child's peak
//!    RSS over its whole run is its `VmHWM`, polled until its `/proc` entry
//!    goes (the last read is at most one poll before the exit).
//!
//! After each section: orphans (a process whose cmdline holds `__subagent`
//! and whose parent is this process or pid 1, or a zombie child of ours)
//! must be 0, and this process's open fds (`/proc/self/fd`) and `VmRSS`
//! are printed at the start, after cycle [`WARM_CYCLES`] and at the end.
//! The bench fails (exit 1) when the fds grew at all after the warm-up, or
//! `VmRSS` by more than [`RSS_MARGIN_KIB`].
//!
//! The model server is a minimal one in this file, not the tests'
//! `FakeServer`: that one records every request's body, which over
//! thousands of requests would be this process's RSS growth, not Fido's.
//!
//! The subagents run what `fido` would run beside `FIDO_BIN`, or beside
//! the one cargo built for this bench (`target/release/fido` under `cargo
//! bench`): `fido-subagent`, else `fido` itself. `BENCH_SOAK_TRACE=1`
//! prints every lifecycle event of the cancel cycles with its time in the
//! cycle.

#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fido::plan::PlanFlavour;
use fido::protocol::delegate::{DelegateArgs, DelegateResult, DelegateStatus};
use fido::protocol::{EventKind, Message};
use fido::provider::HttpPolicy;
use fido::provider::openai::OpenAiProvider;
use fido::subagent::supervisor::{DelegationSettings, Supervisor};
use fido::tools::ToolCatalog;
use fido::tools::delegate::{DelegationRequest, Delegator};
use support::Sorted;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const PARALLEL: usize = 4;
/// Cycles before the warm figures are taken.
const WARM_CYCLES: usize = 10;
/// How much `VmRSS` may grow from the warm figure to the end.
const RSS_MARGIN_KIB: u64 = 4 * 1024;
/// One cycle's limit; past it the bench fails.
const CYCLE_LIMIT: Duration = Duration::from_secs(60);
const FINAL: &str = r#"{"summary": "s", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

type BenchResult<T> = Result<T, String>;

fn main() -> ExitCode {
    support::run_async("delegate_soak", bench())
}

async fn bench() -> BenchResult<()> {
    let fido = support::subagent_program("delegate_soak")?;
    let cancel_cycles = support::env_count("BENCH_SOAK_CYCLES", 1000)?;
    let complete_cycles = env_count_or_zero("BENCH_SOAK_COMPLETE_CYCLES", 1000)?;
    let mut failures = Vec::new();

    let mut rig = Rig::start(&fido).await?;
    rig.server.answer.store(false, Ordering::SeqCst);
    let section = rig
        .soak("spawn -> cancel", cancel_cycles, Rig::cancel_cycle)
        .await?;
    failures.extend(section.failures());
    rig.shutdown().await;

    if complete_cycles > 0 {
        let mut rig = Rig::start(&fido).await?;
        rig.server.answer.store(true, Ordering::SeqCst);
        let section = rig
            .soak("spawn -> complete", complete_cycles, Rig::complete_cycle)
            .await?;
        failures.extend(section.failures());
        let peaks = Sorted::new(std::mem::take(&mut rig.peaks_kib));
        println!(
            "child peak RSS over the whole run (VmHWM, last read before exit), n = {}: median {:.1} MiB, max {:.1} MiB",
            peaks.len(),
            peaks.median() / 1024.0,
            peaks.max() / 1024.0
        );
        support::table_row(
            "delegate_soak",
            "child peak RSS over a whole run (VmHWM, last read before exit)",
            &format!(
                "{:.1} MiB (max {:.1}, n = {})",
                peaks.median() / 1024.0,
                peaks.max() / 1024.0,
                peaks.len()
            ),
            "—",
            "—",
        );
        rig.shutdown().await;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        for failure in &failures {
            println!("FAIL: {failure}");
        }
        Err(format!("{} check(s) failed", failures.len()))
    }
}

/// `name` as a count that may be 0, else `default`.
fn env_count_or_zero(name: &str, default: usize) -> BenchResult<usize> {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .map_err(|_| format!("{name} must be a number, not {text:?}")),
        Err(_) => Ok(default),
    }
}

/// This process's open fds and `VmRSS` (KiB) at one moment.
#[derive(Debug, Clone, Copy)]
struct Footprint {
    fds: usize,
    rss_kib: u64,
}

impl Footprint {
    fn now() -> Footprint {
        Footprint {
            fds: std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count()),
            rss_kib: status_kib("self", "VmRSS"),
        }
    }
}

/// One section's figures.
struct Section {
    name: &'static str,
    cycles: usize,
    warm: Footprint,
    end: Footprint,
    orphans: Vec<(u32, u32, char)>,
    unexpected: Vec<String>,
}

impl Section {
    fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let name = self.name;
        if !self.orphans.is_empty() {
            failures.push(format!("{name}: orphans {:?}", self.orphans));
        }
        if self.cycles > WARM_CYCLES && self.end.fds > self.warm.fds {
            failures.push(format!(
                "{name}: open fds grew after the warm-up, {} -> {}",
                self.warm.fds, self.end.fds
            ));
        }
        let grown = self.end.rss_kib.saturating_sub(self.warm.rss_kib);
        if self.cycles > WARM_CYCLES && grown > RSS_MARGIN_KIB {
            failures.push(format!(
                "{name}: VmRSS grew by {grown} KiB after the warm-up (margin {RSS_MARGIN_KIB} KiB)"
            ));
        }
        if let Some(first) = self.unexpected.first() {
            failures.push(format!(
                "{name}: {} unexpected result(s), the first: {first}",
                self.unexpected.len()
            ));
        }
        failures
    }
}

/// The minimal model server: counts requests and either never answers
/// (the connection stays open until the client drops it) or answers with
/// one final text turn and closes.
struct ModelServer {
    addr: std::net::SocketAddr,
    answer: AtomicBool,
    requests: AtomicUsize,
    /// Requests whose connection is open and unanswered.
    stalled: AtomicUsize,
}

impl ModelServer {
    async fn start() -> BenchResult<Arc<ModelServer>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("model server: bind: {e}"))?;
        let server = Arc::new(ModelServer {
            addr: listener
                .local_addr()
                .map_err(|e| format!("model server: {e}"))?,
            answer: AtomicBool::new(false),
            requests: AtomicUsize::new(0),
            stalled: AtomicUsize::new(0),
        });
        let serving = server.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serving.clone().connection(stream));
            }
        });
        Ok(server)
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    async fn connection(self: Arc<Self>, mut stream: tokio::net::TcpStream) {
        let Some(chat) = read_request(&mut stream).await else {
            return;
        };
        if !chat {
            // The provider's context-window discovery (`/props`,
            // `/v1/models`, Ollama's `/api/show`): a server without them
            // answers 404 at once.
            let head = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.shutdown().await;
            return;
        }
        self.requests.fetch_add(1, Ordering::SeqCst);
        if self.answer.load(Ordering::SeqCst) {
            let body: String = sse::text_turn(FINAL).concat();
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.shutdown().await;
            return;
        }
        self.stalled.fetch_add(1, Ordering::SeqCst);
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        self.stalled.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads one request (headers and a `content-length` body): whether it is
/// a chat completion; `None` when the client closed first.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<bool> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while data.len() < end + length {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&chunk[..n]);
    }
    let request_line = head.lines().next().unwrap_or_default();
    Some(request_line.starts_with("post ") && request_line.contains("/chat/completions"))
}

/// A supervisor, its model server, its workspace and its events.
struct Rig {
    workspace: tempfile::TempDir,
    server: Arc<ModelServer>,
    supervisor: Arc<Supervisor>,
    events: fido::agent::EventReceiver,
    messages: Vec<Message>,
    /// Children's peak RSS (KiB), complete cycles.
    peaks_kib: Vec<f64>,
}

/// One cycle's body: `Ok` with the unexpected results' descriptions.
type Cycle = for<'a> fn(
    &'a mut Rig,
    usize,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = BenchResult<Vec<String>>> + 'a>,
>;

impl Rig {
    async fn start(program: &Path) -> BenchResult<Rig> {
        let workspace = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        std::fs::write(workspace.path().join("main.rs"), "fn main() {}\n")
            .map_err(|e| format!("workspace: {e}"))?;
        let server = ModelServer::start().await?;
        let policy = HttpPolicy {
            max_retries: 0,
            ..HttpPolicy::default()
        };
        let provider = OpenAiProvider::new(server.base_url(), Some("k".into()), "m".into(), policy)
            .map_err(|e| format!("provider: {e}"))?;
        let (sink, events) = fido::protocol::event_queue::channel();
        let mut settings =
            DelegationSettings::defaults(workspace.path().to_path_buf(), program.to_path_buf());
        settings.limits.concurrency = PARALLEL as u32;
        let supervisor = Supervisor::start(
            settings,
            fido::provider::gateway::Gateway::new(Arc::new(provider), PARALLEL),
            ToolCatalog::standard(PlanFlavour::UpdatePlan),
            sink,
        )
        .await
        .map_err(|e| format!("supervisor: {e}"))?;
        Ok(Rig {
            workspace,
            server,
            supervisor: Arc::new(supervisor),
            events,
            messages: support::parent_messages(PARALLEL),
            peaks_kib: Vec::new(),
        })
    }

    async fn shutdown(self) {
        self.supervisor.shutdown(Duration::from_secs(5)).await;
        drop(self.workspace);
    }

    /// `cycles` runs of `cycle`, with the footprint and orphan checks.
    async fn soak(
        &mut self,
        name: &'static str,
        cycles: usize,
        cycle: Cycle,
    ) -> BenchResult<Section> {
        let start = Footprint::now();
        let mut warm = start;
        let mut unexpected = Vec::new();
        let mut walls = Vec::with_capacity(cycles);
        let began = Instant::now();
        for index in 0..cycles {
            let started = Instant::now();
            let odd = tokio::time::timeout(CYCLE_LIMIT, cycle(self, index))
                .await
                .map_err(|_| format!("{name}: cycle {index} took over {CYCLE_LIMIT:?}"))?
                .map_err(|e| format!("{name}: cycle {index}: {e}"))?;
            walls.push(started.elapsed().as_secs_f64() * 1e3);
            unexpected.extend(odd.into_iter().map(|o| format!("cycle {index}: {o}")));
            if !self.supervisor.running_agents().is_empty() {
                return Err(format!("{name}: cycle {index} left running subagents"));
            }
            if index + 1 == WARM_CYCLES {
                warm = Footprint::now();
            }
        }
        let elapsed = began.elapsed();
        // Let the dropped connections and the reaped children settle.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let end = Footprint::now();
        let orphans = orphans();
        let slowest = walls
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(index, _)| index);
        let walls = Sorted::new(walls);
        // A p99 only where n >= 100.
        let p99 = if walls.len() >= 100 {
            format!(", p99 {:.1} ms", walls.quantile(0.99))
        } else {
            String::new()
        };
        println!(
            "{name}: {cycles} cycles of {PARALLEL} subagents in {:.1} s (cycle median {:.1} ms{p99}, max {:.1} ms at cycle {slowest}); model requests {}; orphans {}",
            elapsed.as_secs_f64(),
            walls.median(),
            walls.max(),
            self.server.requests.load(Ordering::SeqCst),
            orphans.len()
        );
        println!(
            "{name}: open fds start {} / after cycle {WARM_CYCLES} {} / end {}; VmRSS start {} KiB / after cycle {WARM_CYCLES} {} KiB / end {} KiB ({:+} KiB after the warm-up, margin {RSS_MARGIN_KIB} KiB)",
            start.fds,
            warm.fds,
            end.fds,
            start.rss_kib,
            warm.rss_kib,
            end.rss_kib,
            end.rss_kib as i64 - warm.rss_kib as i64
        );
        support::table_row(
            "delegate_soak",
            &format!(
                "{cycles} cycles of {name}, {PARALLEL} parallel subagents each, one supervisor"
            ),
            &format!(
                "{} orphans; fds {} → {} → {}; VmRSS {:.1} → {:.1} → {:.1} MiB ({:+} KiB after the warm-up); cycle {}",
                orphans.len(),
                start.fds,
                warm.fds,
                end.fds,
                start.rss_kib as f64 / 1024.0,
                warm.rss_kib as f64 / 1024.0,
                end.rss_kib as f64 / 1024.0,
                end.rss_kib as i64 - warm.rss_kib as i64,
                support::spread(&walls, 1, "ms")
            ),
            &format!("0 orphans, fds flat, RSS ≤ +{RSS_MARGIN_KIB} KiB after the warm-up"),
            "—",
        );
        Ok(Section {
            name,
            cycles,
            warm,
            end,
            orphans,
            unexpected,
        })
    }

    /// Starts the 4 delegations of one cycle (one parent turn).
    fn spawn_delegations(&self) -> Vec<tokio::task::JoinHandle<DelegateResult>> {
        self.supervisor.begin_turn();
        (0..PARALLEL)
            .map(|slot| {
                let supervisor = self.supervisor.clone();
                let messages = self.messages.clone();
                tokio::spawn(async move {
                    let cancel = CancellationToken::new();
                    supervisor
                        .delegate(DelegationRequest {
                            call_id: &format!("d{slot}"),
                            args: DelegateArgs::for_task("look"),
                            parent_messages: &messages,
                            cancel: &cancel,
                            tools: None,
                        })
                        .await
                })
            })
            .collect()
    }

    fn cancel_cycle(
        &mut self,
        index: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = BenchResult<Vec<String>>> + '_>> {
        Box::pin(async move {
            let tasks = self.spawn_delegations();
            self.cancel_at_moments(index).await?;
            let mut odd = Vec::new();
            for result in join(tasks).await? {
                if result.error.as_ref().map(|e| e.code.as_str()) != Some("cancelled") {
                    odd.push(format!("{:?} {:?}", result.status, result.error));
                }
            }
            Ok(odd)
        })
    }

    /// Follows the cycle's events and cancels each agent at its moment:
    /// the n-th agent to show up gets moment `(n + index) % 4`.
    async fn cancel_at_moments(&mut self, index: usize) -> BenchResult<()> {
        let mut moments: HashMap<String, usize> = HashMap::new();
        let mut finished = 0;
        let began = Instant::now();
        while finished < PARALLEL {
            let (agent_id, pid, phase) = self.next_subagent_event().await?;
            if std::env::var_os("BENCH_SOAK_TRACE").is_some() {
                eprintln!(
                    "cycle {index} +{:.1} ms {agent_id} moment {:?} {phase} {pid:?}",
                    began.elapsed().as_secs_f64() * 1e3,
                    moments.get(&agent_id)
                );
            }
            if is_final(&phase) {
                finished += 1;
                continue;
            }
            let seen = moments.len();
            let moment = *moments
                .entry(agent_id.clone())
                .or_insert((seen + index) % PARALLEL);
            let now = match moment {
                0 => true,
                1 => pid.is_some(),
                2 => phase == "reasoning",
                _ if phase == "reasoning" => {
                    self.wait_for_stall().await;
                    true
                }
                _ => false,
            };
            if now {
                self.supervisor.cancel_running_agents(Some(&agent_id));
            }
        }
        Ok(())
    }

    /// Until the server holds at least one unanswered request (the one just
    /// sent), for at most a second.
    async fn wait_for_stall(&self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.server.stalled.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    fn complete_cycle(
        &mut self,
        _index: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = BenchResult<Vec<String>>> + '_>> {
        Box::pin(async move {
            let tasks = self.spawn_delegations();
            let mut pollers = Vec::new();
            let mut polled = std::collections::HashSet::new();
            let mut finished = 0;
            while finished < PARALLEL {
                let (_, pid, phase) = self.next_subagent_event().await?;
                if is_final(&phase) {
                    finished += 1;
                } else if let Some(pid) = pid.filter(|pid| polled.insert(*pid)) {
                    pollers.push(tokio::spawn(peak_until_exit(pid)));
                }
            }
            let mut odd = Vec::new();
            for result in join(tasks).await? {
                if result.status != DelegateStatus::Completed {
                    odd.push(format!("{:?} {:?}", result.status, result.error));
                }
            }
            for poller in pollers {
                let peak = poller.await.map_err(|e| format!("poller: {e}"))?;
                if peak > 0 {
                    self.peaks_kib.push(peak as f64);
                }
            }
            Ok(odd)
        })
    }

    /// The next `subagent` event: agent id, pid, phase.
    async fn next_subagent_event(&mut self) -> BenchResult<(String, Option<u32>, String)> {
        loop {
            let event = self.events.recv().await.ok_or("the event channel closed")?;
            if let EventKind::Subagent {
                agent_id,
                pid,
                phase,
                ..
            } = event.kind
            {
                return Ok((agent_id, pid, phase.as_str().to_owned()));
            }
        }
    }
}

fn is_final(phase: &str) -> bool {
    ["completed", "partial", "failed", "cancelled"].contains(&phase)
}

async fn join(
    tasks: Vec<tokio::task::JoinHandle<DelegateResult>>,
) -> BenchResult<Vec<DelegateResult>> {
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await.map_err(|e| format!("delegation task: {e}"))?);
    }
    Ok(results)
}

/// The child's `VmHWM` (KiB), read every 2 ms until its `/proc` entry has
/// no status any more: the peak of its whole run, up to one poll.
async fn peak_until_exit(pid: u32) -> u64 {
    let mut peak = 0;
    loop {
        let hwm = status_kib(&pid.to_string(), "VmHWM");
        if hwm == 0 {
            return peak;
        }
        peak = peak.max(hwm);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A `kB` field of `/proc/<pid>/status`, 0 when unreadable (or a zombie's).
fn status_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let value = line.strip_prefix(field)?.strip_prefix(':')?;
                value.trim().trim_end_matches("kB").trim().parse().ok()
            })
        })
        .unwrap_or(0)
}

/// Processes whose cmdline names `__subagent` and whose parent is this
/// process or pid 1, and zombie children of ours.
fn orphans() -> Vec<(u32, u32, char)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = stat.get(stat.rfind(')')? + 1..)?;
            let mut fields = after.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let ppid: u32 = fields.next()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let named = String::from_utf8_lossy(&cmdline).contains("__subagent");
            let zombie_of_ours = state == 'Z' && ppid == me;
            (named && (ppid == me || ppid == 1) || zombie_of_ours).then_some((pid, ppid, state))
        })
        .collect()
}
