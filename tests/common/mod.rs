//! Shared support for the integration tests (codex's `tests/common` idea):
//! a fake model server that records requests ([`server`]), builders of the
//! SSE events it sends ([`sse`]), the prompt-cache invariants checked on the
//! recorded requests ([`invariants`]) and helpers that run the real binary
//! and watch its processes ([`process`]).
//!
//! Not every test uses every helper or re-export, hence the `allow`.
#![allow(dead_code, unused_imports)]

pub mod catalog;
pub mod compaction;
pub mod invariants;
pub mod process;
pub mod server;
pub mod sse;
pub mod tree;
pub mod turns;

pub use invariants::{
    History, assert_conversation_invariants, assert_conversation_invariants_with,
    check_conversation,
};
pub use process::{
    ProcessFilter, assert_no_processes, events_of, exec_cmd, fido_cmd, fido_cmd_with_home,
    parse_events, run_exec, run_with_timeout, wait_with_timeout,
};
pub use server::{FakeServer, RecordedRequest, Reply};

/// Runs git in `dir` with a fixed author (for test repositories); its
/// stdout. Panics with git's stderr when it fails.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
