//! Runs one hook command: `sh -c COMMAND` in the workspace, with the
//! user's rights and environment minus its secrets (the session's
//! [`EnvPolicy`]), as the leader of a process group of its own.
//!
//! Nothing a hook does can hold a turn past its timeout or leave a
//! process behind: its stdin is written by a task of its own (a hook that
//! never reads cannot block the writer, which is dropped at the end);
//! stdout and stderr are read concurrently and kept up to [`OUTPUT_CAP`]
//! each (the rest is read and dropped, so a flood cannot fill a pipe and
//! stall the hook either); at the timeout the whole group is killed; and
//! when the leader exits, whatever it left in its group is killed too.
//! The leader is always reaped.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

use crate::process::ProcessGroup;
use crate::process::env::{EnvPolicy, Inherit};
use crate::protocol::hook::HookStatus;

/// Bytes of stdout, and of stderr, kept of one hook.
pub const OUTPUT_CAP: usize = 64 * 1024;
/// How long output is still read once the group is gone.
const DRAIN: Duration = Duration::from_millis(500);

/// One stream of a hook, up to the cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// More came than the cap; the rest was dropped.
    pub cut: bool,
}

impl Captured {
    /// The text, lossily decoded, with `[cut]` after it when it was cut.
    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let text = text.trim();
        if self.cut {
            format!("{text} [cut at {} KiB]", OUTPUT_CAP / 1024)
        } else {
            text.to_string()
        }
    }
}

/// How one run of a hook went.
#[derive(Debug, Clone)]
pub struct HookRun {
    pub status: HookStatus,
    /// Its exit code (status `exited`), or the signal that ended it
    /// (status `killed`).
    pub code: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub elapsed: Duration,
    /// Why it could not be started (status `spawn_failed`).
    pub spawn_error: Option<String>,
}

/// Runs `command` with `stdin` written to it, for at most `timeout`.
pub async fn run_command(
    command: &str,
    cwd: &Path,
    env_policy: &EnvPolicy,
    stdin: Vec<u8>,
    timeout: Duration,
) -> HookRun {
    let started = Instant::now();
    let mut shell = Command::new("sh");
    env_policy.apply(&mut shell, Inherit::All);
    shell
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env("FIDO_PROJECT_DIR", cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut group = match ProcessGroup::spawn_with_stdin(&mut shell, Stdio::piped()) {
        Ok(group) => group,
        Err(err) => return spawn_failed(err.to_string(), started),
    };
    let child = group.child_mut();
    let writer = child.stdin.take().map(|mut pipe| {
        tokio::spawn(async move {
            // A hook may exit without reading: a broken pipe is no error.
            let _ = pipe.write_all(&stdin).await;
            let _ = pipe.shutdown().await;
        })
    });
    let mut stdout = child.stdout.take().map(|out| tokio::spawn(capture(out)));
    let mut stderr = child.stderr.take().map(|err| tokio::spawn(capture(err)));
    let waited = tokio::time::timeout(timeout, group.wait()).await;
    // Whatever the hook left running in its group goes with it.
    if let Err(err) = group.kill() {
        tracing::warn!(error = %err, "cannot kill a hook's process group");
    }
    if let Err(err) = group.wait().await {
        tracing::warn!(error = %err, "cannot reap a hook");
    }
    if let Some(writer) = writer {
        writer.abort();
    }
    let (status, code) = match waited {
        Err(_elapsed) => (HookStatus::TimedOut, None),
        Ok(Ok(exit)) => classify(exit),
        Ok(Err(err)) => return spawn_failed(format!("cannot wait for it: {err}"), started),
    };
    HookRun {
        status,
        code,
        stdout: drain(&mut stdout).await,
        stderr: drain(&mut stderr).await,
        elapsed: started.elapsed(),
        spawn_error: None,
    }
}

fn classify(exit: ExitStatus) -> (HookStatus, Option<i32>) {
    match (exit.code(), exit.signal()) {
        (Some(code), _) => (HookStatus::Exited, Some(code)),
        (None, signal) => (HookStatus::Killed, signal),
    }
}

fn spawn_failed(message: String, started: Instant) -> HookRun {
    HookRun {
        status: HookStatus::SpawnFailed,
        code: None,
        stdout: Captured::default(),
        stderr: Captured::default(),
        elapsed: started.elapsed(),
        spawn_error: Some(message),
    }
}

/// Reads `stream` to its end, keeping the first [`OUTPUT_CAP`] bytes.
async fn capture(mut stream: impl AsyncRead + Unpin) -> Captured {
    let mut captured = Captured::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return captured,
            Ok(n) => {
                let room = OUTPUT_CAP - captured.bytes.len();
                captured.bytes.extend_from_slice(&buf[..n.min(room)]);
                captured.cut |= n > room;
            }
        }
    }
}

