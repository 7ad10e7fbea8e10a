//! What the turn loop tells the live terminal UI beyond the event contract:
//! streamed text fragments and the part of a tool call's output worth
//! showing (a `patch`'s edits for its diff, the tail of a `bash_exec`, a
//! write subagent's diff).
//! Both travel as live-only events, which `fido exec --json` never prints.

use crate::protocol::{EventKind, ToolCall};
use crate::tools::ToolOutput;

/// Longest `patch` arguments worth sending for a diff; past this the UI
/// shows the one-line result only.
const MAX_PATCH_ARGUMENTS: usize = 256 * 1024;
/// Lines of `bash_exec` output kept for the UI (it shows a few, or all of
/// these when expanded).
const BASH_TAIL_LINES: usize = 200;

/// The live-only event for a finished call, for the tools the UI shows in
/// more than one line.
pub(super) fn tool_output(call: &ToolCall, output: &ToolOutput) -> Option<EventKind> {
    let content = match call.name.as_str() {
        "patch" if output.ok && call.arguments.len() <= MAX_PATCH_ARGUMENTS => String::new(),
        "bash_exec" => tail_lines(&output.content, BASH_TAIL_LINES).to_string(),
        "delegate" => change_set_diff(&output.content)?,
        _ => return None,
    };
    Some(EventKind::ToolOutput {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        content,
    })
}

/// The unified diff of a write subagent's change set, from its
/// `delegate_result` (capped by `delegate_diff_bytes`); `None` when the
/// subagent changed nothing.
fn change_set_diff(result: &str) -> Option<String> {
    let result: serde_json::Value = serde_json::from_str(result).ok()?;
    let diff = result.get("changes")?.get("diff")?.as_str()?;
    (!diff.is_empty()).then(|| diff.to_string())
}

/// The last `count` lines of `text`.
fn tail_lines(text: &str, count: usize) -> &str {
    let mut start = text.len();
    for _ in 0..count {
        match text[..start].rfind('\n') {
            Some(at) => start = at,
            None => return text,
        }
    }
    &text[start + 1..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_keep_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(tail_lines("a\nb\nc", 5), "a\nb\nc");
        assert_eq!(tail_lines("", 1), "");
    }

    #[test]
    fn only_patch_bash_exec_and_a_write_delegation_get_live_output() {
        let call = |name: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: "{}".into(),
        };
        let ok = ToolOutput::ok("fine");
        assert!(tool_output(&call("read_file"), &ok).is_none());
        assert!(tool_output(&call("patch"), &ToolOutput::error("no")).is_none());
        assert!(matches!(
            tool_output(&call("bash_exec"), &ok),
            Some(EventKind::ToolOutput { content, .. }) if content == "fine"
        ));
        let read_only = serde_json::json!({"type": "delegate_result"}).to_string();
        assert!(tool_output(&call("delegate"), &ToolOutput::ok(read_only)).is_none());
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let write = serde_json::json!({"changes": {"diff": diff}}).to_string();
        assert!(matches!(
            tool_output(&call("delegate"), &ToolOutput::ok(write)),
            Some(EventKind::ToolOutput { content, .. }) if content == diff
        ));
    }
}
