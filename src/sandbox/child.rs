//! Entering the sandbox, in the child (`fido __subagent`, and the probe
//! child of `fido sandbox check`).
//!
//! Theory of operation: the child connects its IPC socket first (an
//! already-connected socket keeps working under Landlock; a new connection
//! to an abstract socket or a TCP port would be refused), then calls
//! [`enter_child_sandbox`] before it reads the fork, then does its work.
//! In order:
//!
//! 1. the process must have a single thread: Landlock (below ABI 8) and
//!    `no_new_privs` apply to the calling thread and the threads and
//!    processes it starts later, never to threads that already run. Build
//!    the async runtime after this call, and connect the IPC socket with a
//!    blocking connect before it;
//! 2. `PR_SET_NO_NEW_PRIVS`: no set-uid or file-capability gains, ever;
//!    then only Docker's default capabilities stay (`sandbox::caps`);
//! 3. parent-death signal SIGKILL, then `getppid()` is compared with the
//!    expected parent: if the parent died before the signal was armed, the
//!    child was already re-parented and must not go on. (The signal follows
//!    the parent *thread* that spawned the child: spawn from a thread that
//!    lives as long as the supervisor, not from a short-lived blocking-pool
//!    thread);
//! 4. rlimits: no core dumps (`RLIMIT_CORE` 0) and no bytes written to any
//!    regular file (`RLIMIT_FSIZE` 0, with SIGXFSZ ignored so an attempt
//!    fails with EFBIG instead of killing the child). The second is a guard
//!    behind Landlock for a writable descriptor that leaked in before the
//!    ruleset: Landlock checks at `open`, the rlimit at every write. It does
//!    not touch pipes, sockets or `/dev/null`, so the child's stdout/stderr
//!    must be pipes (as the supervisor sets them), not files;
//! 5. the Landlock ruleset (`sandbox::ruleset`): read the workspace and
//!    the system paths, never the credential paths the parent names; write
//!    only the scratch folder;
//! 6. the seccomp filter (`sandbox::seccomp`): no new sockets or
//!    connections (the IPC socket is already connected), no ptrace.
//!
//! `RLIMIT_NPROC` is set to what the user runs already plus a headroom
//! ([`process_limit`]): it counts every process and thread of the user,
//! so an absolute value would stop either nothing or the user's other
//! work. It does not apply to root of the first user namespace. Counting
//! reads all of `/proc`, so it is not part of [`enter_child_sandbox`]: the
//! supervisor counts while the child starts and sends the limit with the
//! fork, and the child sets it ([`limit_processes`]) before it runs
//! anything.
//!
//! Reads are confined to the workspace and [`SYSTEM_READ_ROOTS`] (minus
//! [`SYSTEM_SECRETS`] and the credential paths): nothing in a home folder
//! outside the workspace.

use nix::sys::prctl;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::unistd::{Pid, getppid};

use super::caps;
use super::policy::{Enforcement, SandboxError, SandboxReport, SandboxRequirement};
use super::ruleset::{self, MIN_READ_ONLY_ABI};
use super::seccomp::{SeccompPolicy, SeccompProgram, SocketAccess};
use std::path::{Path, PathBuf};

/// What a child may touch besides the system: its scratch folder (its
/// `TMPDIR`, writable), its workspace (readable), and for a write subagent
/// its worktree (writable) and its private repository (readable).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildRoots<'a> {
    pub scratch: Option<&'a Path>,
    pub workspace: Option<&'a Path>,
    pub write: &'a [PathBuf],
    pub read: &'a [PathBuf],
}

