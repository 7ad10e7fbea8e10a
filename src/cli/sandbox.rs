//! `fido sandbox check`: proves, in real sandboxed children, what this
//! kernel enforces for subagents and for the main agent's commands.
//!
//! For each role (the subagent; commands in `read-only` and in
//! `workspace-write`) the parent prepares a fresh probe fixture,
//! re-executes this binary as `fido sandbox check --probe-child …` (hidden
//! arguments, nextest's `__double-spawn` idea) in its own process group
//! with an empty environment, reads the child's JSON frames, checks the
//! side effects itself, and always reaps the child and removes the
//! fixture. A subagent child enters its sandbox itself; a command child is
//! confined between fork and exec by the session code of `bash_exec`
//! ([`CommandSandbox`]). The report has one line per probe, one column per
//! role, and a `containment:` line says how a subagent's process tree is
//! kept from escaping (a PID namespace per command where the kernel allows
//! one in the sandbox, and always a child subreaper and a sweep of its
//! descendants; the line says which). Exit 0 only when
//! the subagent sandbox and the configured
//! `sandbox_mode` are fully enforced: every forbidden probe blocked, every
//! control allowed.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use super::preamble::{ConfigWarnings, load_config};
use crate::config::Overrides;
use crate::protocol::SandboxMode;
use crate::sandbox::probe::{self, ProbeFixture, ProbeFrame, ProbeResult, ProbeRole, ProbeTargets};
use crate::sandbox::{CommandPolicy, CommandSandbox, ProcessGroup};
use crate::sandbox::{SandboxReport, child::error_chain};

/// How long the probe child may take.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
/// SIGTERM → SIGKILL grace for a probe child that ran over.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// The command modes that have a sandbox to probe.
const COMMAND_MODES: [SandboxMode; 2] = [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite];

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Try forbidden operations in real sandboxed children (a subagent's,
    /// and the main agent's commands in each mode) and report what this
    /// kernel blocks; exit non-zero unless what the configuration requires
    /// is enforced.
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
        deny: probe::denied_paths(&dir),
        dir,
        tcp_port,
        abstract_name,
        parent: Pid::from_raw(parent),
        role,
    };
    let stdout = std::io::stdout();
    let stdin = std::io::stdin();
    match probe::run_child(
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

/// What came back from the probe child.
struct ChildRun {
    status: ExitStatus,
    frames: Vec<ProbeFrame>,
    stderr: String,
    /// Lines that were not frames (a bug, or a panic message on stdout).
    garbage: Vec<String>,
}

fn check(overrides: &Overrides) -> ExitCode {
    super::init_logging();
    let configured = match load_config(overrides, ConfigWarnings::Keep) {
        Ok(config) => config.safety.sandbox_mode,
        Err(code) => return code,
    };
    let subagent = match probe_role(ProbeRole::Subagent) {
        Ok(summary) => summary,
        Err(message) => return super::fail(&message),
    };
    let mut commands = Vec::new();
    for mode in COMMAND_MODES {
        match probe_role(ProbeRole::Command(mode)) {
            Ok(summary) => commands.push((mode, summary)),
            Err(message) => return super::fail(&message),
        }
    }
    let text = report_text(&subagent, &commands, configured);
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return super::fail(&format!("cannot write the report: {}", error_chain(&err)));
    }
    let required = std::iter::once(&subagent).chain(
        commands
            .iter()
            .filter(|(mode, _)| *mode == configured)
            .map(|(_, summary)| summary),
    );
    let mut enforced = true;
    for summary in required {
        if !summary.enforced() {
            enforced = false;
            summary.print_child_output();
        }
    }
    if enforced {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// One role's run on a fresh fixture.
fn probe_role(role: ProbeRole) -> Result<Summary, String> {
    let fixture = ProbeFixture::create()
        .map_err(|err| format!("cannot prepare the probe directory: {err}"))?;
    let run = spawn_and_collect(&fixture, role)?;
    let mut summary = summarize(run.frames, run.status, run.garbage.len(), role, |results| {
        fixture.verify(results)
    });
    summary.child_output = run
        .garbage
        .into_iter()
        .chain(run.stderr.lines().map(str::to_owned))
        .collect();
    Ok(summary)
}

fn spawn_and_collect(fixture: &ProbeFixture, role: ProbeRole) -> Result<ChildRun, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("cannot find the fido binary to re-execute: {err}"))?;
    let parent = Pid::this();
    let targets = fixture
        .targets(parent, role)
        .map_err(|err| format!("cannot read the probe listener's address: {err}"))?;
    let sandbox = match role {
        ProbeRole::Subagent => None,
        ProbeRole::Command(mode) => Some(Arc::new(
            CommandSandbox::prepare(&CommandPolicy {
                mode,
                network: false,
                workspace: targets.workspace(),
                writable_roots: Vec::new(),
                deny: targets.deny.clone(),
            })
            .map_err(|err| format!("commands ({mode}): {}", error_chain(&err)))?,
        )),
    };
    let args: Vec<OsString> = vec![
        "sandbox".into(),
        "check".into(),
        "--probe-child".into(),
        "--probe-as".into(),
        role.as_str().into(),
        "--parent-pid".into(),
        parent.as_raw().to_string().into(),
        "--probe-dir".into(),
        targets.dir.into_os_string(),
        "--probe-port".into(),
        targets.tcp_port.to_string().into(),
        "--probe-abstract".into(),
        targets.abstract_name.into(),
    ];
    let runtime = super::preamble::runtime()?;
    // block_on runs on this (main) thread, so the child's parent-death
    // signal is tied to a thread that outlives it.
    runtime.block_on(async move {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(args)
            .env_clear()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sandbox) = &sandbox {
            sandbox.apply(&mut command);
        }
        let group = ProcessGroup::spawn(&mut command)
            .map_err(|err| format!("cannot start the probe child: {err}"))?;
        collect(group).await
    })
}

