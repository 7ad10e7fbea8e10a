//! Process groups: the one place that spawns a group and signals it.
//!
//! Theory of operation (after nextest's runner and watchexec's supervisor):
//! a [`ProcessGroup`] is a child spawned as the leader of its own session
//! and process group (`setsid`, so pgid = sid = pid), with no controlling
//! terminal: nothing it runs can open `/dev/tty` or type into the user's
//! terminal. Whatever it starts stays in that group unless it deliberately
//! leaves it. Every signal goes to the
//! whole group with `killpg`, and "no such process" (ESRCH) counts as done.
//! Termination is SIGTERM to the group, a grace period raced against the
//! leader's exit and the group's emptiness, then SIGKILL to the group and a
//! reap of the leader.
//!
//! States: `Running` → `LeaderExited` (the leader exited, members may
//! remain) → `Gone` (the group was killed or found empty). Dropping a
//! group that is not `Gone` sends SIGKILL to it; tokio reaps a dropped
//! leader in the background.
//!
//! No signal can reach a reused PID: the leader's exit is watched through
//! a pidfd and read with `WNOWAIT`, so the leader stays an unreaped zombie,
//! and its PID (the group id) stays reserved by the kernel, until the
//! group has been killed; only then is it reaped. (Without pidfds, on
//! kernels before 5.3, the leader is reaped at once, as tokio does.)

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::process::{Child, Command};

use super::Leavers;

/// What a sandbox's `pre_exec` already did for the child it confines,
/// which [`ProcessGroup::spawn`]'s hook, run after it in the same child,
/// must not do again. Stored only between fork and exec ([`confined`]),
/// so the parent's copy stays [`NOT_CONFINED`] and each child reads what
/// its own sandbox did. (Comparing sessions cannot tell: where Fido's
/// session leader is outside its PID namespace, as in a container, and in
/// the command's own PID namespace, `getsid` answers 0 for both.)
static CONFINED: AtomicU8 = AtomicU8::new(NOT_CONFINED);
const NOT_CONFINED: u8 = 0;
const IN_SESSION: u8 = 1;
const IN_NAMESPACE: u8 = 2;

/// How a sandbox left the child it confines, before exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confined {
    /// A session of its own and Fido's death signal armed: the group's
    /// hook only puts it in the spawn's cgroup.
    InSession,
    /// Besides, inside a PID namespace whose init takes whatever it starts
    /// with it: the group's hook does nothing.
    InNamespace,
}

/// Records, in a forked child before exec, what its sandbox did (one
/// atomic store: async-signal-safe). Never call it in Fido itself.
pub fn confined(how: Confined) {
    let value = match how {
        Confined::InSession => IN_SESSION,
        Confined::InNamespace => IN_NAMESPACE,
    };
    CONFINED.store(value, Ordering::Relaxed);
}

/// How often a terminating group is checked for emptiness.
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    LeaderExited(ExitStatus),
    Gone(Option<ExitStatus>),
}

/// A child process leading its own process group.
#[derive(Debug)]
pub struct ProcessGroup {
    child: Child,
    pgid: Pid,
    state: State,
    /// Readable once the leader has exited (it is not reaped by that).
    exit: Option<AsyncFd<OwnedFd>>,
    /// What left the group goes when the group is killed.
    leavers: Leavers,
}

impl ProcessGroup {
    /// Spawns `command` as the leader of a new process group, stdin
    /// `/dev/null`. Set stdout and stderr on the command before.
    pub fn spawn(command: &mut Command) -> io::Result<ProcessGroup> {
        ProcessGroup::spawn_with_stdin(command, Stdio::null())
    }

