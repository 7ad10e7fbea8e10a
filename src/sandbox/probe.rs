//! The probes of `fido sandbox check`: forbidden operations tried inside a
//! real sandboxed child, and what the parent sees afterwards.
//!
//! Theory of operation: the parent builds a [`ProbeFixture`] first (a
//! private temporary directory with the files the probes aim at, a
//! loopback TCP listener and an abstract UNIX listener), so that a refusal
//! can only come from the sandbox, never from a missing file or a closed
//! port. It then starts the child, which calls
//! [`crate::sandbox::enter_child_sandbox`] in `Required` mode and
//! [`run_probes`], and writes one [`ProbeFrame`] per line (JSON) on stdout:
//! `sandboxed` (the report) or `refused` (the error), one `probe` per
//! probe, then `done`. Back in the parent, [`ProbeFixture::verify`] looks
//! for each probe's side effect itself, so a probe that claims "blocked"
//! while the file did change still counts as allowed.
//!
//! A forbidden probe passes only when it failed with EACCES or EPERM (what
//! Landlock and the seccomp filter return) or EFBIG (the `RLIMIT_FSIZE`
//! guard), the fork bomb with EAGAIN (`RLIMIT_NPROC`) and the setsid
//! escape with ESRCH (the escaped process is gone after the sweep); any
//! other error is inconclusive and fails the check, as does a skipped
//! probe.
//!
//! The setsid escape: the child starts a shell, as a subagent's command
//! is started, that double-forks a process into a session of its own and
//! exits. Where the sandbox allows a PID namespace per command
//! ([`super::pidns`]), the escaped process must be gone with its command.
//! Elsewhere a subagent is a child subreaper, so the orphan is re-parented
//! to it; the child then runs the sweep a subagent runs before it exits
//! ([`super::sweep`]) and reaps what it killed. The escaped process carries a marker (from the fixture's
//! name) on its command line, so the parent finds, reports and kills one
//! that got away: the check never leaves it behind.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{self as unix, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::child::{enter_child_sandbox, error_chain};
use super::pidns::Containment;
use super::policy::{SandboxReport, SandboxRequirement};
use super::ruleset::{MIN_READ_ONLY_ABI, NETWORK_ABI, SCOPE_ABI};
use super::sweep;

/// What every fixture file holds before the probes.
pub const ORIGINAL_CONTENT: &[u8] = b"fido sandbox probe: original content\n";
/// What a probe that got through writes.
const ESCAPED_CONTENT: &[u8] = b"escaped\n";

const READ_ME: &str = "read-me.txt";
const WRITE_ME: &str = "write-me.txt";
const TRUNCATE_ME: &str = "truncate-me.txt";
const UNLINK_ME: &str = "unlink-me.txt";
const RENAME_FROM: &str = "rename-from.txt";
const RENAME_TO: &str = "rename-to.txt";
const CREATED: &str = "created.txt";
const NEW_DIR: &str = "new-dir";
const SYMLINK: &str = "symlink";
const HARDLINK: &str = "hardlink";
const CHMOD_ME: &str = "chmod-me.txt";
/// The mode of [`CHMOD_ME`] before the probes, and what the probe tries.
const ORIGINAL_MODE: u32 = 0o600;
const ESCAPED_MODE: u32 = 0o777;
const SECRET_DIR: &str = "secret";
const SECRET_FILE: &str = "secret/key.txt";
const WORKSPACE_DIR: &str = "workspace";
const UNIX_SOCKET: &str = "listener.sock";
/// The file the `scratch-write` control writes in the scratch folder.
const SCRATCH_FILE: &str = "fido-probe-scratch";
/// How long the setsid probe waits for the escaped process to appear, and
/// for the killed processes to be reaped.
const ESCAPE_WAIT: Duration = Duration::from_secs(5);

/// Probe names, in the order they run and print.
pub const FORBIDDEN_PROBES: [&str; 18] = [
    "write-existing",
    "create",
    "unlink",
    "rename",
    "truncate",
    "mkdir",
    "symlink",
    "hardlink",
    "chmod",
    "tcp-connect",
    "tcp-bind",
    "signal-parent",
    "abstract-unix-connect",
    "udp-send",
    "unix-pathname-connect",
    "read-credentials",
    "read-parent-environ",
    "ptrace-parent",
];
/// Forbidden to a subagent only (the fork bomb last: it is left out where
/// `RLIMIT_NPROC` cannot apply).
pub const SUBAGENT_PROBES: [&str; 3] = ["read-outside-workspace", "setsid-escape", "fork-bomb"];
/// Operations the sandbox must still allow.
pub const CONTROL_PROBES: [&str; 2] = ["read-file", "write-dev-null"];
/// What a subagent's commands must still be able to do: write in the
/// scratch `TMPDIR`.
pub const SUBAGENT_CONTROLS: [&str; 1] = ["scratch-write"];
/// Writing in the workspace and in `$TMPDIR`: allowed to a
/// `workspace-write` command, forbidden (the workspace) in `read-only`.
pub const WORKSPACE_PROBES: [&str; 2] = ["write-workspace", "write-tmpdir"];

/// Whose sandbox the probe child is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    /// A subagent's: the child enters it itself.
    Subagent,
    /// The main agent's commands in this mode: the parent confined the
    /// child between fork and exec, as `bash_exec` does.
    Command(crate::protocol::SandboxMode),
}

