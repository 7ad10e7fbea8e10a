//! A `patch` diff's hunk headers carry the file's real line numbers: the
//! real tool edits a real file, its result and arguments go through the
//! store as the agent's events would, and every numbered line of the diff
//! is checked against the file before and after.

use serde_json::{Value, json};

use super::*;
use crate::tools::patch::Patch;
use crate::tools::testing::{call, env};
use crate::ui::diff::DiffLine;
use crate::ui::state::{Entry, Store, ToolDetail};
use crate::ui::theme;

/// `line 1\n` … `line 50\n`.
fn fifty_lines() -> String {
    (1..=50).map(|n| format!("line {n}\n")).collect()
}

/// Runs the real `patch` on a file holding `before`; returns the diff the
/// transcript shows for it, and the file's text afterwards.
async fn patched_diff(before: &str, edits: Value) -> (Vec<DiffLine>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, before).unwrap();
    let arguments = json!({"path": "notes.txt", "edits": edits});
    let out = call(&Patch, &env(dir.path()), arguments.clone()).await;
    assert!(out.ok, "{}", out.content);
    let mut store = store_with((100, 30), &[session()]);
    let now = std::time::Instant::now();
    for event in [
        tool_call("p1", "patch", "notes.txt"),
        // What the turn loop sends: the result's first 120 characters
        // and the tool's facts.
        EventKind::ToolResult {
            id: "p1".into(),
            name: "patch".into(),
            ok: true,
            summary: crate::text::summary(&out.content, 120),
            facts: out.facts.clone(),
        },
        EventKind::ToolOutput {
            id: "p1".into(),
            name: "patch".into(),
            arguments: arguments.to_string(),
            content: String::new(),
        },
    ] {
        store.apply(&event, now);
    }
    (diff_of(&store), std::fs::read_to_string(&file).unwrap())
}

fn diff_of(store: &Store) -> Vec<DiffLine> {
    store
        .transcript
        .iter()
        .find_map(|entry| match entry {
            Entry::Tool {
                detail: Some(ToolDetail::Diff(lines)),
                ..
            } => Some(lines.clone()),
            _ => None,
        })
        .expect("the patch entry has a diff")
}

/// `@@ -40,3 +41 @@` → (40, 41).
fn header_starts(header: &str) -> (usize, usize) {
    let start = |sign: char| -> usize {
        let field = header
            .split(' ')
            .find_map(|field| field.strip_prefix(sign))
            .unwrap();
        field.split(',').next().unwrap().parse().unwrap()
    };
    (start('-'), start('+'))
}

/// Every context and removed line is in the file's line of that number
/// before the edit; every context and added line, after it. (In, not
/// equal to: an edit may start or end inside a line, and one matched
/// ignoring whitespace is indented like the file.)
fn assert_numbers_match(lines: &[DiffLine], before: &str, after: &str) -> usize {
    let before: Vec<&str> = before.lines().collect();
    let after: Vec<&str> = after.lines().collect();
    let (mut old, mut new, mut hunks) = (0, 0, 0);
    for line in lines {
        match line {
            DiffLine::Hunk(header) => {
                (old, new) = header_starts(header);
                hunks += 1;
            }
            DiffLine::Context(text) => {
                assert!(before[old - 1].contains(text.trim()), "old {old}: {text}");
                assert!(after[new - 1].contains(text.trim()), "new {new}: {text}");
                (old, new) = (old + 1, new + 1);
            }
            DiffLine::Removed(text) => {
                assert!(before[old - 1].contains(text.trim()), "old {old}: {text}");
                old += 1;
            }
            DiffLine::Added(text) => {
                assert!(after[new - 1].contains(text.trim()), "new {new}: {text}");
                new += 1;
            }
            DiffLine::File(_) | DiffLine::Note(_) => {}
        }
    }
    hunks
}

#[tokio::test]
async fn a_change_on_line_40_of_50_is_numbered_40() {
    let before = fifty_lines();
    let edits = json!([{"old_text": "line 40\n", "new_text": "line forty\n"}]);
    let (lines, after) = patched_diff(&before, edits).await;
    assert_eq!(
        lines[1],
        DiffLine::Hunk("@@ -40 +40 @@".into()),
        "{lines:?}"
    );
    assert_eq!(assert_numbers_match(&lines, &before, &after), 1);
    // On screen too.
    let mut store = store_with((100, 30), &[session()]);
    store.push(Entry::Diff(lines));
    assert!(screen_text(&render(&store)).contains("@@ -40 +40 @@"));
}

