//! Running the real `fido` binary, and watching the processes it leaves.
//!
//! Every command gets a clean environment for fido: no `FIDO_*`,
//! `OPENAI_*`, `ANTHROPIC_*` or `RUST_LOG` from the developer's shell, and
//! `HOME` / `XDG_CONFIG_HOME` pointing at an empty directory so no user
//! config leaks in. Each child leads its own process group, so a runaway
//! run is killed with everything it started in that group.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::server::FakeServer;

/// Longest a single fido run may take before the test kills it and fails.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The `fido` binary cargo built for this test run.
pub fn fido_bin() -> &'static str {
    env!("CARGO_BIN_EXE_fido")
}

/// `fido` with a clean environment and the shared empty home (see
/// [`clean_home`]); the caller adds arguments, env and stdio.
pub fn fido_cmd() -> Command {
    fido_cmd_with_home(clean_home())
}

/// `fido` with a clean environment and `HOME` / `XDG_CONFIG_HOME` set to
/// `home` (so `home/fido/…` is the user config directory); for tests that
/// write a user config or must not share the home with other tests.
pub fn fido_cmd_with_home(home: &Path) -> Command {
    program_cmd(Path::new(fido_bin()), home)
}

/// Keeps this process's Fido and provider settings (and `RUST_LOG`) from
/// `cmd`, so a test's Fido sees only what the test sets.
pub fn remove_fido_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if ["FIDO_", "OPENAI_", "ANTHROPIC_"]
            .iter()
            .any(|prefix| key_text.starts_with(prefix))
            || key_text == "RUST_LOG"
        {
            cmd.env_remove(&key);
        }
    }
}

/// `program` (a `fido` binary) set up as [`fido_cmd_with_home`] sets up
/// `fido`.
fn program_cmd(program: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    remove_fido_env(&mut cmd);
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// An empty directory under cargo's target tmp dir, emptied once per test
/// run and shared by every [`fido_cmd`] of the run.
pub fn clean_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fido-clean-home");
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", home.display()));
        home
    })
}

/// `fido exec -C <workspace> --json -- <prompt>` against `server` as an
/// OpenAI-compatible provider (`FIDO_MODEL=test-model`,
/// `FIDO_API_KEY=test-key`), with `extra_env` on top; stdout and stderr piped.
pub fn exec_cmd(
    workspace: &Path,
    server: &FakeServer,
    prompt: &str,
    extra_env: &[(&str, &str)],
) -> Command {
    exec_cmd_with_flags(workspace, server, &[], prompt, extra_env)
}

/// [`exec_cmd`] with more `fido exec` flags (e.g. `--resume ID`) before
/// the prompt.
pub fn exec_cmd_with_flags(
    workspace: &Path,
    server: &FakeServer,
    flags: &[&str],
    prompt: &str,
    extra_env: &[(&str, &str)],
) -> Command {
    exec_cmd_of(
        Path::new(fido_bin()),
        workspace,
        server,
        flags,
        prompt,
        extra_env,
    )
}