impl ProbeRole {
    /// The forbidden probes and the controls this role must pass, in order.
    pub fn plan(self) -> (Vec<&'static str>, Vec<&'static str>) {
        use crate::protocol::SandboxMode;
        let mut forbidden = FORBIDDEN_PROBES.to_vec();
        let mut controls = CONTROL_PROBES.to_vec();
        match self {
            // Only a subagent is confined to its workspace and a process
            // headroom; the main agent's commands read like its user.
            ProbeRole::Subagent => {
                forbidden.extend(&SUBAGENT_PROBES[..2]);
                // Where the limit cannot apply, the probe would only show
                // that; `fork_bomb_note` says so instead.
                if fork_bomb_note().is_none() {
                    forbidden.push(SUBAGENT_PROBES[2]);
                }
                controls.extend(SUBAGENT_CONTROLS);
            }
            ProbeRole::Command(SandboxMode::DangerFullAccess) => {}
            ProbeRole::Command(SandboxMode::ReadOnly) => forbidden.push(WORKSPACE_PROBES[0]),
            ProbeRole::Command(SandboxMode::WorkspaceWrite) => {
                // [`CHMOD_NOTE`]: not blockable here, so not a probe.
                forbidden.retain(|probe| *probe != "chmod");
                controls.extend(WORKSPACE_PROBES);
            }
        }
        (forbidden, controls)
    }

    /// The `--probe-as` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeRole::Subagent => "subagent",
            ProbeRole::Command(mode) => mode.as_str(),
        }
    }

    pub fn parse(value: &str) -> Option<ProbeRole> {
        match value {
            "subagent" => Some(ProbeRole::Subagent),
            other => crate::protocol::SandboxMode::parse(other).map(ProbeRole::Command),
        }
    }
}

/// Why a `workspace-write` command is not probed for `chmod` outside the
/// workspace: nothing on this kernel can refuse it without refusing it in
/// the workspace too.
pub const CHMOD_NOTE: &str = "a workspace-write command may change the mode of a file it owns outside the workspace: Landlock has no right for file modes, and the seccomp filter, which sees no paths, refuses mode changes only in read-only sandboxes (probe chmod not run)";

/// How a refusal was made, from the probe and its errno (for the line),
/// where the child did not say ([`ProbeResult::mechanism`]).
pub fn mechanism(probe: &str, errno: &str) -> &'static str {
    match (probe, errno) {
        (_, "EFBIG") | ("fork-bomb", _) => "rlimit",
        ("setsid-escape", _) => "subreaper sweep",
        // The filter refuses every ptrace call at syscall entry, before
        // Landlock or the kernel's own ptrace check are asked.
        ("ptrace-parent", _) => "seccomp",
        ("tcp-connect" | "tcp-bind" | "udp-send" | "unix-pathname-connect" | "chmod", "EPERM") => {
            "seccomp"
        }
        ("signal-parent" | "abstract-unix-connect", _) => "landlock scope",
        ("read-parent-environ", _) => "non-dumpable parent, no CAP_SYS_PTRACE",
        _ => "landlock",
    }
}

/// What the probe is meant to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// A forbidden operation: the sandbox must refuse it.
    Blocked,
    /// A control: the sandbox must let it through.
    Allowed,
}

/// What happened when the child tried the operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// The operation succeeded.
    Succeeded,
    /// The operation failed with this errno (its name, e.g. `EACCES`).
    Failed { errno: String },
    /// Not tried: this kernel cannot deny it.
    Skipped { reason: String },
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub name: String,
    pub expect: Expect,
    pub outcome: Outcome,
    /// Set by [`ProbeFixture::verify`]: the parent saw the operation's
    /// effect (a changed file, an accepted connection).
    #[serde(default)]
    pub side_effect_seen: bool,
    /// What refused it, where the child could tell better than
    /// [`mechanism`] (the ptrace probe looks at its own seccomp state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
}

/// How the parent judges a [`ProbeResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A forbidden operation was refused with a sandbox errno.
    Blocked { errno: String },
    /// A forbidden operation got through.
    Allowed,
    /// A forbidden operation failed, but not with a sandbox errno.
    Inconclusive { errno: String },
    /// Not tried.
    Skipped { reason: String },
    /// A control worked.
    ControlAllowed,
    /// A control failed: the sandbox is too tight.
    ControlFailed { errno: String },
}

impl Verdict {
    /// Whether this verdict lets `fido sandbox check` exit 0.
    pub fn passed(&self) -> bool {
        match self {
            Verdict::Blocked { .. } | Verdict::ControlAllowed => true,
            Verdict::Allowed
            | Verdict::Inconclusive { .. }
            | Verdict::Skipped { .. }
            | Verdict::ControlFailed { .. } => false,
        }
    }
}

impl ProbeResult {
    /// The parent's judgement, side effects included.
    pub fn verdict(&self) -> Verdict {
        match (self.expect, &self.outcome) {
            (_, Outcome::Skipped { reason }) => Verdict::Skipped {
                reason: reason.clone(),
            },
            (Expect::Blocked, _) if self.side_effect_seen => Verdict::Allowed,
            (Expect::Blocked, Outcome::Succeeded) => Verdict::Allowed,
            (Expect::Blocked, Outcome::Failed { errno }) => {
                let limit = self.name == "fork-bomb" && errno == "EAGAIN";
                let swept = self.name == "setsid-escape" && errno == "ESRCH";
                if limit || swept || ["EACCES", "EPERM", "EFBIG"].contains(&errno.as_str()) {
                    Verdict::Blocked {
                        errno: errno.clone(),
                    }
                } else {
                    Verdict::Inconclusive {
                        errno: errno.clone(),
                    }
                }
            }
            (Expect::Allowed, Outcome::Succeeded) => Verdict::ControlAllowed,
            (Expect::Allowed, Outcome::Failed { errno }) => Verdict::ControlFailed {
                errno: errno.clone(),
            },
        }
    }

    /// The line `fido sandbox check` prints for this probe.
    pub fn line(&self) -> String {
        format!("probe {}: {}", self.name, self.cell())
    }

