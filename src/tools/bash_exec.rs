//! `bash_exec` (stub, being written).

use super::{Invocation, Tool, ToolFuture, ToolKind, ToolOutput};
use crate::protocol::ToolSpec;

pub struct BashExec;

impl Tool for BashExec {
    fn name(&self) -> &'static str {
        "bash_exec"
    }
    fn kind(&self) -> ToolKind {
        ToolKind::ReadOnly
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "bash_exec".into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    fn invoke<'a>(&'a self, _invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async { ToolOutput::error("not implemented") })
    }
}
