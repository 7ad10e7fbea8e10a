//! Builders of SSE events as real providers send them, for [`Reply::sse`].
//!
//! Every function returns complete wire events (`"data: …\n\n"`), so a test
//! can splice hand-made or broken events between built ones. The OpenAI
//! builders mirror `chat.completion.chunk` streams with
//! `stream_options.include_usage`: a role chunk, content or tool-call
//! deltas, a chunk with `finish_reason`, a usage chunk with `choices: []`,
//! then `data: [DONE]`. The Anthropic builders mirror Messages streaming
//! (`message_start` … `message_stop`).
//!
//! Fragments are cut every [`FRAGMENT_BYTES`] bytes (on character
//! boundaries) so that clients must accumulate deltas.
//!
//! This file is shared with `benches/exec.rs` through `#[path]`: it only uses
//! `serde_json`.
//!
//! [`Reply::sse`]: super::server::Reply::sse

use serde_json::{Value, json};

/// Model name written into every chunk.
pub const MODEL: &str = "test-model";
/// Largest text or argument fragment in one delta.
pub const FRAGMENT_BYTES: usize = 4;

/// Token counts of one reply. `prompt` includes `cached` (OpenAI's way);
/// Anthropic events report `prompt - cached` as `input_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

impl TokenUsage {
    /// What the turn builders report unless told otherwise; distinct numbers
    /// so a test can tell which one was summed where.
    pub const DEFAULT: TokenUsage = TokenUsage {
        prompt: 100,
        completion: 20,
        cached: 60,
    };
}

impl Default for TokenUsage {
    fn default() -> Self {
        TokenUsage::DEFAULT
    }
}

/// `data: <json>\n\n`.
pub fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// `data: [DONE]\n\n`, the end of an OpenAI stream.
pub fn done() -> String {
    "data: [DONE]\n\n".to_owned()
}

/// `event: <name>\ndata: <json>\n\n`, an Anthropic-style named event.
pub fn named(event: &str, value: &Value) -> String {
    format!("event: {event}\ndata: {value}\n\n")
}

/// A `chat.completion.chunk` with one choice carrying `delta` and
/// `finish_reason`, and `usage: null` as OpenAI sends before the last chunk.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": [{
            "index": 0,
            "delta": delta,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": null,
    })
}

/// The last chunk of a stream with `include_usage`: no choices, only usage.
pub fn usage_chunk(usage: TokenUsage) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": [],
        "usage": {
            "prompt_tokens": usage.prompt,
            "completion_tokens": usage.completion,
            "total_tokens": usage.prompt + usage.completion,
            "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    })
}

/// A final answer: role chunk, `text` in small content deltas, finish
/// reason `stop`, usage, `[DONE]`.
pub fn text_turn(text: &str) -> Vec<String> {
    text_turn_with_usage(text, TokenUsage::DEFAULT)
}

pub fn text_turn_with_usage(text: &str, usage: TokenUsage) -> Vec<String> {
    text_pieces_turn(&fragments(text, FRAGMENT_BYTES), usage)
}

/// A final answer whose content deltas are exactly `pieces`.
pub fn text_pieces_turn(pieces: &[&str], usage: TokenUsage) -> Vec<String> {
    let mut events = vec![data(&chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    ))];
    events.extend(
        pieces
            .iter()
            .map(|piece| data(&chunk(json!({"content": piece}), None))),
    );
    events.push(data(&chunk(json!({}), Some("stop"))));
    events.push(data(&usage_chunk(usage)));
    events.push(done());
    events
}

/// Tool calls `(id, name, arguments JSON text)`: per call, a first delta with
/// index, id, type, name and the first argument fragment (the very first
/// also carries the role), then argument-only deltas; finish reason
/// `tool_calls`, usage, `[DONE]`.
pub fn tool_call_turn(calls: &[(&str, &str, &str)]) -> Vec<String> {
    tool_call_turn_with_usage(calls, TokenUsage::DEFAULT)
}

pub fn tool_call_turn_with_usage(calls: &[(&str, &str, &str)], usage: TokenUsage) -> Vec<String> {
    let mut events = Vec::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        let pieces = fragments(arguments, FRAGMENT_BYTES);
        let (first, rest) = pieces.split_first().map_or(("", &[][..]), |(f, r)| (*f, r));
        let mut delta = json!({
            "tool_calls": [{
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": first},
            }],
        });
        if index == 0 {
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
        }
        events.push(data(&chunk(delta, None)));
        for piece in rest {
            events.push(data(&chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            )));
        }
    }
    events.push(data(&chunk(json!({}), Some("tool_calls"))));
    events.push(data(&usage_chunk(usage)));
    events.push(done());
    events
}

