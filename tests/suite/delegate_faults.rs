//! Delegation faults, driven through the library: the `Supervisor` spawns
//! either a fake subagent (`tests/fixtures/fake_subagent.py`, whose
//! behaviour is its file name: the tests exec it through a symlink named
//! after the behaviour) or the real `fido __subagent` against the fake model
//! server, and every test ends by checking that no process is left.
//!
//! "No process left": a watcher thread polls `/proc` during the run and
//! records every process whose working directory is the test's private
//! workspace (the subagent and whatever it started); after the result, each
//! recorded child of this test process must be reaped (no `/proc` entry,
//! not even a zombie) and no live process may still work in the workspace.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fido::plan::PlanFlavour;
use fido::protocol::delegate::DelegateArgs;
use fido::protocol::delegate::{DelegateResult, DelegateStatus};
use fido::protocol::ipc::catalog_fingerprint;
use fido::protocol::{Event, EventKind, Message, ToolCall};
use fido::provider::HttpPolicy;
use fido::provider::openai::OpenAiProvider;
use fido::sandbox::SandboxRequirement;
use fido::subagent::DelegationLimits;
use fido::subagent::supervisor::{DelegationSettings, Supervisor};
use fido::tools::ToolCatalog;
use fido::tools::delegate::{DelegationRequest, Delegator};
use tokio_util::sync::CancellationToken;

use crate::common::process::{ProcessFilter, processes};
use crate::common::sse;
use crate::common::{FakeServer, Reply};

const FAKE_SUBAGENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fake_subagent.py"
);

/// Longest any single test may take before it fails.
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// A grace longer than [`TEST_LIMIT`]: a test that ends at all proves
/// that nothing waited for it, with no wall-clock bound to tune.
const ENDLESS_GRACE: Duration = Duration::from_secs(600);

const FINAL_JSON: &str = r#"{"summary": "main prints hi", "findings": [{"file": "main.rs", "line": 1, "claim": "prints hi", "confidence": "high"}], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

/// Which program the supervisor spawns.
#[derive(Debug, Clone, Copy)]
enum Child {
    /// The fake subagent with this behaviour.
    Fake(&'static str),
    /// The real `fido __subagent`.
    Real,
}

/// Knobs of one rig.
#[derive(Debug, Clone)]
struct Setup {
    child: Child,
    script: Vec<Reply>,
    grace: Duration,
    default_timeout: Duration,
    max_steps: u32,
    concurrency: u32,
    max_processes: u32,
}

impl Setup {
    fn new(child: Child) -> Setup {
        Setup {
            child,
            script: Vec::new(),
            grace: Duration::from_secs(2),
            default_timeout: Duration::from_secs(30),
            max_steps: 10,
            concurrency: 4,
            max_processes: fido::sandbox::limits::DEFAULT_MAX_PROCESSES,
        }
    }

    fn max_processes(mut self, max_processes: u32) -> Setup {
        self.max_processes = max_processes;
        self
    }

    fn concurrency(mut self, concurrency: u32) -> Setup {
        self.concurrency = concurrency;
        self
    }

    fn script(mut self, script: Vec<Reply>) -> Setup {
        self.script = script;
        self
    }

    fn grace(mut self, grace: Duration) -> Setup {
        self.grace = grace;
        self
    }

