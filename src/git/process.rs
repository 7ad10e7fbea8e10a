//! One git process from start to reaping, started the one way
//! (`crate::process::own_group`): it leads a process group of its own and
//! dies with Fido, and whatever it started is killed with its group (and
//! its cgroup or the orphan sweep, for what left the group) once it
//! exits, before it is reaped, so the group id can name no other process
//! then.

use std::io::{self, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::process::Leavers;

/// What a finished git process left.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// It was killed for outliving its time limit.
    pub timed_out: bool,
}

/// Runs `command` (made by [`crate::process::own_group`]) with `input` on
/// its stdin, and collects its output; after `timeout` its group is
/// killed. Whatever left the group goes with `leavers` when it exits.
pub fn run(
    command: &mut Command,
    leavers: &Leavers,
    input: Option<&[u8]>,
    timeout: Option<Duration>,
) -> io::Result<Finished> {
    command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let registration = crate::process::leavers::registration();
    let mut child = command.spawn()?;
    let pgid = child.id() as libc::pid_t;
    registration.done(pgid);
    let reaped = (Mutex::new(false), Condvar::new());
    let timed_out = Mutex::new(false);
    std::thread::scope(|scope| {
        // Writers and readers of their own: git may fill its stdout
        // before it reads all of its stdin.
        let writer = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => Some(scope.spawn(move || stdin.write_all(bytes))),
            _ => None,
        };
        let stdout = child.stdout.take().map(|out| scope.spawn(|| read_all(out)));
        let stderr = child.stderr.take().map(|err| scope.spawn(|| read_all(err)));
        if let Some(limit) = timeout {
            let (reaped, timed_out) = (&reaped, &timed_out);
            scope.spawn(move || watchdog(reaped, limit, pgid, timed_out));
        }
        let exited = wait_unreaped(&child);
        // The leader is a zombie: the group id is still its own.
        kill_group(pgid);
        leavers.kill();
        let stdout = stdout
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let stderr = stderr
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        if let Some(writer) = writer {
            // A git that exits before reading its input is no error here.
            let _ = writer.join();
        }
        let status = reap(&mut child, &reaped);
        crate::process::leavers::unregister(pgid);
        exited?;
        Ok(Finished {
            status: status?,
            stdout,
            stderr,
            timed_out: *timed_out.lock().unwrap_or_else(PoisonError::into_inner),
        })
    })
}

fn read_all(mut from: impl Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = from.read_to_end(&mut bytes);
    bytes
}

/// Kills the group at `limit`, unless the leader was reaped before.
fn watchdog(reaped: &(Mutex<bool>, Condvar), limit: Duration, pgid: i32, timed_out: &Mutex<bool>) {
    let (lock, changed) = reaped;
    let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let (guard, _) = changed
        .wait_timeout_while(guard, limit, |done| !*done)
        .unwrap_or_else(PoisonError::into_inner);
    if !*guard {
        // Still unreaped (the lock is held): the group id is the leader's.
        kill_group(pgid);
        *timed_out.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }
}

/// Reaps the leader once the watchdog can no longer signal its group.
fn reap(child: &mut Child, reaped: &(Mutex<bool>, Condvar)) -> io::Result<ExitStatus> {
    let (lock, changed) = reaped;
    let mut done = lock.lock().unwrap_or_else(PoisonError::into_inner);
    *done = true;
    changed.notify_all();
    drop(done);
    child.wait()
}

/// Waits until the leader has exited, leaving it unreaped.
fn wait_unreaped(child: &Child) -> io::Result<()> {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: a plain syscall; "no such process" means nothing is left.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}
