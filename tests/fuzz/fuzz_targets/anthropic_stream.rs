//! The Anthropic Messages stream decoder on the SSE events of the input:
//! a malformed stream is an `Err`, never a panic, and a completion agrees
//! with the notices shown live on the way.
#![no_main]

#[path = "../common/stream.rs"]
mod stream;

use fido::provider::anthropic::MessagesStreamAccumulator;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some(events) = stream::sse_events(input) else {
        return;
    };
    let mut accumulator = MessagesStreamAccumulator::default();
    let mut notices = Vec::new();
    for event in &events {
        match accumulator.push(event.event.as_deref(), &event.data) {
            Ok(more) => notices.extend(more),
            Err(_) => return,
        }
        if accumulator.is_done() {
            break;
        }
    }
    if let Ok(completion) = accumulator.finish() {
        stream::check_completion(&completion, &notices);
        assert!(completion.usage.cached_tokens <= completion.usage.prompt_tokens);
    }
});
