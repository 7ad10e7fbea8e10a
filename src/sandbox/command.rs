//! The sandbox of the main agent's commands (`sandbox_mode`).
//!
//! Theory of operation: the Landlock ruleset and the seccomp program are
//! built once per session, in the parent, from the same code as the
//! subagent's ([`super::ruleset`], [`super::seccomp`]). Building a ruleset
//! does not restrict the process that builds it; only
//! `landlock_restrict_self` does. Each command is then forked as usual and,
//! between `fork` and `exec`, the child calls [`CommandSandbox::confine`]:
//! parent-death SIGKILL, no core dumps, `no_new_privs`,
//! `landlock_restrict_self` with the prepared ruleset descriptor, and the
//! seccomp filter. Those are plain syscalls on memory prepared before the
//! fork, with no allocation, so they are safe in the child of a
//! multi-threaded process, and they cost microseconds per command.
//!
//! Modes:
//! - `read-only`: read everywhere but the credential paths, write nowhere
//!   but `/dev/null`;
//! - `workspace-write`: the same, plus read-write beneath the workspace,
//!   the session's private `TMPDIR` and the trusted `writable_roots`;
//! - `danger-full-access`: no ruleset, no filter.
//!
//! In both sandboxed modes each command also leads a session of its own
//! (no controlling terminal) and runs in a PID namespace of its
//! own where the kernel allows one ([`super::pidns`]): whatever it starts,
//! `setsid` and double forks included, ends when it ends or is killed.
//!
//! In both sandboxed modes TCP bind/connect are denied by Landlock and
//! other sockets by seccomp unless `network = true`, and signals and
//! abstract UNIX sockets are scoped to the sandbox. `/proc/<fido>/environ`
//! and `/proc/<fido>/mem` stay out of reach: Fido makes itself
//! non-dumpable at start, and the command loses `CAP_SYS_PTRACE` (with
//! every other capability outside Docker's default set, see
//! [`super::caps`]) from its bounding set, so even root cannot pass the
//! kernel's ptrace check; seccomp denies `ptrace` itself. The sandbox
//! fails closed: a kernel without Landlock cannot run sandboxed commands
//! at all, and says so.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::limits::{self, CommandLimits, TmpdirLimit};
use super::nested_clones::CommandRunning;
use super::netns::{NetworkConfinement, ProxyConfinement, ProxyRoute};
use super::new_repository::RepositoryWatch;
use super::pidns::PidNamespace;
use super::policy::{Enforcement, SandboxError};
use super::protect::{self, Mechanism, Protection, ReadOnlyBinds};
use super::ruleset::{self, MIN_READ_ONLY_ABI, NETWORK_ABI, RulesetSpec};
use super::seccomp::{SeccompPolicy, SeccompProgram, SocketAccess};
use crate::protocol::{NetworkAccess, SandboxMode};

/// Makes this process non-dumpable, so that processes of the same user
/// cannot read its memory or `/proc/<pid>/environ` (where the API key
/// is). Called once at start.
pub fn make_non_dumpable() {
    // SAFETY: a prctl with constant arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot make fido non-dumpable");
    }
}

/// Credential paths below the home directory that no sandboxed process may
/// read (besides Fido's own config directory and user config file).
const HOME_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".config/gcloud",
];

/// The credential paths that exist here, canonical: `~/.ssh` and its
/// peers, Fido's config directory (the key and the trust record) and the
/// user config file wherever `FIDO_CONFIG` puts it.
pub fn credential_paths(home: Option<&Path>, fido_files: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = home
        .into_iter()
        .flat_map(|home| HOME_CREDENTIALS.iter().map(move |rel| home.join(rel)))
        .chain(fido_files.iter().cloned())
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// What the sandbox of one session's commands is built from.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    pub mode: SandboxMode,
    /// As configured. Only `true` gives the commands a network of their
    /// own; under `allowlist` they reach it once [`CommandSandbox::with_proxy`]
    /// routes them through the proxy.
    pub network: NetworkAccess,
    /// Canonical workspace root.
    pub workspace: PathBuf,
    /// Canonical extra writable folders (trusted config only).
    pub writable_roots: Vec<PathBuf>,
    /// Never readable (see [`credential_paths`]).
    pub deny: Vec<PathBuf>,
    /// What one command may use (`sandbox::limits`).
    pub limits: CommandLimits,
}