    /// [`ProcessGroup::spawn`] with the given stdin (a pipe for a server
    /// that reads requests from it).
    pub fn spawn_with_stdin(command: &mut Command, stdin: Stdio) -> io::Result<ProcessGroup> {
        let fido = std::process::id() as libc::pid_t;
        let leavers = Leavers::prepare();
        let cgroup = leavers.join_fd();
        // SAFETY: setsid, prctl, getppid, write and an atomic load are
        // async-signal-safe; the values were copied before the fork.
        unsafe {
            command.pre_exec(move || match CONFINED.load(Ordering::Relaxed) {
                // A sandbox's confinement made the session and armed the
                // death signal already, before it forked a keeper
                // (`CommandSandbox::apply`); its PID namespace holds all.
                IN_NAMESPACE => Ok(()),
                // Best effort: the session is the sandbox's, and a keeper
                // between Fido and this process may have left it in a user
                // namespace that cannot write the cgroup.
                IN_SESSION => {
                    let _ = super::leavers::join(cgroup);
                    Ok(())
                }
                _ => {
                    if libc::setsid() == -1 {
                        return Err(io::Error::last_os_error());
                    }
                    super::die_with_fido(fido)?;
                    super::leavers::join(cgroup)
                }
            });
        }
        command.stdin(stdin).kill_on_drop(false);
        let registration = super::leavers::registration();
        let child = command.spawn()?;
        let Some(pid) = child.id() else {
            return Err(io::Error::other("spawned child has no pid"));
        };
        let pgid = i32::try_from(pid)
            .map(Pid::from_raw)
            .map_err(|_| io::Error::other(format!("pid {pid} out of range")))?;
        registration.done(pgid.as_raw());
        tracing::debug!(pid, "process group spawned");
        Ok(ProcessGroup {
            exit: pidfd(pgid),
            child,
            pgid,
            state: State::Running,
            leavers,
        })
    }

    /// Waits until the leader has exited, leaving it unreaped when a pidfd
    /// is available. Cancel safe.
    async fn leader_exit(&mut self) -> io::Result<ExitStatus> {
        let Some(exit) = &self.exit else {
            return self.child.wait().await;
        };
        loop {
            let mut ready = exit.readable().await?;
            if let Some(status) = peek_exit(self.pgid)? {
                return Ok(status);
            }
            ready.clear_ready();
        }
    }

    /// Reaps an exited leader (a zombie by now), once the group was killed.
    fn reap_leader(&mut self) {
        if let Err(err) = self.child.try_wait() {
            tracing::debug!(pid = self.pid(), error = %err, "cannot reap the group leader");
        }
    }

    /// The leader's pid, which is also the group id.
    pub fn pid(&self) -> u32 {
        self.pgid.as_raw().unsigned_abs()
    }

    /// The leader, e.g. to take its stdout pipe.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the leader to exit and reaps it. Cancel safe. Other members
    /// of the group may still run: see [`ProcessGroup::kill`].
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self.state {
            State::Running => {
                let status = self.leader_exit().await?;
                self.state = State::LeaderExited(status);
                Ok(status)
            }
            State::LeaderExited(status) | State::Gone(Some(status)) => Ok(status),
            State::Gone(None) => {
                let status = self.child.wait().await?;
                self.state = State::Gone(Some(status));
                Ok(status)
            }
        }
    }

    /// The leader's exit status if it has exited, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self.state {
            State::Running if self.exit.is_some() => {
                let status = peek_exit(self.pgid)?;
                if let Some(status) = status {
                    self.state = State::LeaderExited(status);
                }
                Ok(status)
            }
            State::Running | State::Gone(None) => {
                let status = self.child.try_wait()?;
                if let Some(status) = status {
                    self.state = match self.state {
                        State::Gone(_) => State::Gone(Some(status)),
                        State::Running | State::LeaderExited(_) => State::LeaderExited(status),
                    };
                }
                Ok(status)
            }
            State::LeaderExited(status) | State::Gone(Some(status)) => Ok(Some(status)),
        }
    }

    /// Sends `signal` to the whole group; a group that is already gone is
    /// not an error.
    pub fn signal(&self, signal: Signal) -> io::Result<()> {
        if matches!(self.state, State::Gone(_)) {
            return Ok(());
        }
        match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(errno) => Err(io::Error::from(errno)),
        }
    }

    /// Whether any process is still in the group: zombies count, except
    /// the exited leader that is kept unreaped on purpose.
    pub fn group_alive(&self) -> bool {
        match self.state {
            State::Gone(_) => false,
            State::LeaderExited(_) if self.exit.is_some() => members_besides_leader(self.pgid),
            State::Running | State::LeaderExited(_) => {
                !matches!(killpg(self.pgid, None), Err(Errno::ESRCH))
            }
        }
    }

    /// SIGKILL to the whole group and to what left it, now. The leader
    /// still needs a [`ProcessGroup::wait`] to be reaped (or is reaped
    /// after drop).
    pub fn kill(&mut self) -> io::Result<()> {
        self.signal(Signal::SIGKILL)?;
        self.leavers.kill();
        self.state = match self.state {
            State::Running => State::Gone(None),
            State::LeaderExited(status) => {
                // The group is dead: now the leader's PID may be freed.
                self.reap_leader();
                State::Gone(Some(status))
            }
            gone @ State::Gone(_) => gone,
        };
        Ok(())
    }

    /// Waits up to `grace` for the leader to exit and the group to empty.
    async fn settle(&mut self, grace: Duration) {
        let graceful = tokio::time::timeout(grace, async {
            let status = self.wait().await;
            while self.group_alive() {
                tokio::time::sleep(POLL).await;
            }
            status
        })
        .await;
        if let Ok(Err(err)) = graceful {
            tracing::warn!(pid = self.pid(), error = %err, "waiting for a terminating group failed");
        }
    }

    /// SIGTERM to the group; after `grace`, or as soon as the leader has
    /// exited and the group is empty, SIGKILL to the group; then reaps the
    /// leader. Returns the leader's exit status. A zero `grace` kills
    /// right after the SIGTERM, without a timer.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGTERM)?;
        if !grace.is_zero() {
            self.settle(grace).await;
        }
        self.kill()?;
        let status = self.wait().await?;
        tracing::debug!(pid = self.pid(), ?status, "process group terminated");
        Ok(status)
    }
}

