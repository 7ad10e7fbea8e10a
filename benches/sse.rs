//! `cargo bench --bench sse`: how fast a model's stream is taken apart,
//! in MB/s of wire bytes, on a stream of the shape servers send: a
//! 256 KiB answer in 4-byte deltas (one event per token, as llama.cpp and
//! OpenAI stream them), 64k events, each a whole `chat.completion.chunk`
//! (or Anthropic `content_block_delta`) with its id, model and
//! fingerprint fields; fed in 16 KiB reads, as from a socket.
//!
//! Besides the synthetic streams, a recorded one: a 208 KB llama.cpp
//! answer (806 tokens, one event each, as `llama-server` sent it:
//! `tests/fixtures/sse/llama-text.sse`), through the OpenAI decoder.
//!
//! Three figures per stream: the SSE framing alone (`SseDecoder`), and
//! the whole path (framing, JSON, the accumulator and its live notices),
//! beside the physical limit: a memcpy of the same bytes. `BENCH_RUNS`
//! (default 20) passes of each. Exit status 1 when a whole path is slower
//! than the target or a pass does not give back the answer.

#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::process::ExitCode;
use std::time::Instant;

use fido::protocol::Message;
use fido::provider::Completion;
use fido::provider::anthropic::MessagesStreamAccumulator;
use fido::provider::openai::ChatStreamAccumulator;
use fido::provider::sse::SseDecoder;
use support::Sorted;

const ANSWER_BYTES: usize = 256 * 1024;
const READ_BYTES: usize = 16 * 1024;
/// The whole decode of a stream, per provider, at the median.
const TARGET_MB_PER_S: f64 = 50.0;

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("sse bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn answer() -> String {
    let words = [
        "fn ", "main", "() {", " let", " x =", " 42;", " }\n", "ok. ",
    ];
    words
        .iter()
        .cycle()
        .take(ANSWER_BYTES / 4)
        .copied()
        .collect()
}

/// Recorded verbatim from llama.cpp's `llama-server` (Qwen2.5-Coder-0.5B).
const RECORDED: &[u8] = include_bytes!("../tests/fixtures/sse/llama-text.sse");

type Decode = fn(&[u8]) -> Result<Completion, String>;

/// One stream to measure: its bytes, the answer it carries, its decoder.
struct Case {
    name: &'static str,
    what: &'static str,
    stream: Vec<u8>,
    answer: String,
    decode: Decode,
}

fn cases() -> Result<Vec<Case>, String> {
    let text = answer();
    let recorded_answer = recorded_content(RECORDED)?;
    Ok(vec![
        Case {
            name: "openai",
            what: "openai stream decode (SSE, JSON, accumulator), 4-byte deltas",
            stream: sse::text_turn(&text).concat().into_bytes(),
            answer: text.clone(),
            decode: openai_completion,
        },
        Case {
            name: "anthropic",
            what: "anthropic stream decode (SSE, JSON, accumulator), 4-byte deltas",
            stream: sse::anthropic_text_turn(&text).concat().into_bytes(),
            answer: text,
            decode: anthropic_completion,
        },
        Case {
            name: "openai, recorded llama.cpp",
            what: "openai stream decode of a recorded llama.cpp stream (208 KB, 806 one-token events)",
            stream: RECORDED.to_vec(),
            answer: recorded_answer,
            decode: openai_completion,
        },
    ])
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", 20)?;
    let mut ok = true;
    for case in cases()? {
        let stream = &case.stream;
        let answer = text_of(&(case.decode)(stream)?)?;
        if answer != case.answer {
            return Err(format!(
                "{}: the decoded answer differs from the one sent",
                case.name
            ));
        }
        let framing = throughput(stream, runs, |bytes| framing_only(bytes).map(drop))?;
        let whole = throughput(stream, runs, |bytes| (case.decode)(bytes).map(drop))?;
        let copy = throughput(stream, runs, |bytes| {
            std::hint::black_box(bytes.to_vec());
            Ok(())
        })?;
        ok &= report(&case, &framing, &whole, &copy);
    }
    Ok(ok)
}