/// Confines the calling process for good: single thread required; then
/// `no_new_privs`, parent-death SIGKILL checked against `expected_parent`,
/// rlimits and the read-only Landlock ruleset (see the module comment).
///
/// In [`SandboxRequirement::Required`] anything short of a fully enforced ruleset
/// on a Landlock ABI that can deny truncation is an error. In
/// [`SandboxRequirement::BestEffort`] Landlock shortfalls become
/// [`SandboxReport::warnings`]; the other steps are required in both modes.
/// After an error the process may be partly confined and must exit.
pub fn enter_child_sandbox(
    expected_parent: Pid,
    mode: SandboxRequirement,
    deny: &[PathBuf],
    roots: &ChildRoots<'_>,
) -> Result<SandboxReport, SandboxError> {
    let writer = !roots.write.is_empty();
    confine_process(expected_parent, roots.scratch.is_some(), writer)?;
    // Compiled before the ruleset, while files can still be opened. Mode
    // and owner changes stay refused to a write subagent too: Landlock
    // does not cover them, so they would reach the main checkout.
    let seccomp = SeccompProgram::compile(SeccompPolicy {
        network: SocketAccess::Off,
        metadata_writes: false,
    });
    let write_roots: Vec<PathBuf> = roots
        .scratch
        .map(Path::to_path_buf)
        .into_iter()
        .chain(roots.write.iter().cloned())
        .collect();
    let mut read_roots = roots.workspace.map(read_roots).unwrap_or_default();
    read_roots.extend(roots.read.iter().cloned());
    let deny = with_system_secrets(deny);
    let (applied, failure) =
        match ruleset::restrict_current_thread(&deny, &write_roots, &read_roots) {
            Ok(applied) => (applied, None),
            Err(err) => match mode {
                SandboxRequirement::Required => return Err(err),
                SandboxRequirement::BestEffort => (no_ruleset(), Some(error_chain(&err))),
            },
        };
    let seccomp = seccomp.and_then(|program| {
        program
            .apply()
            .map_err(|err| SandboxError::Seccomp(err.to_string()))
    });
    let failure = match (seccomp, mode) {
        (Ok(()), _) => failure,
        (Err(err), SandboxRequirement::Required) => return Err(err),
        (Err(err), SandboxRequirement::BestEffort) => {
            Some(failure.map_or(error_chain(&err), |f| format!("{f}; {}", error_chain(&err))))
        }
    };
    let no_new_privs = prctl::get_no_new_privs().unwrap_or(false);
    let report = report(&applied, no_new_privs, failure);
    match mode {
        SandboxRequirement::Required => require(&applied)?,
        SandboxRequirement::BestEffort => {}
    }
    tracing::debug!(
        abi = ?report.landlock_abi,
        fully_enforced = report.fully_enforced,
        network_restricted = report.network_restricted,
        scoped = report.scoped,
        "sandbox entered"
    );
    Ok(report)
}

/// The process-wide steps, in order: one thread, `no_new_privs`, cut
/// capabilities, the parent-death signal (checked against
/// `expected_parent`), rlimits (`scratched`: the subagent has a scratch
/// folder) and the child subreaper.
fn confine_process(
    expected_parent: Pid,
    scratched: bool,
    writer: bool,
) -> Result<(), SandboxError> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(SandboxError::MultiThreaded { threads });
    }
    prctl::set_no_new_privs().map_err(SandboxError::NoNewPrivs)?;
    // Root keeps only Docker's default capabilities: no CAP_SYS_PTRACE to
    // read the parent's environment with.
    caps::drop_from_bounding_set();
    caps::drop_from_own_sets().map_err(SandboxError::Capabilities)?;
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(SandboxError::ParentDeathSignal)?;
    let actual = getppid();
    // PID 2 of its own namespace (`subagent_ns::contain_subagent`) has the
    // namespace's init as its parent, which dies with Fido's keeper.
    let own_namespace = actual.as_raw() == 1 && super::subagent_ns::in_own_namespace();
    if actual != expected_parent && !own_namespace {
        return Err(SandboxError::ParentGone {
            expected: expected_parent.as_raw(),
            actual: actual.as_raw(),
        });
    }
    set_rlimits(scratched, writer)?;
    // Orphans of the commands (a `setsid` or double-forked process) are
    // re-parented to this process, so its sweep at the end finds them.
    prctl::set_child_subreaper(true).map_err(SandboxError::Subreaper)?;
    Ok(())
}

/// What a best-effort sandbox has when no ruleset could be applied.
fn no_ruleset() -> ruleset::Applied {
    ruleset::Applied {
        abi: None,
        enforcement: Enforcement::None,
        network_restricted: false,
        scoped: false,
        gaps: ruleset::gaps(0),
    }
}

/// `deny` and the system secrets that exist on this machine.
fn with_system_secrets(deny: &[PathBuf]) -> Vec<PathBuf> {
    let mut deny = deny.to_vec();
    deny.extend(
        SYSTEM_SECRETS
            .iter()
            .map(PathBuf::from)
            .filter(|path| path.exists()),
    );
    deny
}