/// The prepared sandbox of a session's commands. Cheap to share; dropping
/// the last reference removes the private `TMPDIR`.
#[derive(Debug)]
pub struct CommandSandbox {
    mode: SandboxMode,
    /// What the commands reach: `allowlist` only with [`Self::proxy`].
    network: NetworkAccess,
    ruleset: Option<OwnedFd>,
    /// What `ruleset` was built from, to build it anew for the proxy.
    spec: Option<RulesetSpec>,
    seccomp: Option<SeccompProgram>,
    tmpdir: Option<PrivateDir>,
    parent: libc::pid_t,
    /// A subagent's shell: the soft `RLIMIT_FSIZE` its commands raise to
    /// the hard limit the subagent was given (see [`Self::subagent_shell`]).
    file_size_cap: Option<libc::rlim_t>,
    /// Each command in a PID namespace of its own, so nothing it starts
    /// outlives it (`sandbox::pidns`); not in `danger-full-access`.
    pid_namespace: Option<PidNamespace>,
    /// `network = "allowlist"`: the proxy the commands' connections go
    /// through, and how they are kept to it (`sandbox::netns`).
    proxy: Option<ProxyConfinement>,
    /// `workspace-write`: how the protected paths of the workspace are
    /// kept read-only (`sandbox::protect`).
    protection: Option<Protection>,
    /// The limits as configured, and how `TMPDIR` is kept to its size.
    limits: Option<(CommandLimits, TmpdirLimit)>,
}

/// What one command's confinement adds to the session's, prepared before
/// its fork ([`CommandSandbox::prepare_start`]).
#[derive(Debug, Default)]
pub struct CommandConfinement {
    /// The protected paths to bind read-only in its mount namespace.
    binds: Option<ReadOnlyBinds>,
    /// Landlock's per-entry fallback: the ruleset built for the workspace
    /// as it is now, instead of the session's.
    ruleset: Option<OwnedFd>,
    /// The fallback ruleset could not be built: the command must not
    /// start.
    failed: bool,
}

impl CommandSandbox {
    /// Builds the ruleset and filter for `policy`. In a sandboxed mode a
    /// kernel that cannot enforce the ruleset is an error, never a silent
    /// downgrade.
    pub fn prepare(policy: &CommandPolicy) -> Result<CommandSandbox, SandboxError> {
        let parent = std::process::id() as libc::pid_t;
        if policy.mode == SandboxMode::DangerFullAccess {
            return Ok(CommandSandbox::unconfined());
        }
        let (tmpdir, tmpdir_limit) = match policy.mode {
            SandboxMode::WorkspaceWrite => {
                let (dir, limit) = PrivateDir::create_limited(policy.limits.tmpdir_mib)?;
                (Some(dir), limit)
            }
            SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => (
                None,
                TmpdirLimit::None {
                    reason: "read-only: commands write nowhere".into(),
                },
            ),
        };
        let protection = (policy.mode == SandboxMode::WorkspaceWrite)
            .then(|| Protection::prepare(&policy.workspace));
        let mut write_roots = Vec::new();
        if policy.mode == SandboxMode::WorkspaceWrite {
            write_roots.push(policy.workspace.clone());
            write_roots.extend(tmpdir.iter().map(|dir| dir.path.clone()));
            write_roots.extend(policy.writable_roots.iter().cloned());
        }
        // The main agent's commands read everywhere but the credentials,
        // as a person's shell would; subagents read far less (see child).
        // Until a proxy routes them, allowlisted commands have no network.
        let network = match policy.network {
            NetworkAccess::On => NetworkAccess::On,
            NetworkAccess::Off | NetworkAccess::Allowlist => NetworkAccess::Off,
        };
        let spec = RulesetSpec {
            deny: policy.deny.clone(),
            write_roots,
            write_except: Vec::new(),
            read_roots: Vec::new(),
            network: network.is_direct(),
            connect_port: None,
        };
        let built = ruleset::build(&spec)?;
        match (built.applied.enforcement, built.applied.abi) {
            (Enforcement::Full, Some(abi)) if abi >= MIN_READ_ONLY_ABI => {}
            (Enforcement::Full, Some(abi)) => {
                return Err(SandboxError::LandlockTooOld {
                    abi,
                    required: MIN_READ_ONLY_ABI,
                });
            }
            (Enforcement::Full | Enforcement::Partial | Enforcement::None, _) => {
                return Err(SandboxError::LandlockUnavailable);
            }
        }
        let ruleset: Option<OwnedFd> = built.created.into();
        Ok(CommandSandbox {
            mode: policy.mode,
            network,
            ruleset,
            spec: Some(spec),
            seccomp: Some(SeccompProgram::compile(SeccompPolicy {
                network: match network {
                    NetworkAccess::On => SocketAccess::On,
                    NetworkAccess::Off | NetworkAccess::Allowlist => SocketAccess::Off,
                },
                metadata_writes: policy.mode == SandboxMode::WorkspaceWrite,
            })?),
            tmpdir,
            parent,
            file_size_cap: None,
            pid_namespace: Some(
                PidNamespace::for_commands().with_process_limit(policy.limits.max_processes),
            ),
            proxy: None,
            protection,
            limits: Some((policy.limits, tmpdir_limit)),
        })
    }

