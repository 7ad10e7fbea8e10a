//! The judgement of a role's frames and the report's text.

use std::os::unix::process::ExitStatusExt;

use super::*;
use crate::sandbox_check::verdict::Outcome;

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
    report_text(
        summary,
        &commands,
        None,
        None,
        SandboxMode::WorkspaceWrite,
        None,
    )
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
        text.contains(&format!("summary (commands, workspace-write, configured): {n}/{n} forbidden operations blocked, 4/4 controls allowed; sandbox enforced\n", n = forbidden_of_a_workspace_write_command())),
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
        text(&summary).starts_with("sandbox: refused: landlock is not available in this kernel\n")
    );
    let n = ProbeRole::Subagent.plan().0.len();
    assert!(text(&summary).contains(&format!("0/{n} forbidden operations blocked")));

    let silent = judge(Vec::new(), ok(), 0);
    assert!(!silent.enforced());
}

/// A run of a write subagent child; `tweak` spoils it.
fn write_frames(tweak: impl Fn(&str) -> Option<Outcome>) -> Vec<ProbeFrame> {
    let mut frames = vec![ProbeFrame::Sandboxed {
        report: report(true),
    }];
    let (forbidden, controls) = ProbeRole::WriteSubagent.plan();
    for name in forbidden {
        frames.push(probe(
            name,
            Expect::Blocked,
            tweak(name).unwrap_or_else(eacces),
        ));
    }
    for name in controls {
        let outcome = tweak(name).unwrap_or(Outcome::Succeeded);
        frames.push(probe(name, Expect::Allowed, outcome));
    }
    frames.push(ProbeFrame::Done);
    frames
}

fn judge_write(frames: Vec<ProbeFrame>) -> Summary {
    summarize(frames, ok(), 0, ProbeRole::WriteSubagent, |_| {})
}

#[test]
fn the_write_subagent_has_a_section_and_a_summary_of_its_own() {
    let subagent = judge(frames(|_| None), ok(), 0);
    let commands = [(SandboxMode::WorkspaceWrite, judge_command(command_frames()))];
    let write = judge_write(write_frames(|_| None));
    assert!(write.enforced(), "{:?}", write.problems);
    let text = report_text(
        &subagent,
        &commands,
        Some(&write),
        None,
        SandboxMode::WorkspaceWrite,
        None,
    );
    // The table of the other roles is the same as without it: no column.
    let without = report_text(
        &subagent,
        &commands,
        None,
        None,
        SandboxMode::WorkspaceWrite,
        None,
    );
    let table = |text: &str| -> Vec<String> {
        let lines = text.lines().filter(|l| l.starts_with("probe "));
        lines.map(str::to_owned).collect()
    };
    assert_eq!(table(&text), table(&without));
    assert!(
        text.contains("\nwrite subagent: landlock ABI 7, ruleset fully enforced, no_new_privs set, TCP denied, signals and abstract sockets scoped, seccomp filter, capabilities cut\nwrite-subagent probe rewrite-worktree-git-link: blocked (EACCES, landlock)\n"),
        "{text}"
    );
    assert!(
        text.contains("\nwrite-subagent probe git-status-and-log: allowed (control)\nsummary (commands, workspace-write, configured)"),
        "{text}"
    );
    // Its note is the subagent's, printed once.
    assert_eq!(
        text.matches("note: not covered by landlock here").count(),
        1,
        "{text}"
    );
    let n = ProbeRole::Subagent.plan().0.len();
    assert!(
        text.ends_with(&format!("summary (write subagent): 14/14 forbidden operations blocked, 2/2 controls allowed; write sandbox enforced\nsummary: {n}/{n} forbidden operations blocked, 3/3 controls allowed; read-only sandbox enforced\n")),
        "{text}"
    );

    // A redirect that got through, or git that cannot read its own
    // repository, fails it.
    let leaky = judge_write(write_frames(|name| {
        (name == "rewrite-worktree-git-link").then_some(Outcome::Succeeded)
    }));
    assert!(!leaky.enforced());
    let text = report_text(
        &subagent,
        &commands,
        Some(&leaky),
        None,
        SandboxMode::WorkspaceWrite,
        None,
    );
    assert!(
        text.contains("write-subagent probe rewrite-worktree-git-link: ALLOWED\n"),
        "{text}"
    );
    assert!(text.contains("summary (write subagent): 13/14 forbidden operations blocked"));
    let blind = judge_write(write_frames(|name| {
        (name == "git-status-and-log").then(eacces)
    }));
    assert!(!blind.enforced());
}

/// A run of a command child behind the allowlist proxy; `tweak` spoils it.
fn allowlist_frames(tweak: impl Fn(&str) -> Option<Outcome>) -> Vec<ProbeFrame> {
    let eperm = || Outcome::Failed {
        errno: "EPERM".to_owned(),
    };
    let mut frames = vec![ProbeFrame::Sandboxed {
        report: report(true),
    }];
    let (forbidden, controls) = ProbeRole::Allowlist.plan();
    for name in forbidden {
        let outcome = tweak(name).unwrap_or_else(eperm);
        frames.push(probe(name, Expect::Blocked, outcome));
    }
    for name in controls {
        let outcome = tweak(name).unwrap_or(Outcome::Succeeded);
        frames.push(probe(name, Expect::Allowed, outcome));
    }
    frames.push(ProbeFrame::Done);
    frames
}