/// [`exec_cmd_with_flags`] of another `fido` binary, `program`.
pub fn exec_cmd_of(
    program: &Path,
    workspace: &Path,
    server: &FakeServer,
    flags: &[&str],
    prompt: &str,
    extra_env: &[(&str, &str)],
) -> Command {
    let mut cmd = program_cmd(program, clean_home());
    cmd.arg("exec")
        .arg("-C")
        .arg(workspace)
        .arg("--json")
        .args(flags)
        .arg("--")
        .arg(prompt)
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key")
        .envs(extra_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs [`exec_cmd`] to completion within [`RUN_TIMEOUT`], then checks
/// that it left no process behind ([`assert_nothing_left`]).
pub fn run_exec(
    workspace: &Path,
    server: &FakeServer,
    prompt: &str,
    extra_env: &[(&str, &str)],
) -> Output {
    run_in(
        workspace,
        exec_cmd(workspace, server, prompt, extra_env),
        None,
        RUN_TIMEOUT,
    )
}

/// [`run_with_timeout`] of a fido that works in `workspace`, then the
/// checks of [`wait_in`].
pub fn run_in(workspace: &Path, cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> Output {
    wait_in(workspace, spawn_with_stdin(cmd, stdin), timeout)
}

/// [`wait_with_timeout`] of a fido that works in `workspace`, then the
/// check every test that spawns processes ends with: nothing is left in
/// its process group nor in the workspace ([`assert_nothing_left`]).
pub fn wait_in(workspace: &Path, child: Child, timeout: Duration) -> Output {
    let group = child.id();
    let output = wait_with_timeout(child, timeout);
    assert_no_processes(ProcessFilter::Group(group), Duration::from_secs(5));
    assert_nothing_left(workspace);
    output
}

/// Spawns `cmd` with piped stdout/stderr, writes `stdin` (if any) and waits
/// at most `timeout`.
pub fn run_with_timeout(cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> Output {
    wait_with_timeout(spawn_with_stdin(cmd, stdin), timeout)
}

/// Spawns `cmd` with piped stdout/stderr and writes `stdin` (if any).
fn spawn_with_stdin(mut cmd: Command, stdin: Option<&[u8]>) -> Child {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input)
            .unwrap_or_else(|e| panic!("cannot write fido's stdin: {e}"));
    }
    child
}

/// Collects the output of a spawned child (stdout/stderr piped or not),
/// killing its process group and panicking when it runs past `timeout`.
/// Also panics when the pipes stay open 5 s after the child exited: some
/// process it started still holds them.
pub fn wait_with_timeout(mut child: Child, timeout: Duration) -> Output {
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let pid = child.id();
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                kill_group_or_child(&mut child);
                let _ = child.wait();
                let stderr = stderr
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap_or_default();
                panic!(
                    "process {pid} ran longer than {timeout:?} and was killed; stderr:\n{}",
                    String::from_utf8_lossy(&stderr)
                );
            }
            Err(e) => panic!("cannot wait for process {pid}: {e}"),
        }
    };
    let collect = |rx: mpsc::Receiver<Vec<u8>>, name: &str| {
        rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
            panic!("process {pid} exited but its {name} is still held open by a process it started")
        })
    };
    Output {
        status,
        stdout: collect(stdout, "stdout"),
        stderr: collect(stderr, "stderr"),
    }
}

/// Reads a pipe to its end on a thread; a missing pipe reads as empty.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = tx.send(bytes);
    });
    rx
}

fn kill_group_or_child(child: &mut Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        let _ = child.kill();
        return;
    };
    // SAFETY: plain syscalls on a pid we spawned and have not reaped yet.
    let group = unsafe { libc::getpgid(pid) };
    if group == pid {
        // SAFETY: the child leads this group (process_group(0)).
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    } else {
        let _ = child.kill();
    }
}

/// Sends `signal` (e.g. `libc::SIGINT`) to one process.
pub fn send_signal(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).unwrap_or_else(|_| panic!("pid {pid} out of range"));
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}) failed: {}",
        std::io::Error::last_os_error()
    );
}

/// `--json` stdout as events, one per line; panics on a line that is not a
/// JSON object with a string `type`.
pub fn parse_events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert!(
                event.get("type").is_some_and(Value::is_string),
                "event without a string `type`: {line}"
            );
            event
        })
        .collect()
}

/// The events of one type, in order.
pub fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some(kind))
        .collect()
}

/// Which processes [`processes`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessFilter {
    /// The process with this pid.
    Pid(u32),
    /// Members of this process group.
    Group(u32),
    /// Children of this process.
    ChildrenOf(u32),
}

/// One line of `/proc/<pid>/stat`, the parts tests care about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: u32,
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
}

