//! A PID namespace for each sandboxed command (the main agent's, and a
//! subagent's shell's), and for each subagent's own process
//! (`super::subagent_ns`): when the command (or subagent) ends, everything
//! it started dies with it, also a process that called `setsid`,
//! double-forked or was `nohup`ed; and `pid_max` there bounds how many
//! processes and threads it may have at once (`super::limits`).
//!
//! Theory of operation, between fork and exec ([`enter`], called from the
//! command sandbox's `pre_exec`; raw syscalls on memory prepared before the
//! fork, no allocation):
//!
//! 1. the forked process (the *keeper*, the process group leader the
//!    supervisor knows) calls `unshare(CLONE_NEWUSER | CLONE_NEWPID)` and
//!    maps its own uid and gid into the new user namespace where it may
//!    write `/proc/self/uid_map` (not under a subagent's Landlock ruleset:
//!    there the user shows as the overflow uid inside, and file access is
//!    checked as before); where user namespaces are off it tries `CLONE_NEWPID`
//!    alone (that needs `CAP_SYS_ADMIN`). Where neither is allowed it goes
//!    on without a namespace, and the subagent's subreaper sweep
//!    (`process::sweep`) is what remains;
//! 2. the keeper forks: the new process is PID 1 of the namespace, a
//!    small init that never execs. When PID 1 exits, the kernel kills
//!    every process of the namespace;
//! 3. PID 1 dies with the keeper (`PR_SET_PDEATHSIG`). It arms that signal,
//!    then checks a pipe whose write end only the keeper holds: a hang-up
//!    means the keeper died before the signal was armed, and PID 1 exits;
//! 4. PID 1 forks the command's process (PID 2), which goes on to exec the
//!    command: as PID 2 the command keeps ordinary signal semantics (the
//!    kernel shields a namespace's init from the signals it has no handler
//!    for, so a command as PID 1 would survive `kill $$`). PID 1 closes
//!    every other descriptor, reaps whatever is re-parented to it, and once
//!    PID 2 has ended writes its wait status to a second pipe and exits;
//! 5. the keeper closes every other descriptor (so the spawner's exec
//!    status pipe reaches EOF when the command execs), waits for PID 1 and
//!    ends the way the command ended (the status PID 1 sent; PID 1's own
//!    where it sent none): the same exit code, or the same signal.
//!
//! A signal to the process group reaches the keeper and the command. PID
//! 1 takes none it has no handler for, but dies with the keeper.

use std::ffi::CStr;
use std::io;

/// The namespace set-up a command gets, prepared before the fork: the
/// `uid_map` and `gid_map` lines that map the user to itself.
#[derive(Debug, Clone)]
pub struct PidNamespace {
    mapping: SelfMapping,
    /// Try a PID namespace alone before a user and PID namespace: the main
    /// agent's commands, so that where Fido may make one (root, with
    /// `CAP_SYS_ADMIN`) its commands keep their access to files of users
    /// a new user namespace would not map.
    plain_first: bool,
    /// What PID 1 writes to the namespace's `kernel.pid_max` before the
    /// command starts (`sandbox::limits`); `None` where the kernel keeps
    /// that value for the whole machine.
    pid_max: Option<Vec<u8>>,
    /// The keeper ignores SIGTERM, so that a SIGTERM to the group reaches
    /// the process inside (a subagent, which sends what it has and exits)
    /// instead of ending the namespace at once; SIGKILL still ends all.
    keeper_ignores_term: bool,
}

/// The `uid_map` and `gid_map` lines that map this process's user to
/// itself in a new user namespace, prepared before the fork (also for the
/// network namespace of `sandbox::netns`).
#[derive(Debug, Clone)]
pub(super) struct SelfMapping {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl SelfMapping {
    pub(super) fn for_current_user() -> SelfMapping {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        SelfMapping {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Maps the user to itself in the user namespace just unshared, so
    /// `id` and `ls -l` look the same inside. Under a subagent's Landlock
    /// ruleset `/proc` is not writable: the user then shows as the
    /// overflow uid (65534) inside, while the kernel still checks files
    /// against the real one, so access is unchanged.
    ///
    /// # Safety
    /// Only between fork and exec (open/write/close on prepared memory).
    pub(super) unsafe fn write(&self) {
        // SAFETY: the caller's contract.
        unsafe {
            if write_file(SETGROUPS, b"deny") {
                write_file(GID_MAP, &self.gid_map);
            }
            write_file(UID_MAP, &self.uid_map);
        }
    }
}

/// How the commands of a subagent are contained on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// A user and PID namespace per command.
    UserAndPidNamespace,
    /// A PID namespace per command (no user namespace: the process has
    /// `CAP_SYS_ADMIN`).
    PidNamespace,
    /// No namespace: the subagent is a child subreaper whose tree is
    /// swept; the reason says why.
    Subreaper { reason: String },
}

impl Containment {
    /// Whether commands get a PID namespace of their own.
    pub fn uses_namespace(&self) -> bool {
        !matches!(self, Containment::Subreaper { .. })
    }
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Containment::UserAndPidNamespace => f.write_str("a user and PID namespace per command"),
            Containment::PidNamespace => f.write_str("a PID namespace per command"),
            Containment::Subreaper { reason } => {
                write!(f, "a child subreaper and a sweep of its tree ({reason})")
            }
        }
    }
}

