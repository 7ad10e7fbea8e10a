//! Starting a child process: the one way every child of Fido is started,
//! signalled and reaped (hooks, git, MCP servers, commands, subagents).
//!
//! Each child:
//! - leads a process group of its own ([`ProcessGroup`]: its own session,
//!   no controlling terminal; git: a group in Fido's session), and every
//!   signal goes to the whole group;
//! - dies with Fido: the parent-death signal (SIGKILL) is armed between
//!   fork and exec, then the parent pid is checked again, so a Fido that
//!   died during the fork is caught ([`die_with_fido`]);
//! - starts from Fido's environment minus its secrets, as [`env`]'s one
//!   policy says for its kind;
//! - is reaped once its group is dead (a pidfd and `WNOWAIT` keep the
//!   leader's pid, the group id, reserved until then);
//! - takes along what left its group ([`leavers`]: a `setsid` or a double
//!   fork): a cgroup of its own where one can be made, else the orphans
//!   re-parented to Fido, a child subreaper, are killed and reaped.
//!
//! Nothing else in the crate calls `kill`/`killpg` (the probe of
//! `fido sandbox check` sends one signal on purpose, to prove it is
//! refused; the subagent sweep kills what it found by start time).

pub mod env;
mod group;
pub mod leavers;
pub mod sweep;

use std::io;

pub use env::{EnvPolicy, Inherit};
pub use group::{Confined, ProcessGroup, confined, ignores_signal};
pub use leavers::Leavers;

/// Arms SIGKILL on the death of `parent` (Fido) and checks it is still
/// the parent. Runs between fork and exec: plain syscalls, no allocation.
pub fn die_with_fido(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl and getppid with constant arguments.
    unsafe {
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
        // The parent died before the signal was armed.
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

/// Between fork and exec: leads a session of its own (so it has no
/// controlling terminal), dies with Fido (`parent`), and records that
/// for `ProcessGroup::spawn`'s hook ([`Confined::InSession`]). Plain
/// syscalls and an atomic store, no allocation.
pub fn own_session(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    if unsafe { libc::setsid() } == -1 {
        return Err(io::Error::last_os_error());
    }
    die_with_fido(parent)?;
    confined(Confined::InSession);
    Ok(())
}

/// Makes a blocking `command` (git's) the leader of a new process group in
/// Fido's session that dies with Fido and joins `leavers`' cgroup.
pub fn own_group(command: &mut std::process::Command, leavers: &Leavers) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    let cgroup = leavers.join_fd();
    command.process_group(0);
    // SAFETY: async-signal-safe syscalls on values copied before the fork.
    unsafe {
        command.pre_exec(move || {
            die_with_fido(parent)?;
            leavers::join(cgroup)
        });
    }
}
