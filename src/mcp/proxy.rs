//! The catalog's MCP tools inside a subagent: same names, descriptions and
//! schemas as the parent's (from the fork), but a call goes over the IPC
//! socket to the parent, which holds the server connections. The guard has
//! already refused the tools of servers that are not read-only (their kind
//! is side-effecting), and the parent checks again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::protocol::ToolSpec;
use crate::protocol::mcp::McpToolSpec;
use crate::tools::{Capability, Invocation, Tool, ToolFuture, ToolOutput};

pub type LinkFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// The way to the parent: sends one call, resolves with its result.
pub trait McpLink: Send + Sync {
    fn call<'a>(&'a self, tool: &'a str, arguments: String) -> LinkFuture<'a>;
}

/// One MCP tool of a subagent's catalog.
pub struct McpProxyTool {
    spec: McpToolSpec,
    link: Arc<dyn McpLink>,
}

/// The proxies for the fork's MCP tools, in its order.
pub fn proxy_tools(specs: Vec<McpToolSpec>, link: Arc<dyn McpLink>) -> Vec<Box<dyn Tool>> {
    specs
        .into_iter()
        .map(|spec| {
            Box::new(McpProxyTool {
                spec,
                link: link.clone(),
            }) as Box<dyn Tool>
        })
        .collect()
}

impl Tool for McpProxyTool {
    fn name(&self) -> &str {
        &self.spec.spec.name
    }

    fn capability(&self) -> Capability {
        super::tool::capability(self.spec.read_only)
    }

    fn spec(&self) -> ToolSpec {
        self.spec.spec.clone()
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments = invocation.args.to_string();
            tokio::select! {
                output = self.link.call(self.name(), arguments) => output,
                _ = invocation.call.cancel.cancelled() => ToolOutput::error("cancelled"),
            }
        })
    }
}