    fn max_steps(mut self, max_steps: u32) -> Setup {
        self.max_steps = max_steps;
        self
    }
}

/// A supervisor, its fake model server, a private workspace and the
/// watcher of the processes working in it.
struct Rig {
    dir: tempfile::TempDir,
    server: Arc<FakeServer>,
    supervisor: Arc<Supervisor>,
    events: fido::agent::EventReceiver,
    seen: Vec<Event>,
    watcher: Watcher,
}

impl Rig {
    async fn start(setup: Setup) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(
            workspace.join("main.rs"),
            "fn main() { println!(\"hi\"); }\n",
        )
        .unwrap();
        let program = match setup.child {
            Child::Fake(behaviour) => fake_program(dir.path(), behaviour),
            Child::Real => PathBuf::from(env!("CARGO_BIN_EXE_fido")),
        };
        let server = Arc::new(FakeServer::start(setup.script));
        let policy = HttpPolicy {
            max_retries: 0,
            ..HttpPolicy::default()
        };
        let provider =
            OpenAiProvider::new(server.base_url(), Some("k".into()), "m".into(), policy).unwrap();
        let (sink, events) = fido::protocol::event_queue::channel();
        let supervisor = Supervisor::start(
            DelegationSettings {
                limits: DelegationLimits {
                    default_timeout: setup.default_timeout,
                    max_timeout: Duration::from_secs(600),
                    grace: setup.grace,
                    sandbox: SandboxRequirement::Required,
                    max_steps: setup.max_steps,
                    concurrency: setup.concurrency,
                    ..DelegationLimits::default()
                },
                max_processes: setup.max_processes,
                ..DelegationSettings::defaults(workspace.clone(), program)
            },
            fido::provider::gateway::Gateway::new(Arc::new(provider), 4),
            ToolCatalog::standard(PlanFlavour::UpdatePlan),
            sink,
        )
        .await
        .unwrap();
        Rig {
            watcher: Watcher::start(workspace),
            dir,
            server,
            supervisor: Arc::new(supervisor),
            events,
            seen: Vec::new(),
        }
    }

    /// Starts a delegation in a task of its own; `turn_cancel` is the parent
    /// turn's token (Ctrl+C).
    fn spawn_delegate(
        &self,
        timeout_ms: Option<u64>,
        turn_cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<DelegateResult> {
        let supervisor = self.supervisor.clone();
        tokio::spawn(async move {
            let messages = parent_messages();
            supervisor
                .delegate(DelegationRequest {
                    call_id: "d1",
                    args: args(timeout_ms),
                    parent_messages: &messages,
                    cancel: &turn_cancel,
                    tools: None,
                })
                .await
        })
    }

    /// Runs one delegation to its end.
    async fn delegate(&mut self, timeout_ms: Option<u64>) -> DelegateResult {
        let task = self.spawn_delegate(timeout_ms, CancellationToken::new());
        within(TEST_LIMIT, task).await.unwrap()
    }

    /// Every event so far, the ones already seen included.
    fn drain(&mut self) -> &[Event] {
        while let Some(event) = self.events.try_recv() {
            self.seen.push(event);
        }
        &self.seen
    }

    /// Waits for a `subagent` event matching `wanted` and returns its pid
    /// and elapsed time.
    async fn wait_for_phase(&mut self, wanted: impl Fn(&str, Option<u32>) -> bool) -> (u32, u64) {
        let deadline = Instant::now() + TEST_LIMIT;
        loop {
            for event in self.drain() {
                if let EventKind::Subagent {
                    pid,
                    phase,
                    elapsed_ms,
                    ..
                } = &event.kind
                    && wanted(phase.as_str(), *pid)
                {
                    return (pid.unwrap_or(0), *elapsed_ms);
                }
            }
            assert!(Instant::now() < deadline, "no such subagent event");
            let next = tokio::time::timeout(Duration::from_millis(100), self.events.recv()).await;
            if let Ok(Some(event)) = next {
                self.seen.push(event);
            }
        }
    }

    /// The pid of the running subagent, once its handshake is done.
    async fn subagent_pid(&mut self) -> u32 {
        self.wait_for_phase(|phase, pid| phase == "starting" && pid.is_some())
            .await
            .0
    }

    /// `(phase, pid, elapsed_ms, detail)` of every `subagent` event.
    fn phases(&mut self) -> Vec<(String, Option<u32>, u64, String)> {
        self.drain()
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Subagent {
                    phase,
                    pid,
                    elapsed_ms,
                    detail,
                    ..
                } => Some((phase.to_string(), *pid, *elapsed_ms, detail.clone())),
                _ => None,
            })
            .collect()
    }

    /// Blocks (on the blocking pool) until the model server got `count`
    /// requests.
    async fn wait_for_model_requests(&self, count: usize) {
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || {
            server.wait_for_requests(count, TEST_LIMIT);
        })
        .await
        .unwrap();
    }

    /// The end of every test: the run's processes are gone and reaped
    /// while the supervisor still runs (its shutdown kills whatever is
    /// left, which would hide a leak), then the supervisor shuts down.
    async fn assert_no_process_left(self) {
        let Rig {
            dir,
            supervisor,
            watcher,
            ..
        } = self;
        tokio::task::spawn_blocking(move || watcher.assert_clean())
            .await
            .unwrap();
        supervisor.shutdown(Duration::from_secs(5)).await;
        drop(dir);
    }
}

