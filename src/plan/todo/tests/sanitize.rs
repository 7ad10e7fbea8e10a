//! Display sanitising: escape sequences and control characters stripped,
//! stored text raw.

use serde_json::json;

use super::*;
use crate::plan::todo::sanitize::display;
use crate::plan::todo::state::TodoState;

#[test]
fn sanitising_cases() {
    for (raw, shown) in [
        ("plain text", "plain text"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\u{9b}1;2mC1 csi", "C1 csi"),
        ("title\x1b]0;evil\x07 after", "title after"),
        ("link \x1b]8;;http://x\x1b\\text\x1b]8;;\x1b\\", "link text"),
        ("osc 8-bit \u{9d}payload\u{9c}end", "osc 8-bit end"),
        ("unterminated \x1b]0;rest of it", "unterminated "),
        ("osc stops at esc \x1b]0;x\x1bcZ", "osc stops at esc Z"),
        ("two-char \x1bcreset", "two-char reset"),
        ("bad csi \x1b[\u{1}", "bad csi "),
        ("lines\nand\ttabs\rhere", "lines and tabs here"),
        ("sep\u{2028}par\u{2029}end", "sep par end"),
        ("nul\u{0}bell\u{7}del\u{7f}c1\u{85}", "nulbelldelc1"),
        (
            "bidi \u{202e}reversed\u{202c} \u{2066}iso\u{2069} \u{200f}rlm",
            "bidi reversed iso rlm",
        ),
        ("trailing esc \x1b", "trailing esc "),
        ("esc then newline \x1b\nnext", "esc then newline  next"),
        ("unicode ✓ ⛓ → stays", "unicode ✓ ⛓ → stays"),
    ] {
        assert_eq!(display(raw), shown, "{raw:?}");
    }
}

#[test]
fn every_shown_field_is_sanitised_and_the_state_keeps_the_raw_text() {
    let raw = "a\x1b[2Jb\nc";
    let s = ok(
        &TodoState::empty(),
        json!({"action": "create", "subject": raw, "description": raw, "activeForm": raw, "owner": raw}),
    );
    assert_eq!(s.text, "Created #1: ab c (pending)");
    assert_eq!(s.details["tasks"][0]["subject"], raw);
    let s = ok(
        &s.state,
        json!({"action": "update", "id": 1, "status": "in_progress"}),
    );
    assert_eq!(
        ok(&s.state, json!({"action": "list"})).text,
        "[in_progress] #1 ab c (ab c)"
    );
    assert_eq!(
        ok(&s.state, json!({"action": "get", "id": 1})).text,
        "#1 [in_progress] ab c\n  description: ab c\n  activeForm: ab c\n  owner: ab c"
    );
    let s = ok(
        &s.state,
        json!({"action": "update", "id": 1, "status": "completed", "evidence": raw}),
    );
    assert_eq!(
        ok(&s.state, json!({"action": "list"})).text,
        "[completed] #1 ab c\n    evidence: ab c"
    );
    assert_eq!(
        ok(&s.state, json!({"action": "delete", "id": 1})).text,
        "Deleted #1: ab c"
    );
}