    /// The verdict as one cell of that line: `blocked (EACCES, landlock)`,
    /// `allowed (control)`, `ALLOWED`, …
    pub fn cell(&self) -> String {
        match self.verdict() {
            Verdict::Blocked { errno } => {
                let how = self
                    .mechanism
                    .as_deref()
                    .unwrap_or_else(|| mechanism(&self.name, &errno));
                format!("blocked ({errno}, {how})")
            }
            Verdict::Allowed if self.side_effect_seen => {
                "ALLOWED (the parent saw its effect)".to_owned()
            }
            Verdict::Allowed => "ALLOWED".to_owned(),
            Verdict::Inconclusive { errno } => {
                format!("inconclusive ({errno}, not a sandbox refusal)")
            }
            Verdict::Skipped { reason } => {
                format!("skipped (not supported by this kernel: {reason})")
            }
            Verdict::ControlAllowed => "allowed (control)".to_owned(),
            Verdict::ControlFailed { errno } => {
                format!("FAILED ({errno}, a control the sandbox must allow)")
            }
        }
    }
}

/// One line of the probe child's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProbeFrame {
    /// The sandbox is in place; probes follow.
    Sandboxed { report: SandboxReport },
    /// The sandbox could not be entered; nothing follows.
    Refused { error: String },
    /// One probe.
    Probe(ProbeResult),
    /// How the subagent's process tree is contained: whether the child is
    /// a child subreaper (read back with `PR_GET_CHILD_SUBREAPER`), and
    /// the PID namespace its commands get, tried from inside its sandbox
    /// (`None`: none is allowed there).
    Containment {
        subreaper: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid_namespace: Option<String>,
    },
    /// Hold mode: the child stays sandboxed until its stdin closes.
    Holding { pid: u32 },
    /// Every probe ran.
    Done,
}

/// Where the probes aim, as the child gets it on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTargets {
    /// The fixture directory.
    pub dir: PathBuf,
    /// A loopback port with a listener.
    pub tcp_port: u16,
    /// The name of an abstract UNIX socket with a listener.
    pub abstract_name: String,
    /// The parent, whom the child must not be able to signal.
    pub parent: Pid,
    /// Paths the child's ruleset denies (the fixture's stand-in credential).
    pub deny: Vec<PathBuf>,
    /// Whose sandbox the child is in.
    pub role: ProbeRole,
}

impl ProbeTargets {
    /// The workspace of a command probe child (writable in
    /// `workspace-write`).
    pub fn workspace(&self) -> PathBuf {
        self.dir.join(WORKSPACE_DIR)
    }

    fn unix_socket(&self) -> PathBuf {
        self.dir.join(UNIX_SOCKET)
    }

    /// The scratch folder of a subagent probe child (its commands' `TMPDIR`).
    pub fn scratch(&self) -> PathBuf {
        scratch_dir(&self.dir)
    }
}

/// The parent's side: files and listeners the probes aim at. Dropping it
/// removes the directory.
#[derive(Debug)]
pub struct ProbeFixture {
    dir: PathBuf,
    tcp: TcpListener,
    unix: UnixListener,
    abstract_name: String,
    pathname: Option<UnixListener>,
}

impl ProbeFixture {
    /// A private directory under the system temp dir with the fixture
    /// files, a listener on 127.0.0.1 and one on an abstract UNIX socket.
    pub fn create() -> io::Result<ProbeFixture> {
        let tag = format!("{}-{:016x}", std::process::id(), fastrand::u64(..));
        let dir = std::env::temp_dir().join(format!("fido-sandbox-check-{tag}"));
        DirBuilder::new().mode(0o700).create(&dir)?;
        // From here on Drop cleans up, even if a later step fails.
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0));
        let abstract_name = format!("fido-sandbox-check-{tag}");
        let unix = unix::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .and_then(|addr| UnixListener::bind_addr(&addr));
        let (tcp, unix) = match (tcp, unix) {
            (Ok(tcp), Ok(unix)) => (tcp, unix),
            (Err(err), _) | (_, Err(err)) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(err);
            }
        };
        let mut fixture = ProbeFixture {
            dir,
            tcp,
            unix,
            abstract_name,
            pathname: None,
        };
        for sub in [SECRET_DIR, WORKSPACE_DIR] {
            DirBuilder::new()
                .mode(0o700)
                .create(fixture.dir.join(sub))?;
        }
        let pathname = UnixListener::bind(fixture.dir.join(UNIX_SOCKET))?;
        pathname.set_nonblocking(true)?;
        fixture.pathname = Some(pathname);
        for file in [
            READ_ME,
            WRITE_ME,
            TRUNCATE_ME,
            UNLINK_ME,
            RENAME_FROM,
            SECRET_FILE,
            CHMOD_ME,
        ] {
            std::fs::write(fixture.dir.join(file), ORIGINAL_CONTENT)?;
        }
        std::fs::set_permissions(
            fixture.dir.join(CHMOD_ME),
            std::fs::Permissions::from_mode(ORIGINAL_MODE),
        )?;
        std::fs::write(outside_file(&fixture.dir), ORIGINAL_CONTENT)?;
        DirBuilder::new()
            .mode(0o700)
            .create(scratch_dir(&fixture.dir))?;
        fixture.tcp.set_nonblocking(true)?;
        fixture.unix.set_nonblocking(true)?;
        Ok(fixture)
    }

    /// The fixture directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the child needs to know, with `parent` as the process it must
    /// not signal, in the sandbox of `role`.
    pub fn targets(&self, parent: Pid, role: ProbeRole) -> io::Result<ProbeTargets> {
        Ok(ProbeTargets {
            dir: self.dir.clone(),
            tcp_port: self.tcp.local_addr()?.port(),
            abstract_name: self.abstract_name.clone(),
            parent,
            deny: denied_paths(&self.dir),
            role,
        })
    }

    /// Looks for each forbidden probe's effect and marks the results whose
    /// effect is there. Call after the child has exited.
    pub fn verify(&self, results: &mut [ProbeResult]) {
        for result in results.iter_mut() {
            if result.expect == Expect::Blocked && self.side_effect_seen(&result.name) {
                result.side_effect_seen = true;
            }
        }
    }

    fn side_effect_seen(&self, probe: &str) -> bool {
        let path = |name: &str| self.dir.join(name);
        let changed =
            |name: &str| std::fs::read(path(name)).ok().as_deref() != Some(ORIGINAL_CONTENT);
        let exists = |name: &str| std::fs::symlink_metadata(path(name)).is_ok();
        match probe {
            "write-existing" => changed(WRITE_ME),
            "truncate" => changed(TRUNCATE_ME),
            "create" => exists(CREATED),
            "unlink" => !exists(UNLINK_ME),
            "rename" => exists(RENAME_TO) || !exists(RENAME_FROM),
            "mkdir" => exists(NEW_DIR),
            "symlink" => exists(SYMLINK),
            "hardlink" => exists(HARDLINK),
            "chmod" => std::fs::metadata(path(CHMOD_ME))
                .map_or(true, |m| m.permissions().mode() & 0o7777 != ORIGINAL_MODE),
            "tcp-connect" => self.tcp.accept().is_ok(),
            "abstract-unix-connect" => self.unix.accept().is_ok(),
            "unix-pathname-connect" => self
                .pathname
                .as_ref()
                .is_some_and(|listener| listener.accept().is_ok()),
            // Found alive after the child's sweep: reported, then killed.
            "setsid-escape" => kill_escaped(&escape_marker(&self.dir)) > 0,
            // Nothing to look at from outside: the child's errno decides.
            _ => false,
        }
    }
}

