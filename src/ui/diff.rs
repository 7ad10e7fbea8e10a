//! Diffs for the transcript: a `patch` call's change as a unified diff
//! (computed with `similar` from its arguments) and the output of `git
//! diff` (`/diff`), both as classified lines the transcript colours.
//!
//! A `patch` with `edits` shows each edit's old and new text as a hunk; one
//! with `content` shows the written text as added lines (the text it
//! replaced is not in the call, so an overwrite says so instead of
//! inventing a diff).

use serde::Deserialize;
use similar::{ChangeTag, TextDiff};

/// Context lines around each change.
const CONTEXT: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    /// `--- a/…`, `+++ b/…`, `diff --git …`: file names.
    File(String),
    /// `@@ … @@`
    Hunk(String),
    Context(String),
    Added(String),
    Removed(String),
    /// Anything else (`index …`, `Binary files differ`, a note).
    Note(String),
}

#[derive(Deserialize)]
struct PatchArgs {
    path: String,
    #[serde(default)]
    edits: Option<Vec<Edit>>,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Edit {
    old_text: String,
    new_text: String,
}

/// The diff of a successful `patch` call, from its JSON arguments; `None`
/// when they cannot be read.
pub fn from_patch_arguments(arguments: &str, overwrote: bool) -> Option<Vec<DiffLine>> {
    let args: PatchArgs = serde_json::from_str(arguments).ok()?;
    let mut out = vec![DiffLine::File(format!("{} ", args.path))];
    match (args.edits, args.content) {
        (Some(edits), _) => {
            for (index, edit) in edits.iter().enumerate() {
                out.push(DiffLine::Hunk(format!("@@ edit {} @@", index + 1)));
                out.extend(text_diff(&edit.old_text, &edit.new_text));
            }
        }
        (None, Some(content)) => {
            if overwrote {
                out.push(DiffLine::Note(
                    "the whole file was rewritten; its new text:".into(),
                ));
            }
            out.extend(
                content
                    .lines()
                    .map(|line| DiffLine::Added(line.to_string())),
            );
        }
        (None, None) => return None,
    }
    Some(out)
}

/// A unified line diff of two texts, hunks with [`CONTEXT`] lines.
pub fn text_diff(old: &str, new: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for (index, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if index > 0 {
            out.push(DiffLine::Hunk("@@ … @@".into()));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let text = change.value().trim_end_matches(['\n', '\r']).to_string();
                out.push(match change.tag() {
                    ChangeTag::Equal => DiffLine::Context(text),
                    ChangeTag::Insert => DiffLine::Added(text),
                    ChangeTag::Delete => DiffLine::Removed(text),
                });
            }
        }
    }
    out
}

/// Classifies the lines of `git diff` output.
pub fn from_git(text: &str) -> Vec<DiffLine> {
    text.lines()
        .map(|line| {
            let owned = line.to_string();
            if line.starts_with("diff --git") || line.starts_with("+++") || line.starts_with("---")
            {
                DiffLine::File(owned)
            } else if line.starts_with("@@") {
                DiffLine::Hunk(owned)
            } else if let Some(rest) = line.strip_prefix('+') {
                DiffLine::Added(rest.to_string())
            } else if let Some(rest) = line.strip_prefix('-') {
                DiffLine::Removed(rest.to_string())
            } else if let Some(rest) = line.strip_prefix(' ') {
                DiffLine::Context(rest.to_string())
            } else {
                DiffLine::Note(owned)
            }
        })
        .collect()
}

/// `+N −M` for a summary line.
pub fn counts(lines: &[DiffLine]) -> (usize, usize) {
    lines
        .iter()
        .fold((0, 0), |(added, removed), line| match line {
            DiffLine::Added(_) => (added + 1, removed),
            DiffLine::Removed(_) => (added, removed + 1),
            DiffLine::File(_) | DiffLine::Hunk(_) | DiffLine::Context(_) | DiffLine::Note(_) => {
                (added, removed)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_becomes_a_hunk_of_removed_and_added_lines_with_context() {
        let args = serde_json::json!({
            "path": "src/lib.rs",
            "edits": [{"old_text": "a\nb\nc\n", "new_text": "a\nB\nc\n"}]
        });
        let lines = from_patch_arguments(&args.to_string(), false).unwrap();
        assert_eq!(
            lines,
            [
                DiffLine::File("src/lib.rs ".into()),
                DiffLine::Hunk("@@ edit 1 @@".into()),
                DiffLine::Context("a".into()),
                DiffLine::Removed("b".into()),
                DiffLine::Added("B".into()),
                DiffLine::Context("c".into()),
            ]
        );
        assert_eq!(counts(&lines), (1, 1));
    }

    #[test]
    fn git_output_is_classified_line_by_line() {
        let lines =
            from_git("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same");
        assert_eq!(lines[3], DiffLine::Hunk("@@ -1 +1 @@".into()));
        assert_eq!(lines[4], DiffLine::Removed("old".into()));
        assert_eq!(lines[5], DiffLine::Added("new".into()));
        assert_eq!(lines[6], DiffLine::Context("same".into()));
        assert!(from_patch_arguments("not json", false).is_none());
    }
}
