//! The subagent sandbox through the real binary: `fido sandbox check`, and a
//! sandboxed probe child looked at from outside while it is confined.
//!
//! This kernel supports Landlock ABI 7; these tests fail, never skip, where
//! the sandbox cannot be enforced.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fido::sandbox_check::{
    Outcome, ProbeFixture, ProbeFrame, ProbeResult, ProbeRole, escape_marker, mechanism,
};
use nix::unistd::Pid;

use crate::common::process::pids_with;
use crate::common::tree::{assert_tree_unchanged, tree_bytes};
use crate::common::{
    ProcessFilter, assert_no_processes, fido_cmd, run_with_timeout, wait_with_timeout,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The errno each forbidden probe must be refused with: Landlock answers
/// EACCES for file-system rules, EPERM for scopes; the seccomp filter
/// refuses new sockets (before Landlock's TCP rules are reached) with
/// EPERM, and every ptrace call with EPERM; the kernel's ptrace check
/// answers EACCES for the parent's environment; the setsid'd process is
/// gone (ESRCH) after the sweep.
fn expected_errno(probe: &str) -> &'static str {
    match probe {
        "setsid-escape" | "command-setsid-escape" => "ESRCH",
        "open-terminal" => "ENXIO",
        "ptrace-parent"
        | "signal-parent"
        | "abstract-unix-connect"
        | "tcp-connect"
        | "tcp-bind"
        | "udp-send"
        | "unix-pathname-connect"
        | "make-char-device"
        | "make-block-device"
        | "type-into-terminal"
        | "drive-console"
        | "chmod" => "EPERM",
        "fork-bomb" => "EAGAIN",
        _ => "EACCES",
    }
}

fn blocked(probe: &str) -> String {
    let errno = expected_errno(probe);
    let by = match (probe, command_namespace()) {
        ("setsid-escape", Some(_)) => "PID namespace",
        _ => mechanism(probe, errno),
    };
    format!("blocked ({errno}, {by})")
}

/// The PID namespace a subagent's commands get here, if any.
fn command_namespace() -> Option<String> {
    let kind = fido::sandbox::pidns::containment();
    kind.uses_namespace().then(|| kind.to_string())
}