impl Drop for ProbeFixture {
    fn drop(&mut self) {
        // A probe child that died before its sweep leaves nothing either.
        kill_escaped(&escape_marker(&self.dir));
        let _ = std::fs::remove_dir_all(scratch_dir(&self.dir));
        let _ = std::fs::remove_file(outside_file(&self.dir));
        if let Err(err) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %err, "cannot remove the probe directory");
        }
    }
}

/// A file beside the fixture directory, outside the subagent probe's
/// workspace (which is the fixture directory).
fn outside_file(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-outside.txt");
    PathBuf::from(name)
}

/// The scratch folder beside the fixture directory (outside the
/// workspace, as a subagent's is).
fn scratch_dir(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-scratch");
    PathBuf::from(name)
}

/// What the setsid probe's escaped process has on its command line.
pub fn escape_marker(dir: &Path) -> String {
    let tag = dir
        .file_name()
        .map_or_else(|| dir.to_string_lossy(), |name| name.to_string_lossy());
    format!("fido-probe-escape-{tag}")
}

/// Live processes (not zombies) whose command line holds `marker`.
fn marked_processes(marker: &str) -> Vec<i32> {
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

/// The session id of `pid` (field 6 of `/proc/PID/stat`).
fn session_of(pid: i32) -> Option<i32> {
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
fn kill_escaped(marker: &str) -> usize {
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

/// The PID namespace a subagent's commands get here, tried from this
/// process (`None`: only the subreaper sweep contains them).
fn command_namespace() -> Option<Containment> {
    static KIND: std::sync::OnceLock<Containment> = std::sync::OnceLock::new();
    let kind = KIND.get_or_init(super::pidns::containment);
    kind.uses_namespace().then(|| kind.clone())
}

/// The setsid probe (see the module comment), run as a subagent's command
/// is. `Err(ESRCH)`: the escaped process is gone (with its command's PID
/// namespace, or swept); `Ok`: it got out of this process's tree, or lived
/// through the sweep (the parent then finds and kills it by `marker`).
fn setsid_escape(marker: &str) -> io::Result<()> {
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
    let namespace = command_namespace().map(|_| super::pidns::PidNamespace::for_current_user());
    if let Some(namespace) = namespace {
        use std::os::unix::process::CommandExt;
        // SAFETY: `enter` is made for the spot between fork and exec.
        unsafe {
            command.pre_exec(move || namespace.enter());
        }
    }
    let status = command.status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "the escape script failed: {status}"
        )));
    }
    if command_namespace().is_some() {
        return gone_with_the_namespace(marker);
    }
    let me = std::process::id() as i32;
    let deadline = std::time::Instant::now() + ESCAPE_WAIT;
    // The forked shell carries the marker before `setsid` has run: wait
    // for a marked process in a session of its own. (One that never gets
    // there is killed by the parent, by its marker.)
    let escaped = loop {
        let marked = marked_processes(marker);
        if let Some(pid) = marked
            .iter()
            .find(|pid| session_of(**pid) != session_of(me))
        {
            break *pid;
        }
        if std::time::Instant::now() >= deadline {
            return Err(io::Error::other(if marked.is_empty() {
                "the escaped process never appeared"
            } else {
                "the probe process did not leave the session"
            }));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
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

/// The command has ended, and its namespace with it: every marked process
/// must be gone (up to [`ESCAPE_WAIT`]; the kernel kills them at once).
fn gone_with_the_namespace(marker: &str) -> io::Result<()> {
    let deadline = std::time::Instant::now() + ESCAPE_WAIT;
    while marked_processes(marker).iter().any(|pid| !is_zombie(*pid)) {
        if std::time::Instant::now() >= deadline {
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
    let deadline = std::time::Instant::now() + ESCAPE_WAIT;
    let mut pending: Vec<i32> = killed.iter().map(|d| d.pid).collect();
    while !pending.is_empty() && std::time::Instant::now() < deadline {
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

/// `PTRACE_SEIZE` of the parent: it never stops the tracee, and should it
/// get through, this process's exit detaches it.
fn ptrace_parent(parent: Pid) -> io::Result<()> {
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

/// What refused a ptrace call in this process: the seccomp filter when one
/// is installed (it answers at syscall entry), else Landlock (no ptrace out
/// of the domain), else the kernel's check (no `CAP_SYS_PTRACE`).
fn ptrace_mechanism(report: &SandboxReport) -> &'static str {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let filtered = status
        .lines()
        .any(|line| line.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]);
    if filtered {
        "seccomp"
    } else if report.landlock_abi.is_some() && report.fully_enforced {
        "landlock"
    } else {
        "ptrace check (no CAP_SYS_PTRACE)"
    }
}

/// The `scratch-write` control: a command started as a subagent's shell
/// starts its commands (`CommandSandbox::subagent_shell`) writes a file in
/// its `TMPDIR`; the file is read back.
fn scratch_write(scratch: &Path) -> io::Result<()> {
    let shell = std::sync::Arc::new(super::CommandSandbox::subagent_shell(scratch.to_path_buf()));
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", r#"printf '%s' "$1" > "$TMPDIR/$2""#, "sh"])
        .arg(String::from_utf8_lossy(ESCAPED_CONTENT).as_ref())
        .arg(SCRATCH_FILE)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    shell.apply(&mut command);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The child's reaping needs the runtime's context, not only its poll.
    let _context = runtime.enter();
    let output = runtime.block_on(command.output())?;
    if !output.status.success() {
        return Err(shell_error(&String::from_utf8_lossy(&output.stderr)));
    }
    if std::fs::read(scratch.join(SCRATCH_FILE))? == ESCAPED_CONTENT {
        Ok(())
    } else {
        Err(io::Error::from(ErrorKind::InvalidData))
    }
}

/// The errno behind a shell's message about a failed redirection.
fn shell_error(stderr: &str) -> io::Error {
    let known = [
        ("Permission denied", libc::EACCES),
        ("Operation not permitted", libc::EPERM),
        ("File too large", libc::EFBIG),
        ("Read-only file system", libc::EROFS),
    ];
    match known.iter().find(|(text, _)| stderr.contains(text)) {
        Some((_, code)) => io::Error::from_raw_os_error(*code),
        None => io::Error::other(format!("the shell failed: {}", stderr.trim())),
    }
}

/// Starts `sleep` children until the kernel refuses one or there are
/// more than a child's process headroom; kills and reaps them all. `Ok`:
/// the bomb was not stopped.
fn fork_bomb() -> io::Result<()> {
    let most = super::child::PROCESS_HEADROOM as usize + 64;
    let mut children = Vec::new();
    let result = loop {
        if children.len() >= most {
            break Ok(());
        }
        match std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(child) => children.push(child),
            Err(err) => break Err(err),
        }
    };
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

/// Why the fork bomb probe cannot show anything here: `RLIMIT_NPROC`
/// never applies to uid 0 of the first user namespace.
pub fn fork_bomb_note() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let first_namespace = std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|map| map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]);
    (root && first_namespace)
        .then(|| "RLIMIT_NPROC does not apply to root of the first user namespace, so a subagent's fork bomb is stopped only when its process group is killed (probe fork-bomb not run)".to_owned())
}

/// The fixture's stand-in for a credential folder, which the probe
/// child's ruleset denies as it denies `~/.ssh`.
pub fn denied_paths(dir: &Path) -> Vec<PathBuf> {
    let secret = dir.join(SECRET_DIR);
    vec![std::fs::canonicalize(&secret).unwrap_or(secret)]
}

/// One probe's operation; `Ok` means it got through.
type Attempt<'a> = Box<dyn Fn() -> io::Result<()> + 'a>;

/// Runs every probe of the role's plan, forbidden ones first, skipping
/// those this kernel cannot deny according to `report`. Call inside the
/// sandbox.
pub fn run_probes(targets: &ProbeTargets, report: &SandboxReport) -> Vec<ProbeResult> {
    let (forbidden, controls) = targets.role.plan();
    let attempts = attempts(targets, report);
    let mut results = Vec::with_capacity(forbidden.len() + controls.len());
    let plan = forbidden
        .iter()
        .map(|name| (*name, Expect::Blocked))
        .chain(controls.iter().map(|name| (*name, Expect::Allowed)));
    for (name, expect) in plan {
        let outcome = match attempts.iter().find(|(n, _, _)| *n == name) {
            Some((_, Some(reason), _)) if expect == Expect::Blocked => Outcome::Skipped {
                reason: reason.clone(),
            },
            Some((_, _, attempt)) => outcome(attempt()),
            None => Outcome::Skipped {
                reason: "no such probe".to_owned(),
            },
        };
        let failed = matches!(outcome, Outcome::Failed { .. });
        let mechanism = match name {
            "ptrace-parent" if failed => Some(ptrace_mechanism(report).to_owned()),
            "setsid-escape" if failed && command_namespace().is_some() => {
                Some("PID namespace".to_owned())
            }
            _ => None,
        };
        results.push(ProbeResult {
            name: name.to_owned(),
            expect,
            outcome,
            side_effect_seen: false,
            mechanism,
        });
    }
    results
}

/// Every probe's operation, with the reason to skip it on this kernel.
fn attempts<'a>(
    targets: &'a ProbeTargets,
    report: &SandboxReport,
) -> Vec<(&'static str, Option<String>, Attempt<'a>)> {
    let abi = report.landlock_abi.unwrap_or(0);
    let dir = &targets.dir;
    let path = move |name: &str| dir.join(name);
    let needs = |available: bool, what: &str, min: i32| -> Option<String> {
        (!available).then(|| format!("{what} need landlock ABI {min}, this kernel has {abi}"))
    };
    let network = needs(report.network_restricted, "TCP rules", NETWORK_ABI);
    let scope = needs(report.scoped, "scopes", SCOPE_ABI);
    let truncate = needs(
        abi >= MIN_READ_ONLY_ABI,
        "truncate rules",
        MIN_READ_ONLY_ABI,
    );
    let tcp_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, targets.tcp_port));
    let mut all = file_attempts(targets, truncate);
    all.extend(socket_attempts(targets, tcp_addr, network, scope));
    all.push((
        "read-credentials",
        None,
        Box::new(move || std::fs::read(path(SECRET_FILE)).map(drop)),
    ));
    all.push((
        "read-outside-workspace",
        None,
        Box::new(move || std::fs::read(outside_file(dir)).map(drop)),
    ));
    all.push(("fork-bomb", None, Box::new(fork_bomb)));
    let marker = escape_marker(dir);
    all.push((
        "setsid-escape",
        None,
        Box::new(move || setsid_escape(&marker)),
    ));
    all.push((
        "ptrace-parent",
        None,
        Box::new(|| ptrace_parent(targets.parent)),
    ));
    all.push((
        "read-parent-environ",
        None,
        Box::new(|| {
            let mut byte = [0u8; 1];
            std::fs::File::open(format!("/proc/{}/environ", targets.parent))?
                .read(&mut byte)
                .map(drop)
        }),
    ));
    all.extend(control_attempts(targets));
    all
}

