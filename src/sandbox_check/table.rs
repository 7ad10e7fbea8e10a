//! The probe table: every probe in the order it runs and prints, and which
//! of them each role's sandbox must pass.
//!
//! A probe lives with its operation in one file of [`super::probes`] as a
//! `const` [`Probe`]; it takes part once its name is listed here.

use super::kernel::{fork_bomb_expected, fork_bomb_probed};
use super::probe::Probe;
use super::probes::{
    controls, environment, files, limits, processes, protected, sockets, terminal, worktree,
};
use super::targets::ProbeRole;
use crate::protocol::SandboxMode;

/// Forbidden in every sandbox, in the order they run and print.
const FORBIDDEN: [&Probe; 31] = [
    &files::WRITE_EXISTING,
    &files::CREATE,
    &files::UNLINK,
    &files::RENAME,
    &files::TRUNCATE,
    &files::MKDIR,
    &files::SYMLINK,
    &files::HARDLINK,
    &files::CHMOD,
    &sockets::TCP_CONNECT,
    &sockets::TCP_BIND,
    &processes::SIGNAL_PARENT,
    &sockets::ABSTRACT_UNIX_CONNECT,
    &sockets::UDP_SEND,
    &sockets::UNIX_PATHNAME_CONNECT,
    &files::READ_CREDENTIALS,
    &processes::READ_PARENT_ENVIRON,
    &processes::PTRACE_PARENT,
    &protected::WRITE_GIT_CONFIG,
    &protected::CREATE_GIT_HOOK,
    &protected::RENAME_GIT,
    &protected::WRITE_FIDO_STATE,
    &protected::WRITE_FIDO_DIR,
    &protected::WRITE_FIDO_TOML,
    &protected::WRITE_GITLINK_GIT_CONFIG,
    &environment::SECRET_ENV,
    &terminal::OWN_SESSION,
    &terminal::MAKE_CHAR_DEVICE,
    &terminal::MAKE_BLOCK_DEVICE,
    &terminal::TYPE_INTO_TERMINAL,
    &terminal::DRIVE_CONSOLE,
];
/// Forbidden to a subagent only (the fork bomb last: it is left out where
/// `RLIMIT_NPROC` cannot apply).
const SUBAGENT: [&Probe; 3] = [
    &files::READ_OUTSIDE_WORKSPACE,
    &processes::SETSID_ESCAPE,
    &processes::FORK_BOMB,
];
/// Operations every sandbox must still allow.
const CONTROLS: [&Probe; 2] = [&controls::READ_FILE, &controls::WRITE_DEV_NULL];
/// What a subagent's commands must still be able to do.
const SUBAGENT_CONTROL: [&Probe; 1] = [&controls::SCRATCH_WRITE];
/// Allowed to a `workspace-write` command, forbidden (the workspace) in
/// `read-only`.
const WORKSPACE: [&Probe; 2] = [&controls::WRITE_WORKSPACE, &controls::WRITE_TMPDIR];
/// Forbidden to a sandboxed command where the kernel gives it a PID
/// namespace: leaving something running behind it.
/// Also more processes than its limit allows (skipped where the kernel
/// keeps `pid_max` for the whole machine).
const COMMAND: [&Probe; 2] = [
    &processes::COMMAND_SETSID_ESCAPE,
    &limits::EXCEED_PROCESS_LIMIT,
];
/// Forbidden to a `workspace-write` command: more bytes in `TMPDIR` than
/// its size (where it is a tmpfs of its own).
const TMPDIR_LIMIT: [&Probe; 1] = [&limits::FILL_TMPDIR];

/// Forbidden to a write subagent: everything of the main checkout and its
/// `.git` outside its worktree, whatever way git or a link is pointed at
/// them. The git commands first: the raw writes, should they get through,
/// would leave the main repository unusable for them.
const WRITE_SUBAGENT: [&Probe; 14] = [
    &worktree::REWRITE_GIT_LINK,
    &worktree::CHECKOUT_IN_MAIN,
    &worktree::GIT_DIR_MAIN,
    &worktree::CONFIG_HOOKS_PATH,
    &worktree::CONFIG_FSMONITOR,
    &worktree::WRITE_MAIN_CHECKOUT,
    &worktree::WRITE_MAIN_HEAD,
    &worktree::WRITE_MAIN_CONFIG,
    &worktree::CREATE_MAIN_REF,
    &worktree::CREATE_MAIN_OBJECT,
    &worktree::CREATE_MAIN_HOOK,
    &worktree::WRITE_THROUGH_ESCAPE_LINK,
    &worktree::HARDLINK_MAIN_FILE,
    &worktree::NESTED_REPOSITORY,
];
/// Forbidden to a command behind the allowlist proxy: every way to the
/// network but the proxy (a direct TCP connection to the parent's loopback
/// listener, also by TCP Fast Open, a TCP listener of its own, UDP, the
/// system's resolver).
const ALLOWLIST: [&Probe; 5] = [
    &sockets::TCP_CONNECT,
    &sockets::TCP_FAST_OPEN,
    &sockets::TCP_BIND,
    &sockets::UDP_SEND,
    &sockets::DNS_LOOKUP,
];
/// What a command behind the allowlist proxy must still be able to do:
/// reach the proxy.
const ALLOWLIST_CONTROL: [&Probe; 1] = [&sockets::PROXY_CONNECT];
/// What a write subagent must still be able to do.
const WRITE_SUBAGENT_CONTROL: [&Probe; 2] = [&worktree::WRITE_CLAIMED, &worktree::GIT_READS];

