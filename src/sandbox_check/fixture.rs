//! The parent's side of the probes: a private directory with what they aim
//! at, listeners they try to reach, and the look for their effects once the
//! child has exited.

use std::fs::DirBuilder;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{self as unix, UnixListener};
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::escape::{escape_marker, kill_escaped};
use super::table::{self, ProbeRole};
use super::verdict::{Expect, ProbeResult};
use super::worktree::WorktreeFixture;

/// What every fixture file holds before the probes.
pub const ORIGINAL_CONTENT: &[u8] = b"fido sandbox probe: original content\n";
/// What a probe that got through writes.
pub(super) const ESCAPED_CONTENT: &[u8] = b"escaped\n";
/// The file every sandbox must still let a process read.
pub(super) const READ_ME: &str = "read-me.txt";
/// What `create` (in the fixture) and `write-workspace` (in the workspace)
/// write.
pub(super) const CREATED: &str = "created.txt";
/// The stand-in credential folder, denied as `~/.ssh` is.
pub(super) const SECRET_DIR: &str = "secret";
const WORKSPACE_DIR: &str = "workspace";
const UNIX_SOCKET: &str = "listener.sock";

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
    /// A write subagent's worktree, which its sandbox lets it write
    /// (empty for the other roles).
    pub write_roots: Vec<PathBuf>,
    /// What a write subagent reads besides its workspace.
    pub read_roots: Vec<PathBuf>,
    /// The allowlist proxy's port (its stand-in's), for a command behind
    /// it.
    pub proxy_port: Option<u16>,
}

impl ProbeTargets {
    /// The workspace of a command probe child (writable in
    /// `workspace-write`).
    pub fn workspace(&self) -> PathBuf {
        self.dir.join(WORKSPACE_DIR)
    }

    pub(super) fn unix_socket(&self) -> PathBuf {
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
    pub(super) dir: PathBuf,
    pub(super) tcp: TcpListener,
    pub(super) unix: UnixListener,
    abstract_name: String,
    pub(super) pathname: Option<UnixListener>,
    /// The main checkout and its worktree, for a write subagent.
    pub(super) worktree: Option<WorktreeFixture>,
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
            worktree: None,
        };
        fixture.fill()?;
        Ok(fixture)
    }

    /// [`ProbeFixture::create`], plus, for a write subagent, a main
    /// checkout and a worktree of it made as a write delegation makes one.
    pub fn for_role(role: ProbeRole) -> io::Result<ProbeFixture> {
        let mut fixture = ProbeFixture::create()?;
        match role {
            ProbeRole::WriteSubagent => {
                fixture.worktree = Some(WorktreeFixture::create(&fixture.dir)?);
            }
            ProbeRole::Subagent | ProbeRole::Command(_) | ProbeRole::Allowlist => {}
        }
        Ok(fixture)
    }

    /// The write subagent's sandbox roots, where this fixture has a
    /// worktree: its workspace, and its git environment
    /// ([`crate::changes::WriteRoots::git_env`]).
    pub fn write_roots(&self) -> Option<&crate::changes::WriteRoots> {
        self.worktree.as_ref().map(|worktree| &worktree.roots)
    }

    /// The folders, the pathname listener, the shared file and what each
    /// probe prepares for itself.
    fn fill(&mut self) -> io::Result<()> {
        for sub in [SECRET_DIR, WORKSPACE_DIR] {
            DirBuilder::new().mode(0o700).create(self.dir.join(sub))?;
        }
        let pathname = UnixListener::bind(self.dir.join(UNIX_SOCKET))?;
        pathname.set_nonblocking(true)?;
        self.pathname = Some(pathname);
        std::fs::write(self.dir.join(READ_ME), ORIGINAL_CONTENT)?;
        for probe in table::all() {
            (probe.setup)(&self.dir)?;
        }
        DirBuilder::new()
            .mode(0o700)
            .create(scratch_dir(&self.dir))?;
        self.tcp.set_nonblocking(true)?;
        self.unix.set_nonblocking(true)
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
            write_roots: self
                .write_roots()
                .map(|roots| roots.write.clone())
                .unwrap_or_default(),
            read_roots: self
                .write_roots()
                .map(|roots| roots.read.clone())
                .unwrap_or_default(),
            proxy_port: None,
        })
    }

    /// Looks for each forbidden probe's effect and marks the results whose
    /// effect is there. Call after the child has exited.
    pub fn verify(&self, results: &mut [ProbeResult]) {
        for result in results.iter_mut() {
            let seen = || table::find(&result.name).is_some_and(|probe| (probe.side_effect)(self));
            if result.expect == Expect::Blocked && seen() {
                result.side_effect_seen = true;
            }
        }
    }

    /// Whether the fixture file `name` no longer holds [`ORIGINAL_CONTENT`].
    pub(super) fn changed(&self, name: &str) -> bool {
        std::fs::read(self.dir.join(name)).ok().as_deref() != Some(ORIGINAL_CONTENT)
    }

    /// Whether anything (a link included) is at the fixture path `name`.
    pub(super) fn exists(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.dir.join(name)).is_ok()
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
pub(super) fn outside_file(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-outside.txt");
    PathBuf::from(name)
}

/// The scratch folder beside the fixture directory (outside the
/// workspace, as a subagent's is).
pub(super) fn scratch_dir(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-scratch");
    PathBuf::from(name)
}

/// The fixture's stand-in for a credential folder, which the probe
/// child's ruleset denies as it denies `~/.ssh`.
pub fn denied_paths(dir: &Path) -> Vec<PathBuf> {
    let secret = dir.join(SECRET_DIR);
    vec![std::fs::canonicalize(&secret).unwrap_or(secret)]
}
