//! `network = "allowlist"`: how a sandboxed command reaches the network
//! only through Fido's proxy (`net::proxy`).
//!
//! The route is the contract between the two halves: the proxy listens on
//! `127.0.0.1:port` in Fido's own network namespace, and takes client
//! connections as file descriptors sent over `bridge` (a UNIX datagram
//! socket; each message carries one connected stream socket by
//! `SCM_RIGHTS` and a one-byte payload). A command confined in a network
//! namespace of its own reaches the proxy through that bridge only.

use std::os::fd::OwnedFd;
use std::sync::Arc;

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
