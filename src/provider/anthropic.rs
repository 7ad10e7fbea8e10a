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

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http;
use super::sse::{SseEvent, repair_lone_surrogates};
use super::streaming::{
    Answer, StreamAccumulator, StreamingProvider, WindowSource, WireCodec, completion,
    secret_header,
};
use super::{
    ChatRequest, Completion, FinishReason, HttpPolicy, ProviderError, ProviderNotice, ToolChoice,
};
use crate::protocol::{Message, ToolCall, ToolSpec, Usage};

/// The API version this mapping is written against.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A provider for Anthropic's streaming Messages API.
pub type AnthropicProvider = StreamingProvider<AnthropicCodec>;

/// The Messages wire format.
pub struct AnthropicCodec;

impl AnthropicProvider {
    /// `base_url` is what `/v1/messages` is appended to (normally
    /// `https://api.anthropic.com`). Without a key (or with an empty one) no
    /// `x-api-key` header is sent, for local proxies that add their own.
    /// `max_tokens` is required by the API and caps every answer.
    pub fn new(
        base_url: String,
        api_key: Option<String>,
        model: String,
        policy: HttpPolicy,
        max_tokens: u32,
    ) -> Result<Self, ProviderError> {
        if max_tokens == 0 {
            return Err(ProviderError::Config(
                "max_tokens for Anthropic must be at least 1".into(),
            ));
        }
        StreamingProvider::with_codec(AnthropicCodec, base_url, api_key, model, policy, max_tokens)
    }
}

impl WireCodec for AnthropicCodec {
    type Accumulator = MessagesStreamAccumulator;
    const NAME: &'static str = "anthropic";
    const PATH: &'static str = "/v1/messages";
    const MODELS_PATH: &'static str = "/v1/models";
    const REQUEST_KIND: &'static str = "messages";

    const FIXED_HEADERS: &'static [(&'static str, &'static str)] =
        &[("anthropic-version", ANTHROPIC_VERSION)];

    fn key_header(&self, api_key: &str) -> Result<(HeaderName, HeaderValue), ProviderError> {
        Ok((
            HeaderName::from_static("x-api-key"),
            secret_header(api_key)?,
        ))
    }

    /// The API refuses `max_tokens: 0`, so a request never asks for less
    /// than one token.
    fn encode(
        &self,
        model: &str,
        max_output_tokens: u32,
        request: ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        http::to_bytes(&request_body(model, max_output_tokens.max(1), request))
    }

    fn window_source(&self) -> WindowSource {
        WindowSource::ModelName
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
/// `max_tokens`, `system` (when there is one), `tools` and, when tools
/// are off for this answer, `tool_choice` (when any), `messages`, `stream`.
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
        if request.tool_choice == ToolChoice::None {
            body.insert("tool_choice".into(), json!({"type": "none"}));
        }
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

impl StreamAccumulator for MessagesStreamAccumulator {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ProviderNotice>, ProviderError> {
        self.push(event.event.as_deref(), &event.data)
    }

    /// The Messages API always streams: plain JSON is a proxy's or the
    /// API's error, or a reply this code cannot read.
    fn json_body(&mut self, body: &[u8]) -> Result<Vec<ProviderNotice>, ProviderError> {
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

    fn is_done(&self) -> bool {
        MessagesStreamAccumulator::is_done(self)
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        MessagesStreamAccumulator::finish(self)
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
        /// Bytes of the block-start event that carried `initial`, counted
        /// against the answer's size limit like the deltas.
        initial_bytes: usize,
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
        let repaired = repair_lone_surrogates(data);
        let value: Value =
            serde_json::from_str(&repaired).map_err(|e| ProviderError::MalformedStream {
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
            "content_block_start" => self.start_block(&value, data.len(), &mut notices)?,
            "content_block_delta" => self.apply_delta(&value, &mut notices)?,
            "message_delta" => self.message_delta(&value)?,
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
        self.check_size()?;
        Ok(notices)
    }

    /// `content_block_start`, `event_bytes` long: a text block may carry its
    /// first text, a tool-use block its name and whole input.
    fn start_block(
        &mut self,
        value: &Value,
        event_bytes: usize,
        notices: &mut Vec<ProviderNotice>,
    ) -> Result<(), ProviderError> {
        let index = block_index(value)?;
        let block = value.get("content_block").unwrap_or(&Value::Null);
        let block = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                self.push_text(str_field(block, "text"), notices);
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
                    initial_bytes: event_bytes,
                }
            }
            _ => Block::Other,
        };
        self.blocks.push((index, block));
        Ok(())
    }

    /// `content_block_delta`: more text, or more of a call's arguments.
    fn apply_delta(
        &mut self,
        value: &Value,
        notices: &mut Vec<ProviderNotice>,
    ) -> Result<(), ProviderError> {
        let index = block_index(value)?;
        let delta = value.get("delta").unwrap_or(&Value::Null);
        let block = self
            .blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b);
        match (delta.get("type").and_then(Value::as_str), block) {
            (Some("text_delta"), Some(Block::Text)) => {
                self.push_text(str_field(delta, "text"), notices);
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
        Ok(())
    }

    /// `message_delta`: the stop reason and the usage so far.
    fn message_delta(&mut self, value: &Value) -> Result<(), ProviderError> {
        if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
            self.stop_reason = Some(match reason {
                "end_turn" | "stop_sequence" => FinishReason::Stop,
                "tool_use" => FinishReason::ToolCalls,
                "max_tokens" => FinishReason::Length,
                "refusal" => FinishReason::Refusal,
                _ => FinishReason::Other,
            });
        }
        if let Some(usage) = value.get("usage") {
            self.take_usage(usage)?;
        }
        Ok(())
    }

    fn push_text(&mut self, text: &str, notices: &mut Vec<ProviderNotice>) {
        if !text.is_empty() {
            self.text.push_str(text);
            notices.push(ProviderNotice::TextDelta(text.to_owned()));
        }
    }

    fn check_size(&self) -> Result<(), ProviderError> {
        let mut calls = 0;
        let mut bytes = self.text.len();
        for (_, block) in &self.blocks {
            if let Block::ToolUse {
                name,
                json,
                initial_bytes,
                ..
            } = block
            {
                calls += 1;
                bytes += name.len() + json.len() + initial_bytes;
            }
        }
        super::check_answer_size(bytes, calls)
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
        let tool_calls: Vec<ToolCall> = self
            .blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                Block::ToolUse {
                    id,
                    name,
                    json,
                    initial,
                    ..
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
        let usage = Usage {
            // The server's counts: a hostile one may send u64::MAX.
            prompt_tokens: self
                .input_tokens
                .saturating_add(self.cache_read)
                .saturating_add(self.cache_creation),
            cached_tokens: self.cache_read,
            completion_tokens: self.output_tokens,
        };
        completion(Answer {
            done: self.done,
            text: self.text,
            tool_calls,
            finish_reason: self.stop_reason,
            usage,
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
mod tests;