/// The recording's answer read with serde_json alone, not the decoder
/// under test: every `delta.content` in order.
fn recorded_content(stream: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(stream).map_err(|e| e.to_string())?;
    let mut content = String::new();
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: serde_json::Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
        }
    }
    Ok(content)
}

/// MB/s of `runs` passes of `pass` over `stream` (one warm-up).
fn throughput(
    stream: &[u8],
    runs: usize,
    pass: impl Fn(&[u8]) -> Result<(), String>,
) -> Result<Sorted, String> {
    let mut rates = Vec::with_capacity(runs);
    for run in 0..=runs {
        let start = Instant::now();
        pass(stream)?;
        let seconds = start.elapsed().as_secs_f64();
        if run > 0 {
            rates.push(stream.len() as f64 / 1e6 / seconds);
        }
    }
    Ok(Sorted::new(rates))
}

fn framing_only(stream: &[u8]) -> Result<usize, String> {
    let mut decoder = SseDecoder::default();
    let mut events = 0;
    for read in stream.chunks(READ_BYTES) {
        events += decoder.feed(read).map_err(|e| e.to_string())?.len();
    }
    Ok(events + decoder.finish().map_err(|e| e.to_string())?.len())
}

fn openai_completion(stream: &[u8]) -> Result<Completion, String> {
    let mut decoder = SseDecoder::default();
    let mut accumulator = ChatStreamAccumulator::default();
    for read in stream.chunks(READ_BYTES) {
        for event in decoder.feed(read).map_err(|e| e.to_string())? {
            std::hint::black_box(accumulator.push(&event.data).map_err(|e| e.to_string())?);
        }
    }
    accumulator.finish().map_err(|e| e.to_string())
}

fn anthropic_completion(stream: &[u8]) -> Result<Completion, String> {
    let mut decoder = SseDecoder::default();
    let mut accumulator = MessagesStreamAccumulator::default();
    for read in stream.chunks(READ_BYTES) {
        for event in decoder.feed(read).map_err(|e| e.to_string())? {
            let notices = accumulator
                .push(event.event.as_deref(), &event.data)
                .map_err(|e| e.to_string())?;
            std::hint::black_box(notices);
        }
    }
    accumulator.finish().map_err(|e| e.to_string())
}

fn text_of(completion: &Completion) -> Result<String, String> {
    match &completion.message {
        Message::Assistant {
            content: Some(text),
            ..
        } => Ok(text.clone()),
        other => Err(format!("not an assistant answer: {other:?}")),
    }
}

fn report(case: &Case, framing: &Sorted, whole: &Sorted, copy: &Sorted) -> bool {
    let name = case.name;
    println!(
        "{name}: {:.1} MB stream, {} passes (MB/s)",
        case.stream.len() as f64 / 1e6,
        whole.len()
    );
    println!("{:<28}{:>10}{:>10}{:>10}", "", "min", "median", "max");
    for (what, s) in [
        ("SSE framing", framing),
        ("whole decode", whole),
        ("memcpy (limit)", copy),
    ] {
        println!(
            "{what:<28}{:>10.0}{:>10.0}{:>10.0}",
            s.min(),
            s.median(),
            s.max()
        );
    }
    let ok = support::wall_clock_target(
        &format!("{name} whole decode"),
        whole.median(),
        support::Bound::AtLeast,
        TARGET_MB_PER_S,
        "MB/s",
    );
    support::table_row(
        "sse",
        &format!(
            "{}; SSE framing alone {:.0} MB/s",
            case.what,
            framing.median()
        ),
        &support::spread(whole, 0, "MB/s"),
        &format!("≥ {TARGET_MB_PER_S} MB/s"),
        &format!("{:.0} MB/s: a memcpy of the stream", copy.median()),
    );
    ok
}