/// `text` cut into pieces of at most `max_bytes` bytes, never inside a
/// character (a character longer than `max_bytes` is a piece of its own).
pub fn fragments(text: &str, max_bytes: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut end = 0;
    for (at, ch) in text.char_indices() {
        if at + ch.len_utf8() - start > max_bytes && end > start {
            pieces.push(&text[start..end]);
            start = end;
        }
        end = at + ch.len_utf8();
    }
    if end > start {
        pieces.push(&text[start..end]);
    }
    pieces
}

/// An Anthropic Messages stream with one text block and `end_turn`.
pub fn anthropic_text_turn(text: &str) -> Vec<String> {
    let mut events = vec![anthropic_message_start(TokenUsage::DEFAULT)];
    events.push(named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
    ));
    events.push(named("ping", &json!({"type": "ping"})));
    for piece in fragments(text, FRAGMENT_BYTES) {
        events.push(named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.push(named(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    events.extend(anthropic_message_end("end_turn", TokenUsage::DEFAULT));
    events
}

/// An Anthropic Messages stream with one `tool_use` block per call
/// `(id, name, input JSON text)` and `stop_reason: tool_use`.
pub fn anthropic_tool_use_turn(calls: &[(&str, &str, &str)]) -> Vec<String> {
    let mut events = vec![anthropic_message_start(TokenUsage::DEFAULT)];
    for (index, (id, name, input)) in calls.iter().enumerate() {
        events.push(named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for piece in fragments(input, FRAGMENT_BYTES) {
            events.push(named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.extend(anthropic_message_end("tool_use", TokenUsage::DEFAULT));
    events
}

/// `message_start` with the input side of `usage`.
pub fn anthropic_message_start(usage: TokenUsage) -> String {
    named(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
            "model": MODEL, "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": usage.prompt.saturating_sub(usage.cached),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": usage.cached,
                "output_tokens": 1,
            },
        }}),
    )
}

/// `message_delta` with `stop_reason` and output tokens, then `message_stop`.
pub fn anthropic_message_end(stop_reason: &str, usage: TokenUsage) -> Vec<String> {
    vec![
        named(
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                    "usage": {"output_tokens": usage.completion}}),
        ),
        named("message_stop", &json!({"type": "message_stop"})),
    ]
}

/// An OpenAI Responses stream event (`event:` and `data:` with its `type`).
fn responses_event(kind: &str, mut value: Value) -> String {
    value["type"] = json!(kind);
    named(kind, &value)
}

/// `response.completed` of response `id`, with small usage.
fn responses_completed(id: &str) -> String {
    responses_event(
        "response.completed",
        json!({"response": {"id": id, "usage": {
            "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }}}),
    )
}

/// A Responses API turn with one function call (the peer bench's Codex).
pub fn responses_function_call_turn(call_id: &str, name: &str, arguments: &str) -> Vec<String> {
    vec![
        responses_event("response.created", json!({"response": {"id": "resp_call"}})),
        responses_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": {
                "type": "function_call", "id": "fc_1", "call_id": call_id,
                "name": name, "arguments": arguments, "status": "completed",
            }}),
        ),
        responses_completed("resp_call"),
    ]
}

/// A Responses API turn answering `text` in one message.
pub fn responses_text_turn(text: &str) -> Vec<String> {
    let message = |status: &str, content: Value| {
        json!({"type": "message", "role": "assistant", "id": "msg_1",
               "status": status, "content": content})
    };
    vec![
        responses_event("response.created", json!({"response": {"id": "resp_text"}})),
        responses_event(
            "response.output_item.added",
            json!({"output_index": 0, "item": message("in_progress", json!([]))}),
        ),
        responses_event(
            "response.output_text.delta",
            json!({"output_index": 0, "content_index": 0, "item_id": "msg_1", "delta": text}),
        ),
        responses_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": message(
                "completed",
                json!([{"type": "output_text", "text": text, "annotations": []}]),
            )}),
        ),
        responses_completed("resp_text"),
    ]
}