#[test]
fn the_allowlist_has_a_section_and_a_summary_of_its_own() {
    let subagent = judge(frames(|_| None), ok(), 0);
    let commands = [(SandboxMode::WorkspaceWrite, judge_command(command_frames()))];
    let judge_allowlist = |frames| summarize(frames, ok(), 0, ProbeRole::Allowlist, |_| {});
    let mut allowlist = judge_allowlist(allowlist_frames(|_| None));
    allowlist.header = "a network namespace per command".to_owned();
    assert!(allowlist.enforced(), "{:?}", allowlist.problems);
    let text = report_text(
        &subagent,
        &commands,
        None,
        Some(Ok(&allowlist)),
        SandboxMode::WorkspaceWrite,
        None,
    );
    assert!(
        text.contains("\ncommands (network = \"allowlist\"): a network namespace per command\nallowlist probe tcp-connect: blocked (EPERM, seccomp)\nallowlist probe tcp-fast-open: blocked (EPERM, seccomp)\nallowlist probe tcp-bind: blocked (EPERM, seccomp)\nallowlist probe udp-send: blocked (EPERM, seccomp)\nallowlist probe dns-lookup: blocked (EPERM, seccomp)\nallowlist probe proxy-connect: allowed (control)\n"),
        "{text}"
    );
    let n = ProbeRole::Subagent.plan().0.len();
    assert!(
        text.ends_with(&format!("summary (commands, network = \"allowlist\"): 5/5 forbidden operations blocked, 1/1 controls allowed; allowlist confinement enforced\nsummary: {n}/{n} forbidden operations blocked, 3/3 controls allowed; read-only sandbox enforced\n")),
        "{text}"
    );
    // A direct connection that got through, or a proxy out of reach,
    // fails it; a kernel that cannot have it says so.
    let leaky = judge_allowlist(allowlist_frames(|name| {
        (name == "dns-lookup").then_some(Outcome::Succeeded)
    }));
    assert!(!leaky.enforced());
    let cut_off = judge_allowlist(allowlist_frames(|name| {
        (name == "proxy-connect").then(eacces)
    }));
    assert!(!cut_off.enforced());
    let text = report_text(
        &subagent,
        &commands,
        None,
        Some(Ok(&cut_off)),
        SandboxMode::WorkspaceWrite,
        None,
    );
    assert!(
        text.contains(
            "allowlist probe proxy-connect: FAILED (EACCES, a control the sandbox must allow)\n"
        ),
        "{text}"
    );
    let text = report_text(
        &subagent,
        &commands,
        None,
        Some(Err("no user namespace and landlock ABI 3")),
        SandboxMode::WorkspaceWrite,
        None,
    );
    assert!(
        text.contains("\ncommands (network = \"allowlist\"): cannot be enforced here: no user namespace and landlock ABI 3\nsummary (commands, workspace-write, configured)"),
        "{text}"
    );
    assert!(
        text.contains("\nsummary (commands, network = \"allowlist\"): allowlist confinement NOT available on this kernel\n"),
        "{text}"
    );
}

/// The forbidden operations of a workspace-write command here.
fn forbidden_of_a_workspace_write_command() -> usize {
    let contained = crate::sandbox::pidns::containment().uses_namespace();
    // The containment probes (setsid escape, process limit) where
    // commands get a PID namespace, and filling TMPDIR.
    let tmpfs = super::super::probes::limits::tmpdir_limit_probed();
    30 + 2 * usize::from(contained) + usize::from(tmpfs)
}

/// A subagent's process limit is said apart from a command's: the same
/// `pid_max` where a PID namespace can be had, else `RLIMIT_NPROC` only.
#[test]
fn a_subagents_process_limit_has_a_line_of_its_own() {
    let limits = crate::sandbox::limits::CommandLimits {
        max_processes: 299,
        tmpdir_mib: 1,
    };
    let commands = [(SandboxMode::WorkspaceWrite, judge_command(command_frames()))];
    let line_of = |subagent: &Summary| {
        let text = report_text(
            subagent,
            &commands,
            None,
            None,
            SandboxMode::WorkspaceWrite,
            Some(&limits),
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("limits of a subagent with all its commands together: "))
            .map(str::to_owned);
        line.unwrap_or_else(|| panic!("no subagent limits line: {text}"))
    };
    let mut subagent = judge(frames(|_| None), ok(), 0);
    subagent.pid_namespace = Some("a user and PID namespace per command".into());
    let namespaced = line_of(&subagent);
    let expected = crate::sandbox::limits::describe_process_limit(299);
    assert!(namespaced.ends_with(&expected), "{namespaced}");
    subagent.pid_namespace = None;
    let bare = line_of(&subagent);
    assert!(
        bare.ends_with("RLIMIT_NPROC only, which never binds root (no PID namespace here)"),
        "{bare}"
    );
}
