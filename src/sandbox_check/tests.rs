//! The probes run unsandboxed in this test process: each really does what
//! it says, and is seen by the parent where it can be.

use std::io;
use std::time::Duration;

use nix::errno::Errno;
use nix::unistd::Pid;

use super::escape::marked_processes;
use super::kernel::command_namespace;
use super::probes::controls::{SCRATCH_FILE, shell_error};
use super::runner::errno_name;
use super::targets::scratch_dir;
use super::worktree::WorktreePaths;
use super::*;
use crate::sandbox::netns::stand_in::ProxyStandIn;
use crate::sandbox::policy::SandboxReport;

#[test]
fn errno_names() {
    let err = io::Error::from_raw_os_error(libc_eacces());
    assert_eq!(errno_name(&err), "EACCES");
    assert_eq!(errno_name(&io::Error::other("no errno")), "no errno");
}

fn libc_eacces() -> i32 {
    Errno::EACCES as i32
}

/// Unsandboxed, every forbidden probe succeeds and the parent sees every
/// effect it can look for: the probes really do what they say.
#[test]
fn unsandboxed_probes_get_through_and_are_seen() {
    let fixture = ProbeFixture::create().unwrap();
    let dir = fixture.dir().to_owned();
    // The signal probe sends SIGWINCH to "the parent": aim it at a
    // throwaway child instead of this test process.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
    targets.parent = Pid::from_raw(sleeper.id() as i32);
    let report = SandboxReport {
        landlock_abi: Some(7),
        fully_enforced: true,
        network_restricted: true,
        scoped: true,
        no_new_privs: true,
        warnings: Vec::new(),
        not_covered: Vec::new(),
    };
    let mut results = run_probes(&targets, &report);
    // The ptrace probe really attached (SEIZE does not stop it).
    let status = std::fs::read_to_string(format!("/proc/{}/status", sleeper.id())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("TracerPid:") && l != "TracerPid:\t0"),
        "{status}"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Out of a process that is no subreaper, the setsid'd process gets
    // away (the parent sees it and kills it), unless its command's PID
    // namespace took it down with the command.
    let marker = escape_marker(&dir);
    let contained = command_namespace().is_some();
    let escaped = usize::from(!contained);
    assert_eq!(marked_processes(&marker).len(), escaped);
    fixture.verify(&mut results);
    wait_until_gone(&marker);

    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let fork_bomb = super::kernel::fork_bomb_probed();
    let expected: Vec<&str> = FORBIDDEN_PROBES
        .iter()
        .chain(
            SUBAGENT_PROBES
                .iter()
                .filter(|p| fork_bomb || **p != "fork-bomb"),
        )
        .chain(CONTROL_PROBES.iter())
        .chain(SUBAGENT_CONTROLS.iter())
        .copied()
        .collect();
    assert_eq!(names, expected);
    for result in &results {
        // This process holds no canary: only a parent that gives its child
        // one (`spawn`) can show the probe getting through, which the
        // probe's own tests do.
        if result.name == "secret-env" {
            assert_eq!(
                result.line(),
                "probe secret-env: blocked (ENOENT, env policy)"
            );
            continue;
        }
        if contained && result.name == "setsid-escape" {
            assert_eq!(
                result.line(),
                "probe setsid-escape: blocked (ESRCH, PID namespace)"
            );
            continue;
        }
        if result.name.starts_with("make-") && !nix::unistd::geteuid().is_root() {
            // Only a process with CAP_MKNOD makes a device node, sandbox
            // or not.
            let errno = "EPERM".to_owned();
            assert_eq!(result.outcome, Outcome::Failed { errno }, "{}", result.name);
            continue;
        }
        match result.expect {
            Expect::Blocked => {
                assert_eq!(result.outcome, Outcome::Succeeded, "{}", result.name);
                assert_eq!(result.verdict(), Verdict::Allowed, "{}", result.name);
                let unseen = [
                    "tcp-bind",
                    "signal-parent",
                    "udp-send",
                    "read-credentials",
                    "read-parent-environ",
                    "ptrace-parent",
                    "read-outside-workspace",
                    "fork-bomb",
                    "open-terminal",
                    "type-into-terminal",
                    "drive-console",
                ];
                assert_eq!(
                    result.side_effect_seen,
                    !unseen.contains(&result.name.as_str()),
                    "{}",
                    result.name
                );
            }
            Expect::Allowed => assert_eq!(result.verdict(), Verdict::ControlAllowed),
        }
    }
    // The scratch control read its file back (a `ControlAllowed`
    // above); the shell's scratch folder went with its last reference,
    // as a subagent's does.
    assert!(!scratch_dir(&dir).join(SCRATCH_FILE).exists());
    drop(fixture);
    assert!(!dir.exists(), "the fixture directory is removed on drop");
    assert!(!scratch_dir(&dir).exists());
}