/// `<dir>/bin/<behaviour>`, a symlink to the fake subagent: exec'd through
/// it, the script sees its behaviour as its own name. A symlink (not a
/// copy) so the executable is never a freshly written file, which another
/// test's fork could still hold open for writing (ETXTBSY).
fn fake_program(dir: &Path, behaviour: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Path::new(FAKE_SUBAGENT);
    let mode = std::fs::metadata(fixture).unwrap().permissions().mode();
    if mode & 0o111 != 0o111 {
        std::fs::set_permissions(fixture, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join(behaviour);
    std::os::unix::fs::symlink(fixture, &program).unwrap();
    // The fingerprint a well-behaved child sends: the parent's catalog.
    let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
    std::fs::write(bin.join("catalog"), catalog_fingerprint(catalog.specs())).unwrap();
    program
}

/// The parent's conversation at the instant of the call: the system
/// prompt, the user's request and the assistant message calling `delegate`.
fn parent_messages() -> Vec<Message> {
    vec![
        Message::System {
            content: "You are Fido, a coding agent.".into(),
        },
        Message::user("What does main print?"),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "d1".into(),
                name: "delegate".into(),
                arguments: r#"{"task": "Find what main prints"}"#.into(),
            }],
        },
    ]
}

fn args(timeout_ms: Option<u64>) -> DelegateArgs {
    DelegateArgs {
        task: "Find what main prints".into(),
        context: None,
        scope: None,
        mode: None,
        output_contract: None,
        timeout_ms,
        budget_tokens: None,
        plan_item: None,
        profile: None,
    }
}

async fn within<F: std::future::Future>(limit: Duration, future: F) -> F::Output {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("still running after {limit:?}"))
}

fn code(result: &DelegateResult) -> &str {
    result.error.as_ref().map_or("", |e| e.code.as_str())
}

fn message(result: &DelegateResult) -> &str {
    result.error.as_ref().map_or("", |e| e.message.as_str())
}

/// A failed result with this code whose message contains `cause`, still
/// shaped for the parent (identity, a next step).
fn assert_failed(result: &DelegateResult, expected_code: &str, cause: &str) {
    assert_eq!(result.status, DelegateStatus::Failed, "{result:#?}");
    assert_eq!(code(result), expected_code, "{result:#?}");
    assert!(
        message(result).contains(cause),
        "the message should name {cause:?}: {result:#?}"
    );
    let wire = serde_json::to_value(result).unwrap();
    assert_eq!(wire["type"], "delegate_result");
    assert_eq!(wire["identity"]["role"], "subagent");
    assert!(result.identity.agent_id.starts_with("subagent-"));
    if expected_code != "busy" {
        assert!(!result.recommended_next_steps.is_empty(), "{result:#?}");
    }
}

