//! Anthropic Messages (`POST {base}/v1/messages`), streaming, with prompt-cache
//! breakpoints.
//!
//! Mapping from our provider-neutral conversation:
//! - Leading `System` messages become the `system` block array; the last block
//!   carries `cache_control` (a later `System` message, which the agent loop
//!   never writes, is sent as user text).
//! - Consecutive `Tool` results become ONE user message of `tool_result`
//!   blocks; adjacent messages of the same role are merged, so roles alternate
//!   as the API requires. Empty text is dropped (the API refuses empty text
//!   blocks), and a message left without blocks is dropped.
//! - Assistant tool calls become `tool_use` blocks whose `input` is the parsed
//!   arguments object. Arguments that are not a JSON object are sent as `{}`:
//!   the API accepts only an object there, and the call's tool result (an
//!   error naming the bad arguments) already tells the model what went wrong.
//!   Our own history keeps the raw text.
//! - Cache breakpoints (`cache_control: ephemeral`, three of the four allowed):
//!   the system block, the last tool, and the last block of the last message,
//!   so each request reuses the conversation prefix the previous one cached.
//!
//! Invariants:
//! - [`request_body`] is pure and deterministic, like the OpenAI one.
//! - Stream parsing lives in [`MessagesStreamAccumulator`], free of HTTP.
//! - A stream that closes before `message_stop` and without any `stop_reason`
//!   is [`ProviderError::StreamTruncated`]; an `error` event is
//!   [`ProviderError::Api`].

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http::{self, StreamHandler};
use super::retry::with_retries;
use super::sse::SseEvent;
use super::{
    ChatRequest, Completion, CompletionFuture, FinishReason, HttpPolicy, NoticeSink, Provider,
    ProviderError, ProviderNotice,
};
use crate::protocol::{Message, ToolCall, ToolSpec, Usage};

/// The API version this mapping is written against.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A provider for Anthropic's streaming Messages API.
pub struct AnthropicProvider {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    model: String,
    max_tokens: u32,
    policy: HttpPolicy,
}