const SETGROUPS: &CStr = c"/proc/self/setgroups";
const UID_MAP: &CStr = c"/proc/self/uid_map";
const GID_MAP: &CStr = c"/proc/self/gid_map";
const PID_MAX: &CStr = c"/proc/sys/kernel/pid_max";

impl PidNamespace {
    /// The set-up for this process's user.
    pub fn for_current_user() -> PidNamespace {
        PidNamespace {
            mapping: SelfMapping::for_current_user(),
            plain_first: false,
            pid_max: None,
            keeper_ignores_term: false,
        }
    }

    /// The same, with at most `max_processes` processes and threads in the
    /// namespace where this kernel can keep them to it.
    pub fn with_process_limit(self, max_processes: u32) -> PidNamespace {
        let pid_max = super::limits::process_limit_support()
            .ok()
            .map(|()| super::limits::pid_max_bytes(max_processes));
        PidNamespace { pid_max, ..self }
    }

    /// The set-up for the main agent's commands: a PID namespace alone
    /// where this process may make one, else with a user namespace.
    pub fn for_commands() -> PidNamespace {
        PidNamespace {
            plain_first: true,
            ..PidNamespace::for_current_user()
        }
    }

    /// The set-up for a subagent's own process (`contain_subagent`): as
    /// for the main agent's commands, with at most `max_processes`
    /// processes and threads for the subagent and all it starts, and a
    /// keeper that leaves SIGTERM to the subagent.
    pub fn for_subagent(max_processes: u32) -> PidNamespace {
        PidNamespace {
            keeper_ignores_term: true,
            ..PidNamespace::for_commands().with_process_limit(max_processes)
        }
    }

    /// Steps 1–4 of the module comment, in the forked child. Returns in PID
    /// 2 of the new namespace, `true` (or `false` in the child itself where
    /// no namespace could be made); the keeper never returns.
    ///
    /// # Safety
    /// Only between fork and exec, in a single-threaded child.
    pub unsafe fn enter(&self) -> io::Result<bool> {
        // SAFETY: plain syscalls on prepared memory (the caller's contract).
        unsafe {
            if !self.unshare() {
                return Ok(false);
            }
            let mut pipe = [0 as libc::c_int; 2];
            if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            let [read_end, write_end] = pipe;
            let mut status_pipe = [0 as libc::c_int; 2];
            if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            let [status_read, status_write] = status_pipe;
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    libc::close(status_read);
                    if let Some(pid_max) = &self.pid_max {
                        // Still before Landlock, with the namespace's
                        // capabilities: the write is the namespace's own.
                        write_file(PID_MAX, pid_max);
                    }
                    pid_one(read_end, write_end, status_write).map(|()| true)
                }
                pid_one => {
                    libc::close(status_write);
                    if self.keeper_ignores_term {
                        libc::signal(libc::SIGTERM, libc::SIG_IGN);
                    }
                    keep(pid_one, write_end, status_read)
                }
            }
        }
    }

    /// A user and PID namespace, else a PID namespace; `false` for none.
    unsafe fn unshare(&self) -> bool {
        // SAFETY: plain syscalls on prepared memory.
        unsafe {
            if self.plain_first && libc::unshare(libc::CLONE_NEWPID) == 0 {
                return true;
            }
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) == 0 {
                self.mapping.write();
                return true;
            }
            libc::unshare(libc::CLONE_NEWPID) == 0
        }
    }
}