fn file_attempts<'a>(
    targets: &'a ProbeTargets,
    truncate: Option<String>,
) -> Vec<(&'static str, Option<String>, Attempt<'a>)> {
    let dir = &targets.dir;
    let path = move |name: &str| dir.join(name);
    vec![
        (
            "write-existing",
            None,
            Box::new(move || {
                let mut file = OpenOptions::new().write(true).open(path(WRITE_ME))?;
                file.write_all(ESCAPED_CONTENT)
            }),
        ),
        (
            "create",
            None,
            Box::new(move || {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path(CREATED))?;
                file.write_all(ESCAPED_CONTENT)
            }),
        ),
        (
            "unlink",
            None,
            Box::new(move || std::fs::remove_file(path(UNLINK_ME))),
        ),
        (
            "rename",
            None,
            Box::new(move || std::fs::rename(path(RENAME_FROM), path(RENAME_TO))),
        ),
        (
            "truncate",
            truncate,
            Box::new(move || nix::unistd::truncate(&path(TRUNCATE_ME), 0).map_err(io::Error::from)),
        ),
        (
            "mkdir",
            None,
            Box::new(move || std::fs::create_dir(path(NEW_DIR))),
        ),
        (
            "symlink",
            None,
            Box::new(move || std::os::unix::fs::symlink(path(READ_ME), path(SYMLINK))),
        ),
        (
            "hardlink",
            None,
            Box::new(move || std::fs::hard_link(path(READ_ME), path(HARDLINK))),
        ),
        (
            "chmod",
            None,
            Box::new(move || {
                std::fs::set_permissions(
                    path(CHMOD_ME),
                    std::fs::Permissions::from_mode(ESCAPED_MODE),
                )
            }),
        ),
    ]
}