/// Reads the child's output to the end (within [`CHILD_TIMEOUT`]), reaps
/// it and leaves nothing of its group behind.
async fn collect(mut group: ProcessGroup) -> Result<ChildRun, String> {
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
        Ok((_, _, Err(err))) => Err(format!("cannot wait for the probe child {pid}: {err}")),
        Err(_) => {
            let _ = group.terminate(KILL_GRACE).await;
            Err(format!(
                "the probe child {pid} did not finish within {}s and was killed",
                CHILD_TIMEOUT.as_secs()
            ))
        }
    };
    if group.group_alive() {
        let _ = group.terminate(KILL_GRACE).await;
    }
    let (out, err, status) = result?;
    let mut frames = Vec::new();
    let mut garbage = Vec::new();
    for line in String::from_utf8_lossy(&out).lines() {
        match serde_json::from_str::<ProbeFrame>(line) {
            Ok(frame) => frames.push(frame),
            Err(_) => garbage.push(line.to_owned()),
        }
    }
    Ok(ChildRun {
        status,
        frames,
        stderr: String::from_utf8_lossy(&err).into_owned(),
        garbage,
    })
}

/// The whole report: a header per role, one line per probe with a column
/// per role, the notes, and a summary per role.
fn report_text(
    subagent: &Summary,
    commands: &[(SandboxMode, Summary)],
    configured: SandboxMode,
) -> String {
    let mut out = format!("sandbox: {}\n", subagent.header);
    for (mode, summary) in commands {
        out.push_str(&format!("commands ({mode}): {}\n", summary.header));
    }
    out.push_str("commands (danger-full-access): no sandbox, every probe allowed\n");
    out.push_str(&containment_line(
        subagent.subreaper,
        subagent.pid_namespace.as_deref(),
    ));
    out.push('\n');
    let mut names: Vec<String> = subagent.results.iter().map(|r| r.name.clone()).collect();
    for (_, summary) in commands {
        for result in &summary.results {
            if !names.contains(&result.name) {
                names.push(result.name.clone());
            }
        }
    }
    for name in &names {
        let cell = |summary: &Summary| {
            summary
                .results
                .iter()
                .find(|r| &r.name == name)
                .map_or_else(|| "n/a".to_owned(), ProbeResult::cell)
        };
        let mut line = format!("probe {name}: {}", cell(subagent));
        for (mode, summary) in commands {
            line.push_str(&format!(" | {mode}: {}", cell(summary)));
        }
        line.push_str(" | danger-full-access: allowed\n");
        out.push_str(&line);
    }
    let mut notes: Vec<&String> = subagent.notes.iter().collect();
    for note in commands.iter().flat_map(|(_, summary)| &summary.notes) {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    for note in notes {
        out.push_str(note);
        out.push('\n');
    }
    for (mode, summary) in commands {
        let marker = if *mode == configured {
            ", configured"
        } else {
            ""
        };
        out.push_str(&format!(
            "summary (commands, {mode}{marker}): {}\n",
            summary.line("sandbox")
        ));
    }
    if configured == SandboxMode::DangerFullAccess {
        out.push_str(
            "summary (commands, danger-full-access, configured): commands run without a sandbox\n",
        );
    }
    out.push_str(&format!(
        "summary: {}\n",
        subagent.line("read-only sandbox")
    ));
    out
}

/// How a subagent's process tree is contained on this kernel: a PID
/// namespace per command where the sandbox allows one (`sandbox::pidns`),
/// and always the subreaper and the sweep (`sandbox::sweep`).
fn containment_line(subreaper: Option<bool>, pid_namespace: Option<&str>) -> String {
    let how = match subreaper {
        Some(true) => "child subreaper plus a sweep of its descendants",
        Some(false) => "NOT contained: the probe child is not a child subreaper",
        None => "unknown: the probe child did not say",
    };
    match pid_namespace {
        Some(namespace) => format!("containment: {namespace}, and a {how}"),
        None => format!(
            "containment: {how} (no PID namespace for commands: it needs an unprivileged user namespace, {})",
            user_namespaces()
        ),
    }
}

/// What this kernel says about unprivileged user namespaces.
fn user_namespaces() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|value| value.trim().to_owned())
    };
    match (
        read("/proc/sys/user/max_user_namespaces"),
        read("/proc/sys/kernel/unprivileged_userns_clone"),
    ) {
        (Some(max), _) if max == "0" => {
            "and this kernel allows none (user.max_user_namespaces = 0)".to_owned()
        }
        (_, Some(clone)) if clone == "0" => {
            "and this kernel forbids them (kernel.unprivileged_userns_clone = 0)".to_owned()
        }
        (Some(max), _) => format!(
            "which this kernel allows (user.max_user_namespaces = {max}) but containers and hardened kernels often forbid"
        ),
        (None, _) => "and this kernel has no user namespaces".to_owned(),
    }
}

