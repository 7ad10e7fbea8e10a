//! Inputs the fuzz targets (`tests/fuzz/`) once failed on, replayed on
//! stable with the invariant the target checks. Each file lives in
//! `tests/fuzz/regressions/<target>/`.

use std::path::PathBuf;

use fido::plan::todo::TodoState;
use fido::plan::todo::approve::{apply_plan_approval, plan_id};
use fido::plan::todo::markdown::parse_plan_items;
use fido::provider::anthropic::MessagesStreamAccumulator;
use fido::provider::sse::SseDecoder;
use fido::store::journal::replay;

/// Every regression input of `target`, as `(file name, bytes)`.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/regressions")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    assert!(
        !inputs.is_empty(),
        "no regression inputs in {}",
        dir.display()
    );
    inputs
}

/// The `todo_reducer` input's plan: the bytes before the first NUL.
fn plan_part(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).unwrap()
}

#[test]
fn todo_plan_items_always_have_a_subject_and_seed_a_sound_state() {
    for (name, bytes) in inputs("todo_reducer") {
        let markdown = plan_part(&bytes);
        let items = parse_plan_items(markdown);
        assert!(
            items.iter().all(|i| !i.subject.is_empty()),
            "{name}: {items:?}"
        );
        let approval = apply_plan_approval(&TodoState::empty(), &plan_id(markdown), markdown);
        approval.state.check().unwrap();
        assert!(
            approval.state.tasks.iter().all(|t| !t.subject.is_empty()),
            "{name}"
        );
    }
}

/// Token counts are the server's: `u64::MAX` saturates the sum instead of
/// overflowing (a panic in debug builds, a wrapped count in release ones).
#[test]
fn anthropic_usage_counts_saturate() {
    for (name, bytes) in inputs("anthropic_stream") {
        let mut decoder = SseDecoder::default();
        let mut events = decoder.feed(&bytes).unwrap();
        events.extend(decoder.finish().unwrap());
        let mut accumulator = MessagesStreamAccumulator::default();
        for event in &events {
            accumulator
                .push(event.event.as_deref(), &event.data)
                .unwrap();
        }
        let usage = accumulator.finish().unwrap().usage;
        assert_eq!(usage.prompt_tokens, u64::MAX, "{name}");
        assert!(usage.cached_tokens <= usage.prompt_tokens, "{name}");
    }
}

/// A journal's turn records are summed saturating, as the live counters are.
#[test]
fn journal_usage_totals_saturate() {
    for (name, bytes) in inputs("journal_replay") {
        let replayed = replay("fuzz", &bytes).unwrap();
        assert_eq!(replayed.usage.prompt_tokens, u64::MAX, "{name}");
        assert_eq!(replayed.usage.requests, u32::MAX, "{name}");
        assert_eq!(replayed.usage.completion_tokens, 2, "{name}");
    }
}
