//! The parent's judgement of each role's run, and the text `fido sandbox
//! check` prints: a header per role, one line per probe with a column per
//! role, the notes, and a summary per role.

use std::process::ExitStatus;

use super::kernel::{fork_bomb_note, user_namespaces};
use super::table::CHMOD_NOTE;
use super::targets::ProbeRole;
use super::verdict::{Expect, Outcome, ProbeFrame, ProbeResult};
use crate::protocol::SandboxMode;
use crate::sandbox::policy::SandboxReport;

/// One role's verdict.
#[derive(Debug)]
pub struct Summary {
    /// What the sandbox put in place (after `sandbox: `).
    pub header: String,
    pub results: Vec<ProbeResult>,
    /// `warning:` and `note:` lines.
    pub notes: Vec<String>,
    pub problems: Vec<String>,
    blocked: usize,
    forbidden: usize,
    allowed: usize,
    controls: usize,
    /// The child's stderr and stray stdout, shown when the check fails.
    pub child_output: Vec<String>,
    /// Whether the child was a child subreaper (subagent only).
    subreaper: Option<bool>,
    /// The PID namespace its commands get, where one is allowed.
    pid_namespace: Option<String>,
}

impl Summary {
    /// Fully enforced, every forbidden probe blocked, every control
    /// allowed, and the child ran to the end.
    pub fn enforced(&self) -> bool {
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

    /// The child's stderr and stray lines on stderr, when it said anything.
    pub fn print_child_output(&self) {
        if self.child_output.iter().all(|l| l.trim().is_empty()) {
            return;
        }
        eprintln!("fido: the probe child's output:");
        for line in &self.child_output {
            eprintln!("  {line}");
        }
    }
}

/// What the child's frames said, in one place.
#[derive(Default)]
struct Frames {
    report: Option<SandboxReport>,
    refused: Option<String>,
    results: Vec<ProbeResult>,
    done: bool,
    subreaper: Option<bool>,
    pid_namespace: Option<String>,
}

impl Frames {
    fn read(frames: Vec<ProbeFrame>) -> Frames {
        let mut read = Frames::default();
        for frame in frames {
            match frame {
                ProbeFrame::Sandboxed { report } => read.report = Some(report),
                ProbeFrame::Containment {
                    subreaper,
                    pid_namespace,
                } => {
                    read.subreaper = Some(subreaper);
                    read.pid_namespace = pid_namespace;
                }
                ProbeFrame::Refused { error } => read.refused = Some(error),
                ProbeFrame::Probe(result) => read.results.push(result),
                ProbeFrame::Holding { .. } => {}
                ProbeFrame::Done => read.done = true,
            }
        }
        read
    }
}

/// Judges the child's frames for `role`; `verify` marks the probes whose
/// side effect the parent can see.
pub fn summarize(
    frames: Vec<ProbeFrame>,
    status: ExitStatus,
    garbage_lines: usize,
    role: ProbeRole,
    verify: impl FnOnce(&mut [ProbeResult]),
) -> Summary {
    let mut read = Frames::read(frames);
    verify(&mut read.results);
    let (planned_forbidden, planned_controls) = role.plan();
    let mut problems: Vec<String> = Vec::new();
    let (header, notes) = header_and_notes(&read, role, &mut problems);
    let tally = Tally::of(&read.results);
    if read.report.is_some() {
        let planned = (planned_forbidden.len(), planned_controls.len());
        problems.extend(tally.shortfalls(planned, read.done));
    }
    let subagent = role == ProbeRole::Subagent && read.report.is_some();
    if subagent && read.subreaper != Some(true) {
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
        results: read.results,
        notes,
        problems,
        blocked: tally.blocked,
        forbidden: planned_forbidden.len(),
        allowed: tally.allowed,
        controls: planned_controls.len(),
        child_output: Vec::new(),
        subreaper: read.subreaper,
        pid_namespace: read.pid_namespace,
    }
}

/// How many probes of each kind ran, and how many of them passed.
struct Tally {
    forbidden: usize,
    controls: usize,
    blocked: usize,
    allowed: usize,
}

impl Tally {
    fn of(results: &[ProbeResult]) -> Tally {
        let count = |expect, passed: bool| {
            results
                .iter()
                .filter(|r| r.expect == expect && (!passed || r.verdict().passed()))
                .count()
        };
        Tally {
            forbidden: count(Expect::Blocked, false),
            controls: count(Expect::Allowed, false),
            blocked: count(Expect::Blocked, true),
            allowed: count(Expect::Allowed, true),
        }
    }

