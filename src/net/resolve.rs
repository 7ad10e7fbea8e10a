//! The DNS resolver of a web request: it resolves the name and keeps only
//! the addresses the request may connect to, so the check is made on the
//! addresses actually connected to (a name cannot resolve to a public
//! address for a check and to a private one for the connection).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::address::is_private;

/// Resolves names for one hop of a request.
pub(super) struct FilteringResolver {
    /// The host was listed in `network_allow`: private addresses are fine.
    pub allow_private: bool,
    /// Why the name was refused, for the message (reqwest wraps the
    /// resolver's error in its own).
    pub refusal: Arc<Mutex<Option<String>>>,
}

impl Resolve for FilteringResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let refusal = self.refusal.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (kept, refused) = keep_reachable(resolved, allow_private);
            if kept.is_empty() {
                let message = refusal_message(&host, &refused);
                if let Ok(mut slot) = refusal.lock() {
                    *slot = Some(message.clone());
                }
                return Err(message.into());
            }
            let addrs: Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

/// The addresses that may be connected to, and those refused.
pub(super) fn keep_reachable(
    resolved: Vec<SocketAddr>,
    allow_private: bool,
) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
    resolved
        .into_iter()
        .partition(|addr| allow_private || !is_private(addr.ip()))
}

pub(super) fn refusal_message(host: &str, refused: &[SocketAddr]) -> String {
    if refused.is_empty() {
        return format!("{host} did not resolve to any address");
    }
    let shown: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
    format!(
        "{host} resolves to a private address ({}), which is refused unless the host is listed in network_allow",
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        SocketAddr::new(text.parse().unwrap(), 0)
    }

    #[test]
    fn private_addresses_are_dropped_unless_the_host_is_listed() {
        let resolved = vec![addr("127.0.0.1"), addr("93.184.216.34"), addr("::1")];
        let (kept, refused) = keep_reachable(resolved.clone(), false);
        assert_eq!(kept, [addr("93.184.216.34")]);
        assert_eq!(refused, [addr("127.0.0.1"), addr("::1")]);
        let (kept, refused) = keep_reachable(resolved.clone(), true);
        assert_eq!(kept, resolved);
        assert!(refused.is_empty());
    }

    #[tokio::test]
    async fn localhost_is_refused_by_the_resolver_itself() {
        let resolver = FilteringResolver {
            allow_private: false,
            refusal: Arc::default(),
        };
        let name: Name = "localhost".parse().unwrap();
        let err = resolver.resolve(name).await.err().unwrap().to_string();
        assert!(err.contains("private address"), "{err}");
        let saved = resolver.refusal.lock().unwrap().clone().unwrap();
        assert_eq!(saved, err);
    }
}