/// The watcher of one test's processes (see the module comment).
struct Watcher {
    workspace: PathBuf,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeSet<(u32, bool)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    fn start(workspace: PathBuf) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let thread = {
            let (workspace, stop, seen) = (workspace.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let me = std::process::id();
                while !stop.load(Ordering::Relaxed) {
                    for (pid, ppid) in working_in(&workspace) {
                        seen.lock().unwrap().insert((pid, ppid == me));
                    }
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        };
        Watcher {
            workspace,
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Every process the watcher saw is gone, every child of this process
    /// among them reaped, and nothing works in the workspace any more.
    fn assert_clean(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        let seen = self.seen.lock().unwrap().clone();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive: Vec<(u32, bool)> = seen
                .iter()
                .copied()
                .filter(|(pid, ours)| {
                    if *ours {
                        // A child of ours must be reaped: not even a zombie.
                        Path::new(&format!("/proc/{pid}")).exists()
                    } else {
                        !processes(ProcessFilter::Pid(*pid)).is_empty()
                    }
                })
                .collect();
            let left = working_in(&self.workspace);
            if alive.is_empty() && left.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                // Fail, but leave nothing running behind the failure.
                for (pid, _) in &left {
                    if let Ok(pid) = libc::pid_t::try_from(*pid) {
                        // SAFETY: kill(2) has no memory-safety preconditions.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                panic!(
                    "processes left: not reaped or alive {alive:?}, still in the workspace {left:?}"
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `(pid, ppid)` of the live processes whose working directory is
/// `workspace`.
fn working_in(workspace: &Path) -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == workspace)
        })
        .filter_map(|pid| {
            let info = processes(ProcessFilter::Pid(pid)).pop()?;
            Some((pid, info.ppid))
        })
        .collect()
}

/// The `RLIMIT_NPROC` of `pid` from `/proc/<pid>/limits`: soft and hard
/// must be one finite number.
fn process_limit(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max processes"))
        .unwrap();
    // "Max processes  <soft>  <hard>  processes"
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[2], fields[3], "{line}");
    fields[2]
        .parse()
        .unwrap_or_else(|_| panic!("no limit: {line}"))
}

/// The value of one line of `/proc/<pid>/status` (e.g. `SigIgn`), or "".
fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .map(|value| value.trim_start_matches(':').trim().to_string())
        .unwrap_or_default()
}

/// A fake child that fails the protocol after its handshake; the result
/// names the cause, the child is killed and reaped, and the supervisor
/// takes the next delegation normally.
async fn protocol_fault(behaviour: &'static str, cause: &str) {
    let mut rig = Rig::start(Setup::new(Child::Fake(behaviour))).await;
    let result = rig.delegate(None).await;
    // Ended by the fault, not by the 30 s timeout: the code says which.
    assert_failed(&result, "protocol_error", cause);
    let phases = rig.phases();
    let last = phases.last().unwrap();
    assert_eq!(last.0, "failed", "{phases:?}");
    assert!(last.3.starts_with("protocol_error"), "{phases:?}");
    assert_parent_goes_on(&mut rig).await;
    rig.assert_no_process_left().await;
}

/// After a fault the supervisor is free: another delegation runs (and is
/// not refused as `busy`).
async fn assert_parent_goes_on(rig: &mut Rig) {
    let again = rig.delegate(Some(1_000)).await;
    assert_ne!(code(&again), "busy", "{again:#?}");
    assert_ne!(code(&again), "unavailable", "{again:#?}");
}

// (a)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_frame_fails_the_run_with_protocol_error() {
    protocol_fault("malformed", "malformed frame").await;
}

// (b)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_frame_header_fails_the_run_without_allocating_it() {
    protocol_fault("oversized", "4294967295 bytes is larger than the limit").await;
}

// (b), before the handshake
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_frame_instead_of_hello_fails_the_handshake() {
    let mut rig = Rig::start(Setup::new(Child::Fake("oversized_hello"))).await;
    let result = rig.delegate(None).await;
    assert_failed(&result, "protocol_error", "larger than the limit");
    rig.assert_no_process_left().await;
}

// (c)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_hello_is_an_out_of_order_frame() {
    protocol_fault("second_hello", "out-of-order hello frame").await;
}

// (d)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_lifecycle_frames_ends_the_run_promptly() {
    let mut rig = Rig::start(Setup::new(Child::Fake("flood"))).await;
    let result = rig.delegate(Some(30_000)).await;
    // Ended by the flood check, not by the 30 s timeout.
    assert_failed(&result, "protocol_error", "flooded the parent");
    // The lifecycle events reaching the UI are throttled, not one per frame.
    let phases = rig.phases();
    let read_file = phases.iter().filter(|p| p.0 == "read_file").count();
    assert!(
        (1..100).contains(&read_file),
        "{read_file} read_file events"
    );
    assert_parent_goes_on(&mut rig).await;
    rig.assert_no_process_left().await;
}

