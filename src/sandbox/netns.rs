//! `network = "allowlist"`: how a sandboxed command reaches the network
//! only through Fido's proxy (`net::proxy`).
//!
//! The route is the contract between the two halves: the proxy listens on
//! `127.0.0.1:port` in Fido's own network namespace, and takes client
//! connections as file descriptors sent over `bridge` (a UNIX datagram
//! socket; each message carries one connected stream socket by
//! `SCM_RIGHTS` and a one-byte payload). A command confined in a network
//! namespace of its own reaches the proxy through that bridge only.
//!
//! Theory of operation, between fork and exec ([`ProxyConfinement::enter`],
//! called from the command sandbox's `pre_exec`; raw syscalls on memory
//! prepared before the fork, no allocation), where this kernel allows an
//! unprivileged user namespace ([`NetworkConfinement::Namespace`]):
//!
//! 1. the forked process (the *keeper*, the process group leader the
//!    supervisor knows) calls `unshare(CLONE_NEWUSER | CLONE_NEWNET)`, maps
//!    its user to itself, brings `lo` up and listens on `127.0.0.1:port`
//!    in the new namespace, where nothing else is: no other interface, no
//!    route, no resolver;
//! 2. it forks: the new process closes the listener and the bridge, dies
//!    with the keeper (as `sandbox::pidns` arranges it: the parent-death
//!    signal and the pipe check), drops the capabilities the user
//!    namespace gave it, and goes on to Landlock, seccomp and exec. Its
//!    `HTTP_PROXY=http://127.0.0.1:port` reaches the keeper's listener;
//! 3. the keeper closes every other descriptor and loops: each accepted
//!    connection is sent over the bridge to the proxy, then closed, until
//!    the command exits (a pidfd says when); then it ends as the command
//!    ended.
//!
//! Where user namespaces are off ([`NetworkConfinement::PortOnly`]) there
//! is no namespace: the command connects to the proxy's own listener, and
//! Landlock (ABI 4 or later) lets TCP connect to that port only. That is
//! weaker: the same port on another address is reachable too. In both
//! cases the seccomp filter refuses UDP, raw and new UNIX sockets
//! (`SocketAccess::ProxiedTcp`) and Landlock refuses TCP bind.

pub mod stand_in;

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::pidns::{SelfMapping, die_with_keeper, end_as};

/// Where a command's proxied connections go (`network = "allowlist"`).
#[derive(Debug, Clone)]
pub struct ProxyRoute {
    /// The proxy's port: on 127.0.0.1 in Fido's own network namespace, and
    /// the port the bridge listens on inside a command's namespace, so the
    /// command's `HTTP_PROXY` is the same URL either way.
    pub port: u16,
    /// The proxy's end that takes accepted connections as descriptors
    /// (`SCM_RIGHTS`, one descriptor per message with a one-byte payload).
    pub bridge: Arc<OwnedFd>,
}

/// How the commands behind the allowlist proxy are kept from going around
/// it on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkConfinement {
    /// A user and network namespace per command, whose only way out is
    /// the proxy's port on its loopback.
    Namespace,
    /// No namespace: Landlock lets TCP connect to the proxy's port only,
    /// on any address; the reason says why.
    PortOnly { reason: String },
}

impl std::fmt::Display for NetworkConfinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetworkConfinement::Namespace => {
                f.write_str("a network namespace per command, whose only way out is the proxy")
            }
            NetworkConfinement::PortOnly { reason } => write!(
                f,
                "TCP connect to the proxy's port only, on any address ({reason})"
            ),
        }
    }
}

/// Which confinement the commands get here: a child that tries the
/// namespaces and reports. Blocking (a fork and a wait).
pub fn network_confinement() -> NetworkConfinement {
    // SAFETY: the child makes only async-signal-safe syscalls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above, in the forked child.
        unsafe {
            let code = if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
                0
            } else {
                *libc::__errno_location() & 0xff
            };
            libc::_exit(code);
        }
    }
    if pid < 0 {
        return NetworkConfinement::PortOnly {
            reason: format!("cannot test namespaces: {}", io::Error::last_os_error()),
        };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    match (waited == pid && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => NetworkConfinement::Namespace,
        Some(errno) => NetworkConfinement::PortOnly {
            reason: format!(
                "no unprivileged user and network namespace here: {}",
                io::Error::from_raw_os_error(errno)
            ),
        },
        None => NetworkConfinement::PortOnly {
            reason: "the namespace test did not finish".to_owned(),
        },
    }
}

