//! Model providers: one trait, three implementations.
//!
//! - [`openai::OpenAiProvider`]: any OpenAI-compatible `/chat/completions`
//!   endpoint (llama.cpp `llama-server`, Ollama, vLLM, hosted APIs), streaming SSE.
//! - [`anthropic::AnthropicProvider`]: Anthropic Messages, streaming, with
//!   cache breakpoints on the system prompt and the tools.
//!
//!   Both are one [`streaming::StreamingProvider`] (retries, the POST, the
//!   stream, notices, window discovery) with their own
//!   [`streaming::WireCodec`]: a new streaming API is one codec file.
//! - [`script::ScriptProvider`]: plays a JSON file of assistant turns. It is
//!   a script, and says so in its name; it never pretends to be a model.
//!
//! Invariants:
//! - A request body is a pure function of the conversation and the catalog:
//!   the same input serialises to the same bytes (prompt caching depends on it).
//! - Retries (connect errors, 429, 5xx, stream stalls and drops) are bounded and
//!   happen inside `complete`; 400/401/403 are never retried.
//! - Cancellation is dropping the future: the HTTP request is aborted at once.

pub mod anthropic;
mod build_error;
pub mod gateway;
mod http;
mod kind;
pub mod limits;
pub mod openai;
pub mod retry;
pub mod script;
pub mod sse;
pub mod streaming;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::protocol::{Message, ToolSpec, Usage};

pub use build_error::{BuildError, SwitchError};
pub use kind::{ApiKey, ProviderKind};

/// What one provider request is made of. Borrowed: building it copies nothing.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The whole conversation; `messages[0]` is the system prompt.
    pub messages: &'a [Message],
    /// The advertised catalog, in its fixed order.
    pub tools: &'a [ToolSpec],
    /// A lower output cap than the provider's own, when the context window
    /// leaves less room; `None`: the provider's `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    /// Whether the answer may call tools; the tools are sent either way.
    pub tool_choice: ToolChoice,
}

pub use crate::protocol::ipc::{FinishReason, ToolChoice};

/// The complete answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Always a [`Message::Assistant`].
    pub message: Message,
    pub finish_reason: FinishReason,
    pub usage: Usage,
}

/// What a provider reports while a request is under way. Observers use it for
/// live display; the agent loop only relies on the returned [`Completion`].
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderNotice {
    /// A fragment of assistant text.
    TextDelta(String),
    /// A fragment of the model's reasoning, for live display only: it is
    /// not part of the completion.
    ReasoningDelta(String),
    /// The stream started a tool call with this name.
    ToolCallStarted { name: String },
    /// The request failed and will be tried again after `delay`. Text deltas
    /// seen so far belong to the abandoned attempt.
    Retrying {
        /// The attempt that failed, 1-based; also the number of this retry.
        attempt: u32,
        delay: Duration,
        reason: String,
    },
}

pub type NoticeSink<'a> = &'a (dyn Fn(ProviderNotice) + Send + Sync);

pub type CompletionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Completion, ProviderError>> + Send + 'a>>;

pub type WindowFuture<'a> = Pin<Box<dyn Future<Output = Option<u32>> + Send + 'a>>;

pub type ModelsFuture<'a> = Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;

/// A model endpoint.
pub trait Provider: Send + Sync {
    /// Short name for logs and events, e.g. `openai`, `anthropic`, `script`.
    fn name(&self) -> &str;
    /// The model asked for, or for the script provider `script:<file>`.
    fn model(&self) -> &str;
    /// Runs one request to completion, streaming notices to `notices`.
    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a>;
    /// [`Provider::complete`] on behalf of `identity` (the gateway knows
    /// who asks). A real model does not care; the script provider plays a
    /// subagent's own turns for a subagent.
    fn complete_for<'a>(
        &'a self,
        identity: &'a crate::protocol::Identity,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        let _ = identity;
        self.complete(request, notices)
    }
    /// The context window the server serves, in tokens, when it can be
    /// learned (asked of the server, or known for a hosted model).
    fn context_window(&self) -> WindowFuture<'_> {
        Box::pin(async { None })
    }
    /// The models the server lists (`GET …/models`), for a front end that
    /// offers a choice; empty where it lists none or does not answer.
    fn models(&self) -> ModelsFuture<'_> {
        Box::pin(async { Vec::new() })
    }
    /// Every identity's usage so far, when this provider is the session's
    /// model gateway (so a turn's totals include its subagents).
    fn usage_totals(&self) -> Option<crate::protocol::UsageTotals> {
        None
    }
}

/// The most text and tool-call arguments one streamed answer may hold, all
/// together: far above any real answer (128k tokens are about 0.5 MiB), so
/// only a runaway stream meets it, and memory stays bounded.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// The most tool calls one answer may hold.
pub const MAX_ANSWER_CALLS: usize = 256;