fn socket_attempts(
    targets: &ProbeTargets,
    tcp_addr: SocketAddr,
    network: Option<String>,
    scope: Option<String>,
) -> Vec<(&'static str, Option<String>, Attempt<'_>)> {
    vec![
        (
            "tcp-connect",
            network.clone(),
            Box::new(move || {
                TcpStream::connect_timeout(&tcp_addr, Duration::from_secs(2)).map(drop)
            }),
        ),
        (
            "tcp-bind",
            network,
            Box::new(|| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map(drop)),
        ),
        (
            "signal-parent",
            scope.clone(),
            // SIGWINCH: harmless should it arrive (ignored by default).
            Box::new(|| kill(targets.parent, Signal::SIGWINCH).map_err(io::Error::from)),
        ),
        (
            "abstract-unix-connect",
            scope,
            Box::new(|| {
                let addr = unix::SocketAddr::from_abstract_name(targets.abstract_name.as_bytes())?;
                UnixStream::connect_addr(&addr).map(drop)
            }),
        ),
        (
            "udp-send",
            None,
            Box::new(move || {
                let socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
                socket.send_to(b"probe", tcp_addr).map(drop)
            }),
        ),
        (
            "unix-pathname-connect",
            None,
            Box::new(|| UnixStream::connect(targets.unix_socket()).map(drop)),
        ),
    ]
}

fn control_attempts(targets: &ProbeTargets) -> Vec<(&'static str, Option<String>, Attempt<'_>)> {
    let read = || -> io::Result<()> {
        let mut content = Vec::new();
        std::fs::File::open(targets.dir.join(READ_ME))?.read_to_end(&mut content)?;
        if content == ORIGINAL_CONTENT {
            Ok(())
        } else {
            Err(io::Error::from(ErrorKind::InvalidData))
        }
    };
    vec![
        ("read-file", None, Box::new(read)),
        (
            "write-dev-null",
            None,
            // `File::create` opens with O_TRUNC, as a shell's `> /dev/null` does.
            Box::new(|| std::fs::File::create("/dev/null")?.write_all(b"discarded\n")),
        ),
        (
            "write-workspace",
            None,
            Box::new(|| std::fs::write(targets.workspace().join(CREATED), ESCAPED_CONTENT)),
        ),
        (
            "scratch-write",
            None,
            Box::new(|| scratch_write(&targets.scratch())),
        ),
        (
            "write-tmpdir",
            None,
            Box::new(|| {
                let dir = std::env::var_os("TMPDIR")
                    .ok_or_else(|| io::Error::new(ErrorKind::NotFound, "no TMPDIR"))?;
                std::fs::write(Path::new(&dir).join("fido-probe"), ESCAPED_CONTENT)
            }),
        ),
    ]
}

