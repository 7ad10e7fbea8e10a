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
use super::retry::with_retries;
use super::sse::SseEvent;
use super::{
    ChatRequest, Completion, CompletionFuture, FinishReason, HttpPolicy, NoticeSink, Provider,
    ProviderError, ProviderNotice,
};
use crate::protocol::{Message, ToolCall, ToolSpec, Usage};

/// A provider for any server that speaks OpenAI's streaming Chat Completions.
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    model: String,
    policy: HttpPolicy,
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
        Ok(OpenAiProvider {
            client: http::build_client(&policy)?,
            url,
            headers,
            model,
            policy,
        })
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
            let body = request_bytes(&self.model, request).map_err(|err| {
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
}

/// The JSON body for one request, keys in a fixed order: `model`,
/// `messages`, `tools` and `tool_choice` (when there are tools), `stream`,
/// `stream_options`. Serialised straight from the borrowed conversation (no
/// intermediate `Value`, which would copy every string of a long session).
pub fn request_bytes(model: &str, request: ChatRequest<'_>) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&WireBody::new(model, request))
}

/// [`request_bytes`] as a JSON value (tests, inspection).
pub fn request_body(model: &str, request: ChatRequest<'_>) -> Value {
    serde_json::to_value(WireBody::new(model, request)).unwrap_or_default()
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
    tool_choice: Option<&'static str>,
    stream: bool,
    stream_options: StreamOptions,
}

impl<'a> WireBody<'a> {
    fn new(model: &'a str, request: ChatRequest<'a>) -> Self {
        WireBody {
            model,
            messages: request.messages.iter().map(WireMessage::new).collect(),
            tools: request.tools.iter().map(WireTool::new).collect(),
            tool_choice: (!request.tools.is_empty()).then_some("auto"),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::provider::http::test_server::{Reply, TestServer, sse_head};

    fn conversation() -> (Vec<Message>, Vec<ToolSpec>) {
        let messages = vec![
            Message::System {
                content: "you are fido".into(),
            },
            Message::user("list the files"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "list_files".into(),
                    arguments: "{\"path\": \".\"}".into(),
                }],
            },
            Message::Tool {
                tool_call_id: "call_1".into(),
                name: "list_files".into(),
                content: "README.md".into(),
                is_error: false,
            },
            Message::Assistant {
                content: Some("Done.".into()),
                tool_calls: vec![],
            },
        ];
        let tools = vec![ToolSpec {
            name: "list_files".into(),
            description: "List files.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        (messages, tools)
    }

    #[test]
    fn request_body_shape() {
        let (messages, tools) = conversation();
        let body = request_body(
            "m",
            ChatRequest {
                messages: &messages,
                tools: &tools,
            },
        );
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "you are fido"},
                    {"role": "user", "content": "list the files"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "list_files", "arguments": "{\"path\": \".\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "README.md"},
                    {"role": "assistant", "content": "Done."},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "list_files", "description": "List files.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
                }}],
                "tool_choice": "auto",
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "model",
                "messages",
                "tools",
                "tool_choice",
                "stream",
                "stream_options"
            ]
        );
    }

    #[test]
    fn request_body_is_deterministic() {
        let (messages, tools) = conversation();
        let bytes = |m: &[Message], t: &[ToolSpec]| {
            serde_json::to_vec(&request_body(
                "m",
                ChatRequest {
                    messages: m,
                    tools: t,
                },
            ))
            .unwrap()
        };
        let first = bytes(&messages, &tools);
        // A deep copy through serde (as the subagent fork does) changes nothing.
        let copied: Vec<Message> =
            serde_json::from_str(&serde_json::to_string(&messages).unwrap()).unwrap();
        let copied_tools: Vec<ToolSpec> =
            serde_json::from_str(&serde_json::to_string(&tools).unwrap()).unwrap();
        assert_eq!(first, bytes(&messages, &tools));
        assert_eq!(first, bytes(&copied, &copied_tools));
        // And the conversation is a prefix: a longer one starts with the same bytes.
        let text = String::from_utf8(first).unwrap();
        let prefix = &text[..text.find("\"tools\"").unwrap()];
        let mut longer = messages.clone();
        longer.push(Message::user("more"));
        let longer = String::from_utf8(bytes(&longer, &tools)).unwrap();
        assert!(longer.starts_with(&prefix[..prefix.len() - 3]));
    }

    #[test]
    fn no_tools_omits_tools_and_tool_choice() {
        let body = request_body(
            "m",
            ChatRequest {
                messages: &[Message::user("hi")],
                tools: &[],
            },
        );
        assert!(body.get("tools").is_none());
        assert!(body.get("tool_choice").is_none());
    }

    fn run(chunks: &[&str]) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
        let mut acc = ChatStreamAccumulator::default();
        let mut notices = Vec::new();
        for chunk in chunks {
            match acc.push(chunk) {
                Ok(n) => notices.extend(n),
                Err(e) => return (Err(e), notices),
            }
        }
        (acc.finish(), notices)
    }

    fn assistant(c: &Completion) -> (Option<&str>, &[ToolCall]) {
        match &c.message {
            Message::Assistant {
                content,
                tool_calls,
            } => (content.as_deref(), tool_calls),
            other => panic!("not an assistant message: {other:?}"),
        }
    }

    #[test]
    fn text_deltas_and_usage() {
        let (result, notices) = run(&[
            r#"{"id":"x","object":"chat.completion.chunk","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel","reasoning_content":"hmm"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":64}}}"#,
            "[DONE]",
        ]);
        let completion = result.unwrap();
        assert_eq!(assistant(&completion), (Some("Hello"), &[][..]));
        assert_eq!(completion.finish_reason, FinishReason::Stop);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 100,
                cached_tokens: 64,
                completion_tokens: 7
            }
        );
        assert_eq!(
            notices,
            vec![
                ProviderNotice::TextDelta("Hel".into()),
                ProviderNotice::TextDelta("lo".into())
            ]
        );
    }

    #[test]
    fn usage_without_details_has_zero_cached() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
            "[DONE]",
        ]);
        let completion = result.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::Length);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 5,
                cached_tokens: 0,
                completion_tokens: 1
            }
        );
    }

    #[test]
    fn empty_content_is_none() {
        let (result, notices) = run(&[
            r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(assistant(&result.unwrap()).0, None);
        assert!(notices.is_empty());
    }

    #[test]
    fn tool_call_fragments_merge_by_index() {
        let (result, notices) = run(&[
            r#"{"choices":[{"index":0,"delta":{"content":"Let me look."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_files","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\n  \"a b.txt\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let completion = result.unwrap();
        let (text, calls) = assistant(&completion);
        assert_eq!(text, Some("Let me look."));
        assert_eq!(
            calls,
            &[
                ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\n  \"a b.txt\"}".into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "list_files".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            notices,
            vec![
                ProviderNotice::TextDelta("Let me look.".into()),
                ProviderNotice::ToolCallStarted {
                    name: "read_file".into()
                },
                ProviderNotice::ToolCallStarted {
                    name: "list_files".into()
                },
            ]
        );
    }

    #[test]
    fn tool_calls_with_stop_reason_are_still_returned() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"list_files","arguments":""}}]},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        let completion = result.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        let calls = assistant(&completion).1;
        assert_eq!(calls.len(), 1);
        // Blank arguments become an empty object.
        assert_eq!(calls[0].arguments, "{}");
    }

    #[test]
    fn missing_index_falls_back_to_id_then_last_call() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"two","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        let completion = result.unwrap();
        let calls = assistant(&completion).1;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("a", "{\"x\":1}")
        );
        assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("b", "two"));
    }

    #[test]
    fn whole_calls_reusing_index_zero_stay_apart() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"two","arguments":"{\"k\":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let completion = result.unwrap();
        let names: Vec<&str> = assistant(&completion)
            .1
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["one", "two"]);
    }

    #[test]
    fn missing_ids_are_generated() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"one","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(assistant(&result.unwrap()).1[0].id, "call_0");
    }

    #[test]
    fn error_in_stream_is_api_error() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"error":{"message":"context length exceeded","type":"invalid_request_error"}}"#,
        ]);
        match result {
            Err(ProviderError::Api { message }) => {
                assert_eq!(message, "invalid_request_error: context length exceeded")
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn truncation_rules() {
        // Nothing said the answer was over.
        let (result, _) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#]);
        assert!(matches!(result, Err(ProviderError::StreamTruncated)));
        // A finish_reason without [DONE] is a complete answer.
        let (result, _) =
            run(&[r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#]);
        assert_eq!(assistant(&result.unwrap()).0, Some("x"));
        // [DONE] without a finish_reason too.
        let (result, _) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#, "[DONE]"]);
        assert_eq!(result.unwrap().finish_reason, FinishReason::Stop);
    }

    #[test]
    fn malformed_json_is_malformed_stream() {
        let (result, _) = run(&["{not json"]);
        assert!(matches!(result, Err(ProviderError::MalformedStream { .. })));
    }

    #[test]
    fn complete_json_response_is_accepted() {
        let mut acc = ChatStreamAccumulator::default();
        let notices = acc
            .push_complete_response(
                br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"c1","type":"function","function":{"name":"list_files","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            )
            .unwrap();
        assert_eq!(notices.len(), 2);
        let completion = acc.finish().unwrap();
        assert_eq!(assistant(&completion).0, Some("hi"));
        assert_eq!(assistant(&completion).1[0].id, "c1");
        assert_eq!(completion.usage.prompt_tokens, 3);
    }

    // --- over HTTP, against a scripted server on 127.0.0.1 ---

    fn quick_policy() -> HttpPolicy {
        HttpPolicy {
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_retries: 2,
            retry_base: Duration::from_millis(1),
            retry_max: Duration::from_millis(20),
        }
    }

    const GOOD_STREAM: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}\n\n\
        data: [DONE]\n\n";

    async fn complete_with(
        provider: &OpenAiProvider,
    ) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
        let seen = Mutex::new(Vec::new());
        let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
        let messages = [Message::user("hi")];
        let result = provider
            .complete(
                ChatRequest {
                    messages: &messages,
                    tools: &[],
                },
                &sink,
            )
            .await;
        (result, seen.into_inner().unwrap())
    }

    #[tokio::test]
    async fn streams_a_completion_over_http() {
        let server = TestServer::start(vec![Reply::sse(GOOD_STREAM)]).await;
        let provider = OpenAiProvider::new(
            format!("{}/v1/", server.url),
            Some("sk-test".into()),
            "m".into(),
            quick_policy(),
        )
        .unwrap();
        let (result, notices) = complete_with(&provider).await;
        let completion = result.unwrap();
        assert_eq!(assistant(&completion).0, Some("Hi"));
        assert_eq!(completion.usage.prompt_tokens, 4);
        assert_eq!(notices, vec![ProviderNotice::TextDelta("Hi".into())]);
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        assert!(requests[0].head.starts_with("post /v1/chat/completions "));
        assert!(
            requests[0]
                .head
                .contains("authorization: bearer sk-test\r\n")
        );
        let expected = serde_json::to_vec(&request_body(
            "m",
            ChatRequest {
                messages: &[Message::user("hi")],
                tools: &[],
            },
        ))
        .unwrap();
        assert_eq!(requests[0].body, expected);
    }

    #[tokio::test]
    async fn no_key_sends_no_authorization() {
        let server = TestServer::start(vec![Reply::sse(GOOD_STREAM)]).await;
        let provider =
            OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
        assert!(complete_with(&provider).await.0.is_ok());
        assert!(!server.requests()[0].head.contains("authorization"));
    }

    #[tokio::test]
    async fn unauthorized_is_not_retried_and_excerpted() {
        let body = format!(
            "{{\"error\":{{\"message\":\"bad key {}\"}}}}",
            "x".repeat(2000)
        );
        let server = TestServer::start(vec![Reply::status(401, "", &body)]).await;
        let provider = OpenAiProvider::new(
            server.url.clone(),
            Some("k".into()),
            "m".into(),
            quick_policy(),
        )
        .unwrap();
        match complete_with(&provider).await.0 {
            Err(ProviderError::Unauthorized { status: 401, body }) => {
                assert!(body.starts_with("bad key xxx"));
                assert!(body.chars().count() <= 301);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn rate_limit_and_server_errors_are_retried() {
        let server = TestServer::start(vec![
            Reply::status(429, "retry-after: 0\r\n", "slow down"),
            Reply::status(503, "", "busy"),
            Reply::sse(GOOD_STREAM),
        ])
        .await;
        let provider =
            OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
        let (result, notices) = complete_with(&provider).await;
        assert!(result.is_ok());
        let retries: Vec<u32> = notices
            .iter()
            .filter_map(|n| match n {
                ProviderNotice::Retrying { attempt, .. } => Some(*attempt),
                _ => None,
            })
            .collect();
        assert_eq!(retries, [1, 2]);
        assert_eq!(server.requests().len(), 3);
    }

    #[tokio::test]
    async fn persistent_server_errors_give_up() {
        let server = TestServer::start(vec![Reply::status(500, "", "boom"); 3]).await;
        let provider =
            OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
        match complete_with(&provider).await.0 {
            Err(ProviderError::GaveUp { attempts: 3, last }) => {
                assert!(matches!(*last, ProviderError::Server { status: 500, .. }))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn bad_request_and_long_retry_after() {
        let server = TestServer::start(vec![
            Reply::status(400, "", "bad"),
            Reply::status(429, "retry-after: 3600\r\n", "later"),
        ])
        .await;
        let provider =
            OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
        assert!(matches!(
            complete_with(&provider).await.0,
            Err(ProviderError::BadRequest { status: 400, .. })
        ));
        match complete_with(&provider).await.0 {
            Err(ProviderError::RateLimited { retry_after, .. }) => {
                assert_eq!(retry_after, Some(Duration::from_secs(3600)))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn silence_is_an_idle_timeout() {
        let stalled = Reply {
            parts: vec![
                (Duration::ZERO, sse_head().into_bytes()),
                (
                    Duration::ZERO,
                    b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec(),
                ),
            ],
            hold_open: true,
        };
        let server = TestServer::start(vec![stalled]).await;
        let policy = HttpPolicy {
            idle_timeout: Duration::from_millis(200),
            max_retries: 0,
            ..quick_policy()
        };
        let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
        let (result, notices) = complete_with(&provider).await;
        assert!(matches!(result, Err(ProviderError::IdleTimeout { .. })));
        assert_eq!(notices, vec![ProviderNotice::TextDelta("x".into())]);
    }

    #[tokio::test]
    async fn slow_trickle_hits_the_request_timeout() {
        let chunk = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec();
        let mut parts = vec![(Duration::ZERO, sse_head().into_bytes())];
        parts.extend((0..50).map(|_| (Duration::from_millis(50), chunk.clone())));
        let server = TestServer::start(vec![Reply {
            parts,
            hold_open: false,
        }])
        .await;
        let policy = HttpPolicy {
            request_timeout: Duration::from_millis(400),
            idle_timeout: Duration::from_millis(300),
            max_retries: 0,
            ..quick_policy()
        };
        let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
        assert!(matches!(
            complete_with(&provider).await.0,
            Err(ProviderError::RequestTimeout { .. })
        ));
    }

    #[tokio::test]
    async fn closed_mid_stream_is_truncated() {
        let server = TestServer::start(vec![Reply::sse(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
        )])
        .await;
        let policy = HttpPolicy {
            max_retries: 0,
            ..quick_policy()
        };
        let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
        assert!(matches!(
            complete_with(&provider).await.0,
            Err(ProviderError::StreamTruncated)
        ));
    }

    #[tokio::test]
    async fn unreachable_server_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let policy = HttpPolicy {
            max_retries: 0,
            ..quick_policy()
        };
        let provider = OpenAiProvider::new(url, None, "m".into(), policy).unwrap();
        assert!(matches!(
            complete_with(&provider).await.0,
            Err(ProviderError::Connect { .. })
        ));
    }

    #[test]
    fn bad_urls_are_config_errors() {
        for url in ["127.0.0.1:8080/v1", "ftp://host", "not a url"] {
            assert!(matches!(
                OpenAiProvider::new(url.into(), None, "m".into(), HttpPolicy::default()),
                Err(ProviderError::Config(_))
            ));
        }
    }
}

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
            },
        )
        .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), body);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }
}
