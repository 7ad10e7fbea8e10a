//! One streaming HTTP provider, parameterised by its wire codec: the OpenAI
//! and Anthropic providers are this skeleton with their own [`WireCodec`].
//!
//! The skeleton owns what every streaming API shares: the HTTP client and
//! headers, the output cap, the bounded retry loop ([`with_retries`]), one
//! POST per attempt read as an event stream (`http::post_stream`), the live
//! notices, and context-window discovery (asked once, then cached). A codec
//! owns only what differs: the URL path, the headers that carry the key, the
//! request bytes, and the pure accumulator that turns the reply into a
//! [`Completion`].
//!
//! Invariants:
//! - The request body is encoded once per `complete` and the same bytes are
//!   sent on every attempt; each attempt starts from a fresh accumulator.
//! - The output cap sent is the lower of the request's and the provider's.

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::http::{self, StreamHandler};
use super::limits;
use super::retry::with_retries;
use super::sse::SseEvent;
use super::{
    ChatRequest, Completion, CompletionFuture, FinishReason, HttpPolicy, ModelsFuture, NoticeSink,
    Provider, ProviderError, ProviderNotice, WindowFuture,
};
use crate::protocol::{Message, ToolCall, Usage};

/// The wire format of one streaming API: everything a provider does not
/// share with the others.
pub trait WireCodec: Send + Sync + 'static {
    /// Builds one answer from the reply.
    type Accumulator: StreamAccumulator;
    /// The provider's short name, as [`Provider::name`] reports it.
    const NAME: &'static str;
    /// Appended to the base URL: where requests are posted.
    const PATH: &'static str;
    /// Appended to the base URL: where the server lists its models.
    const MODELS_PATH: &'static str = "/models";
    /// What one request is called in debug logs.
    const REQUEST_KIND: &'static str;

    /// Headers every request carries besides content type and accept
    /// (lowercase names), e.g. the API version.
    const FIXED_HEADERS: &'static [(&'static str, &'static str)];

    /// The header that carries `api_key` (trimmed, never blank); without a
    /// key none is sent, for local servers and proxies that add their own.
    fn key_header(&self, api_key: &str) -> Result<(HeaderName, HeaderValue), ProviderError>;
    /// The request bytes, asking for at most `max_output_tokens`.
    fn encode(
        &self,
        model: &str,
        max_output_tokens: u32,
        request: ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError>;
    /// Where the model's context window is learned.
    fn window_source(&self) -> WindowSource;
}

/// Where a provider learns its context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// Asked of the server (llama.cpp, Ollama, vLLM), else known by name.
    Server,
    /// Known by the model's name only: the API has no endpoint for it.
    ModelName,
}

/// Builds one [`Completion`] from a reply, free of HTTP: no I/O, no clock.
pub trait StreamAccumulator: Default + Send {
    /// Takes one SSE event and returns what to show live.
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ProviderNotice>, ProviderError>;
    /// Takes a successful reply that is plain JSON instead of an event
    /// stream (a server that ignored `"stream": true`, or a proxy's error).
    fn json_body(&mut self, body: &[u8]) -> Result<Vec<ProviderNotice>, ProviderError>;
    /// The end of the answer was seen: nothing more will come.
    fn is_done(&self) -> bool;
    /// The completion, once the reply has ended.
    fn finish(self) -> Result<Completion, ProviderError>;
}

/// A provider for a streaming HTTP API spoken through the codec `C`.
pub struct StreamingProvider<C> {
    codec: C,
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    base_url: String,
    model: String,
    policy: HttpPolicy,
    /// Longest answer asked for.
    max_output_tokens: u32,
    /// The window once learned: the agent asks at its first turn, the
    /// supervisor again for every delegation.
    window: tokio::sync::OnceCell<Option<u32>>,
}

