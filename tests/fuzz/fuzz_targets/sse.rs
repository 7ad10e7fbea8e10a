//! The SSE decoder: any chunking gives the same events, errors included,
//! and the events re-encoded as SSE decode to themselves.
#![no_main]

use fido::provider::sse::{SseDecoder, SseError, SseEvent};
use libfuzzer_sys::fuzz_target;

/// Feeds `chunks` in order, then finishes; stops at the first error, as the
/// HTTP layer does.
fn decode(limit: usize, chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
    let mut decoder = SseDecoder::with_limit(limit);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.feed(chunk)?);
    }
    events.extend(decoder.finish()?);
    Ok(events)
}

/// The events as a server would write them.
fn encode(events: &[SseEvent]) -> Vec<u8> {
    let mut out = String::new();
    for event in events {
        if let Some(name) = &event.event {
            out.push_str(&format!("event: {name}\n"));
        }
        for line in event.data.split('\n') {
            out.push_str(&format!("data: {line}\n"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

fuzz_target!(|input: &[u8]| {
    let [a, b, c, bytes @ ..] = input else {
        return;
    };
    let split = usize::from(u16::from_le_bytes([*a, *b])) % (bytes.len() + 1);
    // A small limit (1..=256) half of the time, to reach the size check.
    let limit = if c & 1 == 0 {
        fido::provider::sse::DEFAULT_EVENT_LIMIT
    } else {
        usize::from(*c)
    };
    let (head, tail) = bytes.split_at(split);
    let whole = decode(limit, &[bytes]);
    let split_result = decode(limit, &[head, tail]);
    // Both Ok with the same events, or both the same error.
    assert_eq!(whole, split_result, "split at {split}");
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(whole, decode(limit, &bytewise), "byte by byte");
    if let Ok(events) = whole {
        for event in &events {
            assert!(!event.data.contains('\r'));
            assert!(
                event
                    .event
                    .as_ref()
                    .is_none_or(|n| !n.contains(['\r', '\n']))
            );
        }
        let again = decode(
            fido::provider::sse::DEFAULT_EVENT_LIMIT,
            &[&encode(&events)],
        );
        assert_eq!(again.as_ref(), Ok(&events), "re-encoded events");
    }
});
