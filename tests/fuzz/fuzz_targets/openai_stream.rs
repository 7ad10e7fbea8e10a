//! The OpenAI Chat Completions stream decoder on the SSE events of the
//! input, and on the input as a whole (non-streaming) response body: a
//! malformed stream is an `Err`, never a panic, and a completion agrees
//! with the notices shown live on the way.
#![no_main]

use fido::protocol::Message;
use fido::provider::openai::ChatStreamAccumulator;
use fido::provider::sse::SseDecoder;
use fido::provider::{Completion, MAX_ANSWER_BYTES, MAX_ANSWER_CALLS, ProviderNotice};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    stream(input);
    let mut accumulator = ChatStreamAccumulator::default();
    if let Ok(notices) = accumulator.push_complete_response(input) {
        assert!(accumulator.is_done());
        if let Ok(completion) = accumulator.finish() {
            check(&completion, &notices);
        }
    }
});

fn stream(input: &[u8]) {
    let mut decoder = SseDecoder::default();
    let Ok(mut events) = decoder.feed(input) else {
        return;
    };
    let Ok(tail) = decoder.finish() else {
        return;
    };
    events.extend(tail);
    let mut accumulator = ChatStreamAccumulator::default();
    let mut notices = Vec::new();
    for event in &events {
        match accumulator.push(&event.data) {
            Ok(more) => notices.extend(more),
            Err(_) => return,
        }
        if accumulator.is_done() {
            break;
        }
    }
    if let Ok(completion) = accumulator.finish() {
        check(&completion, &notices);
    }
}

fn check(completion: &Completion, notices: &[ProviderNotice]) {
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
    assert!(tool_calls.iter().all(|c| !c.id.is_empty()));
    assert!(tool_calls.iter().all(|c| !c.arguments.trim().is_empty()));
}
