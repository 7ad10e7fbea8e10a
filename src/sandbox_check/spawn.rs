//! The parent's side of a role's run: a fresh fixture, the probe child
//! re-executed from this binary as `fido sandbox check --probe-child …`
//! (hidden arguments, nextest's `__double-spawn` idea) in its own process
//! group with the environment its role's children get from Fido
//! (`sandbox::env`) plus a canary secret, its frames read back, and the
//! child always reaped and the fixture removed.

use std::ffi::OsString;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::runtime::Runtime;

use super::fixture::ProbeFixture;
use super::probes::environment::canary;
use super::report::{Summary, summarize};
use super::targets::ProbeRole;
use super::targets::ProbeTargets;
use super::verdict::ProbeFrame;
use crate::process::ProcessGroup;
use crate::process::env::{EnvPolicy, Inherit, SUBAGENT_ENV};
use crate::protocol::SandboxMode;
use crate::sandbox::child::error_chain;
use crate::sandbox::netns::stand_in::ProxyStandIn;
use crate::sandbox::{CommandPolicy, CommandSandbox, SandboxError};

/// How long the probe child may take.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
/// SIGTERM → SIGKILL grace for a probe child that ran over.
const KILL_GRACE: Duration = Duration::from_millis(500);

/// Why a role could not be probed (its report is not had).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot prepare the probe directory: {0}")]
    Fixture(#[source] io::Error),
    #[error("cannot start the proxy's stand-in: {0}")]
    StandIn(#[source] io::Error),
    #[error("cannot read the probe listener's address: {0}")]
    Listener(#[source] io::Error),
    /// The sandbox the parent confines the child with cannot be set up.
    #[error("{what}: {}", error_chain(.source))]
    Sandbox {
        what: String,
        #[source]
        source: SandboxError,
    },
    #[error("cannot find the fido binary to re-execute: {0}")]
    Exe(#[source] io::Error),
    #[error("cannot start the probe child: {0}")]
    Spawn(#[source] io::Error),
    #[error("cannot wait for the probe child {pid}: {source}")]
    Wait {
        pid: u32,
        #[source]
        source: io::Error,
    },
    #[error("the probe child {pid} did not finish within {secs}s and was killed")]
    Timeout { pid: u32, secs: u64 },
}

/// What came back from the probe child.
struct ChildRun {
    status: ExitStatus,
    frames: Vec<ProbeFrame>,
    stderr: String,
    /// Lines that were not frames (a bug, or a panic message on stdout).
    garbage: Vec<String>,
}

/// One role's run on a fresh fixture, judged. `runtime` must be driven
/// from this (main) thread: the child's parent-death signal is tied to
/// the thread that spawns it.
pub fn probe_role(role: ProbeRole, runtime: &Runtime) -> Result<Summary, ProbeError> {
    let fixture = ProbeFixture::for_role(role).map_err(ProbeError::Fixture)?;
    let stand_in = match role {
        ProbeRole::Allowlist => Some(ProxyStandIn::start().map_err(ProbeError::StandIn)?),
        ProbeRole::Subagent | ProbeRole::WriteSubagent | ProbeRole::Command(_) => None,
    };
    let mut targets = fixture
        .targets(Pid::this(), role)
        .map_err(ProbeError::Listener)?;
    targets.proxy_port = stand_in.as_ref().map(|stand_in| stand_in.route().port);
    let sandbox = command_sandbox(role, &targets, stand_in.as_ref())?;
    let run = spawn_and_collect(&fixture, targets, sandbox.clone(), runtime)?;
    let mut summary = summarize(run.frames, run.status, run.garbage.len(), role, |results| {
        fixture.verify(results)
    });
    summary.child_output = run
        .garbage
        .into_iter()
        .chain(run.stderr.lines().map(str::to_owned))
        .collect();
    let confinement = sandbox
        .as_ref()
        .and_then(|sandbox| sandbox.network_confinement());
    let protection = sandbox.as_ref().and_then(|sandbox| sandbox.protection());
    if let (ProbeRole::Command(_), Some(mechanism)) = (role, protection) {
        summary.header.push_str(&format!(
            "; .git, .fido, .fido-state and fido.toml kept by {mechanism}"
        ));
    }
    if let (Some(stand_in), Some(confinement)) = (&stand_in, confinement) {
        // Its own line says how this kernel confines it.
        summary.header = confinement.to_string();
        summary.problems.extend(stand_in.misrouted(confinement));
    }
    Ok(summary)
}

/// The sandbox the parent confines a command child with, as `bash_exec`
/// would (`None`: a subagent's child enters its own).
fn command_sandbox(
    role: ProbeRole,
    targets: &ProbeTargets,
    stand_in: Option<&ProxyStandIn>,
) -> Result<Option<Arc<CommandSandbox>>, ProbeError> {
    let mode = match role {
        ProbeRole::Subagent | ProbeRole::WriteSubagent => return Ok(None),
        ProbeRole::Command(mode) => mode,
        ProbeRole::Allowlist => SandboxMode::WorkspaceWrite,
    };
    let prepared = CommandSandbox::prepare(&CommandPolicy {
        mode,
        network: crate::protocol::NetworkAccess::Off,
        workspace: targets.workspace(),
        writable_roots: Vec::new(),
        deny: targets.deny.clone(),
        limits: super::probes::limits::PROBE_LIMITS,
    });
    let sandbox = match stand_in {
        Some(stand_in) => prepared.and_then(|sandbox| sandbox.with_proxy(stand_in.route())),
        None => prepared,
    };
    let what = match role {
        ProbeRole::Allowlist => "commands (network = \"allowlist\")".to_owned(),
        ProbeRole::Subagent | ProbeRole::WriteSubagent | ProbeRole::Command(_) => {
            format!("commands ({mode})")
        }
    };
    sandbox
        .map(|sandbox| Some(Arc::new(sandbox)))
        .map_err(|source| ProbeError::Sandbox { what, source })
}

fn spawn_and_collect(
    fixture: &ProbeFixture,
    targets: ProbeTargets,
    sandbox: Option<Arc<CommandSandbox>>,
    runtime: &Runtime,
) -> Result<ChildRun, ProbeError> {
    let exe = std::env::current_exe().map_err(ProbeError::Exe)?;
    let role = targets.role;
    let inherit = match role {
        ProbeRole::Subagent | ProbeRole::WriteSubagent => SUBAGENT_ENV,
        ProbeRole::Command(_) | ProbeRole::Allowlist => Inherit::All,
    };
    let args = child_args(targets);
    let worktree = fixture.write_roots().cloned();
    // block_on runs on this (main) thread, so the child's parent-death
    // signal is tied to a thread that outlives it.
    runtime.block_on(async move {
        let mut command = tokio::process::Command::new(exe);
        // What `bash_exec`, or the supervisor for a subagent, gives its
        // child, from an environment holding a secret.
        let parent = std::env::vars_os().chain([canary()]);
        EnvPolicy::default().apply_from(&mut command, inherit, parent);
        command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sandbox) = &sandbox {
            sandbox.apply(&mut command);
        }
        // A write subagent's child starts in its workspace with its git
        // environment.
        if let Some(roots) = &worktree {
            command.current_dir(&roots.workspace).envs(roots.git_env());
        }
        // A subagent's child is held as the supervisor holds one: PID 2 of
        // a PID namespace of its own, where the kernel allows one.
        if matches!(role, ProbeRole::Subagent | ProbeRole::WriteSubagent) {
            let limit = super::probes::limits::PROBE_LIMITS.max_processes;
            crate::sandbox::subagent_ns::contain_subagent(&mut command, limit);
        }
        let group = ProcessGroup::spawn(&mut command).map_err(ProbeError::Spawn)?;
        collect(group).await
    })
}

/// The probe child's command line: its role, its parent, the fixture,
/// for a write subagent its roots as `fido __subagent` gets them, and
/// behind the allowlist proxy its port.
fn child_args(targets: ProbeTargets) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "sandbox".into(),
        "check".into(),
        "--probe-child".into(),
        "--probe-as".into(),
        targets.role.as_str().into(),
        "--parent-pid".into(),
        targets.parent.as_raw().to_string().into(),
        "--probe-dir".into(),
        targets.dir.into_os_string(),
        "--probe-port".into(),
        targets.tcp_port.to_string().into(),
        "--probe-abstract".into(),
        targets.abstract_name.into(),
    ];
    for root in targets.write_roots {
        args.extend(["--write-root".into(), root.into_os_string()]);
    }
    for root in targets.read_roots {
        args.extend(["--read-root".into(), root.into_os_string()]);
    }
    if let Some(port) = targets.proxy_port {
        args.extend(["--probe-proxy-port".into(), port.to_string().into()]);
    }
    args
}

/// Reads the child's output to the end (within [`CHILD_TIMEOUT`]), reaps
/// it and leaves nothing of its group behind.
async fn collect(mut group: ProcessGroup) -> Result<ChildRun, ProbeError> {
    let pid = group.pid();
    tracing::debug!(pid, "probe child started");
    let mut stdout = group.child_mut().stdout.take();
    let mut stderr = group.child_mut().stderr.take();
    let collected = tokio::time::timeout(CHILD_TIMEOUT, async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(pipe) = stdout.as_mut() {
                let _ = pipe.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(pipe) = stderr.as_mut() {
                let _ = pipe.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = group.wait().await;
        (out, err, status)
    })
    .await;
    let result = match collected {
        Ok((out, err, Ok(status))) => Ok((out, err, status)),
        Ok((_, _, Err(source))) => Err(ProbeError::Wait { pid, source }),
        Err(_) => {
            let _ = group.terminate(KILL_GRACE).await;
            Err(ProbeError::Timeout {
                pid,
                secs: CHILD_TIMEOUT.as_secs(),
            })
        }
    };
    if group.group_alive() {
        let _ = group.terminate(KILL_GRACE).await;
    }
    let (out, err, status) = result?;
    Ok(child_run(&out, &err, status))
}

/// The child's stdout split into frames and stray lines.
fn child_run(out: &[u8], err: &[u8], status: ExitStatus) -> ChildRun {
    let mut frames = Vec::new();
    let mut garbage = Vec::new();
    for line in String::from_utf8_lossy(out).lines() {
        match serde_json::from_str::<ProbeFrame>(line) {
            Ok(frame) => frames.push(frame),
            Err(_) => garbage.push(line.to_owned()),
        }
    }
    ChildRun {
        status,
        frames,
        stderr: String::from_utf8_lossy(err).into_owned(),
        garbage,
    }
}
