//! What the two stream-decoder targets share: decoding the input as SSE,
//! and the invariants every completion keeps, whichever provider's decoder
//! built it. Included by each target with `#[path]`.

use fido::protocol::{Message, ToolCall};
use fido::provider::sse::{SseDecoder, SseEvent};
use fido::provider::{Completion, MAX_ANSWER_BYTES, MAX_ANSWER_CALLS, ProviderNotice};

/// The SSE events of `input`, or `None` when it is not an SSE stream.
pub fn sse_events(input: &[u8]) -> Option<Vec<SseEvent>> {
    let mut decoder = SseDecoder::default();
    let mut events = decoder.feed(input).ok()?;
    events.extend(decoder.finish().ok()?);
    Some(events)
}

/// The completion is an assistant message whose text is exactly the text
/// shown live, with one start notice per named call, within the answer
/// limits, and no call without arguments. Returns its calls for the
/// provider's own checks.
pub fn check_completion<'a>(
    completion: &'a Completion,
    notices: &[ProviderNotice],
) -> &'a [ToolCall] {
    let Message::Assistant {
        content,
        tool_calls,
    } = &completion.message
    else {
        panic!("a completion that is not an assistant message");
    };
    let shown: String = notices
        .iter()
        .filter_map(|n| match n {
            ProviderNotice::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(content.as_deref().unwrap_or_default(), shown);
    assert_ne!(content.as_deref(), Some(""));
    let started = notices
        .iter()
        .filter(|n| matches!(n, ProviderNotice::ToolCallStarted { .. }))
        .count();
    let named = tool_calls.iter().filter(|c| !c.name.is_empty()).count();
    assert_eq!(started, named);
    assert!(tool_calls.len() <= MAX_ANSWER_CALLS);
    let bytes: usize = shown.len()
        + tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    assert!(bytes <= MAX_ANSWER_BYTES + 2 * MAX_ANSWER_CALLS);
    assert!(tool_calls.iter().all(|c| !c.arguments.trim().is_empty()));
    tool_calls
}