impl AnthropicProvider {
    /// `base_url` is what `/v1/messages` is appended to (normally
    /// `https://api.anthropic.com`). Without a key (or with an empty one) no
    /// `x-api-key` header is sent, for local proxies that add their own.
    pub fn new(
        base_url: String,
        api_key: Option<String>,
        model: String,
        policy: HttpPolicy,
        max_tokens: u32,
    ) -> Result<Self, ProviderError> {
        let url = http::join_url(&base_url, "/v1/messages");
        http::check_url(&url)?;
        if max_tokens == 0 {
            return Err(ProviderError::Config(
                "max_tokens for Anthropic must be at least 1".into(),
            ));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = api_key.filter(|k| !k.trim().is_empty()) {
            let mut value = HeaderValue::from_str(key.trim()).map_err(|_| {
                ProviderError::Config(
                    "the API key contains characters not allowed in a header".into(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        Ok(AnthropicProvider {
            client: http::build_client(&policy)?,
            url,
            headers,
            model,
            max_tokens,
            policy,
        })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        Box::pin(async move {
            let body = request_body(&self.model, self.max_tokens, request);
            let body = Bytes::from(http::to_bytes(&body)?);
            with_retries(&self.policy, notices, |attempt| {
                let body = body.clone();
                async move {
                    tracing::debug!(url = %self.url, attempt, bytes = body.len(), "messages request");
                    let mut handler = Handler {
                        accumulator: MessagesStreamAccumulator::default(),
                        notices,
                    };
                    http::post_stream(
                        &self.client,
                        &self.policy,
                        &self.url,
                        self.headers.clone(),
                        body,
                        &mut handler,
                    )
                    .await?;
                    handler.accumulator.finish()
                }
            })
            .await
        })
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The user turn placed before a conversation that opens with an assistant
/// message (a restored plan).
pub const RESTORED_SESSION_NOTE: &str =
    "[Fido: session restored; the saved workspace state follows]";

/// The JSON body for one request, keys in a fixed order: `model`,
/// `max_tokens`, `system` (when there is one), `tools` (when any),
/// `messages`, `stream`.
pub fn request_body(model: &str, max_tokens: u32, request: ChatRequest<'_>) -> Value {
    let leading_system = request
        .messages
        .iter()
        .take_while(|m| matches!(m, Message::System { .. }))
        .count();
    let (system, rest) = request.messages.split_at(leading_system);

    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("max_tokens".into(), Value::from(max_tokens));
    let mut system_blocks: Vec<Value> = system
        .iter()
        .filter_map(|m| match m {
            Message::System { content } if !content.is_empty() => {
                Some(json!({"type": "text", "text": content}))
            }
            _ => None,
        })
        .collect();
    if let Some(Value::Object(last)) = system_blocks.last_mut() {
        last.insert("cache_control".into(), ephemeral());
    }
    if !system_blocks.is_empty() {
        body.insert("system".into(), Value::Array(system_blocks));
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), tools_json(request.tools));
    }
    let mut messages = wire_messages(rest);
    // Anthropic requires the conversation to open with a user turn. A
    // restored plan opens with Fido's internal tool call, so a fixed note
    // comes first (fixed text keeps the bytes, and the cache, stable).
    if messages.first().is_some_and(|m| m["role"] == "assistant") {
        messages.insert(
            0,
            json!({"role": "user", "content": [{"type": "text", "text": RESTORED_SESSION_NOTE}]}),
        );
    }
    if let Some(Value::Object(last_block)) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.last_mut())
    {
        last_block.insert("cache_control".into(), ephemeral());
    }
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(true));
    Value::Object(body)
}

/// The `tools` array exactly as [`request_body`] sends it, with the cache
/// breakpoint on the last tool (what `fido tool list` prints for this
/// provider).
pub fn tools_json(tools: &[ToolSpec]) -> Value {
    let mut out: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            })
        })
        .collect();
    if let Some(Value::Object(last)) = out.last_mut() {
        last.insert("cache_control".into(), ephemeral());
    }
    Value::Array(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

/// Maps the conversation after the system prompt to alternating messages of
/// content blocks.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(Role, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::System { content } | Message::User { content } => {
                (Role::User, text_block(content).into_iter().collect())
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks: Vec<Value> = content
                    .as_deref()
                    .and_then(text_block)
                    .into_iter()
                    .collect();
                blocks.extend(tool_calls.iter().map(tool_use_block));
                (Role::Assistant, blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut block = Map::new();
                block.insert("type".into(), Value::from("tool_result"));
                block.insert("tool_use_id".into(), Value::from(tool_call_id.as_str()));
                block.insert("content".into(), Value::from(content.as_str()));
                if *is_error {
                    block.insert("is_error".into(), Value::Bool(true));
                }
                (Role::User, vec![Value::Object(block)])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, blocks)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": blocks})
        })
        .collect()
}

/// A text block, or nothing for text the API would refuse as empty.
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn tool_use_block(call: &ToolCall) -> Value {
    let input = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => Value::Object(Map::new()),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// Wires the accumulator to the HTTP stream and the notice sink.
struct Handler<'a> {
    accumulator: MessagesStreamAccumulator,
    notices: NoticeSink<'a>,
}

impl StreamHandler for Handler<'_> {
    fn event(&mut self, event: SseEvent) -> Result<bool, ProviderError> {
        for notice in self.accumulator.push(event.event.as_deref(), &event.data)? {
            (self.notices)(notice);
        }
        Ok(self.accumulator.is_done())
    }

    fn json_body(&mut self, body: &[u8]) -> Result<(), ProviderError> {
        let detail = http::excerpt(body);
        let is_error = serde_json::from_slice::<Value>(body)
            .ok()
            .is_some_and(|v| v.get("error").is_some());
        Err(if is_error {
            ProviderError::Api { message: detail }
        } else {
            ProviderError::MalformedStream {
                detail: format!("expected an event stream, got JSON: {detail}"),
            }
        })
    }
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
        /// `input` as given at block start, used when no delta follows.
        initial: Option<Value>,
    },
    /// Thinking and anything newer: not part of our message.
    Other,
}

