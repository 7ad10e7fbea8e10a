//! The fixture as the probe table makes and reads it:
//! [`ProbeFixture::create`] has every probe of the table prepare its part,
//! and [`ProbeFixture::verify`] looks for every forbidden probe's effect
//! once the child has exited. The fixture's state ([`super::fixture`]) is
//! what the probes look at, so it knows no table; this is the one part of
//! the fixture that does.

use std::fs::DirBuilder;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{self as unix, UnixListener};

use super::fixture::ProbeFixture;
use super::table;
use super::targets::{
    ORIGINAL_CONTENT, ProbeRole, READ_ME, SECRET_DIR, UNIX_SOCKET, WORKSPACE_DIR, scratch_dir,
};
use super::verdict::{Expect, ProbeResult};
use super::worktree::WorktreeFixture;

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
}