/// What a reader got, waiting at most [`DRAIN`] (a process that left the
/// group may hold the pipe open); the reader is stopped after that.
async fn drain(reader: &mut Option<JoinHandle<Captured>>) -> Captured {
    let Some(handle) = reader else {
        return Captured::default();
    };
    match tokio::time::timeout(DRAIN, &mut *handle).await {
        Ok(Ok(captured)) => captured,
        Ok(Err(_)) | Err(_) => {
            handle.abort();
            Captured::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(command: &str, timeout_ms: u64) -> HookRun {
        let dir = std::env::temp_dir();
        run_command(
            command,
            &dir,
            &EnvPolicy::default(),
            b"{\"a\":1}\n".to_vec(),
            Duration::from_millis(timeout_ms),
        )
        .await
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    }

    #[tokio::test]
    async fn a_hook_reads_its_stdin_and_its_exit_code_and_output_are_kept() {
        let ran = run("cat; echo oops >&2; exit 3", 10_000).await;
        assert_eq!((ran.status, ran.code), (HookStatus::Exited, Some(3)));
        assert_eq!(ran.stdout.text(), "{\"a\":1}");
        assert_eq!(ran.stderr.text(), "oops");
    }

    #[tokio::test]
    async fn a_hung_hook_is_killed_with_its_group_at_its_timeout() {
        let marker = tempfile::NamedTempFile::new().unwrap();
        let path = marker.path().display().to_string();
        // A background sleeper in the group, and the leader hangs too.
        let command = format!("sleep 1000 & echo $! > {path}; sleep 1000");
        // The leader sleeps 1000 s: a return marked timed out is the proof.
        let ran = run(&command, 300).await;
        assert_eq!(ran.status, HookStatus::TimedOut);
        let pid: i32 = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive(pid), "the sleeper {pid} outlived its hook");
    }

    #[tokio::test]
    async fn a_hook_that_never_reads_its_stdin_does_not_block_and_leaves_nothing() {
        let marker = tempfile::NamedTempFile::new().unwrap();
        let path = marker.path().display().to_string();
        let dir = std::env::temp_dir();
        // A megabyte of stdin the hook never reads; it exits at once, and
        // leaves a sleeper behind in its group.
        let stdin = vec![b' '; 1 << 20];
        let command = format!("sleep 1000 & echo $! > {path}; exit 0");
        let ran = run_command(
            &command,
            &dir,
            &EnvPolicy::default(),
            stdin,
            Duration::from_secs(20),
        )
        .await;
        // Exited, not timed out at 20 s: the unread stdin blocked nothing.
        assert_eq!((ran.status, ran.code), (HookStatus::Exited, Some(0)));
        let pid: i32 = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!alive(pid), "the sleeper {pid} outlived its hook");
    }

    #[tokio::test]
    async fn a_flood_of_output_is_capped_and_said_to_be_cut() {
        let ran = run(
            "head -c 1000000 /dev/zero | tr '\\0' x; head -c 200000 /dev/zero >&2",
            20_000,
        )
        .await;
        assert_eq!((ran.status, ran.code), (HookStatus::Exited, Some(0)));
        assert_eq!(ran.stdout.bytes.len(), OUTPUT_CAP);
        assert!(ran.stdout.cut && ran.stderr.cut);
        assert!(ran.stdout.text().ends_with("[cut at 64 KiB]"));
    }

    #[tokio::test]
    async fn a_crash_and_a_missing_directory_are_reported_as_such() {
        let ran = run("kill -SEGV $$", 10_000).await;
        assert_eq!((ran.status, ran.code), (HookStatus::Killed, Some(11)));
        let ran = run_command(
            "true",
            Path::new("/no/such/dir"),
            &EnvPolicy::default(),
            Vec::new(),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(ran.status, HookStatus::SpawnFailed);
        assert!(ran.spawn_error.is_some());
    }
}
