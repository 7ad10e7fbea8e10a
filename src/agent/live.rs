//! What the turn loop tells the front ends of a finished call: its
//! `tool_result`, with the tool's typed facts, then what the terminal UI
//! shows of its output beyond the event contract (a `patch`'s edits for
//! its diff, the tail of a `bash_exec`, a write subagent's diff) as a
//! live-only event, which `fido exec --json` never prints (nor the facts).

use crate::protocol::{EventKind, ToolCall};
use crate::text;
use crate::tools::ToolOutput;

/// Longest `patch` arguments worth sending for a diff; past this the UI
/// shows the one-line result only.
const MAX_PATCH_ARGUMENTS: usize = 256 * 1024;
/// Lines of `bash_exec` output kept for the UI (it shows a few, or all of
/// these when expanded).
const BASH_TAIL_LINES: usize = 200;

/// The events of a finished call: its `tool_result` (with the tool's
/// facts, which the `--json` stream leaves out), then, for the tools the
/// UI shows in more than one line, the live-only output.
pub(crate) fn result_events(call: &ToolCall, output: &ToolOutput) -> Vec<EventKind> {
    let result = EventKind::ToolResult {
        id: call.id.clone(),
        name: text::summary(&call.name, 64),
        ok: output.ok,
        summary: text::summary(&output.content, 120),
        facts: output.facts.clone(),
    };
    std::iter::once(result)
        .chain(tool_output(call, output))
        .collect()
}

/// The live-only event for a finished call, for the tools the UI shows in
/// more than one line.
fn tool_output(call: &ToolCall, output: &ToolOutput) -> Option<EventKind> {
    let content = match call.name.as_str() {
        "patch" if output.ok && call.arguments.len() <= MAX_PATCH_ARGUMENTS => String::new(),
        "bash_exec" => command_shown(output),
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

/// What the UI shows of a `bash_exec` result: the tail of the command's
/// output and the notes after the exit line, which the front ends draw
/// from the facts instead. Without facts (the command never ran) the text
/// is the refusal, shown whole.
fn command_shown(output: &ToolOutput) -> String {
    let text = &output.content;
    let Some(run) = output
        .facts
        .as_ref()
        .and_then(|facts| facts.command.as_ref())
    else {
        return tail_lines(text, BASH_TAIL_LINES).to_string();
    };
    let (Some(command_output), Some(own_lines)) =
        (text.get(..run.output_bytes), text.get(run.output_bytes..))
    else {
        return tail_lines(text, BASH_TAIL_LINES).to_string();
    };
    // The tool's own lines: `\n`, the exit line, then notes (the sandbox's,
    // the proxy's refusals, a loop warning).
    let notes = own_lines
        .strip_prefix('\n')
        .and_then(|own| own.split_once('\n'))
        .map_or("", |(_exit, notes)| notes.trim_start_matches('\n'));
    let mut shown = tail_lines(command_output, BASH_TAIL_LINES).to_string();
    if !notes.is_empty() {
        shown.push('\n');
        shown.push_str(notes);
    }
    shown
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

    /// A command's live output is its own output and the notes after the
    /// exit line; the exit line itself is the facts' (the front ends draw
    /// it from them). The result carries the facts.
    #[test]
    fn a_commands_live_output_leaves_its_exit_line_to_the_facts() {
        use crate::protocol::ToolFacts;
        use crate::protocol::tool_facts::{CommandExit, CommandRun};
        let call = ToolCall {
            id: "b1".into(),
            name: "bash_exec".into(),
            arguments: "{}".into(),
        };
        let facts = ToolFacts {
            command: Some(CommandRun {
                exit: CommandExit::Code { code: 3 },
                elapsed_ms: 1,
                output_bytes: "exit code: 0".len(),
            }),
            ..ToolFacts::default()
        };
        let content = "exit code: 0\nexit code: 3\nnote: the sandbox\n\nloop note";
        let output = ToolOutput {
            ok: false,
            ..ToolOutput::ok(content)
        }
        .with_facts(facts.clone());
        let events = result_events(&call, &output);
        assert!(matches!(
            &events[0],
            EventKind::ToolResult { ok: false, facts: Some(sent), .. } if **sent == facts
        ));
        assert!(matches!(
            &events[1],
            EventKind::ToolOutput { content, .. }
                if content == "exit code: 0\nnote: the sandbox\n\nloop note"
        ));
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