/// Unsandboxed, every write subagent probe gets through and the parent
/// sees its effect on the main repository, the private configuration, the
/// link's target or the worktree; the controls work.
#[test]
fn unsandboxed_write_subagent_probes_get_through_and_are_seen() {
    let fixture = ProbeFixture::for_role(ProbeRole::WriteSubagent).unwrap();
    let roots = fixture.write_roots().unwrap().clone();
    let targets = fixture
        .targets(Pid::this(), ProbeRole::WriteSubagent)
        .unwrap();
    assert_eq!(
        (targets.write_roots.clone(), targets.read_roots.clone()),
        (roots.write.clone(), roots.read.clone())
    );
    // The roots of a real worktree: the tree writable; the tree, the
    // private repository and the main objects readable.
    assert!(
        roots
            .workspace
            .ends_with(".fido-state/changes/sandbox-check/tree")
    );
    assert!(roots.read[2].ends_with("main/.git/objects"), "{roots:?}");
    let report = SandboxReport {
        landlock_abi: Some(7),
        fully_enforced: true,
        network_restricted: true,
        scoped: true,
        no_new_privs: true,
        warnings: Vec::new(),
        not_covered: Vec::new(),
    };
    let mut results = run_probes(&targets, &report);
    fixture.verify(&mut results);
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let expected: Vec<&str> = WRITE_SUBAGENT_PROBES
        .iter()
        .chain(WRITE_SUBAGENT_CONTROLS.iter())
        .copied()
        .collect();
    assert_eq!(names, expected);
    for result in &results {
        match result.expect {
            // Planted unsandboxed too; the parent's git never entered it.
            Expect::Blocked if result.name == "nested-repository-in-worktree" => {
                let errno = "ENOEXEC".to_owned();
                assert_eq!(result.verdict(), Verdict::Blocked { errno }, "{result:?}");
                assert!(!WorktreePaths::of(fixture.dir()).nested_marker().exists());
            }
            Expect::Blocked => {
                assert_eq!(result.outcome, Outcome::Succeeded, "{}", result.name);
                assert!(result.side_effect_seen, "{}", result.name);
            }
            Expect::Allowed => {
                assert_eq!(result.verdict(), Verdict::ControlAllowed, "{}", result.name);
            }
        }
    }
}

/// A fixture without a worktree cannot show that the main repository is
/// unchanged: every write subagent probe counts as seen there.
#[test]
fn write_subagent_effects_count_as_seen_without_a_worktree() {
    let fixture = ProbeFixture::create().unwrap();
    let mut results: Vec<ProbeResult> = WRITE_SUBAGENT_PROBES
        .iter()
        .map(|name| ProbeResult {
            name: (*name).to_owned(),
            expect: Expect::Blocked,
            outcome: Outcome::Failed {
                errno: "EACCES".to_owned(),
            },
            side_effect_seen: false,
            mechanism: None,
        })
        .collect();
    fixture.verify(&mut results);
    assert!(results.iter().all(|r| r.side_effect_seen));
}

