//! `ripgrep` (stub, being written).

use super::{Invocation, Tool, ToolFuture, ToolKind, ToolOutput};
use crate::protocol::ToolSpec;

pub struct Ripgrep;

impl Tool for Ripgrep {
    fn name(&self) -> &'static str {
        "ripgrep"
    }
    fn kind(&self) -> ToolKind {
        ToolKind::ReadOnly
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ripgrep".into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    fn invoke<'a>(&'a self, _invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async { ToolOutput::error("not implemented") })
    }
}
