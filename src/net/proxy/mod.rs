//! The allowlist proxy of `network = "allowlist"`: the only way a
//! sandboxed command reaches the network.
//!
//! It serves HTTP `CONNECT host:port` (a tunnel, for HTTPS and anything
//! else over TCP) and plain HTTP requests in absolute form (`GET
//! http://host/path`, forwarded to the origin in origin form). Every
//! target passes the same gate as `browse_url` ([`HopGate`]: the session's
//! `network_allow` / `network_deny` and its approval policy) and the same
//! private-address check on the addresses actually connected to
//! ([`super::address`]); anything else is answered `403` with
//! [`blocked_line`].
//!
//! Clients come two ways: TCP connections to `127.0.0.1:port`, and
//! connected sockets passed as descriptors over the bridge of the
//! [`ProxyRoute`] (the way out of a command's own network namespace, see
//! `sandbox::netns`). Both are served alike, each by a task of its own,
//! at most [`ProxyLimits::max_clients`] at once. Everything stops when the
//! [`Proxy`] is dropped (with the session).

mod bridge;
mod http;
mod serve;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Target;
use super::fetch::{HopGate, HopRefused, Reach};
use crate::sandbox::netns::ProxyRoute;

/// The proxy's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyLimits {
    /// A client must send its whole request head within this.
    pub head: Duration,
    /// Bytes of request head read at most.
    pub max_head: usize,
    /// Longest wait for the origin to accept the connection.
    pub connect: Duration,
    /// Clients served at once; one more is answered `503`.
    pub max_clients: usize,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        ProxyLimits {
            head: Duration::from_secs(10),
            max_head: 64 * 1024,
            connect: Duration::from_secs(10),
            max_clients: 256,
        }
    }
}

/// The variables that point a command's HTTP clients at the proxy (the
/// lower-case forms too: curl reads only `http_proxy` in lower case).
pub const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The variables that would let a client go around the proxy.
const BYPASS_VARIABLES: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// Points `command` at the proxy on `port`, with no host exempted.
pub fn route_command(command: &mut tokio::process::Command, port: u16) {
    let url = format!("http://127.0.0.1:{port}");
    for name in PROXY_VARIABLES {
        command.env(name, &url);
    }
    for name in BYPASS_VARIABLES {
        command.env_remove(name);
    }
}

/// The line a refused connection answers with, logs, and adds to the
/// output of the command that asked.
pub fn blocked_line(target: &Target) -> String {
    format!(
        "blocked by network allowlist: {} (add it to network_allow)",
        target.listed()
    )
}

/// A running proxy; dropping it stops the listener, the bridge and every
/// client.
pub struct Proxy {
    route: ProxyRoute,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1, admitting targets by
    /// `gate`. Must run inside a tokio runtime.
    pub fn start(gate: Arc<dyn HopGate>, limits: ProxyLimits) -> std::io::Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (ours, theirs) = bridge::pair()?;
        let shared = Arc::new(Shared::new(gate, limits));
        let stop = CancellationToken::new();
        tokio::spawn(serve::accept_loop(
            listener,
            Arc::clone(&shared),
            stop.clone(),
        ));
        tokio::spawn(bridge::receive_loop(
            ours,
            Arc::clone(&shared),
            stop.clone(),
        ));
        let route = ProxyRoute {
            port,
            bridge: Arc::new(theirs),
        };
        Ok(Proxy {
            route,
            shared,
            stop,
        })
    }

    /// What the sandbox needs to send commands' connections here.
    pub fn route(&self) -> ProxyRoute {
        self.route.clone()
    }

    pub fn port(&self) -> u16 {
        self.route.port
    }

    /// Clients being served right now.
    pub fn clients(&self) -> usize {
        self.shared.limits.max_clients - self.shared.slots.available_permits()
    }

    /// The refusals since `start`, one line each ([`blocked_line`]), in
    /// order and without repeats.
    pub fn blocked_since(&self, start: Instant) -> Vec<String> {
        self.shared.blocks.since(start)
    }
}

/// Targets whose admission is remembered at most; past it the gate is
/// asked every time (a command cannot grow the table without bound).
const MAX_REMEMBERED: usize = 1024;

/// One target's admission, made once: how it may be reached, or why not.
type Decision = OnceCell<Result<Reach, HopRefused>>;

/// What every client task shares.
pub(super) struct Shared {
    gate: Arc<dyn HopGate>,
    limits: ProxyLimits,
    slots: Arc<Semaphore>,
    blocks: BlockLog,
    /// Each target's admission, decided once per session: a host the
    /// person approved is not asked again, and connections to one host
    /// made at once wait for one answer instead of asking several times.
    decisions: Mutex<HashMap<Target, Arc<Decision>>>,
}

impl Shared {
    fn new(gate: Arc<dyn HopGate>, limits: ProxyLimits) -> Shared {
        Shared {
            gate,
            slots: Arc::new(Semaphore::new(limits.max_clients)),
            limits,
            blocks: BlockLog::default(),
            decisions: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `target` may be reached, and how (a listed host may be an
    /// IP address or resolve to a private one).
    async fn admit(&self, target: &Target, url: &str) -> Result<Reach, HopRefused> {
        let cell = self.decisions.lock().ok().and_then(|mut decisions| {
            if decisions.len() >= MAX_REMEMBERED && !decisions.contains_key(target) {
                return None;
            }
            Some(Arc::clone(decisions.entry(target.clone()).or_default()))
        });
        match cell {
            Some(cell) => cell
                .get_or_init(|| self.gate.admit(target, url))
                .await
                .clone(),
            None => self.gate.admit(target, url).await,
        }
    }
}

/// Refusals kept at most; a command that is refused more often than this
/// in one run still hears about the latest ones.
const MAX_BLOCKS: usize = 64;

/// The recent refusals, with when they happened.
///
/// `bash_exec` reads the ones made during its command's run to add them to
/// the output. A time window rather than a bridge per command: the route is
/// one per session (the sandbox is prepared once), and commands of one
/// session rarely overlap; when they do, each hears of the other's
/// refusals too, which is noise, never a missed refusal.
#[derive(Debug, Default)]
struct BlockLog {
    entries: Mutex<VecDeque<(Instant, String)>>,
}

impl BlockLog {
    fn record(&self, line: String) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() == MAX_BLOCKS {
                entries.pop_front();
            }
            entries.push_back((Instant::now(), line));
        }
    }

    fn since(&self, start: Instant) -> Vec<String> {
        let Ok(entries) = self.entries.lock() else {
            return Vec::new();
        };
        let mut lines: Vec<String> = Vec::new();
        for (_, line) in entries.iter().filter(|(at, _)| *at >= start) {
            if !lines.contains(line) {
                lines.push(line.clone());
            }
        }
        lines
    }
}
