//! The compaction scenario several suites share: a session whose context is
//! small enough that one big tool result makes it compact.

use std::path::Path;

use super::server::Reply;
use super::sse;

/// Environment for a tiny context: compaction starts past 1,500 estimated
/// tokens and keeps the newest 200.
pub const SMALL_CONTEXT: [(&str, &str); 2] = [
    ("FIDO_COMPACT_THRESHOLD_TOKENS", "1500"),
    ("FIDO_COMPACT_KEEP_TOKENS", "200"),
];

/// Writes `big.txt` (400 lines of 20 words, far over the small context)
/// into `workspace` and returns its text.
pub fn write_big_file(workspace: &Path) -> String {
    let big = format!("{}\n", "word ".repeat(20)).repeat(400);
    std::fs::write(workspace.join("big.txt"), &big).unwrap();
    big
}

/// The replies that make the session compact: read `big.txt` (call `c1`),
/// read `small` (call `c2`), answer the summary request with `summary`,
/// then a final `finished`.
pub fn read_big_then_small(small: &str, summary: &str) -> Vec<Reply> {
    vec![
        Reply::sse(sse::tool_call_turn(&[(
            "c1",
            "read_file",
            r#"{"path": "big.txt"}"#,
        )])),
        Reply::sse(sse::tool_call_turn(&[(
            "c2",
            "read_file",
            &format!(r#"{{"path": "{small}"}}"#),
        )])),
        Reply::sse(sse::text_turn(summary)),
        Reply::sse(sse::text_turn("finished")),
    ]
}
