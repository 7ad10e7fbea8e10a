//! The probe child's side: it enters the sandbox, runs the probes of its
//! role's plan and writes one [`ProbeFrame`] per line (JSON) on stdout:
//! `sandboxed` (the report) or `refused` (the error), `containment` for a
//! subagent, one `probe` per probe, then `done`.

use std::io::{self, Read, Write};

use nix::errno::Errno;

use super::kernel::{command_namespace, command_report};
use super::table;
use super::targets::ProbeRole;
use super::targets::ProbeTargets;
use super::verdict::{Expect, Outcome, ProbeFrame, ProbeResult};
use crate::sandbox::child::{enter_child_sandbox, error_chain};
use crate::sandbox::policy::{SandboxReport, SandboxRequirement};

/// The probe child's whole life after argument parsing: enters the sandbox
/// (`Required`, with `targets.parent` as the expected parent), runs the
/// probes and writes [`ProbeFrame`]s to `out`, one JSON line each. With
/// `hold`, it then writes `holding` and stays sandboxed until `input` ends,
/// so a test can look at it from outside. Returns whether the sandbox was
/// entered; an error is a failed write to `out`.
pub fn run_child(
    targets: &ProbeTargets,
    hold: bool,
    out: &mut impl Write,
    input: &mut impl Read,
) -> io::Result<bool> {
    let report = match enter(targets) {
        Ok(report) => report,
        Err(err) => {
            let error = error_chain(&err);
            write_frame(out, &ProbeFrame::Refused { error })?;
            return Ok(false);
        }
    };
    let sandboxed = ProbeFrame::Sandboxed {
        report: report.clone(),
    };
    write_frame(out, &sandboxed)?;
    if targets.role == ProbeRole::Subagent {
        write_frame(out, &containment())?;
    }
    for result in run_probes(targets, &report) {
        write_frame(out, &ProbeFrame::Probe(result))?;
    }
    if hold {
        let pid = std::process::id();
        write_frame(out, &ProbeFrame::Holding { pid })?;
        io::copy(input, &mut io::sink())?;
    }
    write_frame(out, &ProbeFrame::Done)?;
    Ok(true)
}

/// The sandbox of the role: a subagent's child enters it here; a command
/// child was confined by its parent.
fn enter(targets: &ProbeTargets) -> Result<SandboxReport, crate::sandbox::SandboxError> {
    use crate::sandbox::child::{limit_processes, process_limit};
    match targets.role {
        // The process limit a subagent gets with its fork, then the rest,
        // as `fido __subagent` enters it: a write subagent's child was
        // started in its worktree, with its write and read roots (empty
        // for a read-only one).
        ProbeRole::Subagent | ProbeRole::WriteSubagent => {
            let workspace = if targets.role == ProbeRole::WriteSubagent {
                std::env::current_dir().ok()
            } else {
                Some(targets.dir.clone())
            };
            process_limit()
                .map_or(Ok(()), limit_processes)
                .and_then(|()| {
                    enter_child_sandbox(
                        targets.parent,
                        SandboxRequirement::Required,
                        &targets.deny,
                        &crate::sandbox::child::ChildRoots {
                            scratch: Some(&targets.scratch()),
                            workspace: workspace.as_deref(),
                            write: &targets.write_roots,
                            read: &targets.read_roots,
                        },
                    )
                })
        }
        ProbeRole::Command(_) | ProbeRole::Allowlist => Ok(command_report()),
    }
}

/// How this subagent child's process tree is contained.
fn containment() -> ProbeFrame {
    ProbeFrame::Containment {
        subreaper: nix::sys::prctl::get_child_subreaper().unwrap_or(false),
        pid_namespace: command_namespace().map(|kind| kind.to_string()),
    }
}

/// Runs every probe of the role's plan, forbidden ones first, skipping
/// those this kernel cannot deny according to `report`. Call inside the
/// sandbox.
pub fn run_probes(targets: &ProbeTargets, report: &SandboxReport) -> Vec<ProbeResult> {
    let (forbidden, controls) = targets.role.plan_in_child();
    let plan = forbidden
        .iter()
        .map(|name| (*name, Expect::Blocked))
        .chain(controls.iter().map(|name| (*name, Expect::Allowed)));
    plan.map(|(name, expect)| run_probe(targets, report, name, expect))
        .collect()
}

fn run_probe(
    targets: &ProbeTargets,
    report: &SandboxReport,
    name: &str,
    expect: Expect,
) -> ProbeResult {
    let probe = table::find(name);
    let skip = probe.and_then(|probe| (probe.unsupported)(report));
    let outcome = match (probe, skip) {
        (Some(_), Some(reason)) if expect == Expect::Blocked => Outcome::Skipped { reason },
        (Some(probe), _) => outcome((probe.attempt)(targets)),
        (None, _) => Outcome::Skipped {
            reason: "no such probe".to_owned(),
        },
    };
    let failed = matches!(outcome, Outcome::Failed { .. });
    let mechanism = probe
        .filter(|_| failed)
        .and_then(|probe| (probe.seen_by_child)(report));
    ProbeResult {
        name: name.to_owned(),
        expect,
        outcome,
        side_effect_seen: false,
        mechanism,
    }
}

fn write_frame(out: &mut impl Write, frame: &ProbeFrame) -> io::Result<()> {
    let line = serde_json::to_string(frame).map_err(io::Error::other)?;
    writeln!(out, "{line}")?;
    out.flush()
}

fn outcome(result: io::Result<()>) -> Outcome {
    match result {
        Ok(()) => Outcome::Succeeded,
        Err(err) => Outcome::Failed {
            errno: errno_name(&err),
        },
    }
}

/// `EACCES` for a permission error, the error's text when it has no errno.
pub(super) fn errno_name(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => format!("{:?}", Errno::from_raw(code)),
        None => err.to_string(),
    }
}