/// Waits (a few seconds at most) until no live process has `marker`.
fn wait_until_gone(marker: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !marked_processes(marker).is_empty() {
        assert!(std::time::Instant::now() < deadline, "{marker} left behind");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn shell_messages_map_to_errnos() {
    let denied = shell_error("sh: 1: cannot create /x/y: Permission denied\n");
    assert_eq!(errno_name(&denied), "EACCES");
    assert_eq!(errno_name(&shell_error("sh: File too large")), "EFBIG");
    assert_eq!(errno_name(&shell_error("odd\n")), "the shell failed: odd");
}

/// Unsandboxed, every allowlist probe gets through: the direct
/// connection reaches the fixture's listener, the proxy's stand-in answers
/// on its own port.
#[test]
fn unsandboxed_allowlist_probes_get_through() {
    let fixture = ProbeFixture::for_role(ProbeRole::Allowlist).unwrap();
    let stand_in = ProxyStandIn::start().unwrap();
    let mut targets = fixture.targets(Pid::this(), ProbeRole::Allowlist).unwrap();
    targets.proxy_port = Some(stand_in.route().port);
    let report = super::kernel::command_report();
    let mut results = run_probes(&targets, &report);
    fixture.verify(&mut results);
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let expected: Vec<&str> = ALLOWLIST_PROBES
        .iter()
        .chain(ALLOWLIST_CONTROLS.iter())
        .copied()
        .collect();
    assert_eq!(names, expected);
    for result in &results {
        match (result.name.as_str(), result.expect) {
            // Without a network the resolver may be unreachable; never
            // refused by a sandbox here.
            ("dns-lookup", _) => assert!(!result.verdict().passed(), "{result:?}"),
            (_, Expect::Blocked) => assert_eq!(result.verdict(), Verdict::Allowed, "{result:?}"),
            (_, Expect::Allowed) => assert_eq!(result.verdict(), Verdict::ControlAllowed),
        }
    }
    // The direct connection and the fast-open one both reached the
    // fixture's listener.
    assert!(
        results[0].side_effect_seen && results[1].side_effect_seen,
        "{results:?}"
    );
    assert_eq!(stand_in.served(), (0, 1));
    assert!(
        stand_in
            .misrouted(&crate::sandbox::netns::NetworkConfinement::Namespace)
            .is_some()
    );
}

#[test]
fn plans_hold_the_new_probes_where_they_apply() {
    let (forbidden, controls) = ProbeRole::Subagent.plan();
    assert!(forbidden.contains(&"ptrace-parent") && forbidden.contains(&"setsid-escape"));
    assert!(controls.contains(&"scratch-write"));
    use crate::protocol::SandboxMode;
    for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        let (forbidden, controls) = ProbeRole::Command(mode).plan();
        assert!(forbidden.contains(&"ptrace-parent"), "{mode}");
        assert!(!forbidden.contains(&"setsid-escape"), "{mode}");
        assert!(!controls.contains(&"scratch-write"), "{mode}");
    }
}

#[test]
fn skipped_probes_say_why() {
    let fixture = ProbeFixture::create().unwrap();
    let targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
    let report = SandboxReport {
        landlock_abi: Some(3),
        fully_enforced: true,
        network_restricted: false,
        scoped: false,
        no_new_privs: true,
        warnings: Vec::new(),
        not_covered: Vec::new(),
    };
    // Unsandboxed: the file probes get through, the rest is skipped.
    let results = run_probes(&targets, &report);
    let skipped: Vec<&str> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Skipped { .. }))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        skipped,
        [
            "tcp-connect",
            "tcp-bind",
            "signal-parent",
            "abstract-unix-connect"
        ]
    );
    let tcp = results.iter().find(|r| r.name == "tcp-connect").unwrap();
    assert!(
        tcp.line()
            .contains("TCP rules need landlock ABI 4, this kernel has 3")
    );
}
