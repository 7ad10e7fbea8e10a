//! `fido sandbox check`: the command line of the probes in
//! [`crate::sandbox_check`], which prove in real sandboxed children what
//! this kernel enforces for subagents and for the main agent's commands.
//! The report has one line per probe and one column per role, then the
//! write subagent's section. Exit 0 only when the subagent and write
//! subagent sandboxes and the configured `sandbox_mode` are fully
//! enforced: every forbidden probe blocked, every control allowed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use nix::unistd::Pid;

use super::preamble::{ConfigWarnings, load_config};
use crate::config::Overrides;
use crate::protocol::{NetworkAccess, SandboxMode};
use crate::sandbox::child::error_chain;
use crate::sandbox_check::{self as check, ProbeError, ProbeRole, ProbeTargets, Summary};

/// The command modes that have a sandbox to probe.
const COMMAND_MODES: [SandboxMode; 2] = [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite];

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Try forbidden operations in real sandboxed children (a subagent's,
    /// the main agent's commands in each mode, a write subagent's in a
    /// worktree) and report what this kernel blocks; exit non-zero unless
    /// what the configuration requires is enforced.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Internal: be the sandboxed probe child.
    #[arg(long, hide = true)]
    probe_child: bool,
    /// Internal: whose sandbox the probe child is in.
    #[arg(
        long,
        hide = true,
        requires = "probe_child",
        default_value = "subagent"
    )]
    probe_as: String,
    /// Internal: the parent the probe child expects (and must not signal).
    #[arg(long, hide = true, requires = "probe_child")]
    parent_pid: Option<i32>,
    /// Internal: the probe fixture directory.
    #[arg(long, hide = true, requires = "probe_child")]
    probe_dir: Option<PathBuf>,
    /// Internal: the loopback port with the parent's listener.
    #[arg(long, hide = true, requires = "probe_child")]
    probe_port: Option<u16>,
    /// Internal: the parent's abstract UNIX socket name.
    #[arg(long, hide = true, requires = "probe_child")]
    probe_abstract: Option<String>,
    /// Internal: a write subagent's worktree, writable to the probe child.
    #[arg(long, hide = true, requires = "probe_child")]
    write_root: Vec<PathBuf>,
    /// Internal: what a write subagent probe child reads besides its
    /// workspace.
    #[arg(long, hide = true, requires = "probe_child")]
    read_root: Vec<PathBuf>,
    /// Internal: the allowlist proxy's port, for a command behind it.
    #[arg(long, hide = true, requires = "probe_child")]
    probe_proxy_port: Option<u16>,
    /// Internal: stay sandboxed after the probes until stdin closes.
    #[arg(long, hide = true, requires = "probe_child")]
    probe_hold: bool,
}

pub(super) fn run(overrides: &Overrides, command: SandboxCommand) -> ExitCode {
    match command {
        SandboxCommand::Check(args) if args.probe_child => probe_child(args),
        SandboxCommand::Check(_) => check(overrides),
    }
}

/// The child side: no logging set up, no runtime, a single thread.
fn probe_child(args: CheckArgs) -> ExitCode {
    let (Some(parent), Some(dir), Some(tcp_port), Some(abstract_name), Some(role)) = (
        args.parent_pid,
        args.probe_dir,
        args.probe_port,
        args.probe_abstract,
        ProbeRole::parse(&args.probe_as),
    ) else {
        return super::fail(
            "--probe-child needs --parent-pid, --probe-dir, --probe-port, --probe-abstract and a valid --probe-as",
        );
    };
    let targets = ProbeTargets {
        deny: check::denied_paths(&dir),
        dir,
        tcp_port,
        abstract_name,
        parent: Pid::from_raw(parent),
        role,
        write_roots: args.write_root,
        read_roots: args.read_root,
        proxy_port: args.probe_proxy_port,
    };
    let stdout = std::io::stdout();
    let stdin = std::io::stdin();
    match check::run_child(
        &targets,
        args.probe_hold,
        &mut stdout.lock(),
        &mut stdin.lock(),
    ) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => super::fail(&format!("cannot report the probes: {err}")),
    }
}

