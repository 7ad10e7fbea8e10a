//! The network as Fido's own requests see it: which hosts may be reached
//! (`network_allow` / `network_deny`, [`rules`]; with the person's answer
//! for the rest, [`admission`]), which addresses count as
//! private ([`address`]), the fetcher that applies both to every hop
//! of a web request ([`fetch`]), and the allowlist proxy that applies them
//! to sandboxed commands' connections ([`proxy`]).
//!
//! Kept apart from the tools so that `browse_url` and the proxy apply the
//! same rules and the same private-address check.

pub mod address;
pub mod admission;
pub mod fetch;
pub mod proxy;
mod resolve;
pub mod rules;
#[cfg(test)]
pub(crate) mod testing;

pub use rules::{HostRule, Listing, NetRules, Target};
