//! One model request of an agent: the conversation and the catalog as a
//! [`ChatRequest`], the provider's notices as events, cancellation, and
//! the usage it cost.

use tokio_util::sync::CancellationToken;

use super::{AgentDeps, Conversation, limits};
use crate::protocol::{EventKind, UsageTotals};
use crate::provider::{ChatRequest, Completion, ProviderError, ProviderNotice, ToolChoice};
use crate::text;

/// One provider request for a text answer (a compaction summary): the
/// tools are sent, so the prompt keeps its cached prefix, but not offered.
/// `None` when the user interrupted it.
pub(super) async fn request_completion(
    conversation: &Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
) -> Option<Result<Completion, ProviderError>> {
    request(conversation, deps, cancel, Asked::TEXT).await
}

/// What a request asks of the answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked {
    /// Its text fragments go to the live UI as they arrive (the answers
    /// of a turn, not compaction summaries).
    pub stream_text: bool,
    pub tool_choice: ToolChoice,
}

impl Asked {
    /// A turn's answer: streamed, tools offered.
    pub const TURN: Asked = Asked {
        stream_text: true,
        tool_choice: ToolChoice::Auto,
    };
    /// A summary: not streamed, text only.
    pub const TEXT: Asked = Asked {
        stream_text: false,
        tool_choice: ToolChoice::None,
    };
}

/// One provider request; `None` when the user interrupted it.
pub(super) async fn request(
    conversation: &Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    asked: Asked,
) -> Option<Result<Completion, ProviderError>> {
    let stream_text = asked.stream_text;
    let events = deps.events.clone();
    let notices = move |notice: ProviderNotice| match notice {
        ProviderNotice::Retrying {
            attempt,
            delay,
            reason,
        } => events.emit(EventKind::Retrying {
            attempt,
            delay_ms: delay.as_millis() as u64,
            reason: text::summary(&reason, 200),
        }),
        ProviderNotice::TextDelta(text) if stream_text => {
            events.emit(EventKind::AssistantDelta { text });
        }
        ProviderNotice::ReasoningDelta(text) if stream_text => {
            events.emit(EventKind::ReasoningDelta { text });
        }
        ProviderNotice::TextDelta(_)
        | ProviderNotice::ReasoningDelta(_)
        | ProviderNotice::ToolCallStarted { .. } => {}
    };
    let prompt_tokens =
        conversation.estimated_tokens() + limits::tools_tokens(deps.catalog.specs());
    let request = ChatRequest {
        messages: conversation.messages(),
        tools: deps.catalog.specs(),
        max_output_tokens: limits::output_cap(
            &deps.settings.limits,
            conversation.context_window(),
            prompt_tokens,
        ),
        tool_choice: asked.tool_choice,
    };
    tokio::select! {
        // An answer that is already here is kept even when the cancel came
        // with it (a subagent's budget stop follows its last answer): what
        // it says is part of the partial result.
        biased;
        result = deps.provider.complete(request, &notices) => Some(result),
        // Dropping the request future aborts the HTTP request at once.
        _ = cancel.cancelled() => None,
    }
}

pub(super) fn record_usage(deps: &AgentDeps, usage: &mut UsageTotals, completion: &Completion) {
    usage.record(completion.usage);
    deps.events.emit(EventKind::Usage {
        identity: deps.ctx.identity.clone(),
        prompt_tokens: completion.usage.prompt_tokens,
        cached_tokens: completion.usage.cached_tokens,
        completion_tokens: completion.usage.completion_tokens,
    });
}