/// One role's verdict.
#[derive(Debug)]
struct Summary {
    /// What the sandbox put in place (after `sandbox: `).
    header: String,
    results: Vec<ProbeResult>,
    /// `warning:` and `note:` lines.
    notes: Vec<String>,
    problems: Vec<String>,
    blocked: usize,
    forbidden: usize,
    allowed: usize,
    controls: usize,
    /// The child's stderr and stray stdout, shown when the check fails.
    child_output: Vec<String>,
    /// Whether the child was a child subreaper (subagent only).
    subreaper: Option<bool>,
    /// The PID namespace its commands get, where one is allowed.
    pid_namespace: Option<String>,
}

impl Summary {
    /// Fully enforced, every forbidden probe blocked, every control
    /// allowed, and the child ran to the end.
    fn enforced(&self) -> bool {
        self.problems.is_empty()
    }

    fn line(&self, what: &str) -> String {
        let verdict = if self.problems.is_empty() {
            format!("{what} enforced")
        } else {
            format!("{what} NOT enforced: {}", self.problems.join("; "))
        };
        format!(
            "{}/{} forbidden operations blocked, {}/{} controls allowed; {verdict}",
            self.blocked, self.forbidden, self.allowed, self.controls
        )
    }

    fn print_child_output(&self) {
        if self.child_output.iter().all(|l| l.trim().is_empty()) {
            return;
        }
        eprintln!("fido: the probe child's output:");
        for line in &self.child_output {
            eprintln!("  {line}");
        }
    }
}

