//! Tool calls as the model sent them, made safe to run and to replay.
//!
//! - [`sanitize`]: a call whose arguments are not a JSON object (a truncated
//!   call, free text) is never run and never replayed verbatim: it gets an
//!   error result, and the history keeps `{}` in its place, so the next
//!   request parses on strict servers (llama.cpp answers HTTP 500 to invalid
//!   arguments in the history). The original goes to Fido's log only. A
//!   lone UTF-16 surrogate escape in the arguments (half an emoji) becomes
//!   U+FFFD first, so it costs one character, not the call.
//! - [`calls_from_text`]: with `tool_call_fallback`, a call the model wrote
//!   into its text (a fenced `json` block, Qwen's `<tool_call>` tags, or the
//!   bare object as the whole answer) is
//!   taken as a call, but only for an advertised tool whose arguments match
//!   its schema.
//! - [`misfit_text_call`]: a whole answer that is such a call with arguments
//!   that miss the schema is not run, and not taken as the answer either.

use std::borrow::Cow;

use serde_json::{Map, Value};
use tracing::warn;

use crate::provider::sse::repair_lone_surrogates;

use crate::protocol::{ToolCall, ToolSpec};
use crate::text;

/// The replayable calls, and for each the refusal to give instead of running
/// it (`None`: run it).
pub fn sanitize(calls: Vec<ToolCall>, cut_off: bool) -> (Vec<ToolCall>, Vec<Option<String>>) {
    let mut refusals = Vec::with_capacity(calls.len());
    let calls = calls
        .into_iter()
        .map(|mut call| {
            // JSON inside a JSON string: the provider's event was repaired,
            // but an escape in the arguments was only text then.
            if let Cow::Owned(repaired) = repair_lone_surrogates(&call.arguments) {
                call.arguments = repaired;
            }
            let parsed = serde_json::from_str::<Value>(&call.arguments);
            let refusal = match parsed {
                Ok(Value::Object(_)) => None,
                Ok(_) => Some(format!(
                    "the arguments of {} must be a JSON object; the call was not run. Send it again with an object of its parameters.",
                    call.name
                )),
                Err(err) if cut_off => Some(format!(
                    "the call to {} was cut off at the output limit (finish_reason length), so its arguments are incomplete ({err}); it was not run. Send a shorter call, or split the work.",
                    call.name
                )),
                Err(err) => Some(format!(
                    "the arguments of {} are not valid JSON ({err}); the call was not run. Send it again with a complete JSON object.",
                    call.name
                )),
            };
            if refusal.is_some() {
                // The model's text: escaped and capped (5 MB of bad
                // arguments are one short warning).
                warn!(
                    id = %text::for_log(&call.id, 100),
                    name = %text::for_log(&call.name, 100),
                    original = %text::for_log(&call.arguments, 200),
                    "invalid tool-call arguments; replaying {{}} instead"
                );
                call.arguments = "{}".into();
            }
            refusals.push(refusal);
            call
        })
        .collect();
    (calls, refusals)
}

/// Tool calls written into `text`, and the text without them; `None` when
/// there is no block naming an advertised tool with valid arguments.
pub fn calls_from_text(text: &str, tools: &[ToolSpec]) -> Option<(String, Vec<ToolCall>)> {
    // A small model also writes the bare object as its whole answer.
    if let Some((name, arguments)) = parse_call(text, tools) {
        let id = "text_call_0".to_string();
        return Some((
            String::new(),
            vec![ToolCall {
                id,
                name,
                arguments,
            }],
        ));
    }
    let mut calls = Vec::new();
    let mut rest = String::new();
    let mut remaining = text;
    while let Some((before, body, after)) = next_block(remaining) {
        match parse_call(body, tools) {
            Some((name, arguments)) => {
                rest.push_str(before);
                calls.push(ToolCall {
                    id: format!("text_call_{}", calls.len()),
                    name,
                    arguments,
                });
            }
            None => rest.push_str(&remaining[..remaining.len() - after.len()]),
        }
        remaining = after;
    }
    rest.push_str(remaining);
    if calls.is_empty() {
        return None;
    }
    tracing::info!(
        calls = calls.len(),
        "tool calls recognised in the text (tool_call_fallback)"
    );
    Some((rest.trim().to_string(), calls))
}

/// The next ```` ```json ```` fence or `<tool_call>` block: the text before
/// it, its body, the text after it.
fn next_block(text: &str) -> Option<(&str, &str, &str)> {
    let fence = text.find("```json").map(|at| (at, "```json", "```"));
    let tag = text
        .find("<tool_call>")
        .map(|at| (at, "<tool_call>", "</tool_call>"));
    let (at, open, close) = match (fence, tag) {
        (Some(f), Some(t)) => {
            if f.0 < t.0 {
                f
            } else {
                t
            }
        }
        (f, t) => f.or(t)?,
    };
    let body_start = at + open.len();
    let body_len = text[body_start..].find(close)?;
    let after = &text[body_start + body_len + close.len()..];
    Some((&text[..at], &text[body_start..body_start + body_len], after))
}

