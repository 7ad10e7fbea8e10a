//! A stand-in for the allowlist proxy (`net::proxy`) that a command
//! confined behind it reaches, and the judgement of how the connection
//! came. `fido sandbox check`'s allowlist role (`sandbox_check`) and this
//! module's tests confine their commands behind it.
//!
//! The stand-in keeps the proxy's contract ([`ProxyRoute`]): it listens on
//! `127.0.0.1:port` and takes connections as descriptors over a bridge.
//! Each connection gets [`STAND_IN_ANSWER`], so the child's `proxy-connect`
//! control passes only when its connection really reached the stand-in.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{NetworkConfinement, ProxyRoute, receive_descriptor};

/// What the stand-in answers every request with.
pub const STAND_IN_ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/// The proxy's stand-in: a listener thread and a bridge thread, and how
/// many connections came each way. The threads end with the process (the
/// bridge one when every sending end is closed).
#[derive(Debug)]
pub struct ProxyStandIn {
    route: ProxyRoute,
    bridged: Arc<AtomicUsize>,
    direct: Arc<AtomicUsize>,
}

impl ProxyStandIn {
    pub fn start() -> io::Result<ProxyStandIn> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let (ours, theirs) = bridge_pair()?;
        let bridged = Arc::new(AtomicUsize::new(0));
        let direct = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&bridged);
        std::thread::Builder::new()
            .name("proxy-stand-in-bridge".into())
            .spawn(move || {
                while let Some(fd) = receive_descriptor(&ours) {
                    count.fetch_add(1, Ordering::SeqCst);
                    answer(TcpStream::from(fd));
                }
            })?;
        let count = Arc::clone(&direct);
        std::thread::Builder::new()
            .name("proxy-stand-in-port".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    count.fetch_add(1, Ordering::SeqCst);
                    answer(stream);
                }
            })?;
        Ok(ProxyStandIn {
            route: ProxyRoute {
                port,
                bridge: Arc::new(theirs),
            },
            bridged,
            direct,
        })
    }

    /// The route a sandbox takes to this stand-in.
    pub fn route(&self) -> ProxyRoute {
        self.route.clone()
    }

    /// Connections so far: `(over the bridge, on the port)`.
    pub fn served(&self) -> (usize, usize) {
        (
            self.bridged.load(Ordering::SeqCst),
            self.direct.load(Ordering::SeqCst),
        )
    }

    /// What is wrong with how the connections came under `confinement`:
    /// in a namespace only the bridge leads here, without one only the
    /// port does.
    pub fn misrouted(&self, confinement: &NetworkConfinement) -> Option<String> {
        match (confinement, self.served()) {
            (NetworkConfinement::Namespace, (0, _)) => {
                Some("no connection reached the proxy over the bridge".to_owned())
            }
            (NetworkConfinement::Namespace, (_, 0)) => None,
            (NetworkConfinement::Namespace, (_, direct)) => Some(format!(
                "{direct} connection(s) reached the proxy's port from outside the namespace"
            )),
            (NetworkConfinement::PortOnly { .. }, (_, 0)) => {
                Some("no connection reached the proxy's port".to_owned())
            }
            (NetworkConfinement::PortOnly { .. }, _) => None,
        }
    }
}

/// A SEQPACKET socketpair (the proxy's end, the commands' end): its
/// messages keep their bounds, and the proxy's end sees the close of the
/// last sending end.
fn bridge_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut pair = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    // SAFETY: socketpair into a local array.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, pair.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) })
}

/// Reads a request head (within 5 s) and answers it.
fn answer(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let _ = stream.write_all(STAND_IN_ANSWER);
}