    /// The shell of a subagent, which runs inside the subagent's own
    /// sandbox already (read-only Landlock but for `scratch`, no network,
    /// seccomp): commands inherit all of it, so nothing more is applied but
    /// `TMPDIR` = `scratch` and room to write files there (the subagent
    /// itself keeps a soft `RLIMIT_FSIZE` of 0). The scratch folder is
    /// removed with the last reference (the parent removes it too).
    pub fn subagent_shell(scratch: PathBuf) -> CommandSandbox {
        CommandSandbox {
            mode: SandboxMode::ReadOnly,
            network: NetworkAccess::Off,
            tmpdir: Some(PrivateDir {
                path: scratch,
                mounted: false,
            }),
            file_size_cap: Some(super::child::SCRATCH_FILE_CAP as libc::rlim_t),
            pid_namespace: Some(PidNamespace::for_current_user()),
            ..CommandSandbox::unconfined()
        }
    }

    /// Whether this is a subagent's shell (the guard lets a subagent run
    /// `bash_exec` only then).
    pub fn is_subagent_shell(&self) -> bool {
        self.file_size_cap.is_some()
    }

    /// No sandbox (`danger-full-access`, and tests of the tools).
    pub fn unconfined() -> CommandSandbox {
        CommandSandbox {
            mode: SandboxMode::DangerFullAccess,
            network: NetworkAccess::On,
            ruleset: None,
            spec: None,
            seccomp: None,
            tmpdir: None,
            parent: std::process::id() as libc::pid_t,
            file_size_cap: None,
            pid_namespace: None,
            proxy: None,
            protection: None,
            limits: None,
        }
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// What the commands reach: the network (`true`), nothing
    /// (`false`), or the hosts the proxy admits (`allowlist`).
    pub fn network(&self) -> NetworkAccess {
        self.network
    }

    /// Routes the commands' network through the allowlist proxy
    /// (`network = "allowlist"`): an error where this kernel cannot keep
    /// the commands from going around it. Tries the namespaces once, here
    /// (blocking: a fork and a wait), not per command.
    pub fn with_proxy(self, route: ProxyRoute) -> Result<CommandSandbox, SandboxError> {
        let confinement = super::netns::network_confinement();
        self.with_proxy_confined(route, confinement)
    }

    /// [`Self::with_proxy`] with the confinement given rather than tried
    /// (so tests take the fallback on a kernel that has namespaces). The ruleset and the filter are built anew: TCP
    /// connect to the proxy's port only, TCP sockets but no other.
    pub fn with_proxy_confined(
        mut self,
        route: ProxyRoute,
        confinement: NetworkConfinement,
    ) -> Result<CommandSandbox, SandboxError> {
        if self.is_subagent_shell() {
            return Err(SandboxError::AllowlistNotApplicable {
                what: "a subagent's commands, which have no network",
            });
        }
        let Some(spec) = &self.spec else {
            return Err(SandboxError::AllowlistNotApplicable {
                what: "danger-full-access, which has no sandbox",
            });
        };
        let spec = RulesetSpec {
            network: false,
            connect_port: Some(route.port),
            ..spec.clone()
        };
        let built = ruleset::build(&spec)?;
        let abi = built.applied.abi.unwrap_or(0);
        if let NetworkConfinement::PortOnly { reason } = &confinement
            && !built.applied.network_restricted
        {
            return Err(SandboxError::AllowlistUnenforceable {
                reason: reason.clone(),
                abi,
                required: NETWORK_ABI,
            });
        }
        self.ruleset = built.created.into();
        self.spec = Some(spec);
        self.seccomp = Some(SeccompProgram::compile(SeccompPolicy {
            network: SocketAccess::ProxiedTcp,
            metadata_writes: self.mode == SandboxMode::WorkspaceWrite,
        })?);
        self.proxy = Some(ProxyConfinement::new(route, confinement));
        self.network = NetworkAccess::Allowlist;
        Ok(self)
    }

    /// The allowlist proxy the commands' network goes through, if any.
    pub fn proxy(&self) -> Option<&ProxyRoute> {
        self.proxy.as_ref().map(ProxyConfinement::route)
    }

    /// The same sandbox keeping the protected paths by `mechanism` rather
    /// than the one this kernel was found to allow (so tests and
    /// `fido sandbox check` take the fallback on a kernel with
    /// namespaces). Nothing changes outside `workspace-write`.
    pub fn with_protection(mut self, mechanism: Mechanism) -> CommandSandbox {
        if let Some(protection) = &mut self.protection {
            protection.mechanism = mechanism;
        }
        self
    }

    /// The same sandbox without protected paths: only to measure what
    /// keeping them costs (`benches/sandbox.rs`).
    pub fn without_protection(mut self) -> CommandSandbox {
        self.protection = None;
        self
    }

    /// How the workspace's protected paths are kept read-only
    /// (`workspace-write` only).
    pub fn protection(&self) -> Option<&Mechanism> {
        self.protection.as_ref().map(|p| &p.mechanism)
    }

    /// What a command about to start needs from the disk, looked at once:
    /// the confinement it adds (the protected paths as they are now), and
    /// a watch for a `.git` it may make at the top of the workspace or in
    /// a nested repository's folder, where the protected paths are bound
    /// read-only and there is none yet, or one it may put in place of a
    /// nested repository's (`sandbox::new_repository`). Blocking: an
    /// `lstat` per folder, git when the gitlinks must be read again
    /// (`sandbox::gitlinks`), the new repositories' events or, at the
    /// first command, the end of the walk (`sandbox::nested_clones`); so a
    /// caller on the async threads runs it on the blocking pool.
    pub fn prepare_start(&self) -> (Option<RepositoryWatch>, CommandConfinement) {
        let Some(protection) = &self.protection else {
            return (None, CommandConfinement::default());
        };
        let nested = protection.nested();
        let watch = protection
            .mechanism
            .uses_namespace()
            .then(|| RepositoryWatch::before(&protection.workspace, &nested));
        (watch, self.per_command(protection, &nested))
    }

    /// Marks a command as running until the guard drops: a repository
    /// first seen meanwhile may be its own, and comes after the user's
    /// under the limit (`sandbox::nested_clones`).
    pub fn command_started(&self) -> Option<CommandRunning> {
        self.protection.as_ref().map(Protection::command_started)
    }

    /// How the commands are kept to the allowlist proxy, if they have one.
    pub fn network_confinement(&self) -> Option<&NetworkConfinement> {
        self.proxy.as_ref().map(ProxyConfinement::confinement)
    }

    /// Removes the session's private temporary directory and what the
    /// commands left in it (at session end; dropping does it too).
    pub fn remove_tmpdir(&self) {
        if let Some(dir) = &self.tmpdir {
            dir.remove();
        }
    }

    /// The configured limits of a command and how `TMPDIR` is kept to
    /// its size (`None`: no sandbox, or a subagent's shell).
    pub fn limits(&self) -> Option<&(CommandLimits, TmpdirLimit)> {
        self.limits.as_ref()
    }

    /// The session's private temporary directory (workspace-write only).
    pub fn tmpdir(&self) -> Option<&Path> {
        self.tmpdir.as_ref().map(|dir| dir.path.as_path())
    }

    /// Makes `command` start confined: exports `TMPDIR`, and confines the
    /// child between fork and exec. Blocking ([`Self::prepare_start`]).
    pub fn apply(self: &Arc<Self>, command: &mut tokio::process::Command) {
        let extra = match &self.protection {
            Some(protection) => self.per_command(protection, &protection.nested()),
            None => CommandConfinement::default(),
        };
        self.apply_prepared(command, extra);
    }

    /// [`Self::apply`] with what [`Self::prepare_start`] prepared.
    pub fn apply_prepared(
        self: &Arc<Self>,
        command: &mut tokio::process::Command,
        extra: CommandConfinement,
    ) {
        if let Some(dir) = self.tmpdir() {
            command.env("TMPDIR", dir);
            // A subagent cannot read the user's home: its commands get the
            // scratch folder as theirs (git, for one, reads ~/.gitconfig).
            if self.is_subagent_shell() {
                command.env("HOME", dir);
            }
        }
        let sandbox = Arc::clone(self);
        // SAFETY: `confine` makes only async-signal-safe syscalls on memory
        // prepared before the fork (see the module comment).
        unsafe {
            command.pre_exec(move || sandbox.confine(&extra));
        }
    }

    /// What this command adds: the protected paths of `protection`, its
    /// `nested` repositories included, as they are now (a few `lstat`s
    /// and opens).
    fn per_command(&self, protection: &Protection, nested: &[PathBuf]) -> CommandConfinement {
        let workspace = &protection.workspace;
        let mut paths = protect::protected_paths(workspace);
        paths.extend(crate::workspace::nested_git_paths(workspace, nested));
        if protection.mechanism.uses_namespace() {
            return CommandConfinement {
                binds: Some(ReadOnlyBinds::prepare(&paths)),
                ..CommandConfinement::default()
            };
        }
        let Some(spec) = &self.spec else {
            return CommandConfinement::default();
        };
        let spec = RulesetSpec {
            write_except: paths,
            ..spec.clone()
        };
        match ruleset::build(&spec) {
            Ok(built) => CommandConfinement {
                ruleset: built.created.into(),
                ..CommandConfinement::default()
            },
            Err(err) => {
                tracing::warn!(error = %err, "cannot build the ruleset that protects .git and Fido's files");
                CommandConfinement {
                    failed: true,
                    ..CommandConfinement::default()
                }
            }
        }
    }

    /// Runs in the forked child, before exec. No allocation.
    fn confine(&self, extra: &CommandConfinement) -> std::io::Result<()> {
        if extra.failed {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
        let check = |rc: libc::c_int| {
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: plain syscalls with constant or stack arguments.
        unsafe {
            // Its own session, with no controlling terminal, before any
            // keeper forks (`ProcessGroup::spawn` leaves it at that).
            crate::process::own_session(self.parent)?;
            if let Some(proxy) = &self.proxy {
                // From here on in the command's network namespace, whose
                // only way out is the proxy (or the keeper never returns).
                proxy.enter()?;
            }
            if let Some(binds) = &extra.binds {
                // From here on in a mount namespace where the protected
                // paths are read-only (before Landlock, which forbids
                // mounting).
                binds.enter()?;
            }
            if let Some(namespace) = &self.pid_namespace {
                // Last, as the keeper drops capabilities for its child
                // (the mounts above may need them): from here on in PID 2
                // of the command's namespace, and what it starts ends
                // with it (`sandbox::pidns`).
                if namespace.enter()? {
                    crate::process::confined(crate::process::Confined::InNamespace);
                }
            }
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            check(libc::setrlimit(libc::RLIMIT_CORE, &no_core))?;
            if let Some(cap) = self.file_size_cap {
                let room = libc::rlimit {
                    rlim_cur: cap,
                    rlim_max: cap,
                };
                check(libc::setrlimit(libc::RLIMIT_FSIZE, &room))?;
            }
            let Some(ruleset) = extra.ruleset.as_ref().or(self.ruleset.as_ref()) else {
                return Ok(());
            };
            super::caps::drop_from_bounding_set();
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            let rc = libc::syscall(
                libc::SYS_landlock_restrict_self,
                ruleset.as_raw_fd(),
                0 as libc::c_uint,
            );
            check(rc as libc::c_int)?;
        }
        match &self.seccomp {
            Some(program) => program.apply(),
            None => Ok(()),
        }
    }
}

/// Whether `path` is a private folder of a Fido process that is gone.
fn is_stale(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(pid) = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix("fido-"))
        .and_then(|rest| rest.split('-').next())
        .and_then(|pid| pid.parse::<i32>().ok())
    else {
        return false;
    };
    // Not following a symlink: the folder itself must be ours and private.
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let private = meta.is_dir() && meta.uid() == uid && meta.mode() & 0o777 == 0o700;
    // Any process with that pid (any user's) keeps the folder.
    private && pid > 0 && crate::process::sweep::start_time(pid).is_none()
}

/// A private (0700) temporary directory, removed on drop.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    /// A tmpfs of its own is mounted on it (unmounted before removal).
    mounted: bool,
}

impl PrivateDir {
    /// The session's `TMPDIR`: a tmpfs of `mib` MiB where this process may
    /// mount one, else a plain folder; and which of the two it is.
    fn create_limited(mib: u64) -> Result<(PrivateDir, TmpdirLimit), SandboxError> {
        let mut dir = PrivateDir::create_named("")?;
        let limit = match limits::mount_tmpfs(&dir.path, mib) {
            Ok(()) => {
                dir.mounted = true;
                TmpdirLimit::Tmpfs { mib }
            }
            Err(err) => TmpdirLimit::None {
                reason: format!("cannot mount a tmpfs: {err}"),
            },
        };
        Ok((dir, limit))
    }