/// The proxy route of a sandbox and how it is enforced, prepared before
/// the fork.
#[derive(Debug, Clone)]
pub(super) struct ProxyConfinement {
    route: ProxyRoute,
    confinement: NetworkConfinement,
    mapping: SelfMapping,
}

impl ProxyConfinement {
    pub(super) fn new(route: ProxyRoute, confinement: NetworkConfinement) -> ProxyConfinement {
        ProxyConfinement {
            route,
            confinement,
            mapping: SelfMapping::for_current_user(),
        }
    }

    pub(super) fn route(&self) -> &ProxyRoute {
        &self.route
    }

    pub(super) fn confinement(&self) -> &NetworkConfinement {
        &self.confinement
    }

    /// Steps 1–3 of the module comment, in the forked child, before
    /// Landlock (which would refuse the `uid_map` write and the bind).
    /// Returns in the process that goes on to exec the command; the keeper
    /// never returns. An error fails the spawn: no command runs
    /// unconfined.
    ///
    /// # Safety
    /// Only between fork and exec, in a single-threaded child.
    pub(super) unsafe fn enter(&self) -> io::Result<()> {
        let bridge = self.route.bridge.as_raw_fd();
        // SAFETY: plain syscalls on prepared memory (the caller's contract).
        unsafe {
            match self.confinement {
                // The command talks to the proxy's own listener; the
                // bridge is not its business.
                NetworkConfinement::PortOnly { .. } => {
                    close_unless_stdio(bridge);
                    Ok(())
                }
                NetworkConfinement::Namespace => self.enter_namespace(bridge),
            }
        }
    }

    unsafe fn enter_namespace(&self, bridge: libc::c_int) -> io::Result<()> {
        // SAFETY: plain syscalls on prepared memory (the caller's contract).
        unsafe {
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET))?;
            self.mapping.write();
            bring_loopback_up()?;
            let listener = listen_on_loopback(self.route.port)?;
            let mut pipe = [0 as libc::c_int; 2];
            check(libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC))?;
            let [read_end, write_end] = pipe;
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    libc::close(listener);
                    close_unless_stdio(bridge);
                    die_with_keeper(read_end, write_end)?;
                    // The user namespace gave this process every
                    // capability in it; it keeps what any sandboxed
                    // process keeps (`sandbox::caps`).
                    super::caps::drop_from_bounding_set();
                    super::caps::drop_from_own_sets()
                }
                command => keep(command, listener, bridge, write_end),
            }
        }
    }
}

