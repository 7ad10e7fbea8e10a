//! `fido sandbox check`: proves, in a real sandboxed child, what this
//! kernel enforces.
//!
//! The parent prepares the probe fixture, re-executes this binary as
//! `fido sandbox check --probe-child …` (hidden arguments, nextest's
//! `__double-spawn` idea) in its own process group with an empty
//! environment, reads the child's JSON frames, checks the side effects
//! itself, prints one line per probe and a summary, and always reaps the
//! child and removes the fixture. Exit 0 only when the ruleset was fully
//! enforced, every forbidden probe was blocked and every control allowed.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use clap::{Args, Subcommand};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::sandbox::ProcessGroup;
use crate::sandbox::probe::{self, ProbeFixture, ProbeFrame, ProbeResult, ProbeTargets};
use crate::sandbox::{SandboxReport, child::error_chain};

/// How long the probe child may take.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);
/// SIGTERM → SIGKILL grace for a probe child that ran over.
const KILL_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Try forbidden operations in a real sandboxed child and report what
    /// this kernel blocks; exit non-zero unless everything is blocked.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Internal: be the sandboxed probe child.
    #[arg(long, hide = true)]
    probe_child: bool,
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

pub(super) fn run(command: SandboxCommand) -> ExitCode {
    match command {
        SandboxCommand::Check(args) if args.probe_child => probe_child(args),
        SandboxCommand::Check(_) => check(),
    }
}

