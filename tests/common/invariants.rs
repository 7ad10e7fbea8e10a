//! The prompt-cache contract, checked on the requests of one session.
//!
//! For the model requests of one fido process, in order:
//! 1. every tool result answers a tool call of the assistant message just
//!    before it, and every tool call is answered exactly once before the
//!    next user or assistant message (OpenAI: `tool` messages with
//!    `tool_call_id`; Anthropic: `tool_result` blocks in the next user
//!    message);
//! 2. `tools` serialises to the same bytes in every request;
//! 3. the stable head is the same in every request: `messages[0]` (OpenAI)
//!    or `system` (Anthropic);
//! 4. depending on [`History`], each request's `messages` extends the
//!    previous one.

use serde_json::Value;

use super::server::RecordedRequest;

/// How much the history of a session may change between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// Each request's messages start with the previous request's messages.
    AppendOnly,
    /// Each request's messages start with the messages of some earlier
    /// request: for sessions whose requests interleave several
    /// conversations (a delegated subagent forks the parent's history).
    /// Weaker than it looks: a history rewritten after its first request
    /// still extends that first request, so a rewrite passes as a fork.
    /// When a test can tell the conversations apart, check each one's
    /// requests with `AppendOnly` instead.
    Forking,
    /// The session compacts: only rules 1–3 hold.
    Compacting,
}

/// Panics, listing every problem, unless the model requests among
/// `requests` keep the invariants with an append-only history.
pub fn assert_conversation_invariants(requests: &[RecordedRequest]) {
    assert_conversation_invariants_with(requests, History::AppendOnly);
}

pub fn assert_conversation_invariants_with(requests: &[RecordedRequest], history: History) {
    if let Err(problems) = check_conversation(requests, history) {
        panic!(
            "conversation invariants broken ({history:?}):\n- {}",
            problems.join("\n- ")
        );
    }
}

/// Like [`assert_conversation_invariants_with`], returning the problems.
/// Requests that are not model requests (404s) are ignored.
pub fn check_conversation(
    requests: &[RecordedRequest],
    history: History,
) -> Result<(), Vec<String>> {
    let requests: Vec<&RecordedRequest> =
        requests.iter().filter(|r| r.is_model_request()).collect();
    let Some(first) = requests.first() else {
        return Err(vec!["no model requests were recorded".to_owned()]);
    };
    let mut problems = Vec::new();
    let anthropic = first.is_anthropic();
    if requests.iter().any(|r| r.is_anthropic() != anthropic) {
        problems.push("the session mixes OpenAI and Anthropic requests".to_owned());
        return Err(problems);
    }

    for (i, request) in requests.iter().enumerate() {
        if !request.body().get("messages").is_some_and(Value::is_array) {
            problems.push(format!("request {i}: body has no `messages` array"));
            continue;
        }
        let pairing = if anthropic {
            check_anthropic_pairing(request.messages())
        } else {
            check_openai_pairing(request.messages())
        };
        problems.extend(pairing.into_iter().map(|p| format!("request {i}: {p}")));
        let repeated = repeated_call_ids(request.messages(), anthropic);
        problems.extend(
            repeated
                .into_iter()
                .map(|id| format!("request {i}: tool call id {id:?} is used twice")),
        );
    }

    let tools = |r: &RecordedRequest| r.body().get("tools").unwrap_or(&Value::Null).to_string();
    let head = |r: &RecordedRequest| {
        let head = if anthropic {
            r.body().get("system")
        } else {
            r.messages().first()
        };
        head.unwrap_or(&Value::Null).to_string()
    };
    let (first_tools, first_head) = (tools(first), head(first));
    for (i, request) in requests.iter().enumerate().skip(1) {
        if tools(request) != first_tools {
            problems.push(format!(
                "request {i}: `tools` differs from request 0:\n  was: {}\n  now: {}",
                cut(&first_tools),
                cut(&tools(request))
            ));
        }
        let now = head(request);
        if now != first_head {
            let what = if anthropic { "`system`" } else { "messages[0]" };
            problems.push(format!(
                "request {i}: {what} differs from request 0:\n  was: {}\n  now: {}",
                cut(&first_head),
                cut(&now)
            ));
        }
    }

    let comparable: Vec<Vec<String>> = requests
        .iter()
        .map(|r| {
            r.messages()
                .iter()
                .map(|m| comparable(m, anthropic))
                .collect()
        })
        .collect();
    for i in 1..comparable.len() {
        match history {
            History::AppendOnly => {
                if let Err(p) = extends(&comparable[i], &comparable[i - 1]) {
                    problems.push(format!(
                        "request {i} does not extend request {}: {p}",
                        i - 1
                    ));
                }
            }
            History::Forking => {
                if !comparable[..i]
                    .iter()
                    .any(|e| extends(&comparable[i], e).is_ok())
                {
                    problems.push(format!("request {i} extends no earlier request"));
                }
            }
            History::Compacting => {}
        }
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// OpenAI: `tool` messages follow the assistant message whose calls they
/// answer, one per call, before any other message.
/// Call ids that more than one call of the conversation uses (the wire
/// formats need them unique: Anthropic refuses a repeated `tool_use` id).
fn repeated_call_ids(messages: &[Value], anthropic: bool) -> Vec<String> {
    let ids = messages.iter().flat_map(|m| {
        let calls = if anthropic {
            m.get("content")
        } else {
            m.get("tool_calls")
        };
        calls
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(move |c| !anthropic || c["type"] == "tool_use")
            .filter_map(|c| c.get("id").and_then(Value::as_str))
    });
    let mut seen = std::collections::HashSet::new();
    ids.filter(|id| !seen.insert(*id))
        .map(str::to_owned)
        .collect()
}

fn check_openai_pairing(messages: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    // Calls of the latest assistant message still waiting for their result.
    let mut pending: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            if let Some(p) = pending.iter().position(|c| c == id) {
                answered.push(pending.remove(p));
            } else if answered.iter().any(|c| c == id) {
                problems.push(format!(
                    "messages[{at}] answers tool call {id:?} a second time"
                ));
            } else {
                problems.push(format!(
                    "messages[{at}] answers tool call {id:?}, which the assistant message before it did not make"
                ));
            }
            continue;
        }
        if !pending.is_empty() {
            problems.push(format!(
                "tool call(s) {pending:?} unanswered before messages[{at}] ({role})"
            ));
        }
        answered.clear();
        pending = match role {
            "assistant" => message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| c.get("id").and_then(Value::as_str).unwrap_or("").to_owned())
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
    }
    if !pending.is_empty() {
        problems.push(format!(
            "tool call(s) {pending:?} unanswered at the end of the request"
        ));
    }
    problems
}