#[tokio::test]
async fn an_edit_above_an_earlier_one_moves_its_new_line_number() {
    let before = fifty_lines();
    let edits = json!([
        {"old_text": "line 40\nline 41\n", "new_text": "line 40\nline 40b\nline 40c\nline 41\n"},
        {"old_text": "line 9\nline 10\n", "new_text": "line 9\n"},
    ]);
    let (lines, after) = patched_diff(&before, edits).await;
    let headers: Vec<&DiffLine> = lines
        .iter()
        .filter(|line| matches!(line, DiffLine::Hunk(_)))
        .collect();
    // The second edit removed a line above the first: its new start is 39.
    assert_eq!(
        headers,
        [
            &DiffLine::Hunk("@@ -40,2 +39,4 @@".into()),
            &DiffLine::Hunk("@@ -9,2 +9 @@".into()),
        ]
    );
    assert_eq!(assert_numbers_match(&lines, &before, &after), 2);
}

#[tokio::test]
async fn an_edit_in_the_middle_of_a_line_and_a_whitespace_match_are_numbered_too() {
    let before = fifty_lines().replace("line 30\n", "    indented 30\n");
    let edits = json!([
        {"old_text": "ne 7\n", "new_text": "NE 7\n"},
        {"old_text": "indented 30\n", "new_text": "indented thirty\nand more\n"},
        {"old_text": "  line 45\nline 46\n", "new_text": "line 45\nline 46 changed\n"},
    ]);
    let (lines, after) = patched_diff(&before, edits).await;
    assert_eq!(
        assert_numbers_match(&lines, &before, &after),
        3,
        "{lines:?}"
    );
}

/// Approves every request, keeping the last one.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Option<crate::protocol::ApprovalRequest>>);

impl crate::tools::approval::Approver for Recorder {
    fn approve<'a>(
        &'a self,
        request: &'a crate::protocol::ApprovalRequest,
    ) -> crate::tools::approval::ApprovalFuture<'a> {
        *self.0.lock().unwrap() = Some(request.clone());
        Box::pin(async { Some(crate::protocol::ApprovalDecision::Approved) })
    }
}

#[tokio::test]
async fn the_approval_prompt_numbers_and_colours_its_diff_like_the_transcript() {
    use ratatui::style::Color;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), fifty_lines()).unwrap();
    let recorder = std::sync::Arc::new(Recorder::default());
    let mut env = env(dir.path());
    env.approvals = crate::tools::approval::Approvals::new(
        crate::protocol::SafetySettings {
            sandbox_mode: crate::protocol::SandboxMode::WorkspaceWrite,
            approval_policy: crate::protocol::ApprovalPolicy::Untrusted,
            network: crate::protocol::NetworkAccess::Off,
        },
        Some(recorder.clone()),
    );
    let edits = json!([{"old_text": "line 40\n", "new_text": "line forty\n"}]);
    let out = call(&Patch, &env, json!({"path": "notes.txt", "edits": edits})).await;
    assert!(out.ok, "{}", out.content);
    let request = recorder
        .0
        .lock()
        .unwrap()
        .take()
        .expect("patch asked first");
    let mut store = store_with((100, 30), &[session()]);
    crate::ui::approval::show(&mut store, request);
    let terminal = render(&store);
    let buffer = terminal.backend().buffer();
    let cell = |needle: &str| {
        let rows = rows(buffer);
        let (y, row) = rows
            .iter()
            .enumerate()
            .find(|(_, row)| row.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{}", rows.join("\n")));
        let x = row[..row.find(needle).unwrap()].chars().count();
        buffer[(x as u16, y as u16)].clone()
    };
    // The preview's three lines of context put its hunk at 37.
    assert_eq!(cell("@@ -37,7 +37,7 @@").fg, theme::diff_hunk().fg.unwrap());
    assert_eq!(cell("+line forty").fg, Color::Green);
    assert_eq!(cell("-line 40").fg, Color::Red);
}