impl<C: WireCodec> StreamingProvider<C> {
    /// `base_url` is what the codec's path is appended to (a trailing slash
    /// is ignored). An empty `api_key` counts as none.
    pub fn with_codec(
        codec: C,
        base_url: String,
        api_key: Option<String>,
        model: String,
        policy: HttpPolicy,
        max_output_tokens: u32,
    ) -> Result<Self, ProviderError> {
        let url = http::join_url(&base_url, C::PATH);
        http::check_url(&url)?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        for (name, value) in C::FIXED_HEADERS {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        if let Some(key) = api_key.as_deref().map(str::trim).filter(|k| !k.is_empty()) {
            let (name, value) = codec.key_header(key)?;
            headers.insert(name, value);
        }
        Ok(StreamingProvider {
            codec,
            client: http::build_client(&policy)?,
            url,
            headers,
            base_url,
            model,
            policy,
            max_output_tokens,
            window: tokio::sync::OnceCell::new(),
        })
    }

    /// Caps every answer at `tokens` (the request may ask for less).
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = tokens.max(1);
        self
    }

    /// One POST of `body`, its reply streamed into a fresh accumulator.
    async fn attempt(
        &self,
        attempt: u32,
        body: Bytes,
        notices: NoticeSink<'_>,
    ) -> Result<Completion, ProviderError> {
        tracing::debug!(url = %self.url, attempt, bytes = body.len(), "{} request", C::REQUEST_KIND);
        let mut handler = Handler {
            accumulator: C::Accumulator::default(),
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

    async fn discover_window(&self) -> Option<u32> {
        match self.codec.window_source() {
            WindowSource::ModelName => {}
            WindowSource::Server => {
                let mut headers = self.headers.clone();
                headers.remove(ACCEPT);
                let found =
                    limits::discover(&self.client, &self.base_url, &self.model, headers).await;
                if found.is_some() {
                    return found;
                }
            }
        }
        limits::known_window(&self.model)
    }
}

impl<C: WireCodec> Provider for StreamingProvider<C> {
    fn name(&self) -> &str {
        C::NAME
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
            let body = Bytes::from(self.codec.encode(&self.model, cap, request)?);
            with_retries(&self.policy, notices, |attempt| {
                self.attempt(attempt, body.clone(), notices)
            })
            .await
        })
    }

    fn context_window(&self) -> WindowFuture<'_> {
        Box::pin(async move { *self.window.get_or_init(|| self.discover_window()).await })
    }

    fn models(&self) -> ModelsFuture<'_> {
        Box::pin(async move {
            let mut headers = self.headers.clone();
            headers.remove(ACCEPT);
            let url = http::join_url(&self.base_url, C::MODELS_PATH);
            limits::list_models(&self.client, &url, headers).await
        })
    }
}

/// What an accumulator gathered from one reply.
pub(crate) struct Answer {
    /// The end-of-answer marker (`[DONE]`, `message_stop`) was seen.
    pub done: bool,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
}

/// The completion an answer makes. A reply that ended with neither its end
/// marker nor a finish reason was cut off ([`ProviderError::StreamTruncated`],
/// retryable). Empty text is none, and an answer that stopped with tool
/// calls finished for them, whatever the server said (`Stop` when nothing).
pub(crate) fn completion(answer: Answer) -> Result<Completion, ProviderError> {
    if !answer.done && answer.finish_reason.is_none() {
        return Err(ProviderError::StreamTruncated);
    }
    let tool_calls = answer.tool_calls;
    let finish_reason = match answer.finish_reason.unwrap_or(FinishReason::Stop) {
        FinishReason::Stop if !tool_calls.is_empty() => FinishReason::ToolCalls,
        other => other,
    };
    Ok(Completion {
        message: Message::Assistant {
            content: Some(answer.text).filter(|t| !t.is_empty()),
            tool_calls,
        },
        finish_reason,
        usage: answer.usage,
    })
}

/// A header value that holds a secret: never printed in debug output.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        ProviderError::Config("the API key contains characters not allowed in a header".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Wires an accumulator to the HTTP stream and the notice sink.
struct Handler<'a, A> {
    accumulator: A,
    notices: NoticeSink<'a>,
}

impl<A: StreamAccumulator> Handler<'_, A> {
    fn forward(&self, notices: Vec<ProviderNotice>) {
        for notice in notices {
            (self.notices)(notice);
        }
    }
}