// (e)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_and_non_utf8_stderr_does_not_block_the_child_or_the_parent() {
    let mut rig = Rig::start(Setup::new(Child::Fake("stderr_flood"))).await;
    let result = rig.delegate(Some(30_000)).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    // Completed, so within its 30 s timeout: nothing blocked.
    assert_eq!(result.summary, "wrote 32 MiB of stderr");
    rig.assert_no_process_left().await;
}

// (f)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_exits_without_final_is_reported_as_crashed() {
    let mut rig = Rig::start(Setup::new(Child::Fake("no_final"))).await;
    let result = rig.delegate(None).await;
    assert_failed(&result, "subagent_crashed", "exit code 3");
    assert_parent_goes_on(&mut rig).await;
    rig.assert_no_process_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_exits_before_connecting_is_reported_as_crashed() {
    let mut rig = Rig::start(Setup::new(Child::Fake("exit_early"))).await;
    let result = rig.delegate(None).await;
    assert_failed(&result, "subagent_crashed", "exit code 7");
    rig.assert_no_process_left().await;
}

// (g)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ignores_cancel_and_sigterm_is_killed_after_timeout_and_grace() {
    // Long enough for python to run its SIGTERM handler on a loaded
    // machine before the SIGKILL comes (400 ms was not, once).
    let grace = Duration::from_millis(1_500);
    // Room for the fake child (python) to start and say hello on a loaded
    // machine: the pid is read from the event the handshake ends with.
    let timeout = Duration::from_millis(2_500);
    let mut rig = Rig::start(Setup::new(Child::Fake("stubborn")).grace(grace)).await;
    let task = rig.spawn_delegate(Some(timeout.as_millis() as u64), CancellationToken::new());
    let pid = rig
        .wait_for_phase(|phase, pid| phase == "starting" && pid.is_some())
        .await
        .0;
    // It really survives SIGTERM: a handler (bit 15 of SigCgt) that only
    // notes it in `bin/sigterm`.
    let caught = u64::from_str_radix(&status_field(pid, "SigCgt"), 16).unwrap();
    assert_ne!(caught & (1 << (libc::SIGTERM - 1)), 0, "SigCgt {caught:x}");
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_failed(&result, "timeout", "did not finish within 2500 ms");
    // Not reaped yet would mean a zombie: the result comes after the reap.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    // The order, not a time window: SIGTERM came while it lived (it noted
    // it, once) and it is gone, which after a survived SIGTERM only the
    // SIGKILL can do.
    let notes = std::fs::read_to_string(rig.dir.path().join("bin/sigterm")).unwrap_or_default();
    assert_eq!(notes, "SIGTERM\n", "SIGTERM before the kill");
    // The supervisor's own clock, from spawn to the end: the timeout counts
    // from the spawn, then the grace, and only then come the signals.
    let phases = rig.phases();
    let end = phases.last().unwrap().2;
    let budget = (timeout + grace).as_millis() as u64;
    assert!(
        end >= budget,
        "ended after {end} ms, before {budget} ms: {phases:?}"
    );
    rig.assert_no_process_left().await;
}

// (h)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_cancels_the_real_child_which_returns_a_partial_result() {
    // A grace past the test's limit: a result proves the child cooperated.
    let grace = ENDLESS_GRACE;
    let mut rig = Rig::start(
        Setup::new(Child::Real)
            .script(vec![Reply::stall_forever(vec![])])
            .grace(grace),
    )
    .await;
    let task = rig.spawn_delegate(None, CancellationToken::new());
    let pid = rig.subagent_pid().await;
    rig.wait_for_model_requests(1).await;
    assert_eq!(status_field(pid, "NoNewPrivs"), "1");
    // The process limit the supervisor counted while the child started,
    // set before the child's first request.
    let limit = process_limit(pid);
    assert!(
        limit > fido::sandbox::child::PROCESS_HEADROOM,
        "RLIMIT_NPROC {limit}"
    );
    rig.supervisor.cancel_running();
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_eq!(code(&result), "cancelled", "{result:#?}");
    // `partial`, not `failed`: the child answered Cancel with its partial
    // Final, before the grace ran out and any signal was sent.
    assert_eq!(result.status, DelegateStatus::Partial, "{result:#?}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    let phases = rig.phases();
    assert_eq!(phases.last().unwrap().0, "cancelled", "{phases:?}");
    // The parent goes on: the next delegation runs normally.
    rig.server
        .push_reply(Reply::sse(sse::text_turn(FINAL_JSON)));
    let again = rig.delegate(None).await;
    assert_eq!(again.status, DelegateStatus::Completed, "{again:#?}");
    assert_eq!(again.summary, "main prints hi");
    rig.assert_no_process_left().await;
}