fn check(overrides: &Overrides) -> ExitCode {
    super::init_logging();
    let (configured, network, limits) = match load_config(overrides, ConfigWarnings::Keep) {
        Ok(config) => (
            config.sandbox.mode,
            config.sandbox.network,
            config.sandbox.limits,
        ),
        Err(code) => return code,
    };
    let (subagent, commands, write, allowlist) = match probe_every_role() {
        Ok(summaries) => summaries,
        Err(err) => return super::fail(&err.to_string()),
    };
    let allowlist_unprobed = allowlist.as_ref().map_err(ToString::to_string);
    let text = check::report_text(
        &subagent,
        &commands,
        write.as_ref().ok(),
        Some(allowlist_unprobed.as_ref().copied().map_err(String::as_str)),
        configured,
        Some(&limits),
    );
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return super::fail(&format!("cannot write the report: {}", error_chain(&err)));
    }
    // Write delegation is always there to be asked for: its sandbox is
    // required as the subagent's is, and unproven when it could not be
    // probed (no git to make its worktree with, say).
    let mut enforced = true;
    if let Err(message) = &write {
        eprintln!("fido: the write subagent's sandbox was not probed: {message}");
        enforced = false;
    }
    let required = std::iter::once(&subagent).chain(write.as_ref().ok()).chain(
        commands
            .iter()
            .filter(|(mode, _)| *mode == configured)
            .map(|(_, summary)| summary),
    );
    for summary in required {
        if !summary.enforced() {
            enforced = false;
            summary.print_child_output();
        }
    }
    if allowlist_configured(network, configured) {
        match &allowlist {
            Ok(summary) if summary.enforced() => {}
            Ok(summary) => {
                enforced = false;
                summary.print_child_output();
            }
            Err(message) => {
                eprintln!("fido: network = \"allowlist\" is configured, but {message}");
                enforced = false;
            }
        }
    }
    if enforced {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Whether the configuration routes commands through the allowlist proxy,
/// so that its confinement must hold for the check to pass.
fn allowlist_configured(network: NetworkAccess, mode: SandboxMode) -> bool {
    match (network, mode) {
        (NetworkAccess::Allowlist, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) => true,
        (NetworkAccess::Allowlist, SandboxMode::DangerFullAccess)
        | (NetworkAccess::Off | NetworkAccess::On, _) => false,
    }
}

/// Every role's summary: the subagent's, the command modes', the write
/// subagent's and the allowlist's (or why each of these two could not be
/// probed, which leaves the others' report whole).
type Summaries = (
    Summary,
    Vec<(SandboxMode, Summary)>,
    Result<Summary, ProbeError>,
    Result<Summary, ProbeError>,
);

/// Why `fido sandbox check` has no report.
#[derive(Debug, thiserror::Error)]
enum CheckFailed {
    #[error(transparent)]
    Runtime(#[from] super::preamble::NoRuntime),
    /// The subagent's or a command mode's probe run failed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

/// The subagent's run, then one per command mode, then the write
/// subagent's, then a command's behind the allowlist proxy. The allowlist
/// is reported but does not decide the exit code: it applies only where
/// `network = "allowlist"` is configured.
fn probe_every_role() -> Result<Summaries, CheckFailed> {
    let runtime = super::preamble::runtime()?;
    let probe = |role| check::probe_role(role, &runtime);
    let subagent = probe(ProbeRole::Subagent)?;
    let mut commands = Vec::new();
    for mode in COMMAND_MODES {
        commands.push((mode, probe(ProbeRole::Command(mode))?));
    }
    let write = check::probe_role(ProbeRole::WriteSubagent, &runtime);
    let allowlist = check::probe_role(ProbeRole::Allowlist, &runtime);
    Ok((subagent, commands, write, allowlist))
}
