//! The catalog's MCP tools on the parent's side: `mcp__SERVER__TOOL`
//! calls the server through the hub. The guard sees a read-only server's
//! tools as read-only and every other server's as side-effecting, so a
//! subagent gets `permission_denied` and the main agent asks first when
//! the approval policy says so.

use std::sync::Arc;

use serde_json::Value;

use super::McpHub;
use crate::protocol::ToolSpec;
use crate::tools::guard::{self, Identity, InvocationContext};
use crate::tools::{Capability, Invocation, Tool, ToolFuture, ToolOutput};

/// One MCP tool of the parent's catalog.
pub struct McpTool {
    hub: Arc<McpHub>,
    index: usize,
}

impl McpTool {
    pub(super) fn new(hub: Arc<McpHub>, index: usize) -> McpTool {
        McpTool { hub, index }
    }

    fn entry(&self) -> &super::Entry {
        &self.hub.entries[self.index]
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.entry().spec.spec.name
    }

    fn capability(&self) -> Capability {
        capability(self.entry().spec.read_only)
    }

    fn spec(&self) -> ToolSpec {
        self.entry().spec.spec.clone()
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let entry = self.entry();
            let Value::Object(arguments) = invocation.args else {
                return ToolOutput::error(format!(
                    "{}: arguments must be a JSON object",
                    self.name()
                ));
            };
            if !entry.spec.read_only {
                let shown = Value::Object(arguments.clone()).to_string();
                let approved = invocation
                    .call
                    .env
                    .approvals
                    .mcp_call(self.name(), &entry.spec.server, &shown)
                    .await;
                if let Err(refusal) = approved {
                    return refusal.into_output();
                }
            }
            let cap = invocation.call.env.limits.bash_output_cap;
            self.hub
                .call_entry(self.index, arguments, invocation.call.cancel, cap)
                .await
        })
    }
}

/// What a server's tools may do, as its trusted configuration declares
/// it: read only, or anything the server reaches; outside every sandbox
/// either way.
pub fn capability(read_only: bool) -> Capability {
    if read_only {
        Capability::OUTSIDE_READ_ONLY
    } else {
        Capability::OUTSIDE
    }
}

/// The guard's `permission_denied` for a subagent's call of a tool of a
/// server that is not read-only.
pub fn not_for_subagents(tool: &str) -> ToolOutput {
    let subagent = InvocationContext {
        identity: Identity::Subagent {
            agent_id: "subagent".into(),
        },
        delegation_depth: 1,
        mode: crate::protocol::delegate::DelegateMode::ReadOnly,
    };
    // Not the subagent shell: an MCP server runs outside every sandbox.
    match guard::check(tool, Capability::OUTSIDE, &subagent, false) {
        Err(refusal) => refusal,
        Ok(()) => ToolOutput::error(format!("{tool} is not available to a subagent")),
    }
}

/// The arguments of a proxied call as a JSON object.
pub fn parse_object(
    tool: &str,
    arguments: &str,
) -> Result<serde_json::Map<String, Value>, ToolOutput> {
    if arguments.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) | Err(_) => Err(ToolOutput::error(format!(
            "{tool}: arguments must be a JSON object"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_servers_give_read_only_tools_and_the_others_are_refused_to_subagents() {
        assert_eq!(capability(true), Capability::OUTSIDE_READ_ONLY);
        assert_eq!(capability(false), Capability::OUTSIDE);
        let refused = not_for_subagents("mcp__fs__write");
        assert!(!refused.ok);
        let details = refused.details.unwrap();
        assert_eq!(details["error"]["code"], "permission_denied");
        assert!(
            details["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("mcp__fs__write is not available")
        );
    }

    #[test]
    fn proxied_arguments_must_be_an_object() {
        assert!(parse_object("t", "").unwrap().is_empty());
        assert_eq!(parse_object("t", r#"{"a":1}"#).unwrap()["a"], 1);
        for bad in ["[1]", "{", "3"] {
            let refused = parse_object("t", bad).unwrap_err();
            assert_eq!(refused.content, "Error: t: arguments must be a JSON object");
        }
    }
}