/// Closes `fd` in this forked process unless it is a standard stream (a
/// Fido started with a closed stdin could have its bridge at 0; the
/// spawner has put the command's own stdio there by now).
unsafe fn close_unless_stdio(fd: libc::c_int) {
    if fd > libc::STDERR_FILENO {
        // SAFETY: closing this process's copy of the descriptor.
        unsafe { libc::close(fd) };
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets `IFF_UP` on `lo` (a new network namespace starts with it down).
unsafe fn bring_loopback_up() -> io::Result<()> {
    // SAFETY: a socket and two ioctls on a zeroed `ifreq` on the stack.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(socket)?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        let mut rc = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request);
        if rc == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        let result = check(rc);
        libc::close(socket);
        result
    }
}

/// `127.0.0.1:port` as the socket calls take it (built on the stack: no
/// allocation, so it serves between fork and exec).
pub(crate) fn loopback_address(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A non-blocking TCP listener on `127.0.0.1:port`.
unsafe fn listen_on_loopback(port: u16) -> io::Result<libc::c_int> {
    let address = loopback_address(port);
    // SAFETY: plain syscalls on the stack address above.
    unsafe {
        let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        let listener = libc::socket(libc::AF_INET, flags, 0);
        check(listener)?;
        let bound = libc::bind(
            listener,
            (&address as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let result = check(bound).and_then(|()| check(libc::listen(listener, 128)));
        if result.is_err() {
            libc::close(listener);
        }
        result.map(|()| listener)
    }
}

/// The keeper: forwards connections to the bridge until the command
/// exits, then ends as it ended.
unsafe fn keep(
    command: libc::pid_t,
    listener: libc::c_int,
    bridge: libc::c_int,
    write_end: libc::c_int,
) -> ! {
    // SAFETY: plain syscalls on stack memory; the process only forwards,
    // waits and exits from here on.
    unsafe {
        // Kernels before 5.3 have no pidfd: the keeper then looks every
        // 100 ms.
        let pidfd = libc::syscall(libc::SYS_pidfd_open, command, 0) as libc::c_int;
        // The spawner's exec status pipe among the rest, which must reach
        // EOF when the command execs.
        close_all_but([listener, bridge, write_end, pidfd]);
        let timeout = if pidfd < 0 { 100 } else { -1 };
        let mut watch = [
            libc::pollfd {
                fd: listener,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            let mut status = 0;
            match libc::waitpid(command, &mut status, libc::WNOHANG) {
                rc if rc == command => end_as(status),
                -1 if *libc::__errno_location() != libc::EINTR => libc::_exit(127),
                _ => {}
            }
            watch[0].revents = 0;
            watch[1].revents = 0;
            if libc::poll(watch.as_mut_ptr(), 2, timeout) > 0 {
                match watch[0].revents {
                    0 => {}
                    ready if ready & libc::POLLIN != 0 => forward(listener, bridge),
                    // A listener in error: poll ignores a negative fd.
                    _ => watch[0].fd = -1,
                }
            }
        }
    }
}

/// Closes every descriptor from 3 up but those of `keep` (negative ones
/// are ignored).
unsafe fn close_all_but<const N: usize>(mut keep: [libc::c_int; N]) {
    keep.sort_unstable();
    let mut from: libc::c_int = 3;
    for fd in keep {
        if fd < from {
            continue;
        }
        if fd > from {
            // SAFETY: closing descriptors of this process.
            unsafe { libc::close_range(from as libc::c_uint, (fd - 1) as libc::c_uint, 0) };
        }
        from = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::close_range(from as libc::c_uint, libc::c_uint::MAX, 0) };
}

/// One accepted connection, sent to the proxy and closed here.
unsafe fn forward(listener: libc::c_int, bridge: libc::c_int) {
    // SAFETY: plain syscalls on stack memory.
    unsafe {
        let connection = libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        );
        if connection < 0 {
            return;
        }
        // A proxy that is gone drops the connection: the client sees it
        // closed.
        send_descriptor(bridge, connection);
        libc::close(connection);
    }
}

/// A control message with room for exactly one descriptor: on Linux its
/// size is `CMSG_SPACE(sizeof(int))` and the descriptor sits at
/// `CMSG_DATA` (checked by a test).
#[repr(C)]
struct OneDescriptor {
    header: libc::cmsghdr,
    fd: libc::c_int,
}

/// Sends `fd` over `bridge` with a one-byte payload (the contract of
/// [`ProxyRoute`]); whether it went. Blocks while the proxy's queue is
/// full: a burst of connections waits rather than being dropped.
unsafe fn send_descriptor(bridge: libc::c_int, fd: libc::c_int) -> bool {
    // SAFETY: every pointer in `message` points at this frame's locals,
    // which outlive the call.
    unsafe {
        let mut payload = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        let mut control: OneDescriptor = std::mem::zeroed();
        control.header.cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        control.header.cmsg_level = libc::SOL_SOCKET;
        control.header.cmsg_type = libc::SCM_RIGHTS;
        control.fd = fd;
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = (&mut control as *mut OneDescriptor).cast();
        message.msg_controllen = size_of::<OneDescriptor>() as _;
        loop {
            let sent = libc::sendmsg(bridge, &message, libc::MSG_NOSIGNAL);
            if sent >= 0 || *libc::__errno_location() != libc::EINTR {
                return sent == 1;
            }
        }
    }
}

/// The proxy's side of [`send_descriptor`]: one descriptor from a message
/// of the bridge; `None` when the bridge is closed or the message held no
/// descriptor. Blocking.
pub(crate) fn receive_descriptor(bridge: &OwnedFd) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut payload = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: a recvmsg into this frame's locals; a descriptor the kernel
    // passed is this process's to own.
    unsafe {
        let mut control: OneDescriptor = std::mem::zeroed();
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = (&mut control as *mut OneDescriptor).cast();
        message.msg_controllen = size_of::<OneDescriptor>() as _;
        let received = libc::recvmsg(bridge.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC);
        let one = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
        let passed = received == 1
            && control.header.cmsg_len as usize == one
            && control.header.cmsg_level == libc::SOL_SOCKET
            && control.header.cmsg_type == libc::SCM_RIGHTS;
        passed.then(|| OwnedFd::from_raw_fd(control.fd))
    }
}

#[cfg(test)]
mod tests;
