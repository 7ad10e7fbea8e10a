//! The network as Fido's own requests see it: which hosts may be reached
//! (`network_allow` / `network_deny`, [`rules`]), which addresses count as
//! private ([`address`]), and the fetcher that applies both to every hop
//! of a web request ([`fetch`]).
//!
//! Kept apart from the tools so that a later proxy for sandboxed commands
//! can apply the same rules and the same private-address check.

pub mod address;
pub mod fetch;
mod resolve;
pub mod rules;
#[cfg(test)]
pub(crate) mod testing;

pub use rules::{HostRule, Listing, NetRules, Target};
