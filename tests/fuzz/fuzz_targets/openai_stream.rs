//! The OpenAI Chat Completions stream decoder on the SSE events of the
//! input, and on the input as a whole (non-streaming) response body: a
//! malformed stream is an `Err`, never a panic, and a completion agrees
//! with the notices shown live on the way.
#![no_main]

#[path = "../common/stream.rs"]
mod stream;

use fido::provider::openai::ChatStreamAccumulator;
use fido::provider::{Completion, ProviderNotice};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    streamed(input);
    let mut accumulator = ChatStreamAccumulator::default();
    if let Ok(notices) = accumulator.push_complete_response(input) {
        assert!(accumulator.is_done());
        if let Ok(completion) = accumulator.finish() {
            check(&completion, &notices);
        }
    }
});

fn streamed(input: &[u8]) {
    let Some(events) = stream::sse_events(input) else {
        return;
    };
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

/// The shared invariants, and every call has an id.
fn check(completion: &Completion, notices: &[ProviderNotice]) {
    let calls = stream::check_completion(completion, notices);
    assert!(calls.iter().all(|c| !c.id.is_empty()));
}
