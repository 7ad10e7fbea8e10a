//! `cargo bench --bench transcript`: what the TUI's transcript costs in
//! memory against its text, and what a frame of it costs in time (issue 32,
//! "memory in proportion").
//!
//! Each case builds the store the way the UI does, from the agent's event
//! stream: the answer arrives in deltas of 64 B to 4 KiB (a frame drawn
//! after each, as the actor draws when events arrive), then the final
//! message, then frames at 120×40 at the bottom, at the top, paging up, and
//! one frame after a resize to 100×30. A counting allocator in this binary
//! gives the heap's peak while streaming and finishing, and what stays
//! held once the frames are drawn (both above what was held before).
//!
//! Cases: a million short lines (the issue's 5 MB answer), a long Markdown
//! answer (headings, lists, quotes, code, tables), a million-line code
//! block, and 20,000 short `bash_exec` calls with their output.
//!
//! Exit status: 0 when every case but the code block stays under
//! [`TARGET_MB`] peak and retained, 1 otherwise.

#[allow(dead_code)]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fido::protocol::tool_facts::{CommandExit, CommandRun};
use fido::protocol::{EventKind, ToolFacts, TurnStatus};
use fido::ui::frame::Screen;
use fido::ui::state::Store;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use support::Sorted;

/// Heap bytes in use now, and the most since the last reset.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call goes to the system allocator unchanged; only counts
// are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            grew(layout.size());
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(block, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let moved = unsafe { System.realloc(block, layout, size) };
        if !moved.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(size);
        }
        moved
    }
}

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SIZE: (u16, u16) = (120, 40);
const RESIZED: (u16, u16) = (100, 30);
/// Peak and retained heap a case may take (the issue's bound).
const TARGET_MB: f64 = 100.0;
const FRAMES: usize = 60;

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Makes the events of one case.
type Case = fn() -> Vec<EventKind>;