/// The probe child's whole life after argument parsing: enters the sandbox
/// (`Required`, with `targets.parent` as the expected parent), runs the
/// probes and writes [`ProbeFrame`]s to `out`, one JSON line each. With
/// `hold`, it then writes `holding` and stays sandboxed until `input` ends,
/// so a test can look at it from outside. Returns whether the sandbox was
/// entered; an error is a failed write to `out`.
pub fn run_child(
    targets: &ProbeTargets,
    hold: bool,
    out: &mut impl Write,
    input: &mut impl Read,
) -> io::Result<bool> {
    let entered = match targets.role {
        // The process limit a subagent gets with its fork, then the rest.
        ProbeRole::Subagent => super::child::process_limit()
            .map_or(Ok(()), super::child::limit_processes)
            .and_then(|()| {
                enter_child_sandbox(
                    targets.parent,
                    SandboxRequirement::Required,
                    &targets.deny,
                    Some(&targets.scratch()),
                    Some(&targets.dir),
                )
            }),
        ProbeRole::Command(_) => Ok(command_report()),
    };
    let report = match entered {
        Ok(report) => report,
        Err(err) => {
            write_frame(
                out,
                &ProbeFrame::Refused {
                    error: error_chain(&err),
                },
            )?;
            return Ok(false);
        }
    };
    write_frame(
        out,
        &ProbeFrame::Sandboxed {
            report: report.clone(),
        },
    )?;
    if targets.role == ProbeRole::Subagent {
        let subreaper = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
        let pid_namespace = command_namespace().map(|kind| kind.to_string());
        write_frame(
            out,
            &ProbeFrame::Containment {
                subreaper,
                pid_namespace,
            },
        )?;
    }
    for result in run_probes(targets, &report) {
        write_frame(out, &ProbeFrame::Probe(result))?;
    }
    if hold {
        write_frame(
            out,
            &ProbeFrame::Holding {
                pid: std::process::id(),
            },
        )?;
        io::copy(input, &mut io::sink())?;
    }
    write_frame(out, &ProbeFrame::Done)?;
    Ok(true)
}

/// What a command probe child can see of the sandbox its parent put it
/// in (the parent built the ruleset for this kernel's best ABI and fails
/// before the spawn when it cannot).
fn command_report() -> SandboxReport {
    let abi = super::ruleset::kernel_abi();
    SandboxReport {
        landlock_abi: (abi > 0).then_some(abi),
        fully_enforced: abi >= MIN_READ_ONLY_ABI,
        network_restricted: abi >= NETWORK_ABI,
        scoped: abi >= SCOPE_ABI,
        no_new_privs: nix::sys::prctl::get_no_new_privs().unwrap_or(false),
        warnings: Vec::new(),
        not_covered: Vec::new(),
    }
}

fn write_frame(out: &mut impl Write, frame: &ProbeFrame) -> io::Result<()> {
    let line = serde_json::to_string(frame).map_err(io::Error::other)?;
    writeln!(out, "{line}")?;
    out.flush()
}

fn outcome(result: io::Result<()>) -> Outcome {
    match result {
        Ok(()) => Outcome::Succeeded,
        Err(err) => Outcome::Failed {
            errno: errno_name(&err),
        },
    }
}

