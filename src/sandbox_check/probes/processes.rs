//! Forbidden reaches for other processes: signalling, tracing or reading
//! the parent, escaping the process tree, and a fork bomb.

use std::io::{self, Read};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::super::escape::{
    command_escape_marker, command_setsid_escape, escape_marker, kill_escaped, setsid_escape,
};
use super::super::kernel::{
    bound_by_pid_max, command_namespace, in_own_pid_namespace, ptrace_mechanism,
};
use super::super::probe::{Probe, RefusedBy};
use super::sockets::no_scopes;

pub(in super::super) const SIGNAL_PARENT: Probe = Probe::new("signal-parent", |t| {
    // SIGWINCH: harmless should it arrive (ignored by default).
    kill(t.parent, Signal::SIGWINCH).map_err(io::Error::from)
})
.with_unsupported(no_scopes)
.refused_by(RefusedBy::Always("landlock scope"))
// A command in a PID namespace of its own sees no process outside it.
.with_refusal_errno("ESRCH")
.with_seen_by_child(|_| (in_own_pid_namespace()).then(|| "PID namespace".to_owned()));

pub(in super::super) const READ_PARENT_ENVIRON: Probe = Probe::new("read-parent-environ", |t| {
    let mut byte = [0u8; 1];
    std::fs::File::open(format!("/proc/{}/environ", t.parent))?
        .read(&mut byte)
        .map(drop)
})
.refused_by(RefusedBy::Always("non-dumpable parent, no CAP_SYS_PTRACE"));

// The filter refuses every ptrace call at syscall entry, before Landlock or
// the kernel's own ptrace check are asked; the child says which it saw.
pub(in super::super) const PTRACE_PARENT: Probe = Probe::new("ptrace-parent", |t| ptrace(t.parent))
    .refused_by(RefusedBy::Always("seccomp"))
    .with_seen_by_child(|report| Some(ptrace_mechanism(report).to_owned()));

pub(in super::super) const SETSID_ESCAPE: Probe =
    Probe::new("setsid-escape", |t| setsid_escape(&escape_marker(&t.dir)))
        .refused_by(RefusedBy::Always("subreaper sweep"))
        .with_refusal_errno("ESRCH")
        .with_seen_by_child(|_| command_namespace().map(|_| "PID namespace".to_owned()))
        // Found alive after the child's sweep: reported, then killed.
        .with_side_effect(|f| kill_escaped(&escape_marker(f.dir())) > 0);

/// A main-agent command's own escape: a sandboxed command runs in a
/// PID namespace of its own, so what it starts ends with it.
pub(in super::super) const COMMAND_SETSID_ESCAPE: Probe =
    Probe::new("command-setsid-escape", |t| {
        command_setsid_escape(&command_escape_marker(&t.dir))
    })
    .refused_by(RefusedBy::Always("PID namespace"))
    .with_refusal_errno("ESRCH")
    // Found alive once the command has exited: reported, then killed.
    .with_side_effect(|f| kill_escaped(&command_escape_marker(f.dir())) > 0);

pub(in super::super) const FORK_BOMB: Probe = Probe::new("fork-bomb", |_| fork_bomb())
    .refused_by(RefusedBy::Always("rlimit"))
    .with_refusal_errno("EAGAIN")
    // Held as a subagent is: PID 2 of its own namespace, whose pid_max
    // binds root too.
    .with_seen_by_child(|_| bound_by_pid_max().then(|| "pid_max of its PID namespace".to_owned()));

/// `PTRACE_SEIZE` of the parent: it never stops the tracee, and should it
/// get through, this process's exit detaches it.
fn ptrace(parent: Pid) -> io::Result<()> {
    // SAFETY: ptrace(2) with a pid and null address and data; SEIZE reads
    // no memory of ours.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            parent.as_raw(),
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Starts `sleep` children until the kernel refuses one or there are 64
/// more than this process's `RLIMIT_NPROC` (than a child's process
/// headroom where it is unlimited). `Ok`: the bomb was not stopped. The limit counts
/// the user's processes when it was set: sized by the headroom alone, the
/// bomb could fit under it once other processes of the user ended.
fn fork_bomb() -> io::Result<()> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let limit = match getrlimit(Resource::RLIMIT_NPROC) {
        Ok((soft, _)) if soft != RLIM_INFINITY => soft.min(MAX_BOMB),
        _ => crate::sandbox::child::PROCESS_HEADROOM,
    };
    // In its own namespace, past its pid_max (the limit and the PIDs of
    // the namespace's first round) whatever RLIMIT_NPROC says.
    let most = if bound_by_pid_max() {
        super::limits::PAST_THE_LIMIT.max(limit as usize + 64)
    } else {
        limit as usize + 64
    };
    super::sleepers::start_sleepers(most)
}

/// Most sleepers the fork bomb probe starts (an unlimited process count
/// is not tried to its end).
const MAX_BOMB: u64 = 4096;