/// Judges the child's frames for `role`; `verify` marks the probes whose
/// side effect the parent can see.
fn summarize(
    frames: Vec<ProbeFrame>,
    status: ExitStatus,
    garbage_lines: usize,
    role: ProbeRole,
    verify: impl FnOnce(&mut [ProbeResult]),
) -> Summary {
    let mut report: Option<SandboxReport> = None;
    let mut refused: Option<String> = None;
    let mut results: Vec<ProbeResult> = Vec::new();
    let mut done = false;
    let mut subreaper = None;
    let mut pid_namespace = None;
    for frame in frames {
        match frame {
            ProbeFrame::Sandboxed { report: r } => report = Some(r),
            ProbeFrame::Containment {
                subreaper: s,
                pid_namespace: namespace,
            } => {
                subreaper = Some(s);
                pid_namespace = namespace;
            }
            ProbeFrame::Refused { error } => refused = Some(error),
            ProbeFrame::Probe(result) => results.push(result),
            ProbeFrame::Holding { .. } => {}
            ProbeFrame::Done => done = true,
        }
    }
    verify(&mut results);
    let (planned_forbidden, planned_controls) = role.plan();
    let mut problems: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    let header = match (&report, &refused) {
        (Some(report), _) => {
            if !report.fully_enforced {
                problems.push("the ruleset was not fully enforced".to_owned());
            }
            if !report.no_new_privs {
                problems.push("no_new_privs was not set".to_owned());
            }
            notes.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
            notes.extend(report.not_covered.iter().map(|gap| {
                format!("note: not covered by landlock here (the seccomp filter blocks it): {gap}")
            }));
            if role == ProbeRole::Subagent {
                notes.extend(crate::sandbox::probe::fork_bomb_note().map(|n| format!("note: {n}")));
            }
            if role == ProbeRole::Command(SandboxMode::WorkspaceWrite) {
                notes.push(format!("note: {}", crate::sandbox::probe::CHMOD_NOTE));
            }
            header(report)
        }
        (None, Some(error)) => {
            problems.push("the sandbox could not be entered".to_owned());
            format!("refused: {error}")
        }
        (None, None) => {
            problems.push("the probe child reported nothing".to_owned());
            "the probe child reported nothing".to_owned()
        }
    };
    let count = |expect, passed: bool| {
        results
            .iter()
            .filter(|r| r.expect == expect && (!passed || r.verdict().passed()))
            .count()
    };
    let (forbidden, controls) = (
        count(probe::Expect::Blocked, false),
        count(probe::Expect::Allowed, false),
    );
    let (blocked, allowed) = (
        count(probe::Expect::Blocked, true),
        count(probe::Expect::Allowed, true),
    );
    if report.is_some() {
        if forbidden != planned_forbidden.len() || controls != planned_controls.len() || !done {
            problems.push("the probe child stopped before every probe ran".to_owned());
        }
        if blocked != forbidden {
            problems.push(format!(
                "{} forbidden operation(s) not blocked",
                forbidden - blocked
            ));
        }
        if allowed != controls {
            problems.push(format!(
                "{} control operation(s) failed",
                controls - allowed
            ));
        }
    }
    if role == ProbeRole::Subagent && report.is_some() && subreaper != Some(true) {
        problems.push("the child is not a child subreaper".to_owned());
    }
    if !status.success() {
        problems.push(format!("the probe child exited with {status}"));
    }
    if garbage_lines > 0 {
        problems.push(format!(
            "the probe child printed {garbage_lines} unexpected line(s)"
        ));
    }
    Summary {
        header,
        results,
        notes,
        problems,
        blocked,
        forbidden: planned_forbidden.len(),
        allowed,
        controls: planned_controls.len(),
        child_output: Vec::new(),
        subreaper,
        pid_namespace,
    }
}

