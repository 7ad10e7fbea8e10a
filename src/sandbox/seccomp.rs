//! The seccomp filter behind Landlock: what Landlock on this kernel cannot
//! deny (UDP, connecting to pathname UNIX sockets, raw sockets), plus
//! ptrace and io_uring (which would bypass per-syscall checks).
//!
//! Landlock has no right for a file's mode or owner: a confined process
//! may `chmod` any file it owns, anywhere (`chmod 000 ~/.ssh/id_ed25519`,
//! a world-writable `~/.bashrc`). A read-only sandbox (a subagent, a
//! `read-only` command) therefore refuses every mode and owner change;
//! a `workspace-write` one cannot, since the filter sees no paths and a
//! build must `chmod +x` in the workspace (`fido sandbox check` says so).
//!
//! With the network off, `socket(2)` is refused for every family but
//! `AF_UNIX`, and `connect`, `bind`, `listen`, `accept` and `accept4` are
//! refused outright: a process can still make a `socketpair` or use the
//! sockets it inherited (the subagent's IPC connection), but it cannot
//! reach anything new: no host, no `ssh-agent`, no Docker socket. Refused
//! calls fail with `EPERM`.
//!
//! Behind the allowlist proxy (`network = "allowlist"`, `sandbox::netns`)
//! a command must reach `127.0.0.1:port` over TCP: `socket(2)` is allowed
//! for TCP stream sockets of `AF_INET` and `AF_INET6` only (no UDP, no raw
//! socket, no new UNIX socket: a `socketpair` still works) and `connect`
//! is allowed; where it may connect is Landlock's port rule and the
//! network namespace's business, which see the address. `bind`, `listen`
//! and `accept` stay refused, and so do sends with `MSG_FASTOPEN`, which
//! connect without passing Landlock's connect check. The program is compiled once, in the parent;
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

/// Syscalls refused in a read-only sandbox: mode and owner changes, which
/// Landlock does not govern.
const METADATA_DENIED: &[i64] = &[
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    libc::SYS_fchown,
    libc::SYS_fchownat,
];

/// Which sockets a filter lets a process make and use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketAccess {
    /// No new socket but `AF_UNIX` (and socketpairs), no `connect`,
    /// `bind`, `listen` or `accept`.
    Off,
    /// TCP stream sockets and `connect` (to the allowlist proxy), still
    /// no `bind`, `listen` or `accept`, no other socket.
    ProxiedTcp,
    /// Every socket and call.
    On,
}

/// What a filter refuses besides [`ALWAYS_DENIED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeccompPolicy {
    /// Which sockets are allowed.
    pub network: SocketAccess,
    /// Mode and owner changes allowed (`chmod`, `chown` and their kin).
    pub metadata_writes: bool,
}

