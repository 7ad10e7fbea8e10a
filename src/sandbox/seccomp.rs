//! The seccomp filter behind Landlock: what Landlock on this kernel cannot
//! deny (UDP, connecting to pathname UNIX sockets, raw sockets), plus
//! ptrace and io_uring (which would bypass per-syscall checks).
//!
//! With the network off, `socket(2)` is refused for every family but
//! `AF_UNIX`, and `connect`, `bind`, `listen`, `accept` and `accept4` are
//! refused outright: a process can still make a `socketpair` or use the
//! sockets it inherited (the subagent's IPC connection), but it cannot
//! reach anything new: no host, no `ssh-agent`, no Docker socket. Refused
//! calls fail with `EPERM`. The program is compiled once, in the parent;
//! applying it is one `prctl`, safe to do between `fork` and `exec`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::policy::SandboxError;

/// Syscalls refused in every sandboxed process.
const ALWAYS_DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// Syscalls refused when the network is off (`socket` is conditional).
const NETWORK_DENIED: &[i64] = &[
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
];

/// A compiled filter, ready to apply in a forked child.
#[derive(Debug, Clone)]
pub struct SeccompProgram {
    filter: Vec<libc::sock_filter>,
}

impl SeccompProgram {
    /// Compiles the filter for this architecture; `network` keeps the
    /// socket calls allowed.
    pub fn compile(network: bool) -> Result<SeccompProgram, SandboxError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|err| SandboxError::Seccomp(err.to_string()))?;
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for nr in ALWAYS_DENIED {
            rules.insert(*nr, Vec::new());
        }
        if !network {
            for nr in NETWORK_DENIED {
                rules.insert(*nr, Vec::new());
            }
            let not_unix = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|err| SandboxError::Seccomp(err.to_string()))?;
            rules.insert(libc::SYS_socket, vec![not_unix]);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(|err| SandboxError::Seccomp(err.to_string()))?;
        let program: BpfProgram = filter
            .try_into()
            .map_err(|err: seccompiler::BackendError| SandboxError::Seccomp(err.to_string()))?;
        let filter = program
            .into_iter()
            .map(|op| libc::sock_filter {
                code: op.code,
                jt: op.jt,
                jf: op.jf,
                k: op.k,
            })
            .collect();
        Ok(SeccompProgram { filter })
    }

    /// Installs the filter on the calling thread. Makes no allocation, so
    /// it may run between `fork` and `exec`. `no_new_privs` must be set.
    pub fn apply(&self) -> std::io::Result<()> {
        let program = libc::sock_fprog {
            len: self.filter.len() as libc::c_ushort,
            filter: self.filter.as_ptr().cast_mut(),
        };
        // SAFETY: `program` points at `self.filter`, which outlives the
        // call; the kernel copies the filter before prctl returns.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &program as *const libc::sock_fprog,
                0,
                0,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::unix::net::{UnixListener, UnixStream};

    fn errno(err: &std::io::Error) -> Option<i32> {
        err.raw_os_error()
    }

    /// The filter on one thread of the test process (seccomp filters are
    /// per thread without TSYNC, so other tests are unaffected).
    #[test]
    fn the_offline_filter_denies_new_sockets_but_keeps_socketpairs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("listener.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let program = SeccompProgram::compile(false).unwrap();
        let target = path.clone();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            let udp = UdpSocket::bind("127.0.0.1:0").unwrap_err();
            assert_eq!(errno(&udp), Some(libc::EPERM));
            let tcp = std::net::TcpStream::connect("127.0.0.1:9").unwrap_err();
            assert_eq!(errno(&tcp), Some(libc::EPERM));
            let unix = UnixStream::connect(&target).unwrap_err();
            assert_eq!(errno(&unix), Some(libc::EPERM));
            let (mut a, mut b) = UnixStream::pair().unwrap();
            use std::io::{Read, Write};
            a.write_all(b"ok").unwrap();
            let mut buf = [0u8; 2];
            b.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"ok");
        })
        .join()
        .unwrap();
        // Not this thread: the listener still accepts.
        let _client = UnixStream::connect(&path).unwrap();
        drop(listener);
    }

    #[test]
    fn the_online_filter_keeps_sockets() {
        let program = SeccompProgram::compile(true).unwrap();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            UdpSocket::bind("127.0.0.1:0").unwrap();
        })
        .join()
        .unwrap();
    }
}