    /// A new private folder in the system's temporary directory, named
    /// after this process, `label` and a random part; canonical.
    pub fn create_named(label: &str) -> Result<PrivateDir, SandboxError> {
        let path = std::env::temp_dir().join(format!(
            "fido-{}-{label}{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|source| SandboxError::TempDir {
                path: path.display().to_string(),
                source,
            })?;
        // The workspace rules are canonical; so must this one be.
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(PrivateDir {
            path,
            mounted: false,
        })
    }
}

impl PrivateDir {
    /// Removes the private folders that Fido processes killed before they
    /// could clean up left in the temporary directory (their TMPDIRs and
    /// subagent scratch folders); how many. Only folders named after a
    /// process that no longer runs, owned by this user and private (0700):
    /// never another user's, and never a live Fido's. Blocking.
    pub fn remove_stale() -> usize {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|entry| is_stale(&entry.path()))
            .filter(|entry| {
                // A tmpfs left mounted by a Fido that was killed.
                limits::unmount(&entry.path());
                std::fs::remove_dir_all(entry.path()).is_ok()
            })
            .count()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the folder and everything in it (blocking).
    pub fn remove(&self) {
        if self.mounted {
            limits::unmount(&self.path);
        }
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::debug!(path = %self.path.display(), error = %err, "cannot remove the commands' TMPDIR")
            }
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod stale_tests {
    use super::*;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    /// A pid that ran and was reaped: no process has it now (the kernel
    /// hands pids out in increasing order, so it is not reused at once).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn only_private_folders_of_gone_processes_are_removed() {
        let tmp = std::env::temp_dir();
        let dead = dead_pid();
        let private = |name: String| {
            let path = tmp.join(name);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .unwrap();
            std::fs::write(path.join("inside"), b"x").unwrap();
            path
        };
        let gone = private(format!(
            "fido-{dead}-subagent-test-{:08x}",
            fastrand::u32(..)
        ));
        let live = private(format!(
            "fido-{}-test-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let shared = private(format!("fido-{dead}-shared-{:08x}", fastrand::u32(..)));
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = tmp.join(format!("fido-{dead}-file-{:08x}", fastrand::u32(..)));
        std::fs::write(&file, b"x").unwrap();

        assert!(PrivateDir::remove_stale() >= 1);
        assert!(!gone.exists(), "the folder of a gone process stays");
        assert!(live.exists(), "a live process lost its folder");
        assert!(shared.exists(), "a folder that is not private was removed");
        assert!(file.exists(), "a file was removed");
        for path in [&live, &shared] {
            std::fs::remove_dir_all(path).unwrap();
        }
        std::fs::remove_file(&file).unwrap();
    }
}