/// Builds one [`Completion`] from the events of a Messages stream. Pure: no
/// I/O, no clock.
#[derive(Debug, Default)]
pub struct MessagesStreamAccumulator {
    text: String,
    /// Content blocks by their stream index, in order of appearance.
    blocks: Vec<(u64, Block)>,
    stop_reason: Option<FinishReason>,
    input_tokens: u64,
    cache_read: u64,
    cache_creation: u64,
    output_tokens: u64,
    done: bool,
}

impl MessagesStreamAccumulator {
    /// Takes one SSE event (its `event:` name and `data`) and returns what to
    /// show live. The kind is read from the data's `type`, else the name.
    pub fn push(
        &mut self,
        event: Option<&str>,
        data: &str,
    ) -> Result<Vec<ProviderNotice>, ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::MalformedStream {
                detail: format!("{e}: {}", http::shorten(data)),
            })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event)
            .unwrap_or_default();
        let mut notices = Vec::new();
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.take_usage(usage)?;
                }
            }
            "content_block_start" => {
                let index = block_index(&value)?;
                let block = value.get("content_block").unwrap_or(&Value::Null);
                let block = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = str_field(block, "text");
                        if !text.is_empty() {
                            self.text.push_str(text);
                            notices.push(ProviderNotice::TextDelta(text.to_owned()));
                        }
                        Block::Text
                    }
                    Some("tool_use") => {
                        let name = str_field(block, "name").to_owned();
                        if !name.is_empty() {
                            notices.push(ProviderNotice::ToolCallStarted { name: name.clone() });
                        }
                        Block::ToolUse {
                            id: str_field(block, "id").to_owned(),
                            name,
                            json: String::new(),
                            initial: block.get("input").cloned(),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let index = block_index(&value)?;
                let delta = value.get("delta").unwrap_or(&Value::Null);
                let block = self
                    .blocks
                    .iter_mut()
                    .rev()
                    .find(|(i, _)| *i == index)
                    .map(|(_, b)| b);
                match (delta.get("type").and_then(Value::as_str), block) {
                    (Some("text_delta"), Some(Block::Text)) => {
                        let text = str_field(delta, "text");
                        if !text.is_empty() {
                            self.text.push_str(text);
                            notices.push(ProviderNotice::TextDelta(text.to_owned()));
                        }
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(str_field(delta, "partial_json"));
                    }
                    (_, None) => {
                        return Err(ProviderError::MalformedStream {
                            detail: format!("delta for content block {index}, which never started"),
                        });
                    }
                    // Thinking, signatures, citations: not ours.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(match reason {
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" => FinishReason::Length,
                        _ => FinishReason::Other,
                    });
                }
                if let Some(usage) = value.get("usage") {
                    self.take_usage(usage)?;
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let message =
                    http::api_error_message(&value).unwrap_or_else(|| http::shorten(data));
                return Err(ProviderError::Api {
                    message: http::shorten(&message),
                });
            }
            // `ping`, `content_block_stop` (blocks are closed in `finish`) and
            // event kinds newer than this code.
            _ => {}
        }
        Ok(notices)
    }

    /// `message_stop` was seen: nothing more will come.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Usage fields present in an event replace what earlier events said
    /// (`message_delta` counts are cumulative).
    fn take_usage(&mut self, usage: &Value) -> Result<(), ProviderError> {
        let usage: WireUsage =
            serde_json::from_value(usage.clone()).map_err(|e| ProviderError::MalformedStream {
                detail: format!("usage: {e}"),
            })?;
        let fields = [
            (usage.input_tokens, &mut self.input_tokens),
            (usage.cache_read_input_tokens, &mut self.cache_read),
            (usage.cache_creation_input_tokens, &mut self.cache_creation),
            (usage.output_tokens, &mut self.output_tokens),
        ];
        for (value, slot) in fields {
            if let Some(value) = value {
                *slot = value;
            }
        }
        Ok(())
    }

    /// The completion, once the stream has ended.
    pub fn finish(self) -> Result<Completion, ProviderError> {
        if !self.done && self.stop_reason.is_none() {
            return Err(ProviderError::StreamTruncated);
        }
        let tool_calls: Vec<ToolCall> = self
            .blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                Block::ToolUse {
                    id,
                    name,
                    json,
                    initial,
                } => {
                    let arguments = if !json.trim().is_empty() {
                        json
                    } else {
                        match initial {
                            Some(Value::Object(o)) if !o.is_empty() => Value::Object(o).to_string(),
                            _ => "{}".to_owned(),
                        }
                    };
                    Some(ToolCall {
                        id,
                        name,
                        arguments,
                    })
                }
                Block::Text | Block::Other => None,
            })
            .collect();
        let finish_reason = match self.stop_reason.unwrap_or(FinishReason::Stop) {
            FinishReason::Stop if !tool_calls.is_empty() => FinishReason::ToolCalls,
            other => other,
        };
        Ok(Completion {
            message: Message::Assistant {
                content: Some(self.text).filter(|t| !t.is_empty()),
                tool_calls,
            },
            finish_reason,
            usage: Usage {
                prompt_tokens: self.input_tokens + self.cache_read + self.cache_creation,
                cached_tokens: self.cache_read,
                completion_tokens: self.output_tokens,
            },
        })
    }
}