/// A rule that matches when every `(argument, comparison, value)` holds
/// (on the argument's low 32 bits: `socket(2)` takes `int`s).
fn rule(conditions: &[(u8, SeccompCmpOp, u64)]) -> Result<SeccompRule, SandboxError> {
    conditions
        .iter()
        .map(|(arg, op, value)| {
            SeccompCondition::new(*arg, SeccompCmpArgLen::Dword, op.clone(), *value)
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(SeccompRule::new)
        .map_err(|err| SandboxError::Seccomp(err.to_string()))
}

/// The `socket(2)` calls refused behind the proxy: any family but
/// `AF_UNIX`, `AF_INET` and `AF_INET6`; `AF_UNIX` itself (a new one could
/// connect to `ssh-agent`, since `connect` is allowed); and an `AF_INET`
/// or `AF_INET6` socket that is not a TCP stream (its type, with or
/// without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`, is not `SOCK_STREAM`, or its
/// protocol is neither 0 nor TCP).
fn not_tcp_stream() -> Result<Vec<SeccompRule>, SandboxError> {
    use SeccompCmpOp::{Eq, Ne};
    let stream = libc::SOCK_STREAM as u64;
    let nonblock = libc::SOCK_NONBLOCK as u64;
    let cloexec = libc::SOCK_CLOEXEC as u64;
    let mut rules = vec![rule(&[
        (0, Ne, libc::AF_INET as u64),
        (0, Ne, libc::AF_INET6 as u64),
    ])?];
    for family in [libc::AF_INET, libc::AF_INET6] {
        let family = family as u64;
        rules.push(rule(&[
            (0, Eq, family),
            (1, Ne, stream),
            (1, Ne, stream | nonblock),
            (1, Ne, stream | cloexec),
            (1, Ne, stream | nonblock | cloexec),
        ])?);
        rules.push(rule(&[
            (0, Eq, family),
            (2, Ne, 0),
            (2, Ne, libc::IPPROTO_TCP as u64),
        ])?);
    }
    Ok(rules)
}

/// The sends that carry `MSG_FASTOPEN`: TCP Fast Open connects from
/// `sendto`/`sendmsg` without the `connect` check Landlock's port rule
/// hangs on (on this kernel a fast-open `sendto` reached a port the rule
/// refuses), so behind the proxy they are refused; `connect` then `write`
/// is the way.
fn fast_open() -> Result<[(i64, Vec<SeccompRule>); 3], SandboxError> {
    let flag = libc::MSG_FASTOPEN as u64;
    let with_flag = |arg: u8| rule(&[(arg, SeccompCmpOp::MaskedEq(flag), flag)]).map(|r| vec![r]);
    Ok([
        (libc::SYS_sendto, with_flag(3)?),
        (libc::SYS_sendmsg, with_flag(2)?),
        (libc::SYS_sendmmsg, with_flag(3)?),
    ])
}

/// Device nodes and terminal injection, refused in every sandboxed
/// process: `mknod`/`mknodat` of a character or block device (a copy of
/// `/dev/tty` made in the workspace would reach the user's terminal), and
/// the `ioctl`s that type into a terminal (`TIOCSTI`) or drive the Linux
/// console (`TIOCLINUX`). FIFOs and sockets stay allowed.
fn devices_and_terminals() -> Result<Vec<(i64, Vec<SeccompRule>)>, SandboxError> {
    use SeccompCmpOp::{Eq, MaskedEq};
    let format = libc::S_IFMT as u64;
    let device = |arg: u8| -> Result<Vec<SeccompRule>, SandboxError> {
        Ok(vec![
            rule(&[(arg, MaskedEq(format), libc::S_IFCHR as u64)])?,
            rule(&[(arg, MaskedEq(format), libc::S_IFBLK as u64)])?,
        ])
    };
    let terminal = vec![
        rule(&[(1, Eq, libc::TIOCSTI)])?,
        rule(&[(1, Eq, libc::TIOCLINUX)])?,
    ];
    Ok(vec![
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_mknod, device(1)?),
        (libc::SYS_mknodat, device(2)?),
        (libc::SYS_ioctl, terminal),
    ])
}

/// A compiled filter, ready to apply in a forked child.
#[derive(Debug, Clone)]
pub struct SeccompProgram {
    filter: Vec<libc::sock_filter>,
}

impl SeccompProgram {
    /// Compiles the filter for this architecture.
    pub fn compile(policy: SeccompPolicy) -> Result<SeccompProgram, SandboxError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|err| SandboxError::Seccomp(err.to_string()))?;
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for nr in ALWAYS_DENIED {
            rules.insert(*nr, Vec::new());
        }
        rules.extend(devices_and_terminals()?);
        if !policy.metadata_writes {
            for nr in METADATA_DENIED {
                rules.insert(*nr, Vec::new());
            }
        }
        match policy.network {
            SocketAccess::Off => {
                for nr in NETWORK_DENIED {
                    rules.insert(*nr, Vec::new());
                }
                let not_unix = rule(&[(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)])?;
                rules.insert(libc::SYS_socket, vec![not_unix]);
            }
            SocketAccess::ProxiedTcp => {
                for nr in NETWORK_DENIED.iter().filter(|nr| **nr != libc::SYS_connect) {
                    rules.insert(*nr, Vec::new());
                }
                rules.insert(libc::SYS_socket, not_tcp_stream()?);
                rules.extend(fast_open()?);
            }
            SocketAccess::On => {}
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
    use std::mem::size_of;
    use std::net::UdpSocket;
    use std::os::unix::net::{UnixListener, UnixStream};

    fn errno(err: &std::io::Error) -> Option<i32> {
        err.raw_os_error()
    }

    const OFFLINE_READ_ONLY: SeccompPolicy = SeccompPolicy {
        network: SocketAccess::Off,
        metadata_writes: false,
    };

    /// Tries a mode change by path, through an fd and an owner change, on
    /// a thread with `policy`'s filter; the errnos (0: it worked).
    fn metadata_changes(policy: SeccompPolicy, file: &std::path::Path) -> [i32; 3] {
        use std::os::unix::fs::PermissionsExt;
        let program = SeccompProgram::compile(policy).unwrap();
        let file = file.to_path_buf();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            let code = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error()).unwrap_or(0);
            let by_path = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o777));
            // Opening for reading is allowed; the mode change through it is not.
            let opened = std::fs::File::open(&file).unwrap();
            let by_fd = opened.set_permissions(std::fs::Permissions::from_mode(0o777));
            let owner = std::os::unix::fs::chown(&file, None, None);
            [code(by_path), code(by_fd), code(owner)]
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_read_only_filter_refuses_mode_and_owner_changes_a_writing_one_keeps_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mode.txt");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let refused = metadata_changes(OFFLINE_READ_ONLY, &file);
        assert_eq!(refused, [libc::EPERM; 3]);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the refused chmod changed nothing");
        let writing = SeccompPolicy {
            network: SocketAccess::Off,
            metadata_writes: true,
        };
        assert_eq!(metadata_changes(writing, &file), [0; 3]);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);
    }

    /// Device nodes and terminal injection are refused by every filter;
    /// FIFOs are not. `TIOCSTI` is tried on a real pseudo-terminal: without
    /// the filter it types (as root) or fails with EIO where the kernel
    /// turned it off, never with EPERM.
    #[test]
    fn every_filter_refuses_device_nodes_and_terminal_injection() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        // SAFETY: opens a new pseudo-terminal master; checked below.
        let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
        assert!(master >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: a descriptor just opened and owned here alone.
        let pty = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(master) };
        let program = SeccompProgram::compile(SeccompPolicy {
            network: SocketAccess::On,
            metadata_writes: true,
        })
        .unwrap();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            let mknod = |name: &str, kind: libc::mode_t| {
                let path =
                    std::ffi::CString::new(root.join(name).into_os_string().into_encoded_bytes())
                        .unwrap();
                // SAFETY: a plain syscall on a valid C string.
                let rc = unsafe { libc::mknod(path.as_ptr(), kind | 0o600, libc::makedev(5, 0)) };
                if rc == 0 {
                    0
                } else {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
                }
            };
            assert_eq!(mknod("tty", libc::S_IFCHR), libc::EPERM);
            assert_eq!(mknod("disk", libc::S_IFBLK), libc::EPERM);
            assert_eq!(mknod("fifo", libc::S_IFIFO), 0);
            let byte = b'y';
            // SAFETY: an ioctl on an open descriptor with a valid pointer.
            let rc = unsafe { libc::ioctl(pty.as_raw_fd(), libc::TIOCSTI, &byte) };
            assert_eq!(rc, -1);
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EPERM)
            );
        })
        .join()
        .unwrap();
        assert!(!dir.path().join("tty").exists());
        assert!(dir.path().join("fifo").exists());
    }

    /// The filter on one thread of the test process (seccomp filters are
    /// per thread without TSYNC, so other tests are unaffected).
    #[test]
    fn the_offline_filter_denies_new_sockets_but_keeps_socketpairs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("listener.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let program = SeccompProgram::compile(OFFLINE_READ_ONLY).unwrap();
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

    /// `socket(2)` with raw arguments on a thread with the filter: the errno
    /// (0: it made one).
    fn socket_errno(domain: i32, kind: i32, protocol: i32) -> i32 {
        // SAFETY: a socket call; the descriptor is closed at once.
        let fd = unsafe { libc::socket(domain, kind, protocol) };
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        }
        // SAFETY: the descriptor just made.
        unsafe { libc::close(fd) };
        0
    }

    /// A TCP Fast Open `sendto` to `127.0.0.1:port`; the errno (0: sent).
    fn fast_open_errno(port: u16) -> i32 {
        let addr = crate::sandbox::netns::loopback_address(port);
        // SAFETY: a socket call, a sendto from a constant buffer to the
        // stack address above, and its close.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let sent = libc::sendto(
                fd,
                b"x".as_ptr().cast(),
                1,
                libc::MSG_FASTOPEN,
                (&addr as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
            libc::close(fd);
            if sent < 0 { errno } else { 0 }
        }
    }

    #[test]
    fn the_proxied_filter_keeps_tcp_connect_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let program = SeccompProgram::compile(SeccompPolicy {
            network: SocketAccess::ProxiedTcp,
            metadata_writes: true,
        })
        .unwrap();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            std::net::TcpStream::connect(target).unwrap();
            let stream = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
            assert_eq!(socket_errno(libc::AF_INET6, stream, libc::IPPROTO_TCP), 0);
            let refused = [
                (libc::AF_INET, libc::SOCK_DGRAM, 0),
                (libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0),
                (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
                (libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP),
                (libc::AF_INET, libc::SOCK_STREAM | 0x4000, 0),
                (libc::AF_PACKET, libc::SOCK_RAW, 0),
                (libc::AF_NETLINK, libc::SOCK_RAW, 0),
                (libc::AF_UNIX, libc::SOCK_STREAM, 0),
            ];
            for (domain, kind, protocol) in refused {
                let errno = socket_errno(domain, kind, protocol);
                assert_eq!(
                    errno,
                    libc::EPERM,
                    "socket({domain}, {kind:#x}, {protocol})"
                );
            }
            // TCP Fast Open would connect without `connect`.
            assert_eq!(fast_open_errno(target.port()), libc::EPERM);
            let bind = std::net::TcpListener::bind("127.0.0.1:0").unwrap_err();
            assert_eq!(errno(&bind), Some(libc::EPERM));
            // A socketpair needs no new socket(2): it still works.
            UnixStream::pair().unwrap();
        })
        .join()
        .unwrap();
        let _accepted = listener.accept().unwrap();
    }

    #[test]
    fn the_online_filter_keeps_sockets() {
        let program = SeccompProgram::compile(SeccompPolicy {
            network: SocketAccess::On,
            metadata_writes: true,
        })
        .unwrap();
        std::thread::spawn(move || {
            nix::sys::prctl::set_no_new_privs().unwrap();
            program.apply().unwrap();
            UdpSocket::bind("127.0.0.1:0").unwrap();
        })
        .join()
        .unwrap();
    }
}
