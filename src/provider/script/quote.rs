//! A script's quotes of earlier tool results: `{{TOOL}}` in a turn's text
//! is the latest result of `TOOL` in the conversation the request carries,
//! so a scripted answer can use what a tool (or a subagent) really found.

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::Message;
use crate::protocol::delegate::DelegateStatus;

/// The most characters one quote inserts.
const MAX_QUOTE_CHARS: usize = 400;

/// `text` with every `{{TOOL}}` replaced by the latest result of `TOOL` in
/// `messages`; JSON-escaped when `text` is a JSON object.
pub(super) fn fill(text: &str, messages: &[Message]) -> String {
    let json = text.trim_start().starts_with('{');
    let mut filled = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        let name = &rest[open + 2..open + 2 + close];
        filled.push_str(&rest[..open]);
        let quoted = latest_result(name, messages);
        if json {
            let escaped = serde_json::to_string(&quoted).unwrap_or_default();
            filled.push_str(escaped.trim_matches('"'));
        } else {
            filled.push_str(&quoted);
        }
        rest = &rest[open + 2 + close + 2..];
    }
    filled.push_str(rest);
    filled
}

/// What the latest result of `tool` says, in one line.
fn latest_result(tool: &str, messages: &[Message]) -> String {
    let found = messages.iter().rev().find_map(|m| match m {
        Message::Tool { name, content, .. } if name == tool => Some(content.as_str()),
        _ => None,
    });
    let Some(content) = found else {
        return format!("(no {tool} result)");
    };
    let line = match serde_json::from_str::<Value>(content) {
        Ok(result) if tool == "delegate" => delegate_line(&result),
        _ => joined_lines(content),
    };
    crate::text::summary(&line, MAX_QUOTE_CHARS)
}

/// A `delegate_result`: its summary, or, when it failed, why.
fn delegate_line(result: &Value) -> String {
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(result, |v, key| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if matches!(
        DelegateStatus::deserialize(&result["status"]),
        Ok(DelegateStatus::Failed)
    ) {
        format!(
            "no subagent result ({}: {})",
            field(&["error", "code"]),
            field(&["error", "message"])
        )
    } else {
        field(&["summary"])
    }
}

/// The non-empty lines of a tool result, joined by spaces; `read_file`'s
/// line numbers, its notes (`[…`) and Markdown headings left out.
fn joined_lines(content: &str) -> String {
    content
        .lines()
        .map(|line| match line.split_once('\t') {
            Some((number, text)) if number.trim().parse::<u64>().is_ok() => text,
            _ => line,
        })
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('['))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: "c".into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
        }
    }

    #[test]
    fn quotes_the_latest_result_of_the_named_tool() {
        let messages = [
            tool("read_file", "     1\t# Title\n     2\t\n     3\told"),
            tool(
                "read_file",
                "     1\t# Title\n     2\tFido is \"an agent\".\n[… more lines follow; continue with offset=3]",
            ),
            tool(
                "delegate",
                r#"{"status": "completed", "summary": "it says hi"}"#,
            ),
        ];
        assert_eq!(
            fill(
                "README: {{read_file}}; sub: {{delegate}}; {{ripgrep}}",
                &messages
            ),
            "README: Fido is \"an agent\".; sub: it says hi; (no ripgrep result)"
        );
        assert_eq!(
            fill(r#"{"summary": "{{read_file}}"}"#, &messages),
            r#"{"summary": "Fido is \"an agent\"."}"#
        );
        assert_eq!(fill("no quotes {{ here", &messages), "no quotes {{ here");
    }

    #[test]
    fn a_failed_delegation_is_quoted_as_why() {
        let messages = [tool(
            "delegate",
            r#"{"status": "failed", "summary": "x", "error": {"code": "sandbox_unavailable", "message": "no user namespaces"}}"#,
        )];
        assert_eq!(
            fill("{{delegate}}", &messages),
            "no subagent result (sandbox_unavailable: no user namespaces)"
        );
    }
}
