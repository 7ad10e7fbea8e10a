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

use bytes::Bytes;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

use super::http::{self, StreamHandler};
use super::limits;
use super::retry::with_retries;
use super::sse::SseEvent;
use super::{
    ChatRequest, Completion, CompletionFuture, FinishReason, HttpPolicy, NoticeSink, Provider,
    ProviderError, ProviderNotice, ToolChoice, WindowFuture,
};
use crate::protocol::{Message, ToolCall, ToolSpec, Usage};

/// A provider for any server that speaks OpenAI's streaming Chat Completions.
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    model: String,
    policy: HttpPolicy,
    base_url: String,
    /// Longest answer asked for (`max_output_tokens`).
    max_output_tokens: u32,
    cap_field: CapField,
    /// The window once asked for: the agent asks at its first turn, the
    /// supervisor again for every delegation.
    window: tokio::sync::OnceCell<Option<u32>>,
}

/// The request field that carries the output cap: hosted OpenAI wants
/// `max_completion_tokens` (its reasoning models refuse `max_tokens`); local
/// servers (llama.cpp, Ollama, vLLM) all read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapField {
    MaxTokens,
    MaxCompletionTokens,
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
        let url = http::join_url(&base_url, "/chat/completions");
        http::check_url(&url)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = api_key.filter(|k| !k.trim().is_empty()) {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                    ProviderError::Config(
                        "the API key contains characters not allowed in a header".into(),
                    )
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let cap_field = if base_url.starts_with("https://api.openai.com") {
            CapField::MaxCompletionTokens
        } else {
            CapField::MaxTokens
        };
        Ok(OpenAiProvider {
            client: http::build_client(&policy)?,
            url,
            headers,
            model,
            policy,
            base_url,
            max_output_tokens: super::limits::DEFAULT_MAX_OUTPUT_TOKENS,
            cap_field,
            window: tokio::sync::OnceCell::new(),
        })
    }

    /// Caps every answer at `tokens` (the request may ask for less).
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = tokens.max(1);
        self
    }

    async fn discover_window(&self) -> Option<u32> {
        if self.is_hosted_openai() {
            return limits::known_window(&self.model);
        }
        let mut headers = self.headers.clone();
        headers.remove(ACCEPT);
        match limits::discover(&self.client, &self.base_url, &self.model, headers).await {
            Some(window) => Some(window),
            None => limits::known_window(&self.model),
        }
    }

    /// Whether the window can be asked of the server: hosted OpenAI has no
    /// such endpoint, its models are known by name instead.
    fn is_hosted_openai(&self) -> bool {
        self.cap_field == CapField::MaxCompletionTokens
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
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
            let cap = request
                .max_output_tokens
                .map_or(self.max_output_tokens, |cap| {
                    cap.min(self.max_output_tokens)
                });
            let request = ChatRequest {
                max_output_tokens: Some(cap),
                ..request
            };
            let body = request_bytes_with(&self.model, request, self.cap_field).map_err(|err| {
                ProviderError::Config(format!("cannot encode the request: {err}"))
            })?;
            let body = Bytes::from(body);
            with_retries(&self.policy, notices, |attempt| {
                let body = body.clone();
                async move {
                    tracing::debug!(url = %self.url, attempt, bytes = body.len(), "chat completions request");
                    let mut handler = Handler {
                        accumulator: ChatStreamAccumulator::default(),
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

    fn context_window(&self) -> WindowFuture<'_> {
        Box::pin(async move { *self.window.get_or_init(|| self.discover_window()).await })
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

/// Wires the accumulator to the HTTP stream and the notice sink.
struct Handler<'a> {
    accumulator: ChatStreamAccumulator,
    notices: NoticeSink<'a>,
}

impl StreamHandler for Handler<'_> {
    fn event(&mut self, event: SseEvent) -> Result<bool, ProviderError> {
        if event.event.as_deref() == Some("error") {
            return Err(ProviderError::Api {
                message: error_text(&event.data),
            });
        }
        for notice in self.accumulator.push(&event.data)? {
            (self.notices)(notice);
        }
        Ok(self.accumulator.is_done())
    }

    fn json_body(&mut self, body: &[u8]) -> Result<(), ProviderError> {
        for notice in self.accumulator.push_complete_response(body)? {
            (self.notices)(notice);
        }
        Ok(())
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
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
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
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| ProviderError::MalformedStream {
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
        let mut value: Value =
            serde_json::from_slice(body).map_err(|e| ProviderError::MalformedStream {
                detail: format!("{e}: {}", http::shorten(&String::from_utf8_lossy(body))),
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
                for call in delta.tool_calls.unwrap_or_default() {
                    self.merge_call(call, &mut notices);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(match reason.as_str() {
                    "stop" | "end_turn" | "eos" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" | "max_tokens" => FinishReason::Length,
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
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderError::StreamTruncated);
        }
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
        let finish_reason = match self.finish_reason.unwrap_or(FinishReason::Stop) {
            FinishReason::Stop if !tool_calls.is_empty() => FinishReason::ToolCalls,
            other => other,
        };
        Ok(Completion {
            message: Message::Assistant {
                content: Some(self.content).filter(|c| !c.is_empty()),
                tool_calls,
            },
            finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn an_empty_final_answer_is_empty_text_never_null_content() {
        let messages = vec![
            Message::System {
                content: "s".into(),
            },
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: vec![],
            },
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
            },
        ];
        let body = request_body(
            "m",
            ChatRequest {
                messages: &messages,
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": ""})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        let bytes = request_bytes(
            "m",
            ChatRequest {
                messages: &messages,
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
        )
        .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), body);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert!(body.get("max_tokens").is_none());

        let capped = ChatRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: Some(512),
            tool_choice: Default::default(),
        };
        let local: Value =
            serde_json::from_slice(&request_bytes_with("m", capped, CapField::MaxTokens).unwrap())
                .unwrap();
        assert_eq!(local["max_tokens"], json!(512));
        assert!(local.get("max_completion_tokens").is_none());
        let hosted: Value = serde_json::from_slice(
            &request_bytes_with("m", capped, CapField::MaxCompletionTokens).unwrap(),
        )
        .unwrap();
        assert_eq!(hosted["max_completion_tokens"], json!(512));
        assert!(hosted.get("max_tokens").is_none());
    }
}
