//! The setsid escape: the child starts a shell, as a subagent's command is
//! started, that double-forks a process into a session of its own and
//! exits. Where the sandbox allows a PID namespace per command
//! ([`crate::sandbox::pidns`]), the escaped process must be gone with its
//! command. Elsewhere a subagent is a child subreaper, so the orphan is
//! re-parented to it; the child then runs the sweep a subagent runs before
//! it exits ([`crate::process::sweep`]) and reaps what it killed. The
//! escaped process carries a marker (from the fixture's name) on its
//! command line, so the parent finds, reports and kills one that got away:
//! the check never leaves it behind.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use super::kernel::command_namespace;
use crate::process::sweep;

/// How long the probe waits for the escaped process to appear, and for the
/// killed processes to be reaped.
const ESCAPE_WAIT: Duration = Duration::from_secs(5);

/// What the setsid probe's escaped process has on its command line.
pub fn escape_marker(dir: &Path) -> String {
    let tag = dir
        .file_name()
        .map_or_else(|| dir.to_string_lossy(), |name| name.to_string_lossy());
    format!("fido-probe-escape-{tag}")
}

/// Live processes (not zombies) whose command line holds `marker`.
pub(super) fn marked_processes(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let marked = cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == marker.as_bytes());
            marked && !is_zombie(*pid)
        })
        .collect()
}

/// The session id of `pid` (field 6 of `/proc/PID/stat`), or of this
/// process for `"self"` (right in a PID namespace of its own too, where
/// `/proc` is still the parent's).
fn session_of(pid: impl std::fmt::Display) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(3)?.parse().ok()
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(false)
}

/// Kills every marked process and what it started; how many marked ones
/// there were.
pub(super) fn kill_escaped(marker: &str) -> usize {
    let marked = marked_processes(marker);
    for pid in &marked {
        // Its descendants first, read while it still holds them.
        let mut tree = sweep::descendants(*pid);
        if let Some(start_time) = sweep::start_time(*pid) {
            tree.insert(
                0,
                sweep::Descendant {
                    pid: *pid,
                    start_time,
                },
            );
        }
        sweep::kill_all(&tree);
    }
    marked.len()
}

/// The setsid probe, run as a subagent's command is. `Err(ESRCH)`: the
/// escaped process is gone (with its command's PID namespace, or swept);
/// `Ok`: it got out of this process's tree, or lived through the sweep (the
/// parent then finds and kills it by `marker`).
pub(super) fn setsid_escape(marker: &str) -> io::Result<()> {
    start_escape(marker)?;
    if command_namespace().is_some() {
        return gone_with_the_namespace(marker);
    }
    let me = std::process::id() as i32;
    let escaped = wait_for_escape(marker)?;
    let tree = sweep::descendants(me);
    if !tree.iter().any(|d| d.pid == escaped) {
        // Re-parented elsewhere: out of reach of this process's sweep.
        return Ok(());
    }
    // What a subagent does before it exits, then the reaping a subreaper
    // owes its adopted children.
    sweep::kill_descendants(me);
    reap(&tree);
    if sweep::start_time(escaped).is_some() && !is_zombie(escaped) {
        return Ok(());
    }
    Err(io::Error::from_raw_os_error(libc::ESRCH))
}

/// The marker of the command probe's escaped process.
pub fn command_escape_marker(dir: &Path) -> String {
    escape_marker(dir).replacen("escape", "command-escape", 1)
}

/// The setsid probe of a main-agent command: the probe child is the
/// command, confined by its parent, and starts the escape itself.
/// `Err(ESRCH)`: it runs in a PID namespace of its own, so the escaped
/// process ends with it (the parent checks it is gone once the child has
/// exited); `Ok`: nothing will end it.
pub(super) fn command_setsid_escape(marker: &str) -> io::Result<()> {
    run_escape_script(marker, false)?;
    wait_for_escape(marker)?;
    if super::kernel::in_own_pid_namespace() {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Runs the escape script, in a PID namespace of its own where the sandbox
/// allows one.
fn start_escape(marker: &str) -> io::Result<()> {
    run_escape_script(marker, command_namespace().is_some())
}

/// Runs the escape script, in a PID namespace of its own if `namespace`.
fn run_escape_script(marker: &str, namespace: bool) -> io::Result<()> {
    // The outer shell backgrounds `setsid sh`, whose `sh` waits on a sleep
    // (`; :` keeps it from exec'ing the sleep), and exits at once.
    let mut command = std::process::Command::new("sh");
    command
        .args([
            "-c",
            r#"setsid sh -c 'sleep 300; :' "$1" & exit 0"#,
            "sh",
            marker,
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let namespace = namespace.then(crate::sandbox::pidns::PidNamespace::for_current_user);
    if let Some(namespace) = namespace {
        use std::os::unix::process::CommandExt;
        // SAFETY: `enter` is made for the spot between fork and exec.
        unsafe {
            command.pre_exec(move || namespace.enter().map(drop));
        }
    }
    let status = command.status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "the escape script failed: {status}"
        )));
    }
    Ok(())
}

/// The marked process once it is in a session of its own. The forked
/// shell carries the marker before `setsid` has run; one that never gets
/// there is killed by the parent, by its marker.
fn wait_for_escape(marker: &str) -> io::Result<i32> {
    let deadline = Instant::now() + ESCAPE_WAIT;
    let mine = session_of("self");
    loop {
        let marked = marked_processes(marker);
        if let Some(pid) = marked.iter().find(|pid| session_of(**pid) != mine) {
            return Ok(*pid);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::other(if marked.is_empty() {
                "the escaped process never appeared"
            } else {
                "the probe process did not leave the session"
            }));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The command has ended, and its namespace with it: every marked process
/// must be gone (up to [`ESCAPE_WAIT`]; the kernel kills them at once).
fn gone_with_the_namespace(marker: &str) -> io::Result<()> {
    let deadline = Instant::now() + ESCAPE_WAIT;
    while marked_processes(marker).iter().any(|pid| !is_zombie(*pid)) {
        if Instant::now() >= deadline {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err(io::Error::from_raw_os_error(libc::ESRCH))
}

/// Waits (up to [`ESCAPE_WAIT`]) for each of `killed` to be gone, reaping
/// those that are (or become) this process's children.
fn reap(killed: &[sweep::Descendant]) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let deadline = Instant::now() + ESCAPE_WAIT;
    let mut pending: Vec<i32> = killed.iter().map(|d| d.pid).collect();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|pid| {
            match waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => true,
                Ok(_) => false,
                // Not (yet) a child: pending while it is still there.
                Err(_) => sweep::start_time(*pid).is_some(),
            }
        });
        std::thread::sleep(Duration::from_millis(5));
    }
}
