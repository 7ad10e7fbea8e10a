//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`),
//! streaming: hosted APIs and local servers (llama.cpp, Ollama, vLLM) alike.
//!
//! Invariants:
//! - [`request_body`] is a pure function of the model, the conversation and the
//!   catalog: the same input serialises to the same bytes, so the server can
//!   reuse its cached prompt prefix.
//! - Stream parsing lives in [`ChatStreamAccumulator`], which knows nothing of
//!   HTTP; the provider only feeds it SSE `data` and forwards its notices.
//! - A stream that closes before both `[DONE]` and any `finish_reason` is
//!   [`ProviderError::StreamTruncated`] (retryable); one that gave a
//!   `finish_reason` and then closed without `[DONE]` is complete.
//! - Tool calls are returned whenever they were streamed, whatever the
//!   `finish_reason` said; a call with blank arguments gets `{}`.

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

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

/// A provider for any server that speaks OpenAI's streaming Chat Completions.
pub type OpenAiProvider = StreamingProvider<OpenAiCodec>;

/// The request field that carries the output cap: hosted OpenAI wants
/// `max_completion_tokens` (its reasoning models refuse `max_tokens`); local
/// servers (llama.cpp, Ollama, vLLM) all read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapField {
    MaxTokens,
    MaxCompletionTokens,
}

/// The Chat Completions wire format, for the server at one base URL.
pub struct OpenAiCodec {
    cap_field: CapField,
}

impl OpenAiProvider {
    /// `base_url` is what `/chat/completions` is appended to (a trailing slash
    /// is ignored), e.g. `http://127.0.0.1:8080/v1`. An empty `api_key` counts
    /// as none: no `Authorization` header is sent.
    pub fn new(
        base_url: String,
        api_key: Option<String>,
        model: String,
        policy: HttpPolicy,
    ) -> Result<Self, ProviderError> {
        let cap_field = if base_url.starts_with("https://api.openai.com") {
            CapField::MaxCompletionTokens
        } else {
            CapField::MaxTokens
        };
        StreamingProvider::with_codec(
            OpenAiCodec { cap_field },
            base_url,
            api_key,
            model,
            policy,
            super::limits::DEFAULT_MAX_OUTPUT_TOKENS,
        )
    }
}

impl WireCodec for OpenAiCodec {
    type Accumulator = ChatStreamAccumulator;
    const NAME: &'static str = "openai";
    const PATH: &'static str = "/chat/completions";
    const REQUEST_KIND: &'static str = "chat completions";

    const FIXED_HEADERS: &'static [(&'static str, &'static str)] = &[];

    fn key_header(&self, api_key: &str) -> Result<(HeaderName, HeaderValue), ProviderError> {
        Ok((AUTHORIZATION, secret_header(&format!("Bearer {api_key}"))?))
    }

    fn encode(
        &self,
        model: &str,
        max_output_tokens: u32,
        request: ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        let request = ChatRequest {
            max_output_tokens: Some(max_output_tokens),
            ..request
        };
        request_bytes_with(model, request, self.cap_field)
            .map_err(|err| ProviderError::Config(format!("cannot encode the request: {err}")))
    }

    /// Hosted OpenAI has no endpoint for the window: its models are known
    /// by name instead.
    fn window_source(&self) -> WindowSource {
        match self.cap_field {
            CapField::MaxCompletionTokens => WindowSource::ModelName,
            CapField::MaxTokens => WindowSource::Server,
        }
    }
}

/// The JSON body for one request, keys in a fixed order: `model`,
/// `messages`, `tools` and `tool_choice` (when there are tools), `stream`,
/// `stream_options`. Serialised straight from the borrowed conversation (no
/// intermediate `Value`, which would copy every string of a long session).
pub fn request_bytes(model: &str, request: ChatRequest<'_>) -> Result<Vec<u8>, serde_json::Error> {
    request_bytes_with(model, request, CapField::MaxTokens)
}

/// [`request_bytes`] with the output cap (when the request has one) in
/// `cap_field`, after `stream_options`.
pub fn request_bytes_with(
    model: &str,
    request: ChatRequest<'_>,
    cap_field: CapField,
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&WireBody::new(model, request, cap_field))
}

/// [`request_bytes`] as a JSON value (tests, inspection).
pub fn request_body(model: &str, request: ChatRequest<'_>) -> Value {
    serde_json::to_value(WireBody::new(model, request, CapField::MaxTokens)).unwrap_or_default()
}

