//! `browse_url`: a web page as readable text.
//!
//! The fetch is [`super::web`]'s (always in the parent process, under the
//! host lists and the approval policy), and what the model reads of the
//! answer is [`super::page`]'s. Here are the tool's arguments and bounds.

use std::borrow::Cow;

use super::Capability;
use super::web::BrowseRequest;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;

/// Bytes of text returned when the call names no `max_bytes`.
pub const DEFAULT_MAX_BYTES: usize = 100_000;
pub use super::page::HARD_MAX_BYTES;

pub struct BrowseUrl;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        url: String,
        #[schema(minimum = 1)]
        #[serde(default)]
        max_bytes: Option<usize>,
    }
}

impl TypedTool for BrowseUrl {
    const NAME: &'static str = super::names::BROWSE_URL;
    const CAPABILITY: Capability = Capability {
        network: true,
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        format!(
            "Fetch an http(s) URL as text (HTML as Markdown; binary refused) with its final URL, status and content type. Up to {DEFAULT_MAX_BYTES} bytes, or max_bytes (at most {HARD_MAX_BYTES}). Unlisted hosts need the user's approval."
        )
        .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(web) = &call.env.web else {
                return ToolOutput::error("browse_url is not available in this session");
            };
            let request = BrowseRequest {
                url: args.url,
                max_bytes: args
                    .max_bytes
                    .unwrap_or(DEFAULT_MAX_BYTES)
                    .clamp(1, HARD_MAX_BYTES),
            };
            web.browse(request, call.cancel).await
        })
    }
}

#[cfg(test)]
#[path = "browse_url_tests.rs"]
mod tests;