fn temp_dirs_of(pid: u32) -> Vec<String> {
    let prefix = format!("fido-sandbox-check-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

/// The probe lines `fido sandbox check` prints here, from the reviewed
/// golden table. Two cells depend on the machine, and are spelled out:
/// without a PID namespace for commands the subreaper sweep stops the
/// setsid'd process, and the fork bomb probe runs only where
/// `RLIMIT_NPROC` applies (not as root of the first user namespace).
fn expected_probe_lines(pid_namespace: bool, fork_bomb: bool) -> Vec<String> {
    let golden = include_str!("../fixtures/sandbox_check_probes.txt");
    // Without a mount namespace Landlock's per-entry rules keep the
    // protected paths, and refuse with EACCES.
    let bind_mounts = fido::sandbox::protect::mechanism().uses_namespace();
    let mut lines = Vec::new();
    for line in golden.lines() {
        let line = if bind_mounts {
            line.to_owned()
        } else {
            line.replace("(EROFS, read-only bind mount)", "(EACCES, landlock)")
                .replace("(EBUSY, read-only bind mount)", "(EACCES, landlock)")
        };
        let line = line.as_str();
        let line = if pid_namespace {
            line.to_owned()
        } else {
            // Out of a PID namespace the parent is there to be signalled,
            // and Landlock's scope refuses it.
            line.replace("(ESRCH, PID namespace)", "(EPERM, landlock scope)")
        };
        let line = line.as_str();
        if let Some(skipped) = limit_skipped(line, pid_namespace) {
            lines.extend(skipped);
            continue;
        }
        if line.starts_with("probe command-setsid-escape:") && !pid_namespace {
            // Without a PID namespace a command is not probed for it (the
            // containment line says so).
            continue;
        }
        if line.starts_with("probe setsid-escape:") && !pid_namespace {
            lines.push(line.replace("(ESRCH, PID namespace)", "(ESRCH, subreaper sweep)"));
        } else {
            lines.push(line.to_owned());
        }
        if line.starts_with("probe setsid-escape:") && fork_bomb {
            lines.push(format!("probe fork-bomb: blocked (EAGAIN, {}) | read-only: n/a | workspace-write: n/a | danger-full-access: allowed", fork_bomb_limit()));
        }
    }
    lines
}

/// What stops a subagent's fork bomb here: the `pid_max` of the PID
/// namespace it runs in, where the kernel gives it one with a settable
/// `pid_max`; else its `RLIMIT_NPROC`.
fn fork_bomb_limit() -> &'static str {
    if fido::sandbox_check::subagent_pid_max() {
        "pid_max of its PID namespace"
    } else {
        "rlimit"
    }
}

/// The limit probes' lines where this machine cannot keep a limit: the
/// process limit needs a PID namespace and Linux 6.14 (`None`: the golden
/// line holds; `Some(empty)`: no line), `TMPDIR`'s size a tmpfs Fido may
/// mount (root, here; else not probed).
fn limit_skipped(line: &str, pid_namespace: bool) -> Option<Vec<String>> {
    let cell = |reason: &dyn std::fmt::Display| {
        format!("skipped (not supported by this kernel: {reason})")
    };
    if line.starts_with("probe exceed-process-limit:") {
        if !pid_namespace {
            return Some(Vec::new());
        }
        let reason = fido::sandbox::limits::process_limit_support().err()?;
        return Some(vec![format!(
            "probe exceed-process-limit: n/a | read-only: {0} | workspace-write: {0} | danger-full-access: allowed",
            cell(&reason)
        )]);
    }
    if line.starts_with("probe fill-tmpdir:") && !nix::unistd::geteuid().is_root() {
        // Not probed where its TMPDIR is a plain folder (the limits line
        // says so).
        return Some(Vec::new());
    }
    None
}

#[test]
fn sandbox_check_blocks_every_forbidden_probe_here() {
    let mut cmd = fido_cmd();
    cmd.args(["sandbox", "check"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let output = wait_with_timeout(child, TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "fido sandbox check failed ({}):\n{stdout}\nstderr:\n{stderr}",
        output.status
    );

    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("sandbox: landlock ABI ")
            && lines[0].contains("ruleset fully enforced")
            && lines[0].contains("no_new_privs set")
            && lines[0].contains("TCP denied")
            && lines[0].contains("signals and abstract sockets scoped"),
        "{stdout}"
    );
    let kept_by = format!(
        "; .git, .fido, .fido-state and fido.toml kept by {}",
        fido::sandbox::protect::mechanism()
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("commands (workspace-write): ") && l.ends_with(&kept_by)),
        "{stdout}"
    );
    let probe_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("probe "))
        .collect();
    // The reviewed table (tests/RELIABILITY.md), not one derived from the
    // probe list and `mechanism()`: a dropped or relabelled probe fails.
    let fork_bomb = fido::sandbox_check::fork_bomb_note().is_none();
    let expected = expected_probe_lines(command_namespace().is_some(), fork_bomb);
    assert_eq!(probe_lines, expected, "{stdout}");
    let containment = match command_namespace() {
        Some(kind) => {
            format!("containment: {kind}, and a child subreaper plus a sweep of its descendants")
        }
        None => "containment: child subreaper plus a sweep of its descendants (no PID namespace for commands: it needs an unprivileged user namespace, ".into(),
    };
    assert!(
        lines.iter().any(|l| l.starts_with(&containment)),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nnote: a workspace-write command may change the mode of a file it owns outside the workspace"),
        "{stdout}"
    );
    // The golden table's own counts: 31 forbidden operations for every
    // sandbox (18, 7 on the protected paths, the secret in the
    // environment and 5 on the terminal and devices), one fewer in workspace-write (chmod is n/a), one more
    // in read-only (write-workspace), two more for a subagent (three with
    // the fork bomb).
    let commands = 31;
    // Sandboxed commands have a PID namespace here (probes
    // command-setsid-escape and exceed-process-limit) or not; a
    // workspace-write command's TMPDIR is a tmpfs (probe fill-tmpdir)
    // where Fido may mount one (root, here).
    let contained = 2 * usize::from(command_namespace().is_some());
    let tmpfs = usize::from(nix::unistd::geteuid().is_root());
    let writing = commands - 1 + contained + tmpfs;
    assert!(
        stdout.contains(&format!("summary (commands, workspace-write, configured): {writing}/{writing} forbidden operations blocked, 4/4 controls allowed; sandbox enforced")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("summary (commands, read-only): {n}/{n} forbidden operations blocked, 2/2 controls allowed; sandbox enforced", n = commands + 1 + contained)),
        "{stdout}"
    );
    assert!(
        lines.last().unwrap().starts_with(&format!(
            "summary: {n}/{n} forbidden operations blocked, 3/3 controls allowed; read-only sandbox enforced",
            n = commands + if fork_bomb { 3 } else { 2 }
        )),
        "{stdout}"
    );

    // The write subagent's own section, from its reviewed golden table:
    // a real worktree of a real repository, every way out of it refused,
    // its claim writable and its repository readable with git.
    let write_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("write-subagent probe "))
        .collect();
    let write_golden: Vec<&str> = include_str!("../fixtures/sandbox_check_write_subagent.txt")
        .lines()
        .collect();
    assert_eq!(write_lines, write_golden, "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("write subagent: landlock ABI ")
                && l.contains("ruleset fully enforced")
                && l.contains("no_new_privs set")),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nsummary (write subagent): 14/14 forbidden operations blocked, 2/2 controls allowed; write sandbox enforced\n"),
        "{stdout}"
    );

    // A command behind the allowlist proxy: confined as this kernel
    // allows, it reaches the parent's stand-in for the proxy and nothing
    // else.
    let confinement = fido::sandbox::netns::network_confinement();
    let allowlist = format!(
        "commands (network = \"allowlist\"): {confinement}\n\
         allowlist probe tcp-connect: blocked (EACCES, landlock)\n\
         allowlist probe tcp-fast-open: blocked (EPERM, seccomp)\n\
         allowlist probe tcp-bind: blocked (EPERM, seccomp)\n\
         allowlist probe udp-send: blocked (EPERM, seccomp)\n\
         allowlist probe dns-lookup: blocked (EPERM, seccomp)\n\
         allowlist probe proxy-connect: allowed (control)\n"
    );
    assert!(stdout.contains(&allowlist), "{stdout}");
    assert!(
        stdout.contains("\nsummary (commands, network = \"allowlist\"): 5/5 forbidden operations blocked, 1/1 controls allowed; allowlist confinement enforced\n"),
        "{stdout}"
    );

    // The probe child was reaped, its setsid'd process swept (no process
    // carries the marker of any of this check's fixtures) and the fixture
    // removed.
    assert_no_processes(ProcessFilter::ChildrenOf(pid), Duration::from_secs(5));
    let marker = format!("fido-probe-escape-fido-sandbox-check-{pid}-");
    assert_eq!(
        pids_with(&marker),
        Vec::<u32>::new(),
        "escaped processes left"
    );
    assert!(
        temp_dirs_of(pid).is_empty(),
        "left behind: {:?}",
        temp_dirs_of(pid)
    );
}

