//! What this kernel and this process allow, as the probes and the report
//! need to know it: the sandbox a command child is in, the PID namespace
//! for commands, what refused a ptrace call, whether a fork bomb can be
//! stopped, and the state of unprivileged user namespaces.

use crate::sandbox::pidns::Containment;
use crate::sandbox::policy::SandboxReport;
use crate::sandbox::ruleset::{MIN_READ_ONLY_ABI, NETWORK_ABI, SCOPE_ABI};

/// The PID namespace a subagent's commands get here, tried from this
/// process (`None`: only the subreaper sweep contains them).
pub(super) fn command_namespace() -> Option<Containment> {
    static KIND: std::sync::OnceLock<Containment> = std::sync::OnceLock::new();
    let kind = KIND.get_or_init(crate::sandbox::pidns::containment);
    kind.uses_namespace().then(|| kind.clone())
}

/// Whether this process runs in a PID namespace of its own, as a
/// sandboxed command does: there its init is 1 and the command 2, numbers
/// that outside are the host's init and kernel thread daemon, never a
/// command's.
pub(super) fn in_own_pid_namespace() -> bool {
    std::process::id() <= 2
}

/// What a command probe child can see of the sandbox its parent put it
/// in (the parent built the ruleset for this kernel's best ABI and fails
/// before the spawn when it cannot).
pub(super) fn command_report() -> SandboxReport {
    let abi = crate::sandbox::ruleset::kernel_abi();
    SandboxReport {
        landlock_abi: (abi > 0).then_some(abi),
        fully_enforced: abi >= MIN_READ_ONLY_ABI,
        network_restricted: abi >= NETWORK_ABI,
        scoped: abi >= SCOPE_ABI,
        no_new_privs: nix::sys::prctl::get_no_new_privs().unwrap_or(false),
        warnings: Vec::new(),
        not_covered: Vec::new(),
    }
}

/// What refused a ptrace call in this process: the seccomp filter when one
/// is installed (it answers at syscall entry), else Landlock (no ptrace out
/// of the domain), else the kernel's check (no `CAP_SYS_PTRACE`).
pub(super) fn ptrace_mechanism(report: &SandboxReport) -> &'static str {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let filtered = status
        .lines()
        .any(|line| line.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]);
    if filtered {
        "seccomp"
    } else if report.landlock_abi.is_some() && report.fully_enforced {
        "landlock"
    } else {
        "ptrace check (no CAP_SYS_PTRACE)"
    }
}

/// Why the fork bomb probe cannot show anything here: `RLIMIT_NPROC`
/// never applies to uid 0 of the first user namespace, and no `pid_max`
/// of its own PID namespace holds a subagent instead.
pub fn fork_bomb_note() -> Option<String> {
    (!subagent_pid_max() && !rlimit_binds())
        .then(|| "RLIMIT_NPROC does not apply to root of the first user namespace, so a subagent's fork bomb is stopped only when its process group is killed (probe fork-bomb not run)".to_owned())
}

/// Whether the parent expects a subagent's probe child to run the fork
/// bomb: it starts the child in a namespace of its own with a `pid_max`
/// where it can, and else `RLIMIT_NPROC` must bind.
pub(super) fn fork_bomb_expected() -> bool {
    subagent_pid_max() || rlimit_binds()
}

/// Whether this probe child can show the fork bomb stopped: it is PID 2
/// of its own namespace with a `pid_max`, or `RLIMIT_NPROC` binds it.
pub(super) fn fork_bomb_probed() -> bool {
    bound_by_pid_max() || rlimit_binds()
}

/// Whether this process is PID 2 of a namespace whose `pid_max` is set.
pub(super) fn bound_by_pid_max() -> bool {
    in_own_pid_namespace() && crate::sandbox::limits::process_limit_support().is_ok()
}

/// Whether `RLIMIT_NPROC` binds this process: it never binds uid 0 of the
/// first user namespace.
fn rlimit_binds() -> bool {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let first_namespace = std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|map| map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]);
    !(root && first_namespace)
}

/// Whether a subagent runs in a PID namespace of its own whose `pid_max`
/// is its process limit (`sandbox::subagent_ns`): a PID namespace can be
/// made here and its `pid_max` set (Linux 6.14).
pub fn subagent_pid_max() -> bool {
    crate::sandbox::pidns::containment().uses_namespace()
        && crate::sandbox::limits::process_limit_support().is_ok()
}

/// What this kernel says about unprivileged user namespaces.
pub(super) fn user_namespaces() -> String {
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