/// Anthropic: the user message right after an assistant message with
/// `tool_use` blocks holds one `tool_result` per call, and nothing else
/// holds `tool_result` blocks.
fn check_anthropic_pairing(messages: &[Value]) -> Vec<String> {
    let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m.get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
                    .map(|b| b.get(key).and_then(Value::as_str).unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let mut results = blocks(message, "tool_result", "tool_use_id");
        if role == "user" {
            for id in &results {
                match pending.iter().position(|c| c == id) {
                    Some(p) => {
                        pending.remove(p);
                    }
                    None => problems.push(format!(
                        "messages[{at}] has a tool_result for {id:?}, which the assistant message before it did not ask for (or was answered already)"
                    )),
                }
            }
            results.clear();
        }
        if !results.is_empty() {
            problems.push(format!("messages[{at}] ({role}) holds tool_result blocks"));
        }
        if !pending.is_empty() {
            problems.push(format!("tool_use {pending:?} unanswered in messages[{at}]"));
        }
        pending = if role == "assistant" {
            blocks(message, "tool_use", "id")
        } else {
            Vec::new()
        };
    }
    if !pending.is_empty() {
        problems.push(format!(
            "tool_use {pending:?} unanswered at the end of the request"
        ));
    }
    problems
}

/// A message as compared between requests. Anthropic cache breakpoints may
/// move with the end of the conversation without changing the cached
/// prefix, so `cache_control` is left out there.
fn comparable(message: &Value, anthropic: bool) -> String {
    if !anthropic {
        return message.to_string();
    }
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| k.as_str() != "cache_control")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(message).to_string()
}

/// Whether `earlier` is a prefix of `later`; else where they part.
fn extends(later: &[String], earlier: &[String]) -> Result<(), String> {
    if later.len() < earlier.len() {
        return Err(format!(
            "it has {} messages, the earlier one {}",
            later.len(),
            earlier.len()
        ));
    }
    match earlier.iter().zip(later).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(at) => Err(format!(
            "messages[{at}] changed:\n  was: {}\n  now: {}",
            cut(&earlier[at]),
            cut(&later[at])
        )),
    }
}

/// Long JSON cut for messages.
fn cut(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