    /// What falls short of the plan's `(forbidden, controls)` counts.
    fn shortfalls(&self, planned: (usize, usize), done: bool) -> Vec<String> {
        let mut problems = Vec::new();
        if (self.forbidden, self.controls) != planned || !done {
            problems.push("the probe child stopped before every probe ran".to_owned());
        }
        if self.blocked != self.forbidden {
            let missed = self.forbidden - self.blocked;
            problems.push(format!("{missed} forbidden operation(s) not blocked"));
        }
        if self.allowed != self.controls {
            let failed = self.controls - self.allowed;
            problems.push(format!("{failed} control operation(s) failed"));
        }
        problems
    }
}

/// The role's header and its `warning:`/`note:` lines; what the sandbox
/// lacked goes to `problems`.
fn header_and_notes(
    read: &Frames,
    role: ProbeRole,
    problems: &mut Vec<String>,
) -> (String, Vec<String>) {
    let mut notes = Vec::new();
    let header = match (&read.report, &read.refused) {
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
                notes.extend(fork_bomb_note().map(|n| format!("note: {n}")));
            }
            if role == ProbeRole::Command(SandboxMode::WorkspaceWrite) {
                notes.push(format!("note: {CHMOD_NOTE}"));
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
    (header, notes)
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

/// The whole report: a header per role, one line per probe with a column
/// per role, the notes, the write subagent's section, the allowlist's
/// (`None`: not probed; `Err`: why it cannot be had here), and a summary
/// per role.
pub fn report_text(
    subagent: &Summary,
    commands: &[(SandboxMode, Summary)],
    write: Option<&Summary>,
    allowlist: Option<Result<&Summary, &str>>,
    configured: SandboxMode,
    limits: Option<&crate::sandbox::limits::CommandLimits>,
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
    out.push_str(&probe_lines(subagent, commands));
    let mut notes: Vec<&String> = subagent.notes.iter().collect();
    for note in commands.iter().flat_map(|(_, summary)| &summary.notes) {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    for note in &notes {
        out.push_str(note);
        out.push('\n');
    }
    if let Some(write) = write {
        out.push_str(&write_subagent_section(write, &notes));
    }
    if let Some(allowlist) = allowlist {
        out.push_str(&allowlist_section(allowlist, &notes));
    }
    if let Some(limits) = limits {
        out.push_str(&limits_line(limits, commands));
        out.push_str(&subagent_limits_line(
            limits,
            subagent.pid_namespace.is_some(),
        ));
    }
    out.push_str(&summary_lines(
        subagent, commands, write, allowlist, configured,
    ));
    out
}

/// The allowlist's section: how this kernel keeps a command to the proxy
/// (`sandbox::netns`), one line per probe and its notes not printed
/// above (`printed`); or why it cannot be had here.
fn allowlist_section(allowlist: Result<&Summary, &str>, printed: &[&String]) -> String {
    let summary = match allowlist {
        Ok(summary) => summary,
        Err(error) => return format!("{ALLOWLIST}: cannot be enforced here: {error}\n"),
    };
    let mut out = format!("{ALLOWLIST}: {}\n", summary.header);
    for result in &summary.results {
        out.push_str(&format!("allowlist {}\n", result.line()));
    }
    for note in summary.notes.iter().filter(|note| !printed.contains(note)) {
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// How the allowlist's lines begin.
const ALLOWLIST: &str = "commands (network = \"allowlist\")";

/// The write subagent's own section: its sandbox, one line per probe (its
/// probes are its own, so they get no column in the table above) and its
/// notes not printed above (`printed`).
fn write_subagent_section(write: &Summary, printed: &[&String]) -> String {
    let mut out = format!("write subagent: {}\n", write.header);
    for result in &write.results {
        out.push_str(&format!("write-subagent {}\n", result.line()));
    }
    for note in write.notes.iter().filter(|note| !printed.contains(note)) {
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// One line per probe any role ran, the subagent's first, a column per role.
fn probe_lines(subagent: &Summary, commands: &[(SandboxMode, Summary)]) -> String {
    let mut names: Vec<String> = subagent.results.iter().map(|r| r.name.clone()).collect();
    for (_, summary) in commands {
        for result in &summary.results {
            if !names.contains(&result.name) {
                names.push(result.name.clone());
            }
        }
    }
    let mut out = String::new();
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
    out
}

/// A summary per command mode, the allowlist's, the write subagent's,
/// then the subagent's, last.
fn summary_lines(
    subagent: &Summary,
    commands: &[(SandboxMode, Summary)],
    write: Option<&Summary>,
    allowlist: Option<Result<&Summary, &str>>,
    configured: SandboxMode,
) -> String {
    let mut out = String::new();
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
    match allowlist {
        Some(Ok(summary)) => out.push_str(&format!(
            "summary (commands, network = \"allowlist\"): {}\n",
            summary.line("allowlist confinement")
        )),
        Some(Err(_)) => out.push_str(
            "summary (commands, network = \"allowlist\"): allowlist confinement NOT available on this kernel\n",
        ),
        None => {}
    }
    if let Some(write) = write {
        out.push_str(&format!(
            "summary (write subagent): {}\n",
            write.line("write sandbox")
        ));
    }
    out.push_str(&format!(
        "summary: {}\n",
        subagent.line("read-only sandbox")
    ));
    out
}

/// How a subagent's process tree is contained on this kernel: a PID
/// namespace per command where the sandbox allows one (`sandbox::pidns`),
/// and always the subreaper and the sweep (`process::sweep`).
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

#[cfg(test)]
mod tests;

/// The configured limits of a command, and what keeps them here: the
/// process limit where this kernel has a `pid_max` per PID namespace, the
/// `TMPDIR` size where the workspace-write probe found a tmpfs.
fn limits_line(
    limits: &crate::sandbox::limits::CommandLimits,
    commands: &[(SandboxMode, Summary)],
) -> String {
    let processes = crate::sandbox::limits::describe_process_limit(limits.max_processes);
    let fill = commands
        .iter()
        .filter(|(mode, _)| *mode == SandboxMode::WorkspaceWrite)
        .flat_map(|(_, summary)| &summary.results)
        .find(|result| result.name == super::probes::limits::FILL_TMPDIR.name);
    let tmpdir = match fill.map(|result| &result.outcome) {
        Some(Outcome::Failed { errno }) if errno == "ENOSPC" => {
            format!("at most {} MiB (a tmpfs of its own)", limits.tmpdir_mib)
        }
        Some(_) => "NOT limited (probe fill-tmpdir did not run into its size)".to_owned(),
        None => "not limited (Fido cannot mount a tmpfs here: that needs CAP_SYS_ADMIN)".to_owned(),
    };
    format!("limits of a command: {processes}; TMPDIR {tmpdir}\n")
}

/// The process limit of a subagent with everything its commands start:
/// the same `pid_max`, in the PID namespace Fido makes for the subagent
/// (`sandbox::subagent_ns`) where this kernel lets the subagent make one
/// for its commands (`namespaces`, the probe child's containment); else
/// only its `RLIMIT_NPROC`, which root never meets.
fn subagent_limits_line(
    limits: &crate::sandbox::limits::CommandLimits,
    namespaces: bool,
) -> String {
    let processes = if namespaces {
        crate::sandbox::limits::describe_process_limit(limits.max_processes)
    } else {
        "RLIMIT_NPROC only, which never binds root (no PID namespace here)".to_owned()
    };
    format!("limits of a subagent with all its commands together: {processes}\n")
}