/// Live processes matching `filter`. Zombies (state `Z`) are dead and only
/// wait to be reaped, so they do not count.
pub fn processes(filter: ProcessFilter) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_stat)
        .filter(|p| p.state != 'Z')
        .filter(|p| match filter {
            ProcessFilter::Pid(pid) => p.pid == pid,
            ProcessFilter::Group(pgrp) => p.pgrp == pgrp,
            ProcessFilter::ChildrenOf(ppid) => p.ppid == ppid,
        })
        .collect()
}

fn read_stat(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some(ProcInfo {
        pid,
        comm,
        state,
        ppid,
        pgrp,
    })
}

/// The live `fido __subagent` processes below `fido` (pid `parent`): its
/// children, or, where a subagent runs in a PID namespace of its own, the
/// process two levels below the child Fido spawned (that child keeps the
/// namespace; the one between is the namespace's init).
pub fn subagents_of(parent: u32) -> Vec<ProcInfo> {
    let mut level = vec![parent];
    let mut found = Vec::new();
    for _ in 0..3 {
        let below: Vec<ProcInfo> = level
            .iter()
            .flat_map(|pid| processes(ProcessFilter::ChildrenOf(*pid)))
            .collect();
        level = below.iter().map(|p| p.pid).collect();
        found.extend(below.into_iter().filter(|p| runs_subagent(p.pid)));
    }
    found
}

fn runs_subagent(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__subagent"))
}

/// Panics unless no live process matches `filter` within `within` (processes
/// take a moment to die after a signal).
pub fn assert_no_processes(filter: ProcessFilter, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = processes(filter);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("processes still alive after {within:?} ({filter:?}): {left:#?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Pids of live processes whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| read_stat(pid).is_some_and(|p| p.state != 'Z'))
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}

/// Pids of live processes whose argument vector is exactly `argv`
/// (`/proc/<pid>/cmdline` holds the arguments NUL-separated, so a search
/// for `"sleep 29.5"` in it never matches).
pub fn pids_running(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|arg| [arg.as_bytes(), b"\0"].concat())
        .collect();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| read_stat(pid).is_some_and(|p| p.state != 'Z'))
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// Polls `ready` every 10 ms until it holds; panics naming `what` after
/// `within`.
pub fn wait_until(what: &str, within: Duration, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not after {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Live processes (other than this one) whose working directory is
/// `dir` or below it.
pub fn processes_in(dir: &Path) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .filter_map(read_stat)
        .filter(|p| p.state != 'Z')
        .collect()
}

/// The check every test that spawns processes ends with: within 5 s no
/// live process works in `workspace` (Fido, its commands, its subagents and
/// whatever they started all run there). Whatever is left is killed, so a
/// failure leaves nothing running behind it.
pub fn assert_nothing_left(workspace: &Path) {
    // The kernel reports the canonical path; a tempdir may sit behind a
    // symlink.
    let dir = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_in(&dir);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for process in &left {
                if let Ok(pid) = libc::pid_t::try_from(process.pid) {
                    // SAFETY: kill(2) has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            panic!("processes left in {}: {left:#?}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A test that cannot run here (no root, no namespaces, …): under
/// `CI=true` that is a failure, so CI's count of passed tests is true;
/// elsewhere it says why on the terminal and the caller returns.
pub fn skip_unless_ci(case: &str, reason: &str) {
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{case} cannot run under CI=true: {reason}");
    }
    // Straight to the terminal: the harness captures `eprintln!`.
    let _ = writeln!(std::io::stderr(), "{case}: skipped ({reason})");
}

/// `cmd` run as the last arguments of `wrapper` (`unshare` and its flags,
/// `setsid`, …), with `cmd`'s environment and folder; stdio and process
/// group are the caller's to set.
pub fn wrapped_in(wrapper: &[&str], cmd: &Command) -> Command {
    let (program, flags) = wrapper.split_first().expect("a wrapper program");
    let mut wrapped = Command::new(program);
    wrapped
        .args(flags)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}
