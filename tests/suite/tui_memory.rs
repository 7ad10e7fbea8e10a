//! The TUI with a huge answer (issue 32, memory in proportion): a 5 MB
//! answer of a million short lines streams in, the last line is shown,
//! keys still answer, and the process's peak memory stays a small multiple
//! of the text (it was 682 MB).

use std::time::{Duration, Instant};

use super::tui::{Tmux, start_fido};
use crate::common::process::{ProcessFilter, processes};
use crate::common::sse::{self, TokenUsage};
use crate::common::{FakeServer, Reply};

/// The answer: a million lines of four digits, then a marker line.
fn million_lines() -> String {
    let mut text: String = (0..1_000_000)
        .map(|n| format!("{:04}\n", n % 10_000))
        .collect();
    text.push_str("the-last-line-of-the-answer");
    text
}

/// Peak resident memory of `pid` in MiB (`VmHWM`).
fn peak_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The fido process under the tmux shell.
fn fido_pid(tmux: &Tmux) -> Option<u32> {
    let shell = tmux.shell_pid();
    processes(ProcessFilter::ChildrenOf(shell))
        .into_iter()
        .find(|process| process.comm == "fido")
        .map(|process| process.pid)
}

#[test]
fn a_million_line_answer_shows_its_last_line_and_keeps_the_tui_small_and_responsive() {
    let ws = tempfile::tempdir().unwrap();
    let text = million_lines();
    let pieces: Vec<&str> = text
        .as_bytes()
        .chunks(4096)
        .map(|chunk| std::str::from_utf8(chunk).unwrap())
        .collect();
    let server = FakeServer::start(vec![Reply::sse(sse::text_pieces_turn(
        &pieces,
        TokenUsage::DEFAULT,
    ))]);
    let tmux = Tmux::for_model(&server.base_url(), &[]);
    start_fido(&tmux, ws.path());
    let pid = fido_pid(&tmux).expect("fido runs under the shell");
    tmux.type_line("write a million lines");
    // 5 MB through a debug build beside the rest of the suite: minutes,
    // not the usual 30 s, are allowed for the whole answer.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let screen = tmux.screen();
        if screen.contains("the-last-line-of-the-answer") && screen.contains("ready") {
            break;
        }
        assert!(Instant::now() < deadline, "never finished:\n{screen}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Keys still answer at once: a typed word shows on the input line.
    tmux.keys(&["-l", "still-typing"]);
    tmux.wait_for("the typed word", |s| s.contains("still-typing"));
    let peak = peak_mib(pid).expect("fido's /proc status");
    assert!(
        peak < 150.0,
        "fido peaked at {peak:.0} MiB for a 5 MB answer"
    );
    tmux.keys(&["C-u", "C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("still-typing"));
    tmux.assert_fido_gone(ws.path());
}