/// The Required-mode verdict on what the kernel enforced.
fn require(applied: &ruleset::Applied) -> Result<(), SandboxError> {
    match (applied.enforcement, applied.abi) {
        (Enforcement::None, None) => Err(SandboxError::LandlockUnavailable),
        (Enforcement::Full, Some(abi)) if abi < MIN_READ_ONLY_ABI => {
            Err(SandboxError::LandlockTooOld {
                abi,
                required: MIN_READ_ONLY_ABI,
            })
        }
        (Enforcement::Full, Some(_)) => Ok(()),
        (enforcement @ (Enforcement::Full | Enforcement::Partial | Enforcement::None), abi) => {
            Err(SandboxError::NotEnforced { enforcement, abi })
        }
    }
}

fn report(
    applied: &ruleset::Applied,
    no_new_privs: bool,
    failure: Option<String>,
) -> SandboxReport {
    let mut warnings: Vec<String> = failure.into_iter().collect();
    match applied.enforcement {
        Enforcement::Full => {}
        Enforcement::Partial | Enforcement::None => warnings.push(format!(
            "the landlock ruleset was {}: the subagent is held back only by the invocation guard",
            applied.enforcement
        )),
    }
    if let (Enforcement::Full, Some(abi)) = (applied.enforcement, applied.abi)
        && abi < MIN_READ_ONLY_ABI
    {
        warnings.push(format!(
            "landlock ABI {abi} cannot deny truncation (needs {MIN_READ_ONLY_ABI})"
        ));
    }
    if !no_new_privs {
        warnings.push("no_new_privs is not set".to_owned());
    }
    SandboxReport {
        landlock_abi: applied.abi,
        fully_enforced: applied.enforcement == Enforcement::Full,
        network_restricted: applied.network_restricted,
        scoped: applied.scoped,
        no_new_privs,
        warnings,
        not_covered: applied.gaps.clone(),
    }
}

/// What a subagent needs to read besides its workspace: programs, their
/// libraries and configuration, devices and `/proc`. Nothing under a home
/// folder, `/tmp` or `/root` (only the workspace, wherever it is).
pub const SYSTEM_READ_ROOTS: [&str; 12] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/dev",
    "/proc",
    "/sys/devices/system/cpu",
];

/// System files a subagent never reads, even as root.
pub const SYSTEM_SECRETS: [&str; 7] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/sudoers",
    "/etc/sudoers.d",
];

/// The read roots of a child confined to `workspace`.
pub fn read_roots(workspace: &Path) -> Vec<PathBuf> {
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    std::iter::once(workspace)
        .chain(SYSTEM_READ_ROOTS.iter().map(PathBuf::from))
        .collect()
}

/// Processes (and threads) a child and everything it starts may add to
/// what its user already runs: far more than `git` or `grep` need, few
/// enough that a fork bomb stops.
pub const PROCESS_HEADROOM: u64 = 256;

/// `RLIMIT_NPROC` for a child: what the user runs now plus
/// [`PROCESS_HEADROOM`]; `None` when `/proc` cannot be counted (a guessed
/// limit could stop the child's own work). Blocking: reads all of `/proc`.
pub fn process_limit() -> Option<u64> {
    user_task_count().map(|used| used.saturating_add(PROCESS_HEADROOM))
}

/// Sets `RLIMIT_NPROC` (soft and hard) to `limit`. The kernel counts every
/// process and thread of the user against it, but only when a process of
/// this limit forks, so nothing else of the user is affected. It never
/// applies to uid 0 of the first namespace.
pub fn limit_processes(limit: u64) -> Result<(), SandboxError> {
    setrlimit(Resource::RLIMIT_NPROC, limit, limit).map_err(|source| SandboxError::Rlimit {
        resource: "RLIMIT_NPROC",
        source,
    })
}

/// Processes and threads of this process's real user, from `/proc`.
fn user_task_count() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    // `/proc/self` belongs to this process's user.
    let (Ok(me), Ok(entries)) = (std::fs::metadata("/proc/self"), std::fs::read_dir("/proc"))
    else {
        return None;
    };
    let uid = me.uid();
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| std::fs::read_dir(e.path().join("task")).map_or(1, |tasks| tasks.count() as u64))
        .sum::<u64>()
        .into()
}

/// Bytes one file in the scratch folder may grow to: the commands of a
/// subagent raise their soft `RLIMIT_FSIZE` to this hard limit.
pub const SCRATCH_FILE_CAP: u64 = 256 * 1024 * 1024;

