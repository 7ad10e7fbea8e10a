//! Where `browse_url` fetches: in the parent process always.
//!
//! [`Web`] is what the tool calls. The parent's [`Browser`] admits every
//! hop as the session's host lists and approvals say
//! ([`crate::net::admission`]) and fetches ([`crate::net::fetch`]); a
//! subagent, which has no network, has a `Web`
//! that sends the request to its parent over IPC, where the parent's
//! `Browser` runs it under the same policy.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::approval::Approvals;
use super::page::render;
use super::{ToolFuture, ToolOutput};
use crate::net::NetRules;
use crate::net::admission::Admission;
use crate::net::fetch::{self, FetchLimits, HopGate};

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

/// The parent's web access: what may be reached ([`Admission`]: the host
/// lists and the person to ask, shared with the allowlist proxy) and the
/// fetch limits.
pub struct Browser {
    admission: Arc<Admission<Approvals>>,
    limits: FetchLimits,
}

impl Browser {
    pub fn new(rules: NetRules, approvals: Approvals) -> Browser {
        Browser {
            admission: Arc::new(Admission::new(rules, approvals)),
            limits: FetchLimits::default(),
        }
    }

    /// The same browser with other limits (tests make them short).
    pub fn with_limits(mut self, limits: FetchLimits) -> Browser {
        self.limits = limits;
        self
    }

    /// The gate of every hop, for the allowlist proxy to share.
    pub fn admission(&self) -> Arc<dyn HopGate> {
        self.admission.clone()
    }
}

impl Web for Browser {
    fn browse<'a>(
        &'a self,
        request: BrowseRequest,
        cancel: &'a CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            match fetch::fetch(&request.url, &*self.admission, &self.limits, cancel).await {
                Ok(fetched) => render(fetched, request.max_bytes).await,
                Err(err) => ToolOutput::error(err.to_string()),
            }
        })
    }
}
