//! Change sets as text for a person: the lines of `fido changes` and of
//! the TUI's `/changes` (which the engine answers), shared by both so
//! they read the same.

use std::io::IsTerminal;
use std::path::Path;

use crate::changes::records::Layout;
use crate::changes::{ChangesError, Record, apply, records};
use crate::protocol::changes::{FileChange, FileConflict, FileKind, MergeState};
use crate::protocol::op::ChangesOp;
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

/// One change set on one line: id, state, size, claim and task, and the
/// control files it touches.
pub(crate) fn line(record: &Record) -> String {
    let mut line = format!(
        "{}  {:<9}  {}  claim: {}  {}",
        record.set.id,
        record.set.merge.as_str(),
        record.set.summary(),
        summarized(&record.claim.join(", "), 40),
        summarized(&record.task, 60),
    );
    let control = &record.set.control_files;
    if !control.is_empty() {
        line.push_str(&format!(
            "  touches control files: {}",
            sanitized(&control.join(", "))
        ));
    }
    line
}

/// `record` with its control files marked from its files and what the
/// checkout's control files link to, whatever the record says (one
/// written before Fido marked them counts too).
pub(crate) fn marked(root: &Path, mut record: Record) -> Record {
    record.set.control_files = crate::changes::control::touched(root, &record.set.files);
    record
}

/// The header, files and conflicts of a change set.
pub(crate) fn describe(record: &Record, paint: Paint) -> String {
    let set = &record.set;
    let mut out = paint.bold(&format!("change set {} · {}", set.id, set.merge));
    out.push('\n');
    out.push_str(&format!("base:  {}\n", set.base));
    out.push_str(&format!("claim: {}\n", sanitized(&record.claim.join(", "))));
    out.push_str(&format!("task:  {}\n", sanitized(&record.task)));
    out.push_str(&format!("patch: {}\n", set.patch));
    out.push('\n');
    out.push_str(&paint.bold(&set.summary()));
    out.push('\n');
    let control = &set.control_files;
    if !control.is_empty() {
        out.push_str(&paint.red(&format!(
            "touches control files: {} (they configure Fido or git: read them before you apply)",
            sanitized(&control.join(", "))
        )));
        out.push('\n');
    }
    for file in crate::changes::control::control_first(&set.files, control) {
        let touches = crate::changes::control::touches(file, control);
        out.push_str(&file_line(
            file,
            if touches { "  (control file)" } else { "" },
        ));
    }
    if !set.outside_claim.is_empty() {
        out.push('\n');
        out.push_str(&paint.bold(&format!(
            "outside the claim: {}, not applied",
            crate::text::counted(set.outside_claim.len() as u64, "file")
        )));
        out.push('\n');
        for file in &set.outside_claim {
            out.push_str(&file_line(file, "  (not applied)"));
        }
    }
    if !set.conflicts.is_empty() {
        out.push('\n');
        out.push_str(&paint.red(&crate::text::counted(
            set.conflicts.len() as u64,
            "conflict",
        )));
        out.push('\n');
        out.push_str(&conflict_lines(&set.conflicts));
    }
    out.push('\n');
    out
}

pub(crate) fn file_line(file: &FileChange, note: &str) -> String {
    let path = match &file.from {
        Some(from) => format!("{} → {}", sanitized(from), sanitized(&file.path)),
        None => sanitized(&file.path),
    };
    let size = match file.kind {
        FileKind::Text => format!("+{} -{}", file.added, file.removed),
        FileKind::Binary => "binary".to_string(),
        FileKind::Symlink => "symlink".to_string(),
    };
    format!("  {:<8}  {path}  {size}{note}\n", file.status.as_str())
}