/// The `tools` array exactly as [`request_body`] sends it (what
/// `fido tool list` prints for this provider).
pub fn tools_json(tools: &[ToolSpec]) -> Value {
    serde_json::to_value(tools.iter().map(WireTool::new).collect::<Vec<_>>()).unwrap_or_default()
}

#[derive(Serialize)]
struct WireBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

impl<'a> WireBody<'a> {
    fn new(model: &'a str, request: ChatRequest<'a>, cap_field: CapField) -> Self {
        let cap = request.max_output_tokens;
        WireBody {
            model,
            messages: request.messages.iter().map(WireMessage::new).collect(),
            tools: request.tools.iter().map(WireTool::new).collect(),
            tool_choice: (!request.tools.is_empty()).then_some(request.tool_choice),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_tokens: cap.filter(|_| cap_field == CapField::MaxTokens),
            max_completion_tokens: cap.filter(|_| cap_field == CapField::MaxCompletionTokens),
        }
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireTool<'a> {
    fn new(tool: &'a ToolSpec) -> Self {
        WireTool {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` only next to tool calls: without them, OpenAI-compatible
        /// servers require content, so an empty answer is `""`.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    // The wire format has no error flag; the content already says it.
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> WireMessage<'a> {
    fn new(message: &'a Message) -> Self {
        match message {
            Message::System { content } => WireMessage::System { content },
            Message::User { content } => WireMessage::User { content },
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let text = content.as_deref().filter(|c| !c.is_empty());
                WireMessage::Assistant {
                    content: if tool_calls.is_empty() {
                        Some(text.unwrap_or(""))
                    } else {
                        text
                    },
                    tool_calls: tool_calls
                        .iter()
                        .map(|call| WireCall {
                            id: &call.id,
                            kind: "function",
                            function: WireCallFunction {
                                name: &call.name,
                                arguments: &call.arguments,
                            },
                        })
                        .collect(),
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => WireMessage::Tool {
                tool_call_id,
                content,
            },
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl StreamAccumulator for ChatStreamAccumulator {
    /// An `error` event is the server's report, not a chunk.
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ProviderNotice>, ProviderError> {
        if event.event.as_deref() == Some("error") {
            return Err(ProviderError::Api {
                message: error_text(&event.data),
            });
        }
        self.push(&event.data)
    }

    fn json_body(&mut self, body: &[u8]) -> Result<Vec<ProviderNotice>, ProviderError> {
        self.push_complete_response(body)
    }

    fn is_done(&self) -> bool {
        ChatStreamAccumulator::is_done(self)
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        ChatStreamAccumulator::finish(self)
    }
}

fn error_text(data: &str) -> String {
    serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|v| http::api_error_message(&v))
        .map_or_else(|| http::shorten(data), |m| http::shorten(&m))
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// The model's reasoning, as DeepSeek, vLLM and llama.cpp stream it.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// The model's reasoning, as OpenRouter and Ollama stream it.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// The model's refusal, which OpenAI sends apart from the content.
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Builds one [`Completion`] from the `data` of a Chat Completions stream.
/// Pure: no I/O, no clock.
#[derive(Debug, Default)]
pub struct ChatStreamAccumulator {
    content: String,
    calls: Vec<PartialCall>,
    /// Wire `index` → position in `calls`. Remapped when a server reuses an
    /// index for a call with a different id (each call sent whole).
    slots: Vec<(u64, usize)>,
    /// The call the last fragment went to, for deltas without an index.
    last_call: Option<usize>,
    finish_reason: Option<FinishReason>,
    /// The model sent a refusal: it is the answer's text, and the answer
    /// ends as refused whatever its finish reason said.
    refused: bool,
    usage: Usage,
    done: bool,
}

impl ChatStreamAccumulator {
    /// Takes the `data` of one SSE event and returns what to show live.
    pub fn push(&mut self, data: &str) -> Result<Vec<ProviderNotice>, ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let repaired = repair_lone_surrogates(data);
        let chunk: Chunk =
            serde_json::from_str(&repaired).map_err(|e| ProviderError::MalformedStream {
                detail: format!("{e}: {}", http::shorten(data)),
            })?;
        self.push_chunk(chunk)
    }

    /// Takes a whole non-streaming response (`choices[].message`), for
    /// servers that answer `"stream": true` with plain JSON.
    pub fn push_complete_response(
        &mut self,
        body: &[u8],
    ) -> Result<Vec<ProviderNotice>, ProviderError> {
        let text = String::from_utf8_lossy(body);
        let mut value: Value =
            serde_json::from_str(&repair_lone_surrogates(&text)).map_err(|e| {
                ProviderError::MalformedStream {
                    detail: format!("{e}: {}", http::shorten(&text)),
                }
            })?;
        if let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) {
            for choice in choices {
                if let Some(object) = choice.as_object_mut()
                    && let Some(message) = object.remove("message")
                {
                    object.insert("delta".into(), message);
                }
            }
        }
        let chunk: Chunk =
            serde_json::from_value(value).map_err(|e| ProviderError::MalformedStream {
                detail: e.to_string(),
            })?;
        let notices = self.push_chunk(chunk)?;
        self.done = true;
        Ok(notices)
    }

    /// `[DONE]` was seen: nothing more will come.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn push_chunk(&mut self, chunk: Chunk) -> Result<Vec<ProviderNotice>, ProviderError> {
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = http::api_error_message(&json!({ "error": error }))
                .unwrap_or_else(|| error.to_string());
            return Err(ProviderError::Api {
                message: http::shorten(&message),
            });
        }
        let mut notices = Vec::new();
        // Only the first choice is ours; we never ask for `n > 1`.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.content.push_str(&text);
                    notices.push(ProviderNotice::TextDelta(text));
                }
                // Shown live only: reasoning is never kept in the message.
                let reasoning = delta.reasoning_content.or(delta.reasoning);
                if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                    notices.push(ProviderNotice::ReasoningDelta(text));
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.merge_call(call, &mut notices);
                }
                if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
                    self.refused = true;
                    self.content.push_str(&text);
                    notices.push(ProviderNotice::TextDelta(text));
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(match reason.as_str() {
                    "stop" | "end_turn" | "eos" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" | "max_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::Refusal,
                    _ => FinishReason::Other,
                });
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Usage {
                prompt_tokens: usage.prompt_tokens.unwrap_or(0),
                cached_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                completion_tokens: usage.completion_tokens.unwrap_or(0),
            };
        }
        let arguments: usize = self
            .calls
            .iter()
            .map(|c| c.arguments.len() + c.name.len())
            .sum();
        super::check_answer_size(self.content.len() + arguments, self.calls.len())?;
        Ok(notices)
    }

    fn new_call(&mut self) -> usize {
        self.calls.push(PartialCall::default());
        self.calls.len() - 1
    }

    /// Finds the call a fragment belongs to: by wire index; without one, by
    /// id; without either, the call the previous fragment went to.
    fn merge_call(&mut self, delta: ToolCallDelta, notices: &mut Vec<ProviderNotice>) {
        let id = delta.id.filter(|id| !id.is_empty());
        let position = match delta.index {
            Some(index) => {
                let slot = self.slots.iter().position(|(i, _)| *i == index);
                match slot {
                    Some(slot) => {
                        let position = self.slots[slot].1;
                        let other_id = id.as_ref().is_some_and(|id| {
                            !self.calls[position].id.is_empty() && self.calls[position].id != *id
                        });
                        if other_id {
                            let position = self.new_call();
                            self.slots[slot].1 = position;
                            position
                        } else {
                            position
                        }
                    }
                    None => {
                        let position = self.new_call();
                        self.slots.push((index, position));
                        position
                    }
                }
            }
            None => {
                let known = id
                    .as_ref()
                    .and_then(|id| self.calls.iter().position(|c| c.id == *id));
                match (known, &id, self.last_call) {
                    (Some(position), _, _) => position,
                    (None, None, Some(last)) => last,
                    (None, _, _) => self.new_call(),
                }
            }
        };
        self.last_call = Some(position);
        let call = &mut self.calls[position];
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name.clone();
                notices.push(ProviderNotice::ToolCallStarted { name });
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// The completion, once the stream has ended.
    pub fn finish(self) -> Result<Completion, ProviderError> {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{i}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                },
            })
            .collect();
        completion(Answer {
            done: self.done,
            text: self.content,
            tool_calls,
            finish_reason: match self.refused {
                true => Some(FinishReason::Refusal),
                false => self.finish_reason,
            },
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests;