/// Probe names, in the order they run and print.
pub const FORBIDDEN_PROBES: [&str; 31] = names(FORBIDDEN);
pub const SUBAGENT_PROBES: [&str; 3] = names(SUBAGENT);
pub const CONTROL_PROBES: [&str; 2] = names(CONTROLS);
/// What a subagent's commands must still be able to do: write in the
/// scratch `TMPDIR`.
pub const SUBAGENT_CONTROLS: [&str; 1] = names(SUBAGENT_CONTROL);
/// Writing in the workspace and in `$TMPDIR`: allowed to a
/// `workspace-write` command, forbidden (the workspace) in `read-only`.
pub const WORKSPACE_PROBES: [&str; 2] = names(WORKSPACE);
/// Forbidden to a sandboxed command where it gets a PID namespace.
pub const COMMAND_PROBES: [&str; 2] = names(COMMAND);
/// Forbidden to a `workspace-write` command: filling its `TMPDIR`.
pub const TMPDIR_PROBES: [&str; 1] = names(TMPDIR_LIMIT);
/// Forbidden to a write subagent (its worktree's escapes).
pub const WRITE_SUBAGENT_PROBES: [&str; 14] = names(WRITE_SUBAGENT);
/// What a write subagent must still be able to do: write its claim, read
/// its repository with git.
pub const WRITE_SUBAGENT_CONTROLS: [&str; 2] = names(WRITE_SUBAGENT_CONTROL);
/// Forbidden to a command behind the allowlist proxy.
pub const ALLOWLIST_PROBES: [&str; 5] = names(ALLOWLIST);
/// What a command behind the allowlist proxy must still be able to do.
pub const ALLOWLIST_CONTROLS: [&str; 1] = names(ALLOWLIST_CONTROL);

const fn names<const N: usize>(probes: [&Probe; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = probes[i].name;
        i += 1;
    }
    out
}

/// Every probe of the table.
pub fn all() -> impl Iterator<Item = &'static Probe> {
    FORBIDDEN
        .into_iter()
        .chain(SUBAGENT)
        .chain(CONTROLS)
        .chain(SUBAGENT_CONTROL)
        .chain(WORKSPACE)
        .chain(COMMAND)
        .chain(TMPDIR_LIMIT)
        .chain(WRITE_SUBAGENT)
        .chain(WRITE_SUBAGENT_CONTROL)
        // The allowlist's own: the others are in every sandbox's list.
        .chain(
            ALLOWLIST
                .into_iter()
                .filter(|probe| !FORBIDDEN.iter().any(|f| f.name == probe.name)),
        )
        .chain(ALLOWLIST_CONTROL)
}

/// The probe of this name.
pub fn find(name: &str) -> Option<&'static Probe> {
    all().find(|probe| probe.name == name)
}

/// How a refusal was made, from the probe and its errno (for the line),
/// where the child did not say ([`super::ProbeResult::mechanism`]).
pub fn mechanism(probe: &str, errno: &str) -> &'static str {
    if errno == "EFBIG" {
        // The `RLIMIT_FSIZE` guard, whichever write ran into it.
        return "rlimit";
    }
    find(probe).map_or("landlock", |probe| probe.refused_by.name(errno))
}

/// Which probes each role runs is the table's to say.
impl ProbeRole {
    /// The forbidden probes and the controls this role must pass, in
    /// order, as the parent expects them.
    pub fn plan(self) -> (Vec<&'static str>, Vec<&'static str>) {
        self.plan_with(fork_bomb_expected())
    }

    /// The same, as the probe child itself can run them.
    pub fn plan_in_child(self) -> (Vec<&'static str>, Vec<&'static str>) {
        self.plan_with(fork_bomb_probed())
    }