/// `EACCES` for a permission error, the error's text when it has no errno.
fn errno_name(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => format!("{:?}", Errno::from_raw(code)),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(expect: Expect, outcome: Outcome) -> ProbeResult {
        ProbeResult {
            name: "p".to_owned(),
            expect,
            outcome,
            side_effect_seen: false,
            mechanism: None,
        }
    }

    fn failed(errno: &str) -> Outcome {
        Outcome::Failed {
            errno: errno.to_owned(),
        }
    }

    #[test]
    fn verdicts_and_lines() {
        let blocked = result(Expect::Blocked, failed("EACCES"));
        assert!(blocked.verdict().passed());
        assert_eq!(blocked.line(), "probe p: blocked (EACCES, landlock)");

        let allowed = result(Expect::Blocked, Outcome::Succeeded);
        assert_eq!(allowed.verdict(), Verdict::Allowed);
        assert!(!allowed.verdict().passed());
        assert_eq!(allowed.line(), "probe p: ALLOWED");

        let mut sneaky = result(Expect::Blocked, failed("EPERM"));
        sneaky.side_effect_seen = true;
        assert_eq!(sneaky.verdict(), Verdict::Allowed);
        assert!(sneaky.line().contains("ALLOWED"));

        let odd = result(Expect::Blocked, failed("ENOENT"));
        assert!(!odd.verdict().passed());
        assert!(odd.line().starts_with("probe p: inconclusive (ENOENT"));

        let skipped = result(
            Expect::Blocked,
            Outcome::Skipped {
                reason: "scopes need landlock ABI 6, this kernel has 5".to_owned(),
            },
        );
        assert!(!skipped.verdict().passed());
        assert_eq!(
            skipped.line(),
            "probe p: skipped (not supported by this kernel: scopes need landlock ABI 6, this kernel has 5)"
        );

        let control = result(Expect::Allowed, Outcome::Succeeded);
        assert!(control.verdict().passed());
        assert_eq!(control.line(), "probe p: allowed (control)");
        let broken = result(Expect::Allowed, failed("EACCES"));
        assert!(!broken.verdict().passed());
        assert!(broken.line().contains("FAILED (EACCES"));
    }

    #[test]
    fn frames_round_trip_as_json_lines() {
        let frame = ProbeFrame::Probe(result(Expect::Blocked, failed("EACCES")));
        let line = serde_json::to_string(&frame).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains("\"type\":\"probe\""), "{line}");
        let back: ProbeFrame = serde_json::from_str(&line).unwrap();
        assert_eq!(back, frame);
    }

    #[test]
    fn errno_names() {
        let err = io::Error::from_raw_os_error(libc_eacces());
        assert_eq!(errno_name(&err), "EACCES");
        assert_eq!(errno_name(&io::Error::other("no errno")), "no errno");
    }

    fn libc_eacces() -> i32 {
        Errno::EACCES as i32
    }

    /// Unsandboxed, every forbidden probe succeeds and the parent sees every
    /// effect it can look for: the probes really do what they say.
    #[test]
    fn unsandboxed_probes_get_through_and_are_seen() {
        let fixture = ProbeFixture::create().unwrap();
        let dir = fixture.dir().to_owned();
        // The signal probe sends SIGWINCH to "the parent": aim it at a
        // throwaway child instead of this test process.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
        targets.parent = Pid::from_raw(sleeper.id() as i32);
        let report = SandboxReport {
            landlock_abi: Some(7),
            fully_enforced: true,
            network_restricted: true,
            scoped: true,
            no_new_privs: true,
            warnings: Vec::new(),
            not_covered: Vec::new(),
        };
        let mut results = run_probes(&targets, &report);
        // The ptrace probe really attached (SEIZE does not stop it).
        let status = std::fs::read_to_string(format!("/proc/{}/status", sleeper.id())).unwrap();
        assert!(
            status
                .lines()
                .any(|l| l.starts_with("TracerPid:") && l != "TracerPid:\t0"),
            "{status}"
        );
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        // Out of a process that is no subreaper, the setsid'd process gets
        // away (the parent sees it and kills it), unless its command's PID
        // namespace took it down with the command.
        let marker = escape_marker(&dir);
        let contained = command_namespace().is_some();
        let escaped = usize::from(!contained);
        assert_eq!(marked_processes(&marker).len(), escaped);
        fixture.verify(&mut results);
        wait_until_gone(&marker);

        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        let fork_bomb = fork_bomb_note().is_none();
        let expected: Vec<&str> = FORBIDDEN_PROBES
            .iter()
            .chain(
                SUBAGENT_PROBES
                    .iter()
                    .filter(|p| fork_bomb || **p != "fork-bomb"),
            )
            .chain(CONTROL_PROBES.iter())
            .chain(SUBAGENT_CONTROLS.iter())
            .copied()
            .collect();
        assert_eq!(names, expected);
        for result in &results {
            if contained && result.name == "setsid-escape" {
                assert_eq!(
                    result.line(),
                    "probe setsid-escape: blocked (ESRCH, PID namespace)"
                );
                continue;
            }
            match result.expect {
                Expect::Blocked => {
                    assert_eq!(result.outcome, Outcome::Succeeded, "{}", result.name);
                    assert_eq!(result.verdict(), Verdict::Allowed, "{}", result.name);
                    let unseen = [
                        "tcp-bind",
                        "signal-parent",
                        "udp-send",
                        "read-credentials",
                        "read-parent-environ",
                        "ptrace-parent",
                        "read-outside-workspace",
                        "fork-bomb",
                    ];
                    assert_eq!(
                        result.side_effect_seen,
                        !unseen.contains(&result.name.as_str()),
                        "{}",
                        result.name
                    );
                }
                Expect::Allowed => assert_eq!(result.verdict(), Verdict::ControlAllowed),
            }
        }
        // The scratch control read its file back (a `ControlAllowed`
        // above); the shell's scratch folder went with its last reference,
        // as a subagent's does.
        assert!(!scratch_dir(&dir).join(SCRATCH_FILE).exists());
        drop(fixture);
        assert!(!dir.exists(), "the fixture directory is removed on drop");
        assert!(!scratch_dir(&dir).exists());
    }

    /// Waits (a few seconds at most) until no live process has `marker`.
    fn wait_until_gone(marker: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !marked_processes(marker).is_empty() {
            assert!(std::time::Instant::now() < deadline, "{marker} left behind");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn new_probes_name_their_mechanism() {
        let swept = ProbeResult {
            name: "setsid-escape".to_owned(),
            ..result(Expect::Blocked, failed("ESRCH"))
        };
        assert_eq!(
            swept.line(),
            "probe setsid-escape: blocked (ESRCH, subreaper sweep)"
        );
        // ESRCH proves nothing for any other probe.
        assert!(!result(Expect::Blocked, failed("ESRCH")).verdict().passed());
        let traced = ProbeResult {
            name: "ptrace-parent".to_owned(),
            ..result(Expect::Blocked, failed("EPERM"))
        };
        assert_eq!(
            traced.line(),
            "probe ptrace-parent: blocked (EPERM, seccomp)"
        );
        // What the child saw wins over the default.
        let by_landlock = ProbeResult {
            mechanism: Some("landlock".to_owned()),
            ..traced
        };
        assert_eq!(
            by_landlock.line(),
            "probe ptrace-parent: blocked (EPERM, landlock)"
        );
        let refused = ProbeResult {
            name: "scratch-write".to_owned(),
            ..result(Expect::Allowed, failed("EACCES"))
        };
        assert!(!refused.verdict().passed());
        assert!(refused.line().contains("FAILED (EACCES"));
    }

    #[test]
    fn shell_messages_map_to_errnos() {
        let denied = shell_error("sh: 1: cannot create /x/y: Permission denied\n");
        assert_eq!(errno_name(&denied), "EACCES");
        assert_eq!(errno_name(&shell_error("sh: File too large")), "EFBIG");
        assert_eq!(errno_name(&shell_error("odd\n")), "the shell failed: odd");
    }

    #[test]
    fn plans_hold_the_new_probes_where_they_apply() {
        let (forbidden, controls) = ProbeRole::Subagent.plan();
        assert!(forbidden.contains(&"ptrace-parent") && forbidden.contains(&"setsid-escape"));
        assert!(controls.contains(&"scratch-write"));
        use crate::protocol::SandboxMode;
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let (forbidden, controls) = ProbeRole::Command(mode).plan();
            assert!(forbidden.contains(&"ptrace-parent"), "{mode}");
            assert!(!forbidden.contains(&"setsid-escape"), "{mode}");
            assert!(!controls.contains(&"scratch-write"), "{mode}");
        }
    }

    #[test]
    fn skipped_probes_say_why() {
        let fixture = ProbeFixture::create().unwrap();
        let targets = fixture.targets(Pid::this(), ProbeRole::Subagent).unwrap();
        let report = SandboxReport {
            landlock_abi: Some(3),
            fully_enforced: true,
            network_restricted: false,
            scoped: false,
            no_new_privs: true,
            warnings: Vec::new(),
            not_covered: Vec::new(),
        };
        // Unsandboxed: the file probes get through, the rest is skipped.
        let results = run_probes(&targets, &report);
        let skipped: Vec<&str> = results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skipped { .. }))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            skipped,
            [
                "tcp-connect",
                "tcp-bind",
                "signal-parent",
                "abstract-unix-connect"
            ]
        );
        let tcp = results.iter().find(|r| r.name == "tcp-connect").unwrap();
        assert!(
            tcp.line()
                .contains("TCP rules need landlock ABI 4, this kernel has 3")
        );
    }
}