/// Writes `bytes` to `path` in one write.
unsafe fn write_file(path: &CStr, bytes: &[u8]) -> bool {
    // SAFETY: open/write/close on a constant path and prepared bytes.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// PID 1: dies with the keeper and forks the command's process, which
/// keeps no more capabilities than any sandboxed process and goes on to
/// exec the command; PID 1 itself stays as the namespace's init.
unsafe fn pid_one(
    read_end: libc::c_int,
    write_end: libc::c_int,
    status_write: libc::c_int,
) -> io::Result<()> {
    // SAFETY: plain syscalls on stack memory.
    unsafe {
        die_with_keeper(read_end, write_end)?;
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            // A new user namespace gives its first process every
            // capability inside it; what the command executes keeps
            // Docker's default set, as every sandboxed process does
            // (`sandbox::caps`; both calls are plain syscalls). The status
            // pipe closes on exec.
            0 => {
                super::caps::drop_from_bounding_set();
                super::caps::drop_from_own_sets()
            }
            command => init(command, status_write),
        }
    }
}

/// The namespace's init: reaps everything re-parented to it until the
/// command's process has ended, sends the keeper its wait status, exits.
unsafe fn init(command: libc::pid_t, status_write: libc::c_int) -> ! {
    // SAFETY: plain syscalls on stack memory; the process only waits and
    // exits from here on.
    unsafe {
        close_all_but(status_write, status_write);
        let status = wait_for(command, -1);
        libc::write(
            status_write,
            (&raw const status).cast(),
            std::mem::size_of::<libc::c_int>(),
        );
        libc::_exit(0)
    }
}

/// Waits (`waitpid(reap, …)`) until `pid` has ended; its wait status.
unsafe fn wait_for(pid: libc::pid_t, reap: libc::pid_t) -> libc::c_int {
    // SAFETY: waitpid writes only into `status`.
    unsafe {
        let mut status = 0;
        loop {
            let rc = libc::waitpid(reap, &mut status, 0);
            if rc == pid {
                return status;
            }
            if rc == -1 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
    }
}

/// Closes every descriptor but stdio, `a` and `b` (both above 2).
unsafe fn close_all_but(a: libc::c_int, b: libc::c_int) {
    let (low, high) = (a.min(b) as libc::c_uint, a.max(b) as libc::c_uint);
    // SAFETY: close_range on descriptor ranges of this process.
    unsafe {
        libc::close_range(3, low.saturating_sub(1), 0);
        if high > low + 1 {
            libc::close_range(low + 1, high - 1, 0);
        }
        libc::close_range(high.saturating_add(1), libc::c_uint::MAX, 0);
    }
}

/// In the keeper's child: arms the parent-death signal, then checks the
/// pipe whose write end only the keeper holds (a hang-up means the keeper
/// died before the signal was armed, and the child exits).
///
/// # Safety
/// Only between fork and exec (plain syscalls on stack memory).
pub(super) unsafe fn die_with_keeper(
    read_end: libc::c_int,
    write_end: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        libc::close(write_end);
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        // Armed now; a hang-up means the keeper died before that.
        let mut poll = libc::pollfd {
            fd: read_end,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut poll, 1, 0) != 0 {
            libc::_exit(127);
        }
        libc::close(read_end);
    }
    Ok(())
}

/// The keeper: holds the pipe, waits for PID 1 and ends as the command
/// ended (as PID 1 did, where it sent no status).
unsafe fn keep(pid_one: libc::pid_t, write_end: libc::c_int, status_read: libc::c_int) -> ! {
    // SAFETY: plain syscalls on stack memory; the process only waits and
    // exits from here on.
    unsafe {
        // Every descriptor but stdio and the pipes: the spawner's exec
        // status pipe among them, which must reach EOF when the command
        // execs.
        close_all_but(write_end, status_read);
        let own = wait_for(pid_one, pid_one);
        let mut command: libc::c_int = 0;
        let size = std::mem::size_of::<libc::c_int>();
        let read = libc::read(status_read, (&raw mut command).cast(), size);
        end_as(if read == size as isize { command } else { own })
    }
}