/// Whether `pid` ignores `signal` (its bit in the `SigIgn` mask of
/// `/proc/PID/status`): such a signal is dropped by the kernel, so waiting
/// for the process to act on it is waiting for nothing. `false` when the
/// status cannot be read. Blocking: reads `/proc`.
pub fn ignores_signal(pid: u32, signal: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal as i32 - 1)) != 0)
}

/// A pidfd for `pid`, or `None` where the kernel has none (before 5.3).
fn pidfd(pid: Pid) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "no pidfd; the leader is reaped at exit");
        return None;
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    // SAFETY: `owned` is a valid descriptor that the AsyncFd owns and
    // closes; nothing else registers it.
    unsafe { AsyncFd::register(owned) }.ok()
}

/// The leader's exit status if it has exited, without reaping it.
fn peek_exit(pid: Pid) -> io::Result<Option<ExitStatus>> {
    // SAFETY: an all-zero siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid.as_raw() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after a successful waitid the child fields are set (pid 0:
    // not exited yet).
    let (child, status) = unsafe { (info.si_pid(), info.si_status()) };
    if child == 0 {
        return Ok(None);
    }
    Ok(Some(match info.si_code {
        libc::CLD_EXITED => ExitStatus::from_raw((status & 0xff) << 8),
        _ => ExitStatus::from_raw(status & 0x7f),
    }))
}

