//! Forbidden network and socket operations: the parent's loopback TCP
//! listener, a UDP datagram, and its UNIX listeners (abstract and pathname).

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{self as unix, UnixStream};
use std::time::Duration;

use super::super::fixture::ProbeTargets;
use super::super::table::{Probe, RefusedBy};
use super::needs;
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