/// Where the check runs as root of the first user namespace (CI), the
/// fork bomb probe runs as `nobody` instead, through `setpriv`: the limit
/// exists for everyone else.
#[test]
fn a_subagents_fork_bomb_is_stopped_by_its_process_limit() {
    // As root with a PID namespace for it, the subagent is held by its
    // pid_max; else the probe runs as nobody, whom RLIMIT_NPROC binds.
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = if fido::sandbox_check::fork_bomb_note().is_some() {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.path().join("fido");
        std::fs::copy(crate::common::process::fido_bin(), &bin).unwrap();
        for path in [dir.path(), bin.as_path()] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path());
        cmd
    } else {
        fido_cmd()
    };
    cmd.args(["sandbox", "check"]).current_dir(dir.path());
    let output = run_with_timeout(cmd, None, TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!(
            "probe fork-bomb: blocked (EAGAIN, {})",
            fork_bomb_limit()
        )),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{stdout}");
}

#[test]
fn sandbox_check_hides_the_probe_child_arguments() {
    let mut cmd = fido_cmd();
    cmd.args(["sandbox", "check", "--help"]);
    let output = run_with_timeout(cmd, None, TIMEOUT);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(!help.contains("probe"), "{help}");
}

/// A probe child started by this test, read line by line.
struct HeldChild {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<ProbeFrame>,
}