// (h), the fake side: a cooperative child's partial is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_child_answers_cancel_with_a_partial_result() {
    let mut rig = Rig::start(Setup::new(Child::Fake("cooperative")).grace(ENDLESS_GRACE)).await;
    let task = rig.spawn_delegate(None, CancellationToken::new());
    let pid = rig.subagent_pid().await;
    rig.supervisor.cancel_running();
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_eq!(result.status, DelegateStatus::Partial, "{result:#?}");
    assert_eq!(code(&result), "cancelled");
    assert_eq!(result.summary, "stopped early: cancelled");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    rig.assert_no_process_left().await;
}

// Ctrl+C: the whole turn is interrupted, nobody waits for the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_the_turn_kills_a_stubborn_child_without_waiting_for_the_grace() {
    let mut rig = Rig::start(Setup::new(Child::Fake("stubborn")).grace(ENDLESS_GRACE)).await;
    let turn = CancellationToken::new();
    let task = rig.spawn_delegate(None, turn.clone());
    let pid = rig.subagent_pid().await;
    turn.cancel();
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_failed(&result, "cancelled", "cancelled");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    rig.assert_no_process_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_a_stubborn_child_and_answers_the_pending_delegation() {
    let mut rig = Rig::start(Setup::new(Child::Fake("stubborn")).grace(ENDLESS_GRACE)).await;
    let task = rig.spawn_delegate(None, CancellationToken::new());
    let pid = rig.subagent_pid().await;
    rig.supervisor.shutdown(TEST_LIMIT).await;
    // Shutdown returns once the child is reaped (or at its limit, with the
    // stubborn child still alive: the grace outlasts it).
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_failed(&result, "cancelled", "cancelled");
    rig.assert_no_process_left().await;
}

// A child that connects and never says hello: the timeout and Esc still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_silent_before_hello_still_times_out_on_time() {
    let mut rig =
        Rig::start(Setup::new(Child::Fake("silent")).grace(Duration::from_millis(200))).await;
    let result = rig.delegate(Some(1_000)).await;
    // The timeout fired before any hello: the code says so.
    assert_failed(&result, "timeout", "1000 ms");
    rig.assert_no_process_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_silent_before_hello_can_be_cancelled() {
    let mut rig = Rig::start(Setup::new(Child::Fake("silent")).grace(ENDLESS_GRACE)).await;
    let task = rig.spawn_delegate(None, CancellationToken::new());
    // The run started (the actor took the job): cancel during the handshake.
    rig.wait_for_phase(|phase, _| phase == "starting").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.supervisor.cancel_running();
    let result = within(TEST_LIMIT, task).await.unwrap();
    assert_failed(&result, "cancelled", "cancelled");
    rig.assert_no_process_left().await;
}