    /// `fork_bomb`: whether a subagent runs the fork bomb.
    fn plan_with(self, fork_bomb: bool) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut forbidden = FORBIDDEN_PROBES.to_vec();
        let mut controls = CONTROL_PROBES.to_vec();
        match self {
            // Only a subagent is confined to its workspace and a process
            // headroom; the main agent's commands read like its user.
            ProbeRole::Subagent => {
                forbidden.extend(&SUBAGENT_PROBES[..2]);
                // Where no limit can apply, the probe would only show
                // that; `fork_bomb_note` says so instead.
                if fork_bomb {
                    forbidden.push(SUBAGENT_PROBES[2]);
                }
                controls.extend(SUBAGENT_CONTROLS);
            }
            ProbeRole::Command(SandboxMode::DangerFullAccess) => {}
            ProbeRole::Command(SandboxMode::ReadOnly) => {
                forbidden.push(WORKSPACE_PROBES[0]);
                forbidden.extend(command_containment());
            }
            ProbeRole::Command(SandboxMode::WorkspaceWrite) => {
                // [`CHMOD_NOTE`]: not blockable here, so not a probe.
                forbidden.retain(|probe| *probe != files::CHMOD.name);
                forbidden.extend(command_containment());
                // Where its TMPDIR is a plain folder the limits line
                // says it is not limited.
                if limits::tmpdir_limit_probed() {
                    forbidden.extend(TMPDIR_PROBES);
                }
                controls.extend(WORKSPACE_PROBES);
            }
            // Its own probes only: the shared ones aim at the fixture
            // folder, which is not its workspace.
            ProbeRole::WriteSubagent => {
                forbidden = WRITE_SUBAGENT_PROBES.to_vec();
                controls = WRITE_SUBAGENT_CONTROLS.to_vec();
            }
            // Its network only: the rest is the workspace-write command's.
            ProbeRole::Allowlist => {
                forbidden = ALLOWLIST_PROBES.to_vec();
                controls = ALLOWLIST_CONTROLS.to_vec();
            }
        }
        (forbidden, controls)
    }
}

/// The containment probe of a sandboxed command, where this kernel gives
/// commands a PID namespace (elsewhere the containment line says there is
/// none). The parent tries the namespaces; the probe child sees it is in
/// one of its own when it got one (from inside a sandbox, the try would fail).
fn command_containment() -> Vec<&'static str> {
    if super::kernel::in_own_pid_namespace() || super::kernel::command_namespace().is_some() {
        COMMAND_PROBES.to_vec()
    } else {
        Vec::new()
    }
}

/// Why a `workspace-write` command is not probed for `chmod` outside the
/// workspace: nothing on this kernel can refuse it without refusing it in
/// the workspace too.
pub const CHMOD_NOTE: &str = "a workspace-write command may change the mode of a file it owns outside the workspace: Landlock has no right for file modes, and the seccomp filter, which sees no paths, refuses mode changes only in read-only sandboxes (probe chmod not run)";

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_probe_has_one_name_and_is_found_by_it() {
        let names: Vec<&str> = all().map(|probe| probe.name).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names.len(), 61);
        for name in names {
            assert_eq!(find(name).map(|probe| probe.name), Some(name));
        }
        assert!(find("no-such-probe").is_none());
    }

    #[test]
    fn mechanisms_come_from_the_table() {
        assert_eq!(mechanism("write-existing", "EACCES"), "landlock");
        assert_eq!(mechanism("udp-send", "EPERM"), "seccomp");
        assert_eq!(mechanism("udp-send", "EACCES"), "landlock");
        assert_eq!(mechanism("signal-parent", "EPERM"), "landlock scope");
        assert_eq!(mechanism("fork-bomb", "EAGAIN"), "rlimit");
        // The file-size guard, whichever probe ran into it.
        assert_eq!(mechanism("create", "EFBIG"), "rlimit");
        assert_eq!(mechanism("no-such-probe", "EPERM"), "landlock");
        assert_eq!(
            mechanism("write-git-config", "EROFS"),
            "read-only bind mount"
        );
        assert_eq!(mechanism("rename-git", "EBUSY"), "read-only bind mount");
        assert_eq!(mechanism("write-fido-toml", "EACCES"), "landlock");
        assert_eq!(mechanism("secret-env", "ENOENT"), "env policy");
    }

    #[test]
    fn only_the_fork_bomb_is_refused_with_eagain() {
        use super::super::verdict::{Expect, Outcome, ProbeResult};
        let result = |name: &str| ProbeResult {
            name: name.to_owned(),
            expect: Expect::Blocked,
            outcome: Outcome::Failed {
                errno: "EAGAIN".to_owned(),
            },
            side_effect_seen: false,
            mechanism: None,
        };
        assert!(result("fork-bomb").verdict().passed());
        assert!(!result("tcp-bind").verdict().passed());
    }
}