/// The child side: no logging set up, no runtime, a single thread.
fn probe_child(args: CheckArgs) -> ExitCode {
    let (Some(parent), Some(dir), Some(tcp_port), Some(abstract_name)) = (
        args.parent_pid,
        args.probe_dir,
        args.probe_port,
        args.probe_abstract,
    ) else {
        return super::fail(
            "--probe-child needs --parent-pid, --probe-dir, --probe-port and --probe-abstract",
        );
    };
    let targets = ProbeTargets {
        deny: probe::denied_paths(&dir),
        dir,
        tcp_port,
        abstract_name,
        parent: Pid::from_raw(parent),
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

fn check() -> ExitCode {
    super::init_logging();
    let fixture = match ProbeFixture::create() {
        Ok(fixture) => fixture,
        Err(err) => return super::fail(&format!("cannot prepare the probe directory: {err}")),
    };
    let run = match spawn_and_collect(&fixture) {
        Ok(run) => run,
        Err(message) => return super::fail(&message),
    };
    let code = render(&fixture, run);
    drop(fixture);
    code
}

fn spawn_and_collect(fixture: &ProbeFixture) -> Result<ChildRun, String> {
    let exe = std::env::current_exe()
        .map_err(|err| format!("cannot find the fido binary to re-execute: {err}"))?;
    let parent = Pid::this();
    let targets = fixture
        .targets(parent)
        .map_err(|err| format!("cannot read the probe listener's address: {err}"))?;
    let args: Vec<OsString> = vec![
        "sandbox".into(),
        "check".into(),
        "--probe-child".into(),
        "--parent-pid".into(),
        parent.as_raw().to_string().into(),
        "--probe-dir".into(),
        targets.dir.into_os_string(),
        "--probe-port".into(),
        targets.tcp_port.to_string().into(),
        "--probe-abstract".into(),
        targets.abstract_name.into(),
    ];
    let runtime = super::runtime()?;
    // block_on runs on this (main) thread, so the child's parent-death
    // signal is tied to a thread that outlives it.
    runtime.block_on(async move {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(args)
            .env_clear()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut group = ProcessGroup::spawn(&mut command)
            .map_err(|err| format!("cannot start the probe child: {err}"))?;
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
        // Whatever happened, nothing of the child's group stays behind.
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
    })
}

/// Prints the report, one line per probe and the summary; returns the exit
/// code.
fn render(fixture: &ProbeFixture, run: ChildRun) -> ExitCode {
    let summary = summarize(run.frames, run.status, run.garbage.len(), |results| {
        fixture.verify(results)
    });
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_all(summary.text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return super::fail(&format!("cannot write the report: {}", error_chain(&err)));
    }
    if summary.enforced {
        return ExitCode::SUCCESS;
    }
    if !run.stderr.trim().is_empty() || !run.garbage.is_empty() {
        eprintln!("fido: the probe child's output:");
        for line in run
            .garbage
            .iter()
            .map(String::as_str)
            .chain(run.stderr.lines())
        {
            eprintln!("  {line}");
        }
    }
    ExitCode::from(1)
}

/// The text `fido sandbox check` prints and its verdict.
#[derive(Debug)]
struct Summary {
    text: String,
    /// Fully enforced, every forbidden probe blocked, every control
    /// allowed, and the child ran to the end.
    enforced: bool,
}

/// Judges the child's frames; `verify` marks the probes whose side effect
/// the parent can see.
fn summarize(
    frames: Vec<ProbeFrame>,
    status: ExitStatus,
    garbage_lines: usize,
    verify: impl FnOnce(&mut [ProbeResult]),
) -> Summary {
    let mut report: Option<SandboxReport> = None;
    let mut refused: Option<String> = None;
    let mut results: Vec<ProbeResult> = Vec::new();
    let mut done = false;
    for frame in frames {
        match frame {
            ProbeFrame::Sandboxed { report: r } => report = Some(r),
            ProbeFrame::Refused { error } => refused = Some(error),
            ProbeFrame::Probe(result) => results.push(result),
            ProbeFrame::Holding { .. } => {}
            ProbeFrame::Done => done = true,
        }
    }
    verify(&mut results);

    let mut out = String::new();
    let mut problems: Vec<String> = Vec::new();
    match (&report, &refused) {
        (Some(report), _) => {
            out.push_str(&header(report));
            if !report.fully_enforced {
                problems.push("the ruleset was not fully enforced".to_owned());
            }
            if !report.no_new_privs {
                problems.push("no_new_privs was not set".to_owned());
            }
        }
        (None, Some(error)) => {
            out.push_str(&format!("sandbox: refused: {error}\n"));
            problems.push("the sandbox could not be entered".to_owned());
        }
        (None, None) => {
            out.push_str("sandbox: the probe child reported nothing\n");
            problems.push("the probe child reported nothing".to_owned());
        }
    }
    for result in &results {
        out.push_str(&result.line());
        out.push('\n');
    }
    if let Some(report) = &report {
        for warning in &report.warnings {
            out.push_str(&format!("warning: {warning}\n"));
        }
        for gap in &report.not_covered {
            out.push_str(&format!("note: not covered by landlock here: {gap}\n"));
        }
    }

    let forbidden: Vec<&ProbeResult> = results
        .iter()
        .filter(|r| r.expect == probe::Expect::Blocked)
        .collect();
    let controls: Vec<&ProbeResult> = results
        .iter()
        .filter(|r| r.expect == probe::Expect::Allowed)
        .collect();
    let blocked = forbidden.iter().filter(|r| r.verdict().passed()).count();
    let allowed = controls.iter().filter(|r| r.verdict().passed()).count();
    if report.is_some() {
        if forbidden.len() != probe::FORBIDDEN_PROBES.len()
            || controls.len() != probe::CONTROL_PROBES.len()
            || !done
        {
            problems.push("the probe child stopped before every probe ran".to_owned());
        }
        if blocked != forbidden.len() {
            problems.push(format!(
                "{} forbidden operation(s) not blocked",
                forbidden.len() - blocked
            ));
        }
        if allowed != controls.len() {
            problems.push(format!(
                "{} control operation(s) failed",
                controls.len() - allowed
            ));
        }
    }
    if !status.success() {
        problems.push(format!("the probe child exited with {status}"));
    }
    if garbage_lines > 0 {
        problems.push(format!(
            "the probe child printed {garbage_lines} unexpected line(s)"
        ));
    }
    let verdict = if problems.is_empty() {
        "read-only sandbox enforced".to_owned()
    } else {
        format!("read-only sandbox NOT enforced: {}", problems.join("; "))
    };
    out.push_str(&format!(
        "summary: {blocked}/{} forbidden operations blocked, {allowed}/{} controls allowed; {verdict}\n",
        probe::FORBIDDEN_PROBES.len(),
        probe::CONTROL_PROBES.len(),
    ));
    Summary {
        text: out,
        enforced: problems.is_empty(),
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
    format!("sandbox: {abi}, {ruleset}, {nnp}, {network}, {scoped}\n")
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
        })
    }

    fn eacces() -> Outcome {
        Outcome::Failed {
            errno: "EACCES".to_owned(),
        }
    }

    /// A complete, passing run; `tweak` spoils it.
    fn frames(tweak: impl Fn(&str) -> Option<Outcome>) -> Vec<ProbeFrame> {
        let mut frames = vec![ProbeFrame::Sandboxed {
            report: report(true),
        }];
        for name in probe::FORBIDDEN_PROBES {
            let outcome = tweak(name).unwrap_or_else(eacces);
            frames.push(probe(name, Expect::Blocked, outcome));
        }
        for name in probe::CONTROL_PROBES {
            let outcome = tweak(name).unwrap_or(Outcome::Succeeded);
            frames.push(probe(name, Expect::Allowed, outcome));
        }
        frames.push(ProbeFrame::Done);
        frames
    }

    fn ok() -> ExitStatus {
        ExitStatus::from_raw(0)
    }

    #[test]
    fn a_clean_run_is_enforced() {
        let summary = summarize(frames(|_| None), ok(), 0, |_| {});
        assert!(summary.enforced, "{}", summary.text);
        assert!(summary.text.contains("probe create: blocked (EACCES)\n"));
        assert!(
            summary
                .text
                .contains("note: not covered by landlock here: UDP")
        );
        assert!(
            summary
                .text
                .ends_with("summary: 11/11 forbidden operations blocked, 2/2 controls allowed; read-only sandbox enforced\n"),
            "{}",
            summary.text
        );
    }

    #[test]
    fn any_shortfall_fails_the_check() {
        let allowed = summarize(
            frames(|n| (n == "tcp-connect").then_some(Outcome::Succeeded)),
            ok(),
            0,
            |_| {},
        );
        assert!(!allowed.enforced);
        assert!(allowed.text.contains("probe tcp-connect: ALLOWED\n"));
        assert!(allowed.text.contains("10/11 forbidden operations blocked"));

        let skipped = summarize(
            frames(|n| {
                (n == "signal-parent").then(|| Outcome::Skipped {
                    reason: "old".to_owned(),
                })
            }),
            ok(),
            0,
            |_| {},
        );
        assert!(!skipped.enforced);

        let seen = summarize(frames(|_| None), ok(), 0, |results| {
            results[0].side_effect_seen = true;
        });
        assert!(!seen.enforced);
        assert!(
            seen.text
                .contains("probe write-existing: ALLOWED (the parent saw its effect)")
        );

        let control = summarize(frames(|n| (n == "read-file").then(eacces)), ok(), 0, |_| {});
        assert!(!control.enforced);

        let mut partial = frames(|_| None);
        partial[0] = ProbeFrame::Sandboxed {
            report: report(false),
        };
        let partial = summarize(partial, ok(), 0, |_| {});
        assert!(!partial.enforced);
        assert!(partial.text.contains("ruleset NOT fully enforced"));

        let mut cut = frames(|_| None);
        cut.truncate(5);
        assert!(!summarize(cut, ok(), 0, |_| {}).enforced);

        assert!(!summarize(frames(|_| None), ExitStatus::from_raw(9), 0, |_| {}).enforced);
        assert!(!summarize(frames(|_| None), ok(), 1, |_| {}).enforced);
    }

    #[test]
    fn a_refused_sandbox_fails_the_check() {
        let summary = summarize(
            vec![ProbeFrame::Refused {
                error: "landlock is not available in this kernel".to_owned(),
            }],
            ExitStatus::from_raw(1 << 8),
            0,
            |_| {},
        );
        assert!(!summary.enforced);
        assert!(
            summary
                .text
                .starts_with("sandbox: refused: landlock is not available in this kernel\n")
        );
        assert!(summary.text.contains("0/11 forbidden operations blocked"));

        let silent = summarize(Vec::new(), ok(), 0, |_| {});
        assert!(!silent.enforced);
    }
}