/// Ends the calling keeper as its child ended (`status` from `waitpid`):
/// the same exit code, or the same signal.
///
/// # Safety
/// Only in a keeper (a forked process that only waits and exits).
pub(super) unsafe fn end_as(status: libc::c_int) -> ! {
    // SAFETY: the caller's contract; plain syscalls.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// Which containment the commands of a subagent get here: a child that
/// tries the namespaces and reports. Blocking (a fork and a wait).
pub fn containment() -> Containment {
    let attempts = [libc::CLONE_NEWUSER | libc::CLONE_NEWPID, libc::CLONE_NEWPID];
    match first_unshare_allowed(&attempts) {
        Ok(Some(0)) => Containment::UserAndPidNamespace,
        Ok(Some(_)) => Containment::PidNamespace,
        Ok(None) => Containment::Subreaper {
            reason: "this kernel allows no user or PID namespace here".into(),
        },
        Err(err) => Containment::Subreaper {
            reason: format!("cannot test namespaces: {err}"),
        },
    }
}

/// The index of the first of `attempts` (sets of `unshare` flags) that a
/// forked child may make here, tried in order; `None` for none. Blocking
/// (a fork and a wait); the test leaves this process as it was.
pub(super) fn first_unshare_allowed(attempts: &[libc::c_int]) -> io::Result<Option<usize>> {
    // At most a few attempts: their index is the child's exit code.
    let attempts = &attempts[..attempts.len().min(100)];
    // SAFETY: the child makes only async-signal-safe syscalls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above, in the forked child.
        unsafe {
            let found = attempts.iter().position(|flags| libc::unshare(*flags) == 0);
            libc::_exit(found.unwrap_or(attempts.len()) as libc::c_int);
        }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    if waited != pid || !libc::WIFEXITED(status) {
        return Ok(None);
    }
    let code = libc::WEXITSTATUS(status) as usize;
    Ok((code < attempts.len()).then_some(code))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn namespace_of(pid: &str) -> String {
        std::fs::read_link(format!("/proc/{pid}/ns/pid"))
            .map(|link| link.display().to_string())
            .unwrap_or_default()
    }

    /// Without a PID namespace a test cannot run: under `CI=true` that is a
    /// failure (so CI's count of passed tests is true), elsewhere it says
    /// why and the caller returns.
    pub(crate) fn skip_unless_ci(reason: &str) {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "cannot run under CI=true: {reason}"
        );
        eprintln!("skipped: {reason}");
    }

    /// Processes whose command line is exactly `words`.
    pub(crate) fn running(words: &[&str]) -> Vec<i32> {
        let wanted: Vec<u8> = words
            .iter()
            .flat_map(|w| [w.as_bytes(), b"\0"].concat())
            .collect();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
            .collect()
    }

    #[test]
    fn a_commands_setsid_child_dies_when_the_command_ends() {
        let containment = containment();
        if let Containment::Subreaper { reason } = &containment {
            skip_unless_ci(reason);
            return;
        }
        let namespace = PidNamespace::for_current_user();
        // A marker duration no other test uses.
        let sleeper = ["sleep", "301.25"];
        let mut command = std::process::Command::new("sh");
        command.args([
            "-c",
            "setsid sleep 301.25 < /dev/null > /dev/null 2>&1 & readlink /proc/self/ns/pid; id -u; sed -n 's/^CapEff:\t//p' /proc/self/status",
        ]);
        command.stdout(std::process::Stdio::piped());
        // SAFETY: `enter` is made for this spot.
        unsafe {
            command.pre_exec(move || namespace.enter().map(drop));
        }
        let output = command.output().expect("the command runs");
        assert!(output.status.success(), "{output:?}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut lines = stdout.lines();
        assert_ne!(
            lines.next(),
            Some(namespace_of("self").as_str()),
            "{containment}"
        );
        // The user is itself inside the namespace.
        // SAFETY: getuid cannot fail.
        assert_eq!(
            lines.next(),
            Some(unsafe { libc::getuid() }.to_string().as_str())
        );
        // No capability the sandbox cuts came back with the user namespace:
        // CAP_DAC_READ_SEARCH (2), CAP_SYS_PTRACE (19), CAP_SYS_ADMIN (21).
        let effective = u64::from_str_radix(lines.next().unwrap_or_default(), 16).unwrap();
        for cap in [2, 19, 21] {
            assert_eq!(effective & (1 << cap), 0, "CapEff {effective:x} has {cap}");
        }
        // The command has ended: its setsid'd child went with it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !running(&sleeper).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{sleeper:?} outlived its command"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_keeper_ends_as_the_command_ended_and_the_command_dies_with_it() {
        if let Containment::Subreaper { reason } = containment() {
            skip_unless_ci(&reason);
            return;
        }
        let spawn = |script: &str| {
            let namespace = PidNamespace::for_current_user();
            let mut command = std::process::Command::new("sh");
            command.args(["-c", script]);
            // SAFETY: `enter` is made for this spot.
            unsafe {
                command.pre_exec(move || namespace.enter().map(drop));
            }
            command.spawn().expect("the command starts")
        };
        assert_eq!(spawn("exit 7").wait().unwrap().code(), Some(7));
        // The keeper killed alone: PID 1 follows it (parent-death signal).
        let sleeper = ["sleep", "302.5"];
        let mut keeper = spawn("exec sleep 302.5");
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(&sleeper).is_empty() {
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        keeper.kill().unwrap();
        keeper.wait().unwrap();
        while !running(&sleeper).is_empty() {
            assert!(Instant::now() < deadline, "PID 1 outlived its keeper");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