/// `{"name", "arguments"}` for an advertised tool whose schema the
/// arguments satisfy; the arguments as compact JSON.
fn parse_call(body: &str, tools: &[ToolSpec]) -> Option<(String, String)> {
    let (spec, arguments) = named_call(body, tools)?;
    if !matches_schema(&arguments, &spec.parameters) {
        tracing::info!(
            tool = %spec.name,
            arguments = %text::summary(&arguments.to_string(), 200),
            "a text tool call does not match the tool's schema; left as text"
        );
        return None;
    }
    Some((spec.name.clone(), arguments.to_string()))
}

/// A JSON object `{"name": ..., "arguments" (or "parameters"): ...}`
/// naming an advertised tool: its spec and the arguments.
fn named_call<'a>(body: &str, tools: &'a [ToolSpec]) -> Option<(&'a ToolSpec, Value)> {
    let value: Value = serde_json::from_str(&repair_lone_surrogates(body.trim())).ok()?;
    let name = value.get("name")?.as_str()?;
    let spec = tools.iter().find(|t| t.name == name)?;
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None => Value::Object(Map::new()),
        Some(Value::String(s)) => serde_json::from_str(&repair_lone_surrogates(s)).ok()?,
        Some(other) => other.clone(),
    };
    Some((spec, arguments))
}

/// An answer that is nothing but a call written as text (the bare object,
/// or one fenced or tagged block) to an advertised tool, with arguments
/// that miss its schema: the tool's name and what is wrong. The model meant
/// a call, so the text is no answer; it is not run either.
pub fn misfit_text_call(text: &str, tools: &[ToolSpec]) -> Option<(String, String)> {
    let text = text.trim();
    let body = match next_block(text) {
        Some((before, body, after)) if before.trim().is_empty() && after.trim().is_empty() => body,
        _ => text,
    };
    let (spec, arguments) = named_call(body, tools)?;
    let problem = schema_problem(&arguments, &spec.parameters)?;
    Some((spec.name.clone(), problem))
}

/// A shallow JSON Schema check: an object, every required property present,
/// no unknown property when `additionalProperties` is false, and each
/// property's `type` right. A `null` for an optional property stands for
/// its absence, as the tools read it (Qwen2.5-Coder-1.5B writes
/// `"budget_tokens": null` for `delegate`).
pub fn matches_schema(args: &Value, schema: &Value) -> bool {
    schema_problem(args, schema).is_none()
}