fn main() -> ExitCode {
    // The code block is reported, not gated: its parse is not cut in
    // pieces yet (tests/RELIABILITY.md says so).
    let cases: [(&str, Case, bool); 4] = [
        ("1M short lines", short_lines, true),
        ("Markdown answer", markdown_answer, true),
        ("1M-line code block", code_block, false),
        ("20k bash_exec calls", tool_calls, true),
    ];
    let mut ok = true;
    for (name, events, gated) in cases {
        ok &= run(name, &events()) || !gated;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The issue's answer: a million short lines, about 5 MB.
fn short_lines() -> Vec<EventKind> {
    let text: String = (0..1_000_000)
        .map(|n| format!("{:04}\n", n % 10_000))
        .collect();
    answer(format!("{text}last line"))
}

/// About 5 MB of answers of 20 lines: heading, paragraph, nested list,
/// quote, code, table.
fn markdown_answer() -> Vec<EventKind> {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 5_000_000 {
        text.push_str(&format!(
            "## Step {n}\n\nThe parser had **two** bugs in `parse_expr`; see [the notes](https://example.org/{n}) for *details* and more words to wrap the line somewhat further along.\n\n- precedence of `*` over `+`\n  - nested detail {n}\n- unary minus\n\n> quoted remark {n}\n\n```rust\nfn step_{n}(p: &mut Parser) -> Expr {{\n    // climb precedence\n    let lhs = p.unary();\n    p.binary(lhs, {n})\n}}\n```\n\n| test | result |\n|------|-------:|\n| case {n} | ok |\n\n"
        ));
        n += 1;
    }
    answer(text)
}

/// A million lines of Rust in one fence (no blank line to cut at).
fn code_block() -> Vec<EventKind> {
    let mut text = String::from("```rust\n");
    for n in 0..1_000_000 {
        text.push_str(&format!("let x{n} = {n};\n"));
    }
    text.push_str("```");
    answer(text)
}

/// 20,000 calls of `bash_exec`, each with a result and a few lines of
/// output.
fn tool_calls() -> Vec<EventKind> {
    let mut events = vec![EventKind::TurnStarted { turn: 1 }];
    for n in 0..20_000 {
        let id = format!("call-{n}");
        let name = "bash_exec".to_string();
        events.push(EventKind::ToolCall {
            id: id.clone(),
            name: name.clone(),
            summary: format!("ls -la src/module_{n}"),
        });
        let output: String = (0..8).map(|line| format!("file_{n}_{line}.rs\n")).collect();
        let facts = ToolFacts {
            command: Some(CommandRun {
                exit: CommandExit::Code { code: 0 },
                elapsed_ms: 3,
                output_bytes: output.len(),
            }),
            ..ToolFacts::default()
        };
        events.push(EventKind::ToolResult {
            id: id.clone(),
            name: name.clone(),
            ok: true,
            summary: "file_0_0.rs".into(),
            facts: Some(Box::new(facts)),
        });
        events.push(EventKind::ToolOutput {
            id,
            name,
            arguments: format!("{{\"command\":\"ls -la src/module_{n}\"}}"),
            content: output,
        });
    }
    events.push(EventKind::AssistantText {
        text: "done".into(),
    });
    events
}

/// `text` streamed in deltas of 64 B to 4 KiB, then the final message.
fn answer(text: String) -> Vec<EventKind> {
    let mut events = vec![EventKind::TurnStarted { turn: 1 }];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut offset = 0;
    while offset < text.len() {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let wanted = 64 + (seed >> 33) as usize % (4096 - 64);
        let mut end = (offset + wanted).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        events.push(EventKind::AssistantDelta {
            text: text[offset..end].to_string(),
        });
        offset = end;
    }
    events.push(EventKind::AssistantText { text });
    events
}

fn session() -> EventKind {
    EventKind::SessionStarted {
        workspace: "/work/bench".into(),
        provider: "openai".into(),
        model: "bench-model".into(),
        tools: Vec::new(),
        session_id: None,
    }
}

fn text_bytes(events: &[EventKind]) -> usize {
    events
        .iter()
        .map(|event| match event {
            EventKind::AssistantText { text } => text.len(),
            EventKind::ToolCall { summary, .. } => summary.len(),
            EventKind::ToolOutput { content, .. } => content.len(),
            _ => 0,
        })
        .sum()
}

fn test_terminal(size: (u16, u16)) -> Terminal<TestBackend> {
    Terminal::new(TestBackend::new(size.0, size.1)).unwrap_or_else(|e| match e {})
}

fn draw(terminal: &mut Terminal<TestBackend>, screen: &mut Screen, store: &mut Store) -> f64 {
    let started = Instant::now();
    let _ = terminal.draw(|frame| screen.draw(frame, store));
    ms(started.elapsed())
}

fn frames(
    terminal: &mut Terminal<TestBackend>,
    screen: &mut Screen,
    store: &mut Store,
    mut before: impl FnMut(&mut Store),
) -> Sorted {
    let times = (0..FRAMES)
        .map(|_| {
            before(store);
            draw(terminal, screen, store)
        })
        .collect();
    Sorted::new(times)
}

/// The bottom row of the transcript's area that holds text.
fn last_text_row(terminal: &Terminal<TestBackend>, screen: &mut Screen, store: &Store) -> String {
    let area = screen.layout(store, store.size).transcript;
    let buffer = terminal.backend().buffer();
    (area.top()..area.bottom())
        .rev()
        .map(|y| {
            (area.left()..area.right())
                .filter_map(|x| buffer.cell((x, y)).map(|cell| cell.symbol()))
                .collect::<String>()
        })
        .find(|row| !row.trim().is_empty())
        .map(|row| row.trim().to_string())
        .unwrap_or_default()
}

/// One case: streamed, finished, drawn; its memory and frame times.
fn run(name: &str, events: &[EventKind]) -> bool {
    let text = text_bytes(events);
    let baseline = CURRENT.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let mut store = Store::new(SIZE);
    let mut screen = Screen::default();
    let mut terminal = test_terminal(SIZE);
    let now = Instant::now();
    store.apply(&session(), now);
    store.begin_turn("write a long answer");
    let started = Instant::now();
    let mut stream_frames = Vec::new();
    for event in events {
        store.apply(event, now);
        if matches!(
            event,
            EventKind::AssistantDelta { .. } | EventKind::ToolOutput { .. }
        ) {
            stream_frames.push(draw(&mut terminal, &mut screen, &mut store));
        }
    }
    store.turn_replied(TurnStatus::Completed, None);
    let finished = draw(&mut terminal, &mut screen, &mut store);
    let streamed = started.elapsed();
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    let last = last_text_row(&terminal, &mut screen, &store);
    let bottom = frames(&mut terminal, &mut screen, &mut store, |_| {});
    let retained = CURRENT.load(Ordering::Relaxed).saturating_sub(baseline);
    let top = frames(&mut terminal, &mut screen, &mut store, |store| {
        store.transcript_scroll = usize::MAX / 2;
    });
    store.transcript_scroll = 0;
    let _ = draw(&mut terminal, &mut screen, &mut store);
    let page_up = KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE);
    let paging = frames(&mut terminal, &mut screen, &mut store, |store| {
        fido::ui::keys::handle_key(store, page_up, Instant::now());
    });
    store.transcript_scroll = 0;
    store.size = RESIZED;
    let mut resized_terminal = test_terminal(RESIZED);
    let resize = draw(&mut resized_terminal, &mut screen, &mut store);
    let resized_last = last_text_row(&resized_terminal, &mut screen, &store);
    let after_resize = CURRENT.load(Ordering::Relaxed).saturating_sub(baseline);
    let peak_all = PEAK.load(Ordering::Relaxed) - baseline;
    drop((store, screen, terminal, resized_terminal));
    let stream_frames = Sorted::new(stream_frames);
    println!("## {name}: {:.1} MB of text", mb(text));
    println!(
        "  heap: peak {:.1} MB while streaming and finishing ({:.1}× the text), retained {:.1} MB after the frames ({:.1}×); after a resize to {}x{}: {:.1} MB held, {:.1} MB peak overall",
        mb(peak),
        peak as f64 / text as f64,
        mb(retained),
        retained as f64 / text as f64,
        RESIZED.0,
        RESIZED.1,
        mb(after_resize),
        mb(peak_all)
    );
    println!(
        "  streaming: {} frames in {:.2} s, frame median {:.3} ms, p99 {:.3} ms; final message frame {finished:.1} ms",
        stream_frames.len(),
        streamed.as_secs_f64(),
        stream_frames.median(),
        stream_frames.quantile(0.99)
    );
    println!(
        "  frames at {}x{}: bottom median {:.3} ms, top median {:.3} ms, PageUp median {:.3} ms; resize frame {resize:.1} ms",
        SIZE.0,
        SIZE.1,
        bottom.median(),
        top.median(),
        paging.median()
    );
    println!("  last line shown: {last:?} (after the resize: {resized_last:?})");
    let within = mb(peak_all) <= TARGET_MB && mb(retained.max(after_resize)) <= TARGET_MB;
    if !within {
        println!("  MISSED: peak and retained must stay ≤ {TARGET_MB} MB");
    }
    support::table_row(
        "transcript",
        &format!("{name} ({:.1} MB): heap peak; retained", mb(text)),
        &format!("{:.1} MB; {:.1} MB", mb(peak_all), mb(retained)),
        &format!("≤ {TARGET_MB} MB"),
        &format!("{:.1} MB: the text itself", mb(text)),
    );
    within
}
