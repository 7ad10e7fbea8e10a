//! Forbidden network and socket operations: the parent's loopback TCP
//! listener, a UDP datagram, and its UNIX listeners (abstract and pathname);
//! behind the allowlist proxy, a DNS query, and the proxy itself (a
//! control).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{self as unix, UnixStream};
use std::time::Duration;

use super::super::probe::{Probe, RefusedBy};
use super::super::targets::ProbeTargets;
use super::needs;
use crate::sandbox::netns::stand_in::STAND_IN_ANSWER;
use crate::sandbox::policy::SandboxReport;
use crate::sandbox::ruleset::{NETWORK_ABI, SCOPE_ABI};

fn tcp_addr(targets: &ProbeTargets) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, targets.tcp_port))
}

/// TCP rules come with Landlock ABI [`NETWORK_ABI`].
fn no_tcp_rules(report: &SandboxReport) -> Option<String> {
    needs(report, report.network_restricted, "TCP rules", NETWORK_ABI)
}

/// Signal and abstract-socket scopes come with Landlock ABI [`SCOPE_ABI`].
pub(super) fn no_scopes(report: &SandboxReport) -> Option<String> {
    needs(report, report.scoped, "scopes", SCOPE_ABI)
}

pub(in super::super) const TCP_CONNECT: Probe = Probe::new("tcp-connect", |t| {
    TcpStream::connect_timeout(&tcp_addr(t), Duration::from_secs(2)).map(drop)
})
.with_unsupported(no_tcp_rules)
.refused_by(RefusedBy::SeccompOnEperm)
.with_side_effect(|f| f.tcp.accept().is_ok());

pub(in super::super) const TCP_BIND: Probe = Probe::new("tcp-bind", |_| {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map(drop)
})
.with_unsupported(no_tcp_rules)
.refused_by(RefusedBy::SeccompOnEperm);

pub(in super::super) const ABSTRACT_UNIX_CONNECT: Probe =
    Probe::new("abstract-unix-connect", |t| {
        let addr = unix::SocketAddr::from_abstract_name(t.abstract_name.as_bytes())?;
        UnixStream::connect_addr(&addr).map(drop)
    })
    .with_unsupported(no_scopes)
    .refused_by(RefusedBy::Always("landlock scope"))
    .with_side_effect(|f| f.unix.accept().is_ok());

pub(in super::super) const UDP_SEND: Probe = Probe::new("udp-send", |t| {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    socket.send_to(b"probe", tcp_addr(t)).map(drop)
})
.refused_by(RefusedBy::SeccompOnEperm);

pub(in super::super) const UNIX_PATHNAME_CONNECT: Probe =
    Probe::new("unix-pathname-connect", |t| {
        UnixStream::connect(t.unix_socket()).map(drop)
    })
    .refused_by(RefusedBy::SeccompOnEperm)
    .with_side_effect(|f| {
        f.pathname
            .as_ref()
            .is_some_and(|listener| listener.accept().is_ok())
    });

/// Behind the allowlist proxy: a request to the proxy's port on
/// 127.0.0.1 is answered by the parent's stand-in
/// ([`crate::sandbox::netns::stand_in`]), which only a connection that
/// reached it can read.
pub(in super::super) const PROXY_CONNECT: Probe = Probe::new("proxy-connect", |t| {
    let port = t
        .proxy_port
        .ok_or_else(|| io::Error::other("no proxy port given"))?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET http://fido-sandbox-check.invalid/ HTTP/1.1\r\nHost: fido-sandbox-check.invalid\r\n\r\n")?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    if answer == STAND_IN_ANSWER {
        Ok(())
    } else {
        Err(io::Error::other("the proxy's stand-in did not answer"))
    }
});

/// The resolver of `/etc/resolv.conf` (its first `nameserver`), port 53.
fn resolver() -> SocketAddr {
    let conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let server = conf
        .lines()
        .filter_map(|line| line.strip_prefix("nameserver"))
        .find_map(|rest| rest.trim().parse::<IpAddr>().ok())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    SocketAddr::new(server, 53)
}

/// A DNS query for `example.com` (type A) to the system's resolver: name
/// resolution must go through the proxy, which resolves for the command.
pub(in super::super) const DNS_LOOKUP: Probe = Probe::new("dns-lookup", |_| {
    const QUERY: &[u8] =
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
    let server = resolver();
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = std::net::UdpSocket::bind(local)?;
    socket.send_to(QUERY, server).map(drop)
})
.refused_by(RefusedBy::SeccompOnEperm);

/// A TCP Fast Open send to the parent's loopback listener: it connects
/// from `sendto` without `connect(2)`, past Landlock's port rule, so the
/// seccomp filter refuses it behind the allowlist proxy.
pub(in super::super) const TCP_FAST_OPEN: Probe = Probe::new("tcp-fast-open", |t| {
    let address = crate::sandbox::netns::loopback_address(t.tcp_port);
    // SAFETY: a socket, a sendto from a constant buffer to the stack
    // address above, and its close.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let sent = libc::sendto(
            fd,
            b"x".as_ptr().cast(),
            1,
            libc::MSG_FASTOPEN,
            (&address as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let result = if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        };
        libc::close(fd);
        result
    }
})
.refused_by(RefusedBy::SeccompOnEperm)
.with_side_effect(|f| f.tcp.accept().is_ok());