/// `scratch`: the hard `RLIMIT_FSIZE` leaves room for the commands' files
/// in the scratch folder; this process itself keeps a soft limit of 0,
/// unless it is a write subagent (`writer`), whose file tools write its
/// worktree.
fn set_rlimits(scratch: bool, writer: bool) -> Result<(), SandboxError> {
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|source| SandboxError::Rlimit {
        resource: "RLIMIT_CORE",
        source,
    })?;
    // SAFETY: SIG_IGN installs no handler, so no code of ours runs in signal
    // context; the process is single-threaded here.
    unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) }
        .map_err(SandboxError::SignalDisposition)?;
    let hard = if scratch { SCRATCH_FILE_CAP } else { 0 };
    let soft = if writer { hard } else { 0 };
    setrlimit(Resource::RLIMIT_FSIZE, soft, hard).map_err(|source| SandboxError::Rlimit {
        resource: "RLIMIT_FSIZE",
        source,
    })?;
    Ok(())
}

/// Threads of this process, from `/proc/self/task`.
fn thread_count() -> Result<usize, SandboxError> {
    let tasks = std::fs::read_dir("/proc/self/task").map_err(SandboxError::ThreadCount)?;
    let mut count = 0;
    for task in tasks {
        task.map_err(SandboxError::ThreadCount)?;
        count += 1;
    }
    Ok(count)
}

/// An error and its sources, `: `-separated.
struct ErrorChain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}

/// `err` with its sources, for one-line messages.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    ErrorChain(err).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(enforcement: Enforcement, abi: Option<i32>) -> ruleset::Applied {
        ruleset::Applied {
            abi,
            enforcement,
            network_restricted: enforcement == Enforcement::Full,
            scoped: enforcement == Enforcement::Full,
            gaps: ruleset::gaps(abi.unwrap_or(0)),
        }
    }

    #[test]
    fn required_accepts_only_a_fully_enforced_modern_ruleset() {
        require(&applied(Enforcement::Full, Some(7))).unwrap();
        require(&applied(Enforcement::Full, Some(3))).unwrap();
        assert!(matches!(
            require(&applied(Enforcement::Full, Some(2))),
            Err(SandboxError::LandlockTooOld {
                abi: 2,
                required: 3
            })
        ));
        assert!(matches!(
            require(&applied(Enforcement::Partial, Some(7))),
            Err(SandboxError::NotEnforced {
                enforcement: Enforcement::Partial,
                ..
            })
        ));
        assert!(matches!(
            require(&applied(Enforcement::None, None)),
            Err(SandboxError::LandlockUnavailable)
        ));
        assert!(matches!(
            require(&applied(Enforcement::None, Some(7))),
            Err(SandboxError::NotEnforced { .. })
        ));
    }

    #[test]
    fn report_warns_about_every_shortfall() {
        let full = report(&applied(Enforcement::Full, Some(7)), true, None);
        assert!(full.fully_enforced && full.network_restricted && full.scoped);
        assert_eq!(full.landlock_abi, Some(7));
        assert!(full.warnings.is_empty(), "{:?}", full.warnings);
        // The residual gaps of ABI 7: pathname UNIX sockets and UDP.
        assert_eq!(full.not_covered.len(), 2, "{:?}", full.not_covered);

        let old = report(&applied(Enforcement::Full, Some(2)), true, None);
        assert_eq!(old.warnings.len(), 1, "{:?}", old.warnings);
        assert!(old.warnings[0].contains("truncation"));

        let none = report(
            &applied(Enforcement::None, None),
            false,
            Some("cannot apply the landlock ruleset: boom".to_owned()),
        );
        assert!(!none.fully_enforced && !none.network_restricted && !none.scoped);
        assert!(none.warnings[0].contains("boom"));
        assert!(none.warnings[1].contains("not enforced"));
        assert!(none.warnings.iter().any(|w| w.contains("no_new_privs")));
        assert_eq!(none.not_covered.len(), 5);
    }

    #[test]
    fn the_test_process_is_refused_for_having_threads() {
        // The test harness runs this test on a thread of its own (and this
        // test adds one more), so the process is never single-threaded here.
        let extra = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(1)));
        let err = enter_child_sandbox(
            getppid(),
            SandboxRequirement::BestEffort,
            &[],
            &ChildRoots::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, SandboxError::MultiThreaded { threads } if threads >= 2),
            "{err}"
        );
        extra.join().unwrap();
        // Nothing was changed before the refusal.
        assert!(!prctl::get_no_new_privs().unwrap());
    }

    #[test]
    fn error_chain_joins_sources() {
        let err = SandboxError::ThreadCount(std::io::Error::other("boom"));
        assert_eq!(
            error_chain(&err),
            "cannot count this process's threads: boom"
        );
    }
}
