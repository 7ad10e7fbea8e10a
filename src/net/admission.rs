//! Which hosts may be reached, for `browse_url` and for sandboxed
//! commands' connections through the allowlist proxy alike: the session's
//! `network_deny` and `network_allow` first, then, for a host in neither,
//! whoever approves hosts ([`HostApproval`]: the session's approvals). One
//! [`Admission`] serves both, so a host the person allowed for one is
//! allowed for the other, and neither asks twice.

use std::future::Future;
use std::pin::Pin;

use super::fetch::{GateFuture, HopGate, HopRefused, Reach};
use super::{Listing, NetRules, Target};

pub type HostApprovalFuture<'a> = Pin<Box<dyn Future<Output = Result<(), HopRefused>> + Send + 'a>>;

/// Decides about a host in neither list. `Err` is the refusal, one
/// sentence for the model, as the lists' own refusals are.
pub trait HostApproval: Send + Sync {
    fn approve_host<'a>(&'a self, target: &'a Target, url: &'a str) -> HostApprovalFuture<'a>;
}

/// The session's host lists and who approves the hosts in neither.
pub struct Admission<A> {
    rules: NetRules,
    approval: A,
}

impl<A: HostApproval> Admission<A> {
    pub fn new(rules: NetRules, approval: A) -> Admission<A> {
        Admission { rules, approval }
    }

    async fn decide(&self, target: &Target, url: &str) -> Result<Reach, HopRefused> {
        match self.rules.listing(target) {
            Listing::Denied => Err(HopRefused(format!(
                "{target} is in network_deny, so browse_url may not fetch {url}"
            ))),
            Listing::Allowed => Ok(Reach::Listed),
            // A literal address is never asked about: whether it is
            // private is known only after the person said yes.
            Listing::Unlisted if target.ip().is_some() => Err(HopRefused(format!(
                "{url} names an IP address, which browse_url fetches only when it is listed: the user can allow it with {} in a trusted fido.toml or their user config",
                allow_hint(target)
            ))),
            Listing::Unlisted => self
                .approval
                .approve_host(target, url)
                .await
                .map(|()| Reach::Approved),
        }
    }
}

impl<A: HostApproval> HopGate for Admission<A> {
    fn admit<'a>(&'a self, target: &'a Target, url: &'a str) -> GateFuture<'a> {
        Box::pin(self.decide(target, url))
    }
}

/// The `network_allow` line that would list `target`.
pub fn allow_hint(target: &Target) -> String {
    format!("network_allow = [\"{}\"]", target.listed())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::net::rules::parse_list;

    /// Answers from a script and records what it was asked.
    struct Scripted {
        answer: Result<(), HopRefused>,
        asked: Mutex<Vec<String>>,
    }

    impl HostApproval for Scripted {
        fn approve_host<'a>(&'a self, target: &'a Target, _: &'a str) -> HostApprovalFuture<'a> {
            self.asked.lock().unwrap().push(target.to_string());
            Box::pin(std::future::ready(self.answer.clone()))
        }
    }

    fn admission(allow: &str, deny: &str, answer: Result<(), HopRefused>) -> Admission<Scripted> {
        let rules = NetRules {
            allow: parse_list(allow).unwrap(),
            deny: parse_list(deny).unwrap(),
        };
        let approval = Scripted {
            answer,
            asked: Mutex::new(Vec::new()),
        };
        Admission::new(rules, approval)
    }

    #[tokio::test]
    async fn the_lists_decide_first_and_only_an_unlisted_name_is_asked() {
        let gate = admission("docs.rs", "evil.example", Ok(()));
        let listed = Target::new("docs.rs", 443);
        assert_eq!(
            gate.admit(&listed, "https://docs.rs/").await,
            Ok(Reach::Listed)
        );
        let denied = Target::new("evil.example", 443);
        let refused = gate.admit(&denied, "https://evil.example/").await;
        assert!(refused.unwrap_err().0.contains("network_deny"));
        let unlisted = Target::new("example.com", 443);
        let approved = gate.admit(&unlisted, "https://example.com/").await;
        assert_eq!(approved, Ok(Reach::Approved));
        let address = Target::new("93.184.216.34", 443);
        let refused = gate.admit(&address, "https://93.184.216.34/").await;
        assert!(
            refused
                .unwrap_err()
                .0
                .contains("network_allow = [\"93.184.216.34\"]")
        );
        let asked = gate.approval.asked.lock().unwrap().clone();
        assert_eq!(asked, ["example.com:443"]);
    }

    #[tokio::test]
    async fn the_approvers_refusal_is_the_hops_refusal_word_for_word() {
        let gate = admission("", "", Err(HopRefused("the user denied this.".into())));
        let target = Target::new("example.com", 443);
        let refused = gate.admit(&target, "https://example.com/").await;
        assert_eq!(refused, Err(HopRefused("the user denied this.".into())));
    }
}