// (i)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_to_the_socket_is_refused() {
    let mut rig = Rig::start(Setup::new(Child::Fake("second_connect"))).await;
    let result = rig.delegate(None).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    assert!(
        result.summary.contains("ConnectionRefusedError"),
        "the second connection was not refused: {}",
        result.summary
    );
    rig.assert_no_process_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_connecting_first_is_refused() {
    let mut rig = Rig::start(Setup::new(Child::Fake("intruder"))).await;
    let result = rig.delegate(None).await;
    assert_failed(
        &result,
        "protocol_error",
        "a process other than the subagent",
    );
    assert_parent_goes_on(&mut rig).await;
    rig.assert_no_process_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_left_behind_is_killed_with_the_group() {
    let mut rig = Rig::start(Setup::new(Child::Fake("grandchild"))).await;
    let result = rig.delegate(None).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    let grandchild: u32 = result
        .summary
        .rsplit(' ')
        .next()
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {:?}", result.summary));
    // Killed with the group by the time the result arrives (it ignores SIGTERM).
    let deadline = Instant::now() + Duration::from_secs(2);
    while !processes(ProcessFilter::Pid(grandchild)).is_empty() {
        assert!(
            Instant::now() < deadline,
            "grandchild {grandchild} survived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rig.assert_no_process_left().await;
}

// (j)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegation_past_the_concurrency_limit_waits_and_is_cancelled_unstarted() {
    let mut rig = Rig::start(Setup::new(Child::Fake("cooperative")).concurrency(1)).await;
    let first = rig.spawn_delegate(None, CancellationToken::new());
    let pid = rig.subagent_pid().await;
    let second = rig.spawn_delegate(None, CancellationToken::new());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The second waits for the slot: no process was started for it.
    let starts = rig
        .phases()
        .iter()
        .filter(|p| p.0 == "starting" && p.1.is_none())
        .count();
    assert_eq!(starts, 1);
    rig.supervisor.cancel_running();
    let first = within(TEST_LIMIT, first).await.unwrap();
    assert_eq!(first.status, DelegateStatus::Partial, "{first:#?}");
    let second = within(TEST_LIMIT, second).await.unwrap();
    assert_failed(&second, "cancelled", "waited for a free slot");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} not reaped"
    );
    rig.assert_no_process_left().await;
}

// The slot frees at once: back-to-back delegations never wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_delegations_are_never_busy() {
    let mut rig = Rig::start(Setup::new(Child::Fake("quick"))).await;
    for round in 0..15 {
        let result = rig.delegate(None).await;
        assert_eq!(
            result.status,
            DelegateStatus::Completed,
            "round {round}: {result:#?}"
        );
    }
    rig.assert_no_process_left().await;
}

/// A child that sends many frames, its `Final` and exits at once: its
/// exit may reach the parent while frames sent before it still wait to be
/// read, and the `Final` behind them is its result, not a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_queued_behind_many_frames_counts_when_the_exit_comes_first() {
    let mut rig = Rig::start(Setup::new(Child::Fake("chatty_exit"))).await;
    for round in 0..5 {
        let result = rig.delegate(None).await;
        assert_eq!(
            result.status,
            DelegateStatus::Completed,
            "round {round}: {result:#?}"
        );
        assert!(
            result.summary.contains("3000 lifecycle frames"),
            "{result:#?}"
        );
    }
    rig.assert_no_process_left().await;
}

// The gateway holds the credentials, so it enforces the request budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_refuses_more_model_requests_than_max_steps() {
    let replies = (0..6).map(|_| Reply::sse(sse::text_turn("ok"))).collect();
    let mut rig = Rig::start(
        Setup::new(Child::Fake("greedy"))
            .script(replies)
            .max_steps(3),
    )
    .await;
    let result = rig.delegate(None).await;
    assert_failed(&result, "protocol_error", "more than 3 model requests");
    assert_eq!(rig.server.model_requests().len(), 3);
    assert_eq!(
        result.usage.map(|u| u.totals.requests),
        Some(3),
        "{result:#?}"
    );
    rig.assert_no_process_left().await;
}

// A child whose own loop advertises another catalog would not share the
// parent's cached prefix: the gateway refuses it before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_with_another_catalog_is_refused() {
    let mut rig = Rig::start(Setup::new(Child::Fake("foreign_catalog"))).await;
    let result = rig.delegate(None).await;
    assert_failed(&result, "protocol_error", "tool catalog (0123456789abcdef)");
    assert!(rig.server.model_requests().is_empty());
    rig.assert_no_process_left().await;
}

// A request without a fingerprint is refused like a foreign one: a missing
// field must not skip the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_sends_no_catalog_fingerprint_is_refused() {
    let mut rig = Rig::start(Setup::new(Child::Fake("no_catalog"))).await;
    let result = rig.delegate(None).await;
    let ours = catalog_fingerprint(ToolCatalog::standard(PlanFlavour::UpdatePlan).specs());
    assert_failed(
        &result,
        "protocol_error",
        &format!("sent no tool catalog fingerprint; the parent's is {ours}"),
    );
    assert!(rig.server.model_requests().is_empty());
    rig.assert_no_process_left().await;
}