/// The first way `args` misses `schema` ([`matches_schema`]'s check).
fn schema_problem(args: &Value, schema: &Value) -> Option<String> {
    let Some(object) = args.as_object() else {
        return Some("the arguments are not a JSON object".into());
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    if let Some(missing) = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|key| !object.contains_key(*key))
    {
        return Some(format!("`{missing}` is required"));
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let is_required = |key: &str| required.into_iter().flatten().any(|r| r == key);
    object
        .iter()
        .filter(|(key, value)| !value.is_null() || is_required(key))
        .find_map(|(key, value)| match properties.and_then(|p| p.get(key)) {
            None if closed => Some(format!("`{key}` is not one of its parameters")),
            None => None,
            Some(property) => property
                .get("type")
                .and_then(Value::as_str)
                .filter(|kind| !has_type(value, kind))
                .map(|kind| format!("`{key}` must be of type {kind}")),
        })
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(args: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments: args.into(),
        }
    }

    fn read_file_spec() -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "read".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    #[test]
    fn a_lone_surrogate_in_the_arguments_becomes_a_replacement_character() {
        let (calls, refusals) = sanitize(
            vec![
                call(r#"{"path": "a\ud83d.rs"}"#),
                call(r#"{"path": "\ud83d\udc15.rs"}"#),
            ],
            false,
        );
        assert_eq!(refusals, vec![None, None]);
        assert_eq!(calls[0].arguments, r#"{"path": "a\ufffd.rs"}"#);
        let path: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(path["path"], "a\u{fffd}.rs");
        // A pair is a character and stays as it was.
        assert_eq!(calls[1].arguments, r#"{"path": "\ud83d\udc15.rs"}"#);
    }

    #[test]
    fn invalid_arguments_are_refused_and_replayed_as_an_empty_object() {
        let (calls, refusals) = sanitize(
            vec![
                call(r#"{"path": "src/lib.rs", "offset"#),
                call(r#"{"path": "a"}"#),
                call("[1]"),
            ],
            false,
        );
        assert_eq!(calls[0].arguments, "{}");
        assert!(refusals[0].as_ref().unwrap().contains("not valid JSON"));
        assert_eq!(calls[1].arguments, r#"{"path": "a"}"#);
        assert_eq!(refusals[1], None);
        assert_eq!(calls[2].arguments, "{}");
        assert!(refusals[2].as_ref().unwrap().contains("JSON object"));

        let (calls, refusals) = sanitize(vec![call(r#"{"path": "src/li"#)], true);
        assert_eq!(calls[0].arguments, "{}");
        assert!(refusals[0].as_ref().unwrap().contains("cut off"));
    }

    #[test]
    fn fenced_and_tagged_calls_are_recognised_for_advertised_tools_only() {
        let tools = [read_file_spec()];
        let text = "Let me look.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```\n";
        let (rest, calls) = calls_from_text(text, &tools).unwrap();
        assert_eq!(rest, "Let me look.");
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, r#"{"path":"src/lib.rs"}"#);

        let tagged = "<tool_call>\n{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"a\\\"}\"}\n</tool_call>";
        let (_, calls) = calls_from_text(tagged, &tools).unwrap();
        assert_eq!(calls[0].arguments, r#"{"path":"a"}"#);

        let bare = r#" {"name": "read_file", "arguments": {"path": "src/lib.rs", "offset": 1}} "#;
        let (rest, calls) = calls_from_text(bare, &tools).unwrap();
        assert_eq!((rest.as_str(), calls[0].name.as_str()), ("", "read_file"));

        // Unknown tool, wrong argument type, unknown property, plain JSON.
        for text in [
            "```json\n{\"name\": \"rm_rf\", \"arguments\": {}}\n```",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": 3}}\n```",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\", \"x\": 1}}\n```",
            "```json\n{\"path\": \"a\"}\n```",
            "no block at all",
        ] {
            assert_eq!(calls_from_text(text, &tools), None, "{text}");
        }
    }

    /// A call written in the text with half an emoji, in the object and
    /// in arguments given as a string: taken, with U+FFFD in its place.
    #[test]
    fn a_text_call_with_a_lone_surrogate_is_still_taken() {
        let tools = [read_file_spec()];
        let fenced =
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\\ud83d\"}}\n```";
        let (_, calls) = calls_from_text(fenced, &tools).unwrap();
        assert_eq!(calls[0].arguments, "{\"path\":\"a\u{fffd}\"}");
        let tagged = "<tool_call>{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"b\\\\udc15\\\"}\"}</tool_call>";
        let (_, calls) = calls_from_text(tagged, &tools).unwrap();
        assert_eq!(calls[0].arguments, "{\"path\":\"b\u{fffd}\"}");
    }

    #[test]
    fn schema_check() {
        let schema = read_file_spec().parameters;
        assert!(matches_schema(&json!({"path": "a", "offset": 2}), &schema));
        assert!(!matches_schema(&json!({"offset": 2}), &schema));
        assert!(!matches_schema(
            &json!({"path": "a", "offset": "2"}),
            &schema
        ));
        assert!(!matches_schema(&json!("a"), &schema));
        // A null optional property is absent; a null required one is not
        // there either.
        assert!(matches_schema(
            &json!({"path": "a", "offset": null}),
            &schema
        ));
        assert!(!matches_schema(&json!({"path": null}), &schema));
    }

    #[test]
    fn a_whole_answer_calling_a_tool_with_misfit_arguments_says_what_is_wrong() {
        let tools = [read_file_spec()];
        let misfit = |text: &str| misfit_text_call(text, &tools);
        let problem = |text: &str| misfit(text).map(|(name, problem)| format!("{name}: {problem}"));
        assert_eq!(
            problem(r#"{"name": "read_file", "parameters": {"path": "a", "offset": "2"}}"#),
            Some("read_file: `offset` must be of type integer".into())
        );
        assert_eq!(
            problem("```json\n{\"name\": \"read_file\", \"arguments\": {\"file\": \"a\"}}\n```"),
            Some("read_file: `path` is required".into())
        );
        assert_eq!(
            problem(
                r#"<tool_call>{"name": "read_file", "arguments": {"path": "a", "x": 1}}</tool_call>"#
            ),
            Some("read_file: `x` is not one of its parameters".into())
        );
        // A fitting call, another tool, prose around the block, no JSON.
        for text in [
            r#"{"name": "read_file", "arguments": {"path": "a"}}"#,
            r#"{"name": "rm_rf", "arguments": {"path": 1}}"#,
            "Try this:\n```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```",
            r#"{"name": "read_file", "arguments": {"path": 1}"#,
            "read_file takes a path",
        ] {
            assert_eq!(misfit(text), None, "{text}");
        }
    }
}