fn block_index(value: &Value) -> Result<u64, ProviderError> {
    value
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| ProviderError::MalformedStream {
            detail: "content block event without an index".into(),
        })
}

fn str_field<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::provider::http::test_server::{Reply, TestServer};
    use crate::provider::sse::SseDecoder;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn tool_result(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
        }
    }

    fn tools() -> Vec<ToolSpec> {
        ["list_files", "read_file"]
            .iter()
            .map(|name| ToolSpec {
                name: (*name).into(),
                description: format!("{name} tool"),
                parameters: json!({"type": "object", "properties": {}}),
            })
            .collect()
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::System {
                content: "you are fido".into(),
            },
            Message::user("look around"),
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![
                    call("toolu_1", "list_files", "{}"),
                    call("toolu_2", "read_file", "{\"path\": \"README.md\"}"),
                    call("toolu_3", "read_file", "{not json"),
                ],
            },
            tool_result("toolu_1", "README.md", false),
            tool_result("toolu_2", "# Fido", false),
            tool_result("toolu_3", "invalid arguments", true),
            Message::user("and then?"),
        ]
    }

    #[test]
    fn request_body_mapping() {
        let messages = conversation();
        let tools = tools();
        let body = request_body(
            "claude",
            1024,
            ChatRequest {
                messages: &messages,
                tools: &tools,
            },
        );
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 1024,
                "system": [{"type": "text", "text": "you are fido", "cache_control": {"type": "ephemeral"}}],
                "tools": [
                    {"name": "list_files", "description": "list_files tool", "input_schema": {"type": "object", "properties": {}}},
                    {"name": "read_file", "description": "read_file tool", "input_schema": {"type": "object", "properties": {}},
                     "cache_control": {"type": "ephemeral"}},
                ],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "look around"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}},
                        {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "README.md"}},
                        {"type": "tool_use", "id": "toolu_3", "name": "read_file", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "README.md"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "# Fido"},
                        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "invalid arguments", "is_error": true},
                        {"type": "text", "text": "and then?", "cache_control": {"type": "ephemeral"}},
                    ]},
                ],
                "stream": true,
            })
        );
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "model",
                "max_tokens",
                "system",
                "tools",
                "messages",
                "stream"
            ]
        );
    }

    #[test]
    fn request_body_is_deterministic() {
        let messages = conversation();
        let tools = tools();
        let bytes = |m: &[Message]| {
            serde_json::to_vec(&request_body(
                "claude",
                1024,
                ChatRequest {
                    messages: m,
                    tools: &tools,
                },
            ))
            .unwrap()
        };
        let copied: Vec<Message> =
            serde_json::from_str(&serde_json::to_string(&messages).unwrap()).unwrap();
        assert_eq!(bytes(&messages), bytes(&messages));
        assert_eq!(bytes(&messages), bytes(&copied));
    }

    #[test]
    fn roles_alternate_and_empty_messages_vanish() {
        let messages = vec![
            Message::user("a"),
            Message::user("b"),
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: vec![],
            },
            Message::user(""),
            Message::user("c"),
            Message::Assistant {
                content: Some("x".into()),
                tool_calls: vec![],
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![call("t1", "list_files", "")],
            },
        ];
        let body = request_body(
            "m",
            1,
            ChatRequest {
                messages: &messages,
                tools: &[],
            },
        );
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                    {"type": "text", "text": "c"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_use", "id": "t1", "name": "list_files", "input": {},
                     "cache_control": {"type": "ephemeral"}},
                ]},
            ])
        );
    }

    #[test]
    fn tools_json_marks_only_the_last_tool() {
        let json = tools_json(&tools());
        assert!(json[0].get("cache_control").is_none());
        assert_eq!(json[1]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(tools_json(&[]), json!([]));
    }

    /// A stream as the API sends it (shape from the Messages streaming docs).
    const RECORDED: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\
\n\
event: ping\n\
data: {\"type\": \"ping\"}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I'll check \"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the file.\"}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"read_file\",\"input\":{}}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"READ\"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ME.md\\\"}\"}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":1}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"list_files\",\"input\":{}}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":2}\n\
\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\
\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\
\n";

    fn run(stream: &str) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
        let mut decoder = SseDecoder::default();
        let mut events = decoder.feed(stream.as_bytes()).unwrap();
        events.extend(decoder.finish().unwrap());
        let mut acc = MessagesStreamAccumulator::default();
        let mut notices = Vec::new();
        for event in events {
            match acc.push(event.event.as_deref(), &event.data) {
                Ok(n) => notices.extend(n),
                Err(e) => return (Err(e), notices),
            }
        }
        (acc.finish(), notices)
    }

    #[test]
    fn recorded_stream() {
        let (result, notices) = run(RECORDED);
        let completion = result.unwrap();
        assert_eq!(
            completion.message,
            Message::Assistant {
                content: Some("I'll check the file.".into()),
                tool_calls: vec![
                    call("toolu_01", "read_file", "{\"path\": \"README.md\"}"),
                    call("toolu_02", "list_files", "{}"),
                ],
            }
        );
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 2125,
                cached_tokens: 2000,
                completion_tokens: 89,
            }
        );
        assert_eq!(
            notices,
            vec![
                ProviderNotice::TextDelta("I'll check ".into()),
                ProviderNotice::TextDelta("the file.".into()),
                ProviderNotice::ToolCallStarted {
                    name: "read_file".into()
                },
                ProviderNotice::ToolCallStarted {
                    name: "list_files".into()
                },
            ]
        );
    }

    fn text_stream(stop_reason: &str, with_stop: bool) -> String {
        let mut s = String::from(
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
             data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
             data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
        );
        if !stop_reason.is_empty() {
            s.push_str(&format!(
                "data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop_reason}\"}},\"usage\":{{\"output_tokens\":2}}}}\n\n"
            ));
        }
        if with_stop {
            s.push_str("data: {\"type\":\"message_stop\"}\n\n");
        }
        s
    }

    #[test]
    fn stop_reasons_and_usage_without_cache_fields() {
        for (reason, expected) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("tool_use", FinishReason::ToolCalls),
            ("refusal", FinishReason::Other),
        ] {
            let completion = run(&text_stream(reason, true)).0.unwrap();
            assert_eq!(completion.finish_reason, expected, "{reason}");
            assert_eq!(
                completion.usage,
                Usage {
                    prompt_tokens: 3,
                    cached_tokens: 0,
                    completion_tokens: 2
                }
            );
        }
    }

    #[test]
    fn truncation_rules() {
        assert!(matches!(
            run(&text_stream("", false)).0,
            Err(ProviderError::StreamTruncated)
        ));
        // A stop reason without message_stop is a complete answer.
        let completion = run(&text_stream("end_turn", false)).0.unwrap();
        assert_eq!(
            completion.message,
            Message::Assistant {
                content: Some("ok".into()),
                tool_calls: vec![]
            }
        );
    }

    #[test]
    fn error_event_is_api_error() {
        let stream = format!(
            "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
            text_stream("", false)
        );
        match run(&stream).0 {
            Err(ProviderError::Api { message }) => {
                assert_eq!(message, "overloaded_error: Overloaded")
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn thinking_blocks_and_unknown_events_are_ignored() {
        let stream = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"x\"}}\n\n\
            data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
            data: {\"type\":\"something_new\",\"x\":1}\n\n\
            data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
            data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n\
            data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n\
            data: {\"type\":\"message_stop\"}\n\n";
        let (result, notices) = run(stream);
        let completion = result.unwrap();
        assert_eq!(
            completion.message,
            Message::Assistant {
                content: Some("done".into()),
                tool_calls: vec![]
            }
        );
        assert_eq!(notices, vec![ProviderNotice::TextDelta("done".into())]);
    }

    #[test]
    fn recorded_stream_survives_any_chunking() {
        let bytes = RECORDED.as_bytes();
        let expected = run(RECORDED).0.unwrap();
        for split in (0..bytes.len()).step_by(7) {
            let mut decoder = SseDecoder::default();
            let mut acc = MessagesStreamAccumulator::default();
            let mut events = decoder.feed(&bytes[..split]).unwrap();
            events.extend(decoder.feed(&bytes[split..]).unwrap());
            events.extend(decoder.finish().unwrap());
            for event in events {
                acc.push(event.event.as_deref(), &event.data).unwrap();
            }
            assert_eq!(acc.finish().unwrap(), expected);
        }
    }

    #[tokio::test]
    async fn over_http_with_headers() {
        let server = TestServer::start(vec![Reply::sse(RECORDED)]).await;
        let policy = HttpPolicy {
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_retries: 0,
            retry_base: Duration::from_millis(1),
            retry_max: Duration::from_millis(10),
        };
        let provider = AnthropicProvider::new(
            format!("{}/", server.url),
            Some("sk-ant".into()),
            "claude".into(),
            policy,
            2048,
        )
        .unwrap();
        assert_eq!(provider.name(), "anthropic");
        let seen = Mutex::new(Vec::new());
        let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
        let messages = conversation();
        let tools = tools();
        let request = ChatRequest {
            messages: &messages,
            tools: &tools,
        };
        let completion = provider.complete(request, &sink).await.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(seen.into_inner().unwrap().len(), 4);
        let recorded = &server.requests()[0];
        assert!(recorded.head.starts_with("post /v1/messages "));
        assert!(recorded.head.contains("x-api-key: sk-ant\r\n"));
        assert!(recorded.head.contains("anthropic-version: 2023-06-01\r\n"));
        assert!(recorded.head.contains("content-type: application/json\r\n"));
        let expected = serde_json::to_vec(&request_body("claude", 2048, request)).unwrap();
        assert_eq!(recorded.body, expected);
    }

    #[tokio::test]
    async fn overloaded_status_is_retryable_server_error() {
        let server = TestServer::start(vec![Reply::status(
            529,
            "content-type: application/json\r\n",
            "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
        )])
        .await;
        let policy = HttpPolicy {
            max_retries: 0,
            ..HttpPolicy::default()
        };
        let provider =
            AnthropicProvider::new(server.url.clone(), None, "claude".into(), policy, 10).unwrap();
        let messages = [Message::user("hi")];
        let result = provider
            .complete(
                ChatRequest {
                    messages: &messages,
                    tools: &[],
                },
                &|_| {},
            )
            .await;
        match result {
            Err(ProviderError::Server { status: 529, body }) => {
                assert_eq!(body, "overloaded_error: Overloaded")
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!server.requests()[0].head.contains("x-api-key"));
    }
}
