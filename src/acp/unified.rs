//! A write subagent's change set (a unified diff, `git diff` style) as
//! ACP `diff` contents: one per hunk, its old text (context and removed
//! lines) and new text (context and added lines), at the file's absolute
//! path, with the hunk's first new line as the location.

use std::path::Path;

use agent_client_protocol::v1::schema::{Diff, ToolCallContent, ToolCallLocation};

/// One hunk of one file.
#[derive(Debug, Default, PartialEq)]
struct Hunk {
    path: String,
    /// The file did not exist before (`--- /dev/null`).
    created: bool,
    line: u32,
    old: Vec<String>,
    new: Vec<String>,
}

/// The diffs and locations of `diff`, paths joined to `workspace`.
pub fn change_set(workspace: &Path, diff: &str) -> (Vec<ToolCallContent>, Vec<ToolCallLocation>) {
    let hunks = hunks(diff);
    let contents = hunks
        .iter()
        .map(|hunk| {
            let path = workspace.join(&hunk.path);
            let new = Diff::new(path, hunk.new.join("\n"));
            let diff = if hunk.created {
                new
            } else {
                new.old_text(hunk.old.join("\n"))
            };
            ToolCallContent::Diff(diff)
        })
        .collect();
    let locations = hunks
        .iter()
        .map(|hunk| ToolCallLocation::new(workspace.join(&hunk.path)).line(hunk.line))
        .collect();
    (contents, locations)
}

fn hunks(diff: &str) -> Vec<Hunk> {
    let mut out: Vec<Hunk> = Vec::new();
    let (mut old_path, mut path) = (String::new(), String::new());
    // Lines of the current hunk still to come (old side, new side): a
    // removed `-- x` reads `--- x` and must not pass for a header.
    let mut left = (0u32, 0u32);
    for line in diff.lines() {
        if left != (0, 0) {
            if let Some(hunk) = out.last_mut() {
                hunk_line(hunk, line, &mut left);
            }
        } else if let Some(rest) = line.strip_prefix("--- ") {
            old_path = rest.to_string();
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            path = if rest == "/dev/null" {
                strip_side(&old_path)
            } else {
                strip_side(rest)
            };
        } else if let Some(rest) = line.strip_prefix("@@ ") {
            let (old_range, new_range) = ranges(rest);
            left = (old_range.1, new_range.1);
            out.push(Hunk {
                path: path.clone(),
                created: old_path == "/dev/null",
                line: new_range.0.max(1),
                ..Hunk::default()
            });
        }
    }
    out
}

fn hunk_line(hunk: &mut Hunk, line: &str, left: &mut (u32, u32)) {
    let (old, new) = left;
    match line.split_at_checked(1) {
        Some((" ", text)) => {
            hunk.old.push(text.to_string());
            hunk.new.push(text.to_string());
            *old = old.saturating_sub(1);
            *new = new.saturating_sub(1);
        }
        Some(("-", text)) => {
            hunk.old.push(text.to_string());
            *old = old.saturating_sub(1);
        }
        Some(("+", text)) => {
            hunk.new.push(text.to_string());
            *new = new.saturating_sub(1);
        }
        // An empty context line some tools write without its space.
        None => {
            hunk.old.push(String::new());
            hunk.new.push(String::new());
            *old = old.saturating_sub(1);
            *new = new.saturating_sub(1);
        }
        // `\ No newline at end of file` is no text.
        _ => {}
    }
}

/// `a/src/x.rs` → `src/x.rs` (git's side prefixes; a tab and what follows
/// it, as some tools write a time stamp there, dropped).
fn strip_side(path: &str) -> String {
    let path = path.split('\t').next().unwrap_or(path);
    path.strip_prefix("a/")
        .or_else(|| path.strip_prefix("b/"))
        .unwrap_or(path)
        .to_string()
}

/// The (start, count) of each side of `-1,3 +2,4 @@ …` (a count left
/// out is 1).
fn ranges(header: &str) -> ((u32, u32), (u32, u32)) {
    let range = |sign: char| {
        header
            .split_whitespace()
            .find_map(|part| part.strip_prefix(sign))
            .map_or((1, 1), |range| {
                let mut parts = range.split(',').map(|n| n.parse().unwrap_or(0));
                let start = parts.next().unwrap_or(1);
                (start, parts.next().unwrap_or(1))
            })
    };
    (range('-'), range('+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hunk_is_a_diff_of_its_old_and_new_text() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,4 +1,3 @@ fn x\n one\n-two\n--- x\n+three\n four\n@@ -9 +9,2 @@\n nine\n+ten\ndiff --git a/new.txt b/new.txt\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n\\ No newline at end of file\n";
        let hunks = hunks(diff);
        assert_eq!(hunks.len(), 3);
        assert_eq!(hunks[0].path, "src/a.rs");
        assert_eq!(hunks[0].old, ["one", "two", "-- x", "four"]);
        assert_eq!(hunks[0].new, ["one", "three", "four"]);
        assert_eq!((hunks[1].line, hunks[1].new.len()), (9, 2));
        assert!(hunks[2].created && !hunks[0].created);
        assert_eq!((hunks[2].path.as_str(), hunks[2].line), ("new.txt", 1));
        let (contents, locations) = change_set(Path::new("/w"), diff);
        let json = serde_json::to_value(&contents).unwrap();
        assert_eq!(json[0]["path"], "/w/src/a.rs");
        assert_eq!(json[0]["oldText"], "one\ntwo\n-- x\nfour");
        assert!(json[2]["oldText"].is_null(), "a new file has no old text");
        assert_eq!(json[2]["newText"], "hello");
        assert_eq!(locations[1].line, Some(9));
    }
}