impl<A: StreamAccumulator> StreamHandler for Handler<'_, A> {
    fn event(&mut self, event: SseEvent) -> Result<bool, ProviderError> {
        let notices = self.accumulator.event(&event)?;
        self.forward(notices);
        Ok(self.accumulator.is_done())
    }

    fn json_body(&mut self, body: &[u8]) -> Result<(), ProviderError> {
        let notices = self.accumulator.json_body(body)?;
        self.forward(notices);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::provider::http::test_server::{Reply, TestServer};

    /// A codec of a made-up API: its text is the events' data, `end` ends
    /// it; the body names the model, the cap and the message count.
    struct Toy;

    #[derive(Default)]
    struct Lines {
        text: String,
        done: bool,
    }

    impl StreamAccumulator for Lines {
        fn event(&mut self, event: &SseEvent) -> Result<Vec<ProviderNotice>, ProviderError> {
            if event.data == "end" {
                self.done = true;
                return Ok(Vec::new());
            }
            self.text.push_str(&event.data);
            Ok(vec![ProviderNotice::TextDelta(event.data.clone())])
        }

        fn json_body(&mut self, _: &[u8]) -> Result<Vec<ProviderNotice>, ProviderError> {
            Err(ProviderError::MalformedStream {
                detail: "json".into(),
            })
        }

        fn is_done(&self) -> bool {
            self.done
        }

        fn finish(self) -> Result<Completion, ProviderError> {
            completion(Answer {
                done: self.done,
                text: self.text,
                tool_calls: Vec::new(),
                finish_reason: None,
                usage: Usage::default(),
            })
        }
    }

    impl WireCodec for Toy {
        type Accumulator = Lines;
        const NAME: &'static str = "toy";
        const PATH: &'static str = "/toy";
        const REQUEST_KIND: &'static str = "toy";
        const FIXED_HEADERS: &'static [(&'static str, &'static str)] = &[("x-toy-version", "7")];

        fn key_header(&self, api_key: &str) -> Result<(HeaderName, HeaderValue), ProviderError> {
            Ok((
                HeaderName::from_static("x-toy-key"),
                secret_header(api_key)?,
            ))
        }

        fn encode(
            &self,
            model: &str,
            max_output_tokens: u32,
            request: ChatRequest<'_>,
        ) -> Result<Vec<u8>, ProviderError> {
            Ok(format!("{model} {max_output_tokens} {}", request.messages.len()).into_bytes())
        }

        fn window_source(&self) -> WindowSource {
            WindowSource::ModelName
        }
    }

    #[tokio::test]
    async fn a_retry_sends_the_same_bytes_to_a_fresh_accumulator() {
        let server = TestServer::start(vec![
            Reply::sse("data: lost\n\n"),
            Reply::sse("data: hi\n\ndata: end\n\n"),
        ])
        .await;
        let policy = HttpPolicy {
            max_retries: 1,
            retry_base: Duration::from_millis(1),
            retry_max: Duration::from_millis(5),
            ..HttpPolicy::default()
        };
        let key = Some(" k ".to_owned());
        let provider =
            StreamingProvider::with_codec(Toy, server.url.clone(), key, "m".into(), policy, 9)
                .unwrap()
                .with_max_output_tokens(500);
        assert_eq!(provider.name(), "toy");
        let seen = Mutex::new(Vec::new());
        let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
        let messages = [crate::protocol::Message::user("hi")];
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: Some(9000),
            tool_choice: Default::default(),
        };
        let completion = provider.complete(request, &sink).await.unwrap();

        assert_eq!(
            completion.message,
            Message::Assistant {
                content: Some("hi".into()),
                tool_calls: Vec::new()
            }
        );
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(matches!(
            seen[1],
            ProviderNotice::Retrying { attempt: 1, .. }
        ));
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for recorded in &requests {
            assert_eq!(recorded.body, b"m 500 1");
            assert!(recorded.head.starts_with("post /toy "), "{}", recorded.head);
            for header in [
                "content-type: application/json\r\n",
                "accept: text/event-stream\r\n",
                "x-toy-version: 7\r\n",
                "x-toy-key: k\r\n",
            ] {
                assert!(
                    recorded.head.contains(header),
                    "{header} in {}",
                    recorded.head
                );
            }
        }
        assert_eq!(provider.context_window().await, None);
        assert_eq!(server.requests().len(), 2, "the window is known by name");
    }
}