pub(crate) fn conflict_lines(conflicts: &[FileConflict]) -> String {
    let mut out = String::new();
    for conflict in conflicts {
        out.push_str(&format!(
            "  {}: {}",
            sanitized(&conflict.path),
            sanitized(&conflict.reason)
        ));
        if !conflict.hunks.is_empty() {
            out.push_str(&format!(" (lines {})", conflict.hunks.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// The full patch, each line's control characters shown escaped (the
/// file's bytes are the subagent's), coloured on a terminal.
pub(crate) fn diff(patch: &str, paint: Paint) -> String {
    let mut out = String::with_capacity(patch.len());
    for line in patch.lines() {
        let line = crate::text::escape(line).into_owned();
        let painted =
            if line.starts_with("diff --git") || line.starts_with("+++") || line.starts_with("---")
            {
                paint.bold(&line)
            } else if line.starts_with('+') {
                paint.green(&line)
            } else if line.starts_with('-') {
                paint.red(&line)
            } else if line.starts_with("@@") {
                paint.cyan(&line)
            } else {
                line
            };
        out.push_str(&painted);
        out.push('\n');
    }
    out
}

/// The start of a text from the record on one line: its runs of
/// whitespace (newlines too) folded into one space, escaped.
pub(crate) fn summarized(text: &str, max_chars: usize) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::short(&sanitized(&folded), max_chars)
}

/// One line of text from the record, safe to print on a terminal: its
/// newlines and control characters shown escaped.
pub(crate) fn sanitized(text: &str) -> String {
    crate::text::escape_line(text).into_owned()
}

/// The sentence for a failed `verb` of change set `id`: the error's own
/// when it names the change set already.
pub(crate) fn failure(verb: &str, id: &str, err: &ChangesError) -> String {
    match err {
        ChangesError::Unknown(_) | ChangesError::Closed { .. } => err.to_string(),
        ChangesError::NotARepository(_)
        | ChangesError::Git(_)
        | ChangesError::Io(_)
        | ChangesError::Corrupt { .. }
        | ChangesError::Unsafe(_)
        | ChangesError::Claimed(_)
        | ChangesError::Busy(_) => format!("cannot {verb} change set {id}: {err}"),
    }
}

/// `/changes` in the terminal UI: the same text as `fido changes`, without
/// colour (the transcript colours diffs itself). `Ok((true, _))` is output
/// to show verbatim, `Ok((false, _))` one line of news.
pub(crate) fn for_tui(
    workspace: &Workspace,
    request: &ChangesOp,
) -> Result<(bool, String), String> {
    let root = &workspace.root;
    match request {
        ChangesOp::List => {
            let records: Vec<Record> = records::open(root)
                .into_iter()
                .map(|record| marked(root, record))
                .collect();
            if records.is_empty() {
                return Ok((false, "no pending change sets".into()));
            }
            Ok((
                true,
                records.iter().map(line).collect::<Vec<_>>().join("\n"),
            ))
        }
        ChangesOp::Show { id } => {
            let record = Record::load(root, id).map_err(|e| failure("show", id, &e))?;
            let record = marked(root, record);
            let patch = std::fs::read(Layout::new(root, id).patch())
                .map_err(|e| format!("cannot read the patch of {id}: {e}"))?;
            let plain = Paint { on: false };
            let text = describe(&record, plain) + &diff(&String::from_utf8_lossy(&patch), plain);
            Ok((true, text))
        }
        ChangesOp::Apply { id } => {
            let undo = UndoLog::new(root);
            let record =
                apply::apply(workspace, &undo, id).map_err(|e| failure("apply", id, &e))?;
            match record.set.merge {
                MergeState::Applied => Ok((
                    false,
                    format!(
                        "applied {id}: {}; /undo reverts it",
                        crate::text::counted(record.set.files.len() as u64, "file")
                    ),
                )),
                MergeState::Pending | MergeState::Discarded | MergeState::Conflict => Err(format!(
                    "change set {id} conflicts with edits made since its base; nothing was written and it stays pending:\n{}",
                    conflict_lines(&record.set.conflicts)
                )),
            }
        }
        ChangesOp::Discard { id } => {
            apply::discard(root, id).map_err(|e| failure("discard", id, &e))?;
            Ok((false, format!("discarded {id}")))
        }
    }
}

/// ANSI colour on a terminal only (and never under `NO_COLOR`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paint {
    pub(crate) on: bool,
}

impl Paint {
    pub(crate) fn for_stdout() -> Paint {
        Paint {
            on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    pub(crate) fn with(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub(crate) fn bold(self, text: &str) -> String {
        self.with("1", text)
    }

    pub(crate) fn red(self, text: &str) -> String {
        self.with("31", text)
    }

    pub(crate) fn green(self, text: &str) -> String {
        self.with("32", text)
    }

    pub(crate) fn cyan(self, text: &str) -> String {
        self.with("36", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::op::ChangesVerb;

    #[test]
    fn a_diff_is_coloured_on_a_terminal_and_never_carries_the_files_escapes() {
        let patch = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n ctx\n-old\n+new \x1b]0;pwned\x07\x1b[2J\r\n";
        let on = diff(patch, Paint { on: true });
        assert_eq!(
            on,
            "\x1b[1m--- a/x\x1b[0m\n\x1b[1m+++ b/x\x1b[0m\n\x1b[36m@@ -1 +1 @@\x1b[0m\n ctx\n\x1b[31m-old\x1b[0m\n\x1b[32m+new \\x1b]0;pwned\\x07\\x1b[2J\x1b[0m\n"
        );
        let off = diff(patch, Paint { on: false });
        assert_eq!(
            off,
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n ctx\n-old\n+new \\x1b]0;pwned\\x07\\x1b[2J\n"
        );
    }

    /// `/changes` in the TUI on a real change set: listed, shown in full,
    /// applied (one file written), then no longer listed; an unknown id
    /// and a missing one are clear failures.
    #[test]
    fn the_tui_lists_shows_and_applies_a_change_set() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = |args: &[&str]| crate::changes::tests::git(root, args);
        git(&["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "c"]);
        let start = crate::changes::Start {
            task: "edit a".into(),
            claim: vec!["a.txt".into()],
            plan_item: None,
        };
        let worktree = crate::changes::start(root, "subagent-9", &start).unwrap();
        std::fs::write(worktree.layout.tree().join("a.txt"), "two\n").unwrap();
        crate::changes::finish(root, &worktree, &start, 4096).unwrap();
        let workspace = Workspace::new(root).unwrap();
        let run = |request: ChangesOp| for_tui(&workspace, &request);
        let on = |verb, id: &str| ChangesOp::on(verb, id.to_string());
        let (output, list) = run(ChangesOp::List).unwrap();
        assert!(output && list.starts_with("subagent-9  pending"), "{list}");
        let (_, shown) = run(on(ChangesVerb::Show, "subagent-9")).unwrap();
        assert!(shown.contains("-one") && shown.contains("+two"), "{shown}");
        assert!(
            run(on(ChangesVerb::Apply, "nope"))
                .unwrap_err()
                .contains("no change set")
        );
        let (output, applied) = run(on(ChangesVerb::Apply, "subagent-9")).unwrap();
        assert!(
            !output && applied.starts_with("applied subagent-9: 1 file"),
            "{applied}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "two\n"
        );
        assert_eq!(run(ChangesOp::List).unwrap().1, "no pending change sets");
    }
}
