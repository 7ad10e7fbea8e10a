//! Where `browse_url` fetches: in the parent process always.
//!
//! [`Web`] is what the tool calls. The parent's [`Browser`] applies the
//! session's host lists and approval policy to every hop and fetches
//! ([`crate::net::fetch`]); a subagent, which has no network, has a `Web`
//! that sends the request to its parent over IPC, where the parent's
//! `Browser` runs it under the same policy.

use tokio_util::sync::CancellationToken;

use super::approval::Approvals;
use super::browse_url::render;
use super::{ToolFuture, ToolOutput};
use crate::net::fetch::{self, FetchLimits, GateFuture, HopGate, HopRefused, Reach};
use crate::net::{Listing, NetRules, Target};

/// One `browse_url` call's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowseRequest {
    pub url: String,
    /// Bytes of text returned at most (already bounded by the tool).
    pub max_bytes: usize,
}

/// Runs `browse_url` requests.
pub trait Web: Send + Sync {
    fn browse<'a>(
        &'a self,
        request: BrowseRequest,
        cancel: &'a CancellationToken,
    ) -> ToolFuture<'a>;
}

/// The parent's web access: the host lists, the person to ask and the
/// fetch limits.
pub struct Browser {
    rules: NetRules,
    /// Asks for hosts in neither list (the session's policy and person).
    approvals: Approvals,
    limits: FetchLimits,
}

impl Browser {
    pub fn new(rules: NetRules, approvals: Approvals) -> Browser {
        Browser {
            rules,
            approvals,
            limits: FetchLimits::default(),
        }
    }

    /// The same browser with other limits (tests make them short).
    pub fn with_limits(mut self, limits: FetchLimits) -> Browser {
        self.limits = limits;
        self
    }
}

impl Web for Browser {
    fn browse<'a>(
        &'a self,
        request: BrowseRequest,
        cancel: &'a CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            match fetch::fetch(&request.url, self, &self.limits, cancel).await {
                Ok(fetched) => render(fetched, request.max_bytes).await,
                Err(err) => ToolOutput::error(err.to_string()),
            }
        })
    }
}

impl HopGate for Browser {
    fn admit<'a>(&'a self, target: &'a Target, url: &'a str) -> GateFuture<'a> {
        Box::pin(async move {
            match self.rules.listing(target) {
                Listing::Denied => Err(HopRefused(format!(
                    "{target} is in network_deny, so browse_url may not fetch {url}"
                ))),
                Listing::Allowed => Ok(Reach::Listed),
                Listing::Unlisted if target.ip().is_some() => Err(HopRefused(format!(
                    "{url} names an IP address, which browse_url fetches only when it is listed: the user can allow it with {} in a trusted fido.toml or their user config",
                    super::guard::allow_hint(target)
                ))),
                Listing::Unlisted => self
                    .approvals
                    .browse(target, url)
                    .await
                    .map(|()| Reach::Approved)
                    .map_err(|refusal| HopRefused(strip_error(refusal.content))),
            }
        })
    }
}

/// A refusal's text without its `Error: ` (the fetch error adds its own).
fn strip_error(content: String) -> String {
    match content.strip_prefix("Error: ") {
        Some(rest) => rest.to_string(),
        None => content,
    }
}
