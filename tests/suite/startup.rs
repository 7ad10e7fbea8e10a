//! Start-up of `fido exec` under a signal: Ctrl+C works at any moment,
//! also while start-up waits for something another process holds.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::process::{ProcessFilter, assert_no_processes, send_signal};
use crate::common::sse;
use crate::common::{FakeServer, Reply, exec_cmd, wait_with_timeout};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether process `pid` has `file` open (`/proc/PID/fd` links to it).
fn has_open(pid: u32, file: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| target == file)
}

/// Waits until `pid` has `file` open; panics after `limit`.
fn wait_until_open(pid: u32, file: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !has_open(pid, file) {
        assert!(
            Instant::now() < deadline,
            "pid {pid} never opened {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Another process holds the plan lock while `fido exec` starts: restoring
/// the plan waits for it (up to 5 s). SIGINT sent during that wait ends
/// fido with 130 before the wait could run out: the "locked" error that
/// ends the wait is never reported, and no model request was made.
#[test]
fn sigint_during_start_up_ends_exec_while_the_plan_lock_is_held() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let mut holder = super::plan::hold_plan_lock(&root);
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("unreachable"))]);
    let child = exec_cmd(&root, &server, "hello", &[]).spawn().unwrap();
    let pid = child.id();
    // Start-up opened the lock file and is polling for the lock.
    wait_until_open(pid, &super::plan::plan_lock(&root), Duration::from_secs(30));
    send_signal(pid, libc::SIGINT);
    let output = wait_with_timeout(child, Duration::from_secs(30));
    // The lock is still held: whatever ended fido, it was not the lock.
    assert!(holder.try_wait().unwrap().is_none(), "the holder died");
    let _ = holder.kill();
    let _ = holder.wait();
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{log}");
    let events = String::from_utf8_lossy(&output.stdout);
    assert!(
        !log.contains("locked by") && !events.contains("locked by"),
        "fido waited for the lock to run out instead of ending at SIGINT: {log}"
    );
    assert!(
        server.model_requests().is_empty(),
        "a model request was made"
    );
    assert_no_processes(ProcessFilter::Group(pid), Duration::from_secs(5));
}