// Lifecycle frames are the child's words: sanitised and cut before the UI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_lifecycle_frames_reach_the_ui_sanitised_and_short() {
    let mut rig = Rig::start(Setup::new(Child::Fake("hostile_lifecycle"))).await;
    let result = rig.delegate(None).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    let phases = rig.phases();
    let names: Vec<&str> = phases.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        names,
        ["starting", "starting", "read_file", "working", "completed"],
        "{phases:?}"
    );
    for (phase, _, _, detail) in &phases {
        assert!(
            phase.len() <= 40 && phase.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{phase:?}"
        );
        assert!(detail.chars().count() <= 100, "{detail:?}");
        assert!(
            !detail
                .chars()
                .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
            "{detail:?}"
        );
    }
    assert!(phases[2].3.starts_with("src/main.rs"), "{phases:?}");
    rig.assert_no_process_left().await;
}

/// A subagent's own plan reaches the front ends under its id; one past
/// the parent's bound (64 KiB) does not, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_plan_is_shown_under_its_id_and_a_huge_one_is_not() {
    let mut rig = Rig::start(Setup::new(Child::Fake("plans"))).await;
    let result = rig.delegate(None).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    let plans: Vec<_> = rig
        .drain()
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::SubagentPlan { agent_id, plan } => Some((agent_id.clone(), plan.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(plans.len(), 1, "{plans:?}");
    assert_eq!(plans[0].0, result.identity.agent_id);
    let fido::protocol::plan::PlanSnapshot::UpdatePlan(state) = &plans[0].1 else {
        panic!("{plans:?}");
    };
    assert_eq!(
        (state.version, state.items[0].title.as_str()),
        (1, "Read main")
    );
    rig.assert_no_process_left().await;
}

/// A fork bomb in a subagent's command stops at `command_max_processes`,
/// counted for the subagent and everything it starts together (the
/// `pid_max` of the subagent's own PID namespace), also as root, whom
/// `RLIMIT_NPROC` never binds; the subagent goes on and answers, and
/// nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_in_a_subagent_stops_at_its_process_limit() {
    if let Err(reason) = fido::sandbox::limits::process_limit_support() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{reason}");
        eprintln!("skipped: {reason}");
        return;
    }
    // dash, not bash: bash retries a refused fork for seconds. Past the
    // limit and the 300 PIDs of the namespace's first round.
    let bomb =
        "sh -c 'n=0; while [ $n -lt 800 ]; do sleep 30 & n=$((n+1)); done; echo started $n' 2>&1";
    // Then what a subagent does next: a command with 50 processes at once
    // (after the bomb its namespace's PIDs have wrapped).
    let next =
        "sh -c 'n=0; while [ $n -lt 50 ]; do sleep 5 & n=$((n+1)); done; echo started $n' 2>&1";
    let mut rig = Rig::start(Setup::new(Child::Real).max_processes(299).script(vec![
        crate::common::turns::call("b1", "bash_exec", serde_json::json!({"command": bomb})),
        crate::common::turns::call("b2", "bash_exec", serde_json::json!({"command": next})),
        Reply::sse(sse::text_turn(FINAL_JSON)),
    ]))
    .await;
    let result = rig.delegate(None).await;
    assert_eq!(result.status, DelegateStatus::Completed, "{result:#?}");
    let requests = rig.server.model_requests();
    assert_eq!(requests.len(), 3, "{result:#?}");
    let told = requests[1].body().to_string();
    assert!(
        told.contains("fork") || told.contains("Resource temporarily unavailable"),
        "800 processes started in a subagent limited to 299: {told}"
    );
    assert!(!told.contains("started 800"), "{told}");
    let then = requests[2].body().to_string();
    assert!(then.contains("started 50"), "the next command: {then}");
    rig.assert_no_process_left().await;
}