/// Checks an answer's size so far against the limits above.
pub(crate) fn check_answer_size(bytes: usize, calls: usize) -> Result<(), ProviderError> {
    if bytes > MAX_ANSWER_BYTES {
        return Err(ProviderError::AnswerTooLarge {
            what: format!("{} MiB of text and arguments", MAX_ANSWER_BYTES >> 20),
        });
    }
    if calls > MAX_ANSWER_CALLS {
        return Err(ProviderError::AnswerTooLarge {
            what: format!("{MAX_ANSWER_CALLS} tool calls"),
        });
    }
    Ok(())
}

/// Every way a provider request can fail. Messages are lowercase sentences a
/// user can act on; `is_retryable` decides the retry policy.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot reach the model server at {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the model server rejected the credentials (HTTP {status}): {body}")]
    Unauthorized { status: u16, body: String },
    #[error("the model server refused the request (HTTP {status}): {body}")]
    BadRequest { status: u16, body: String },
    #[error("the model server is rate limiting (HTTP 429){}: {body}", retry_after.map(|d| format!(", retry after {:.1} s", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        retry_after: Option<Duration>,
        body: String,
    },
    #[error("the model server failed (HTTP {status}): {body}")]
    Server { status: u16, body: String },
    #[error("the request does not fit the model's context window (HTTP {status}): {body}")]
    ContextOverflow {
        status: u16,
        body: String,
        /// The window the server named in its refusal.
        n_ctx: Option<u32>,
    },
    #[error("the model server could not parse the request (HTTP {status}): {body}{}", field.as_ref().map(|f| format!("; it points at {f}")).unwrap_or_default())]
    MalformedRequest {
        status: u16,
        body: String,
        field: Option<String>,
    },
    #[error("the model server sent nothing for {:.1} s", after.as_secs_f64())]
    IdleTimeout { after: Duration },
    #[error("the model request took longer than {:.1} s", after.as_secs_f64())]
    RequestTimeout { after: Duration },
    #[error("the model stream broke off: {source}")]
    StreamInterrupted {
        #[source]
        source: reqwest::Error,
    },
    #[error("the model stream ended before it was complete")]
    StreamTruncated,
    #[error("the model server sent a malformed stream event: {detail}")]
    MalformedStream { detail: String },
    #[error("the model server reported an error: {message}")]
    Api { message: String },
    #[error(
        "the model's answer grew past {what}, the most one answer may hold; it was stopped (a runaway model?)"
    )]
    AnswerTooLarge { what: String },
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        attempts: u32,
        #[source]
        last: Box<ProviderError>,
    },
    #[error("provider configuration: {0}")]
    Config(String),
    #[error("script {path}: {detail}")]
    Script { path: String, detail: String },
}

impl ProviderError {
    /// Connect errors, 429, 5xx, stalls and broken streams are worth another
    /// try; a refused request, bad credentials or a malformed stream are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. }
            | ProviderError::RateLimited { .. }
            | ProviderError::Server { .. }
            | ProviderError::MalformedRequest { .. }
            | ProviderError::IdleTimeout { .. }
            | ProviderError::RequestTimeout { .. }
            | ProviderError::StreamInterrupted { .. }
            | ProviderError::StreamTruncated => true,
            ProviderError::Unauthorized { .. }
            | ProviderError::BadRequest { .. }
            | ProviderError::ContextOverflow { .. }
            | ProviderError::MalformedStream { .. }
            | ProviderError::Api { .. }
            | ProviderError::AnswerTooLarge { .. }
            | ProviderError::GaveUp { .. }
            | ProviderError::Config(_)
            | ProviderError::Script { .. } => false,
        }
    }

    /// Retries this error is worth at most, whatever the policy allows: the
    /// same bytes a server called malformed get one more chance (a server
    /// fault may have garbled them), never more.
    pub fn retry_cap(&self) -> Option<u32> {
        match self {
            ProviderError::MalformedRequest { .. } => Some(1),
            _ => None,
        }
    }

    /// The server's wish, for 429 replies with `Retry-After`.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Timeouts and retry budget shared by the HTTP providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpPolicy {
    /// Whole request, from send to the last byte.
    pub request_timeout: Duration,
    /// Longest silence allowed between two chunks of a stream.
    pub idle_timeout: Duration,
    /// Tries after the first one.
    pub max_retries: u32,
    /// First backoff delay; doubles each retry, with full jitter.
    pub retry_base: Duration,
    /// Longest single wait, also the cap on a server's `Retry-After`.
    pub retry_max: Duration,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            request_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(90),
            max_retries: 4,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
        }
    }
}