fn header(report: &SandboxReport) -> String {
    let abi = match report.landlock_abi {
        Some(abi) => format!("landlock ABI {abi}"),
        None => "no landlock".to_owned(),
    };
    let ruleset = if report.fully_enforced {
        "ruleset fully enforced"
    } else {
        "ruleset NOT fully enforced"
    };
    let nnp = if report.no_new_privs {
        "no_new_privs set"
    } else {
        "no_new_privs NOT set"
    };
    let network = if report.network_restricted {
        "TCP denied"
    } else {
        "TCP not restricted"
    };
    let scoped = if report.scoped {
        "signals and abstract sockets scoped"
    } else {
        "signals and abstract sockets not scoped"
    };
    format!("{abi}, {ruleset}, {nnp}, {network}, {scoped}, seccomp filter, capabilities cut")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::probe::{Expect, Outcome};
    use std::os::unix::process::ExitStatusExt;

    fn report(fully_enforced: bool) -> SandboxReport {
        SandboxReport {
            landlock_abi: Some(7),
            fully_enforced,
            network_restricted: true,
            scoped: true,
            no_new_privs: true,
            warnings: Vec::new(),
            not_covered: vec!["UDP is not denied".to_owned()],
        }
    }

    fn probe(name: &str, expect: Expect, outcome: Outcome) -> ProbeFrame {
        ProbeFrame::Probe(ProbeResult {
            name: name.to_owned(),
            expect,
            outcome,
            side_effect_seen: false,
            mechanism: None,
        })
    }

    fn eacces() -> Outcome {
        Outcome::Failed {
            errno: "EACCES".to_owned(),
        }
    }

    /// A complete, passing run; `tweak` spoils it.
    fn frames(tweak: impl Fn(&str) -> Option<Outcome>) -> Vec<ProbeFrame> {
        let mut frames = vec![
            ProbeFrame::Sandboxed {
                report: report(true),
            },
            ProbeFrame::Containment {
                subreaper: true,
                pid_namespace: Some("a user and PID namespace per command".into()),
            },
        ];
        let (forbidden, controls) = ProbeRole::Subagent.plan();
        for name in forbidden {
            let outcome = tweak(name).unwrap_or_else(eacces);
            frames.push(probe(name, Expect::Blocked, outcome));
        }
        for name in controls {
            let outcome = tweak(name).unwrap_or(Outcome::Succeeded);
            frames.push(probe(name, Expect::Allowed, outcome));
        }
        frames.push(ProbeFrame::Done);
        frames
    }

    fn ok() -> ExitStatus {
        ExitStatus::from_raw(0)
    }

    fn judge(frames: Vec<ProbeFrame>, status: ExitStatus, garbage: usize) -> Summary {
        summarize(frames, status, garbage, ProbeRole::Subagent, |_| {})
    }

    fn text(summary: &Summary) -> String {
        let commands = [(SandboxMode::WorkspaceWrite, judge_command(command_frames()))];
        report_text(summary, &commands, SandboxMode::WorkspaceWrite)
    }

    /// A passing run of a workspace-write command child.
    fn command_frames() -> Vec<ProbeFrame> {
        let mut frames = vec![ProbeFrame::Sandboxed {
            report: report(true),
        }];
        let (forbidden, controls) = ProbeRole::Command(SandboxMode::WorkspaceWrite).plan();
        frames.extend(
            forbidden
                .iter()
                .map(|n| probe(n, Expect::Blocked, eacces())),
        );
        frames.extend(
            controls
                .iter()
                .map(|n| probe(n, Expect::Allowed, Outcome::Succeeded)),
        );
        frames.push(ProbeFrame::Done);
        frames
    }

    #[test]
    fn a_clean_run_is_enforced() {
        let summary = judge(frames(|_| None), ok(), 0);
        assert!(summary.enforced(), "{:?}", summary.problems);
        let text = text(&summary);
        assert!(
            text.contains("probe create: blocked (EACCES, landlock) | workspace-write: blocked (EACCES, landlock) | danger-full-access: allowed\n"),
            "{text}"
        );
        assert!(
            text.contains("probe write-tmpdir: n/a | workspace-write: allowed (control)"),
            "{text}"
        );
        assert!(
            text.contains("note: not covered by landlock here"),
            "{text}"
        );
        assert!(
            text.contains("summary (commands, workspace-write, configured): 17/17 forbidden operations blocked, 4/4 controls allowed; sandbox enforced\n"),
            "{text}"
        );
        assert!(
            text.contains("probe chmod: blocked (EACCES, landlock) | workspace-write: n/a | danger-full-access: allowed\n"),
            "{text}"
        );
        assert!(
            text.contains("note: a workspace-write command may change the mode of a file it owns outside the workspace"),
            "{text}"
        );
        assert!(
            text.contains("\ncontainment: a user and PID namespace per command, and a child subreaper plus a sweep of its descendants\n"),
            "{text}"
        );
        let n = ProbeRole::Subagent.plan().0.len();
        assert!(
            text.ends_with(&format!("summary: {n}/{n} forbidden operations blocked, 3/3 controls allowed; read-only sandbox enforced\n")),
            "{text}"
        );
    }

    #[test]
    fn any_shortfall_fails_the_check() {
        let allowed = judge(
            frames(|n| (n == "tcp-connect").then_some(Outcome::Succeeded)),
            ok(),
            0,
        );
        assert!(!allowed.enforced());
        assert!(text(&allowed).contains("probe tcp-connect: ALLOWED |"));
        let n = ProbeRole::Subagent.plan().0.len();
        assert!(text(&allowed).contains(&format!("{}/{n} forbidden operations blocked", n - 1)));

        let skipped = judge(
            frames(|n| {
                (n == "signal-parent").then(|| Outcome::Skipped {
                    reason: "old".to_owned(),
                })
            }),
            ok(),
            0,
        );
        assert!(!skipped.enforced());

        let seen = summarize(frames(|_| None), ok(), 0, ProbeRole::Subagent, |results| {
            results[0].side_effect_seen = true;
        });
        assert!(!seen.enforced());
        assert!(text(&seen).contains("probe write-existing: ALLOWED (the parent saw its effect)"));

        let control = judge(frames(|n| (n == "read-file").then(eacces)), ok(), 0);
        assert!(!control.enforced());

        let mut partial = frames(|_| None);
        partial[0] = ProbeFrame::Sandboxed {
            report: report(false),
        };
        let partial = judge(partial, ok(), 0);
        assert!(!partial.enforced());
        assert!(partial.header.contains("ruleset NOT fully enforced"));

        let mut cut = frames(|_| None);
        cut.truncate(5);
        assert!(!judge(cut, ok(), 0).enforced());

        assert!(!judge(frames(|_| None), ExitStatus::from_raw(9), 0).enforced());

        // Without a namespace the line says why none is used.
        let line = containment_line(Some(true), None);
        assert!(
            line.starts_with("containment: child subreaper plus a sweep of its descendants (no PID namespace for commands: it needs an unprivileged user namespace, "),
            "{line}"
        );

        // A subagent child that is no subreaper, or did not say.
        let mut loose = frames(|_| None);
        loose[1] = ProbeFrame::Containment {
            subreaper: false,
            pid_namespace: None,
        };
        let loose = judge(loose, ok(), 0);
        assert!(!loose.enforced());
        assert!(text(&loose).contains("containment: NOT contained"));
        let mut silent = frames(|_| None);
        silent.remove(1);
        assert!(!judge(silent, ok(), 0).enforced());
        assert!(!judge(frames(|_| None), ok(), 1).enforced());

        // A command column that lets a write through is a failure too.
        let mut leaky = command_frames();
        leaky[1] = probe("write-existing", Expect::Blocked, Outcome::Succeeded);
        assert!(!judge_command(leaky).enforced());
    }

    fn judge_command(frames: Vec<ProbeFrame>) -> Summary {
        summarize(
            frames,
            ok(),
            0,
            ProbeRole::Command(SandboxMode::WorkspaceWrite),
            |_| {},
        )
    }

    #[test]
    fn a_refused_sandbox_fails_the_check() {
        let summary = judge(
            vec![ProbeFrame::Refused {
                error: "landlock is not available in this kernel".to_owned(),
            }],
            ExitStatus::from_raw(1 << 8),
            0,
        );
        assert!(!summary.enforced());
        assert!(
            text(&summary)
                .starts_with("sandbox: refused: landlock is not available in this kernel\n")
        );
        let n = ProbeRole::Subagent.plan().0.len();
        assert!(text(&summary).contains(&format!("0/{n} forbidden operations blocked")));

        let silent = judge(Vec::new(), ok(), 0);
        assert!(!silent.enforced());
    }
}