/// Whether a process other than the group's leader is in the group
/// (from `/proc`: the leader, kept as a zombie, answers every signal).
fn members_besides_leader(pgid: Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            return false;
        };
        if pid == pgid.as_raw() {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …: fields after the last ')'.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|pgrp| pgrp.parse::<i32>().ok())
            == Some(pgid.as_raw())
    })
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !matches!(self.state, State::Gone(_)) {
            // Best effort: there is nobody to report a failure to.
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
        // The leavers' cgroup is killed and removed as it drops.
        super::leavers::unregister(self.pgid.as_raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::path::Path;
    use std::time::Instant;

    /// Whether `pid` is still a live process (a zombie counts as dead).
    pub(crate) fn running(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                // The state follows the command name in parentheses.
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !(state.starts_with('Z') || state.starts_with('X'))
            }
            Err(_) => false,
        }
    }

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        let start = Instant::now();
        while !check() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "timed out: {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn read_pid(file: &Path) -> u32 {
        let mut pid = None;
        eventually("child wrote its pid", || {
            pid = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        })
        .await;
        pid.unwrap()
    }

    #[tokio::test]
    async fn terminate_kills_a_group_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut command = Command::new("bash");
        command.arg("-c").arg(format!(
            "trap '' TERM; sleep 100 & echo $! > {}; wait",
            pid_file.display()
        ));
        let mut group = ProcessGroup::spawn(&mut command).unwrap();
        let leader = group.pid();
        let sleeper = read_pid(&pid_file).await;
        assert!(running(sleeper));

        let status = group.terminate(Duration::from_millis(300)).await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!running(leader));
        eventually("sleeper is gone", || !running(sleeper)).await;
        let pgid = Pid::from_raw(leader as i32);
        eventually("group is empty", || {
            matches!(killpg(pgid, None), Err(Errno::ESRCH))
        })
        .await;
    }

    fn state_of(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')').next()?.trim_start().chars().next()
    }

    /// The leader's PID is the group id: it stays reserved (an unreaped
    /// zombie) until the group was killed, so no signal meant for the
    /// group can reach a process that reused the PID.
    #[tokio::test]
    async fn the_leader_is_reaped_only_after_the_group_is_killed() {
        let mut group = ProcessGroup::spawn(&mut Command::new("true")).unwrap();
        let pid = group.pid();
        assert_eq!(group.wait().await.unwrap().code(), Some(0));
        assert_eq!(state_of(pid), Some('Z'), "the exited leader is kept");
        assert!(!group.group_alive(), "the kept leader does not count");
        group.kill().unwrap();
        assert_eq!(state_of(pid), None, "reaped once the group is dead");
        assert_eq!(group.wait().await.unwrap().code(), Some(0));
    }

    #[tokio::test]
    async fn terminate_is_quick_for_a_cooperative_group() {
        let mut command = Command::new("sleep");
        command.arg("100");
        let mut group = ProcessGroup::spawn(&mut command).unwrap();
        let status = group.terminate(Duration::from_secs(5)).await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(!group.group_alive());
    }

    /// A shell that ignores SIGTERM (inherited through the `exec`), ready
    /// once it printed a line.
    async fn deaf_to_sigterm() -> ProcessGroup {
        use tokio::io::AsyncBufReadExt;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("trap '' TERM; echo ready; exec sleep 100")
            .stdout(Stdio::piped());
        let mut group = ProcessGroup::spawn(&mut command).unwrap();
        let stdout = group.child_mut().stdout.take().unwrap();
        let mut line = String::new();
        tokio::io::BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .unwrap();
        assert_eq!(line, "ready\n");
        group
    }

    #[tokio::test]
    async fn ignores_signal_reads_the_disposition() {
        let mut group = deaf_to_sigterm().await;
        assert!(ignores_signal(group.pid(), Signal::SIGTERM));
        assert!(!ignores_signal(group.pid(), Signal::SIGUSR2));
        group.kill().unwrap();
        group.wait().await.unwrap();
        assert!(
            !ignores_signal(u32::MAX, Signal::SIGTERM),
            "no such process"
        );
    }

    #[tokio::test]
    async fn a_zero_grace_kills_at_once() {
        let mut group = deaf_to_sigterm().await;
        let status = group.terminate(Duration::ZERO).await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!group.group_alive());
    }

    #[tokio::test]
    async fn drop_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut command = Command::new("bash");
        command.arg("-c").arg(format!(
            "sleep 100 & echo $! > {}; wait",
            pid_file.display()
        ));
        let group = ProcessGroup::spawn(&mut command).unwrap();
        let leader = group.pid();
        let sleeper = read_pid(&pid_file).await;
        drop(group);
        eventually("leader is gone", || !running(leader)).await;
        eventually("sleeper is gone", || !running(sleeper)).await;
    }

    #[tokio::test]
    async fn wait_then_kill_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(format!("sleep 100 & echo $! > {}", pid_file.display()));
        let mut group = ProcessGroup::spawn(&mut command).unwrap();
        let status = group.wait().await.unwrap();
        assert_eq!(status.code(), Some(0));
        let sleeper = read_pid(&pid_file).await;
        assert!(group.group_alive());
        group.kill().unwrap();
        eventually("background job is gone", || !running(sleeper)).await;
        // Signalling a gone group is fine.
        group.signal(Signal::SIGTERM).unwrap();
    }
}
