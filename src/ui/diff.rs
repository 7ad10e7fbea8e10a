//! Diffs for the transcript: a `patch` call's change as a unified diff
//! (computed with `similar` from its arguments) and the output of `git
//! diff` (`/diff`), both as classified lines the transcript colours.
//!
//! A `patch` with `edits` shows each edit's old and new text as hunks.
//! Their `@@ -old +new @@` headers carry the file's real line numbers: the
//! tool's facts (`protocol::tool_facts`) say on which line of the edited
//! file each edit starts, and the line counts of the edits above one give
//! its line before the change. Without them (a result restored from the
//! journal, a `replace_all` edit) the headers say only `@@ edit N @@`. One
//! with `content` shows the written text as added lines (the text it
//! replaced is not in the call, so an overwrite says so instead of
//! inventing a diff).
//!
//! Hunk headers rather than a line-number gutter: they cost no columns, so
//! a 20- or 60-column terminal keeps its width for the code, and they read
//! like `git diff` (`/diff`) and the approval prompt's diff.

use similar::{ChangeTag, DiffOp, TextDiff};

use crate::protocol::tool_facts::{FileAction, FileChange, PatchCall, PatchEdit};

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

/// Where a piece of text sits in a file: the 1-based line of its first
/// line before and after the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub old_line: usize,
    pub new_line: usize,
}

/// The diff of a successful `patch` call, from its JSON arguments and what
/// the tool said it did (`None`: it did not say); `None` when the
/// arguments cannot be read.
pub fn from_patch_call(arguments: &str, change: Option<&FileChange>) -> Option<Vec<DiffLine>> {
    let args = PatchCall::parse(arguments)?;
    let action = change.map(|change| &change.action);
    let mut out = vec![DiffLine::File(format!("{} ", args.path))];
    match (args.edits, args.content) {
        (Some(edits), _) => {
            let origins = match action {
                Some(FileAction::Edited { at_lines, .. }) => edit_origins(&edits, at_lines),
                _ => None,
            };
            for (index, edit) in edits.iter().enumerate() {
                match origins.as_ref().map(|origins| origins[index]) {
                    Some(origin) => {
                        out.extend(text_diff_at(&edit.old_text, &edit.new_text, origin))
                    }
                    None => {
                        out.push(DiffLine::Hunk(format!("@@ edit {} @@", index + 1)));
                        out.extend(text_diff(&edit.old_text, &edit.new_text));
                    }
                }
            }
        }
        (None, Some(content)) => {
            if matches!(action, Some(FileAction::Overwrote { .. })) {
                out.push(DiffLine::Note(
                    "the whole file was rewritten; its new text:".into(),
                ));
            } else {
                let count = content.lines().count();
                out.push(DiffLine::Hunk(format!("@@ -0,0 +{} @@", range(1, count))));
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

/// Where each edit sits, before and after the patch, from the lines they
/// start on after it; `None` when the starts do not fit the edits or a
/// `replace_all` edit changed several places.
fn edit_origins(edits: &[PatchEdit], starts: &[usize]) -> Option<Vec<Origin>> {
    if starts.len() != edits.len() || edits.iter().any(|edit| edit.replace_all) {
        return None;
    }
    let change =
        |edit: &PatchEdit| newlines(&edit.new_text) as isize - newlines(&edit.old_text) as isize;
    let origins = starts
        .iter()
        .map(|&new_line| {
            // The edits above this one moved it by their change in lines.
            let moved: isize = starts
                .iter()
                .zip(edits)
                .filter(|(start, _)| **start < new_line)
                .map(|(_, edit)| change(edit))
                .sum();
            Origin {
                old_line: new_line.saturating_add_signed(-moved).max(1),
                new_line,
            }
        })
        .collect();
    Some(origins)
}

fn newlines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

/// A unified line diff of two texts, hunks with [`CONTEXT`] lines.
pub fn text_diff(old: &str, new: &str) -> Vec<DiffLine> {
    diff_hunks(old, new, |index, _| {
        (index > 0).then(|| DiffLine::Hunk("@@ … @@".into()))
    })
}

/// Like [`text_diff`], for texts that start at `origin` in their file:
/// each hunk opens with its `@@ -old,count +new,count @@` header.
pub fn text_diff_at(old: &str, new: &str, origin: Origin) -> Vec<DiffLine> {
    diff_hunks(old, new, |_, group| Some(hunk_header(group, origin)))
}

fn diff_hunks(
    old: &str,
    new: &str,
    header: impl Fn(usize, &[DiffOp]) -> Option<DiffLine>,
) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for (index, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        out.extend(header(index, group));
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

/// `@@ -40,3 +40,4 @@` for a group of operations on texts at `origin`.
fn hunk_header(group: &[DiffOp], origin: Origin) -> DiffLine {
    let (Some(first), Some(last)) = (group.first(), group.last()) else {
        return DiffLine::Hunk("@@ @@".into());
    };
    let old = first.old_range().start..last.old_range().end;
    let new = first.new_range().start..last.new_range().end;
    DiffLine::Hunk(format!(
        "@@ -{} +{} @@",
        range(origin.old_line + old.start, old.len()),
        range(origin.new_line + new.start, new.len())
    ))
}

/// A unified diff range: `40,3`; `40` for one line; for none, the line
/// before it and `,0` (as `git diff` writes them).
fn range(start: usize, count: usize) -> String {
    match count {
        0 => format!("{},0", start.saturating_sub(1)),
        1 => start.to_string(),
        _ => format!("{start},{count}"),
    }
}

/// Classifies the lines of `git diff` output.
pub fn from_git(text: &str) -> Vec<DiffLine> {
    text.lines().map(classify).collect()
}

/// One line of a unified diff (`git diff`, the approval prompt's preview).
pub fn classify(line: &str) -> DiffLine {
    let owned = line.to_string();
    if line.starts_with("diff --git") || line.starts_with("+++") || line.starts_with("---") {
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
        let lines = from_patch_call(&args.to_string(), None).unwrap();
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
        assert!(from_patch_call("not json", None).is_none());
    }
}