impl HeldChild {
    fn spawn(fixture: &ProbeFixture, parent_pid: i32, hold: bool) -> HeldChild {
        let targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
        // A session of its own, as Fido starts every subagent.
        let mut cmd = in_own_session(fido_cmd());
        cmd.args(["sandbox", "check", "--probe-child", "--parent-pid"])
            .arg(parent_pid.to_string())
            .arg("--probe-dir")
            .arg(&targets.dir)
            .arg("--probe-port")
            .arg(targets.tcp_port.to_string())
            .arg("--probe-abstract")
            .arg(&targets.abstract_name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if hold {
            cmd.arg("--probe-hold");
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                let frame: ProbeFrame = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a probe frame ({e}): {line}"));
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        HeldChild {
            child: Some(child),
            stdin,
            frames,
        }
    }

    fn next(&self) -> ProbeFrame {
        self.frames
            .recv_timeout(TIMEOUT)
            .expect("the probe child stopped talking")
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Closes stdin (ends the hold) and waits for the exit.
    fn finish(&mut self) -> std::process::Output {
        drop(self.stdin.take());
        wait_with_timeout(self.child.take().unwrap(), TIMEOUT)
    }
}

impl Drop for HeldChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn proc_field(pid: u32, file: &str, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/{file}:\n{text}"))
        .to_owned()
}

#[test]
fn a_held_sandboxed_child_has_no_new_privs_and_gets_eacces_on_write() {
    let fixture = ProbeFixture::create().unwrap();
    // Taken by the test itself: the child's own report is not the proof.
    let before = tree_bytes(fixture.dir(), &[]);
    let me = i32::try_from(std::process::id()).unwrap();
    let mut held = HeldChild::spawn(&fixture, me, true);
    let pid = held.pid();

    let ProbeFrame::Sandboxed { report } = held.next() else {
        panic!("the child did not enter the sandbox");
    };
    let ProbeFrame::Containment {
        subreaper: true,
        pid_namespace,
    } = held.next()
    else {
        panic!("the child is no subreaper");
    };
    // Tried from inside the sandbox: the one a subagent's commands get.
    assert_eq!(pid_namespace, command_namespace());
    assert!(report.fully_enforced, "{report:?}");
    assert!(report.no_new_privs && report.network_restricted && report.scoped);
    assert!(report.landlock_abi.unwrap() >= 6, "{report:?}");

    let mut results: Vec<ProbeResult> = Vec::new();
    let holding_pid = loop {
        match held.next() {
            ProbeFrame::Probe(result) => results.push(result),
            ProbeFrame::Holding { pid } => break pid,
            other => panic!("unexpected frame {other:?}"),
        }
    };
    assert_eq!(holding_pid, pid);

    // Looked at from outside while it is confined.
    assert_eq!(proc_field(pid, "status", "NoNewPrivs:"), "NoNewPrivs:\t1");
    // As a subagent's: nothing written by the child itself, room for its
    // commands' files in the scratch folder.
    let fsize = proc_field(pid, "limits", "Max file size");
    let cap = fido::sandbox::child::SCRATCH_FILE_CAP.to_string();
    assert_eq!(
        fsize.split_whitespace().collect::<Vec<_>>(),
        ["Max", "file", "size", "0", cap.as_str(), "bytes"]
    );
    assert_eq!(proc_field(pid, "status", "Seccomp:"), "Seccomp:\t2");
    let core = proc_field(pid, "limits", "Max core file size");
    assert_eq!(
        core.split_whitespace().collect::<Vec<_>>(),
        ["Max", "core", "file", "size", "0", "0", "bytes"]
    );

    // The real write attempt inside failed with EACCES, and nothing changed.
    let write = results
        .iter()
        .find(|r| r.name == "write-existing")
        .expect("no write-existing probe");
    assert_eq!(
        write.outcome,
        Outcome::Failed {
            errno: "EACCES".to_owned()
        }
    );
    fixture.verify(&mut results);
    for result in &results {
        assert!(
            result.verdict().passed(),
            "{} (probe {:?})",
            result.line(),
            result
        );
    }
    let written = std::fs::read(fixture.dir().join("write-me.txt")).unwrap();
    assert_eq!(written, fido::sandbox_check::ORIGINAL_CONTENT);

    // The new probes, with what stopped each: the setsid'd process was
    // gone while the child still lived (its sweep, not its death, killed
    // it), the ptrace call met the seccomp filter, the scratch write went
    // through.
    let outcome = |name: &str| {
        let result = results.iter().find(|r| r.name == name);
        result.unwrap_or_else(|| panic!("no {name} probe")).clone()
    };
    // Gone with its command's PID namespace where the kernel allows one
    // in the sandbox, else swept by the subreaper.
    let swept = outcome("setsid-escape");
    assert_eq!(
        swept.line(),
        format!("probe setsid-escape: {}", blocked("setsid-escape"))
    );
    assert_eq!(pids_with(&escape_marker(fixture.dir())), Vec::<u32>::new());
    let traced = outcome("ptrace-parent");
    assert_eq!(traced.mechanism.as_deref(), Some("seccomp"));
    assert_eq!(
        traced.line(),
        "probe ptrace-parent: blocked (EPERM, seccomp)"
    );
    assert_eq!(outcome("scratch-write").outcome, Outcome::Succeeded);
    assert_eq!(
        proc_field(std::process::id(), "status", "TracerPid:"),
        "TracerPid:\t0"
    );

    let output = held.finish();
    assert!(
        output.status.success(),
        "{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(held.next(), ProbeFrame::Done);
    assert_no_processes(ProcessFilter::Pid(pid), Duration::from_secs(5));
    // A read-only subagent wrote nothing of the probe directory, whatever
    // its probes said.
    assert_tree_unchanged(fixture.dir(), &[], &before);
}

#[test]
fn a_child_whose_parent_is_not_the_expected_one_refuses_to_go_on() {
    let fixture = ProbeFixture::create().unwrap();
    // pid 1 is never this test's pid: as if the parent had died and the
    // child had been re-parented before the parent-death signal was armed.
    let mut held = HeldChild::spawn(&fixture, 1, false);
    let ProbeFrame::Refused { error } = held.next() else {
        panic!("the child entered the sandbox with the wrong parent");
    };
    assert!(error.contains("parent process 1 is gone"), "{error}");
    let output = held.finish();
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn killing_the_parent_kills_the_sandboxed_child() {
    // bash starts a held probe child that expects bash as its parent and
    // holds on a pipe fed by a `sleep`; SIGKILL to bash must take the
    // child with it (parent-death signal).
    let fixture = ProbeFixture::create().unwrap();
    let targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
    let script = format!(
        "'{fido}' sandbox check --probe-child --parent-pid $$ --probe-dir '{dir}' \
         --probe-port {port} --probe-abstract '{name}' --probe-hold \
         < <(sleep 600) > /dev/null 2>&1 &\n\
         echo $!; wait",
        fido = crate::common::process::fido_bin(),
        dir = targets.dir.display(),
        port = targets.tcp_port,
        name = targets.abstract_name,
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut bash = cmd.spawn().unwrap();
    let bash_pid = bash.id();
    let mut line = String::new();
    BufReader::new(bash.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child_pid: u32 = line.trim().parse().unwrap();

    // Wait until the child is confined (the sandbox set NoNewPrivs).
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let status =
            std::fs::read_to_string(format!("/proc/{child_pid}/status")).unwrap_or_default();
        if status.contains("NoNewPrivs:\t1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the child never entered the sandbox"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    bash.kill().unwrap();
    bash.wait().unwrap();
    assert_no_processes(ProcessFilter::Pid(child_pid), Duration::from_secs(5));

    // The `sleep` feeding the pipe is still in bash's group: clean it up.
    let group = i32::try_from(bash_pid).unwrap();
    // SAFETY: killpg(2) on the group this test created; no memory involved.
    unsafe { libc::killpg(group, libc::SIGKILL) };
    assert_no_processes(ProcessFilter::Group(bash_pid), Duration::from_secs(5));
}

/// A write subagent's probe child, started as `fido sandbox check` starts
/// it (in the worktree, with its git environment and roots), is confined
/// as a write subagent: it may write files (its soft `RLIMIT_FSIZE` is the
/// scratch cap, not 0), it works in the worktree, and every probe passes
/// with the parent seeing nothing of the main repository changed.
#[test]
fn a_write_subagent_probe_child_is_confined_in_a_real_worktree() {
    let fixture = ProbeFixture::for_role(ProbeRole::WriteSubagent).unwrap();
    let roots = fixture.write_roots().unwrap().clone();
    // Everything but the worktree, byte for byte (the main checkout and
    // its .git included), taken by the test itself.
    let tree = roots.write[0].strip_prefix(fixture.dir()).unwrap();
    let tree = tree.to_str().unwrap().to_owned();
    let before = tree_bytes(fixture.dir(), &[&tree]);
    let targets = fixture
        .targets(Pid::this(), ProbeRole::WriteSubagent)
        .unwrap();
    let mut cmd = std::process::Command::new(crate::common::process::fido_bin());
    cmd.args([
        "sandbox",
        "check",
        "--probe-child",
        "--probe-as",
        "write-subagent",
    ])
    .arg("--parent-pid")
    .arg(std::process::id().to_string())
    .arg("--probe-dir")
    .arg(&targets.dir)
    .arg("--probe-port")
    .arg(targets.tcp_port.to_string())
    .arg("--probe-abstract")
    .arg(&targets.abstract_name)
    .arg("--probe-hold");
    for root in &roots.write {
        cmd.arg("--write-root").arg(root);
    }
    for root in &roots.read {
        cmd.arg("--read-root").arg(root);
    }
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(roots.git_env())
        .current_dir(&roots.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let stdin = child.stdin.take();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> ProbeFrame {
        let line = lines
            .next()
            .expect("the probe child stopped talking")
            .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a probe frame ({e}): {line}"))
    };
    let ProbeFrame::Sandboxed { report } = next() else {
        panic!("the write subagent probe child did not enter the sandbox");
    };
    assert!(report.fully_enforced && report.no_new_privs, "{report:?}");
    let mut results: Vec<ProbeResult> = Vec::new();
    loop {
        match next() {
            ProbeFrame::Probe(result) => results.push(result),
            ProbeFrame::Holding { .. } => break,
            other => panic!("unexpected frame {other:?}"),
        }
    }
    // Looked at from outside while it is confined.
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(&roots.workspace).unwrap());
    let cap = fido::sandbox::child::SCRATCH_FILE_CAP.to_string();
    let fsize = proc_field(pid, "limits", "Max file size");
    assert_eq!(
        fsize.split_whitespace().collect::<Vec<_>>(),
        ["Max", "file", "size", cap.as_str(), cap.as_str(), "bytes"]
    );
    assert_eq!(proc_field(pid, "status", "Seccomp:"), "Seccomp:\t2");

    drop(stdin);
    let output = wait_with_timeout(child, TIMEOUT);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Before the fixture's own look (which builds the change set).
    assert_tree_unchanged(fixture.dir(), &[&tree], &before);
    fixture.verify(&mut results);
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let (forbidden, controls) = ProbeRole::WriteSubagent.plan();
    assert_eq!(names, [forbidden, controls].concat());
    for result in &results {
        assert!(result.verdict().passed(), "{}", result.line());
    }
}

/// `cmd` started through `setsid(1)`, which makes it a session of its own
/// and execs it (same pid): `fido_cmd` makes its command lead a process
/// group, and a group leader cannot call `setsid` itself.
fn in_own_session(cmd: std::process::Command) -> std::process::Command {
    crate::common::process::wrapped_in(&["setsid"], &cmd)
}
