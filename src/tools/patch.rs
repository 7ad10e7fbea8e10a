//! `patch`: edit a text file by exact replacements, or write a whole file.
//!
//! Invariants: all or nothing (edits are applied in memory, the file is
//! replaced atomically with a temp file and a rename, keeping its
//! permissions); the undo entry is journalled before the file changes, and
//! if that fails the file is not touched; only UTF-8 text is edited. In an
//! editor that writes files, an existing file's text comes from and goes to
//! the editor (`through_editor`).

use std::borrow::Cow;
use std::os::fd::AsFd;

use super::capability::{Capability, Reads, Writes};
use super::file_work::{FileEnv, off_runtime, open_failed, refuse_odd};
use super::{Call, ToolFuture, ToolOutput, TypedTool, guard};
use crate::protocol::schema::tool_args;
use crate::protocol::tool_facts::{FileAction, FileChange, ToolFacts};
use crate::store::atomic::write_atomic_at;
use crate::store::undo::UndoEntry;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, Place, is_missing};

mod fuzzy;
mod through_editor;

use through_editor::Through;

/// Largest file `patch` reads or replaces.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

pub struct Patch;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        path: String,
        #[serde(default)]
        edits: Option<Vec<Edit>>,
        #[serde(default)]
        content: Option<String>,
    }
}

tool_args! {
    #[derive(Debug)]
    pub struct Edit {
        old_text: String,
        new_text: String,
        #[serde(default)]
        replace_all: bool,
    }
}

impl TypedTool for Patch {
    const NAME: &'static str = "patch";
    const CAPABILITY: Capability = Capability {
        reads: Some(Reads::File),
        writes: Some(Writes::Files),
        ..Capability::NONE
    };
    type Args = Args;

    // No example call in the description: Qwen2.5-Coder-0.5B copied an
    // example's path and text into its own calls and edited the wrong file.
    fn description(&self) -> Cow<'static, str> {
        "Change a text file with `edits` (exact replacements, in order) or `content` (the whole new file). Each old_text must occur once unless replace_all is set; copy it from read_file without the line numbers. Whitespace-only differences are tolerated. A failed edit changes nothing and shows the closest lines."
            .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let env = call.env;
            let files = FileEnv::of(&call);
            let through = match env.editor.clone().filter(|editor| editor.writes()) {
                Some(editor) => Through::editor(editor, &files, &args.path).await,
                None => Through::disk(),
            };
            // The diff is read and built only when someone will see it,
            // and like all file work off the runtime's workers.
            let (diff, args, through) = match guard::file_change_gate(&env.approvals.settings()) {
                guard::Gate::Ask => {
                    let reader = files.clone();
                    let previewing = move || {
                        let diff = preview(&reader, &args, through.buffer());
                        (diff, args, through)
                    };
                    match off_runtime(Self::NAME, previewing).await {
                        Ok(done) => done,
                        Err(failed) => return failed,
                    }
                }
                guard::Gate::Allow | guard::Gate::Deny(_) => (String::new(), args, through),
            };
            if let Err(refusal) = env
                .approvals
                .file_change(Self::NAME, &args.path, || diff)
                .await
            {
                return refusal.into_output();
            }
            off_runtime(Self::NAME, move || change(&files, args, &through))
                .await
                .unwrap_or_else(|failed| failed)
        })
    }
}

fn change(files: &FileEnv, args: Args, through: &Through) -> ToolOutput {
    match (args.edits, args.content) {
        (Some(_), Some(_)) => {
            ToolOutput::error("pass either `edits` or `content`, not both; nothing was changed")
        }
        (None, None) => ToolOutput::error(
            "pass `edits` (replacements in an existing file) or `content` (the whole file); nothing was changed",
        ),
        (Some(edits), None) => edit_file(files, &args.path, &edits, through),
        (None, Some(content)) => write_file(files, &args.path, &content, through),
    }
}

/// The unified diff the patch would make to the file (or to `buffer`,
/// the editor's text of it), for the approval prompt; a sentence instead
/// when it would not apply.
fn preview(files: &FileEnv, args: &Args, buffer: Option<&str>) -> String {
    let place = match files.workspace.locate(&args.path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return format!("(will fail: {err})"),
    };
    let before = match read_text(&place) {
        Ok(Some((bytes, _))) => as_text(&bytes).map(str::to_owned),
        Ok(None) => None,
        Err(refusal) => return format!("(will fail: {})", refusal.content),
    };
    let before = before.map(|disk| buffer.map_or(disk, str::to_owned));
    let after = match (&args.edits, &args.content) {
        (Some(edits), None) => match before
            .as_deref()
            .map(|text| apply(text, edits, &place.shown))
        {
            Some(Ok(applied)) => applied.text,
            Some(Err(message)) => return format!("(will fail: {message})"),
            None => return format!("(will fail: cannot read `{}` as text)", place.shown),
        },
        (None, Some(content)) => content.clone(),
        (Some(_), Some(_)) | (None, None) => return "(will fail: bad arguments)".to_string(),
    };
    let before = before.unwrap_or_default();
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&place.shown, &place.shown)
        .to_string()
}

/// The bytes and permission bits of the regular file at `place`, read
/// through the handle of its folder; `None` when nothing is there. What
/// [`open_text`] refuses is refused.
fn read_text(place: &Place) -> Result<Option<(Vec<u8>, u32)>, ToolOutput> {
    let Some(mut opened) = open_text(place)? else {
        return Ok(None);
    };
    // The bytes read decide: the size said may be stale or a lie.
    match beneath::read_capped(&mut opened, MAX_FILE_BYTES) {
        Ok(Some(bytes)) => Ok(Some((bytes, opened.mode))),
        Ok(None) => Err(too_big(&place.shown, MAX_FILE_BYTES + 1)),
        Err(err) => Err(ToolOutput::error(format!(
            "cannot read `{}`: {err}",
            place.shown
        ))),
    }
}

/// The regular file at `place`, opened through the handle of its folder
/// and not yet read; `None` when nothing is there. A folder, an odd file
/// (a FIFO, a socket, a device) and a file that says it is over
/// [`MAX_FILE_BYTES`] are refused.
fn open_text(place: &Place) -> Result<Option<beneath::Opened>, ToolOutput> {
    let shown = &place.shown;
    let directory = || ToolOutput::error(format!("`{shown}` is a directory, not a file"));
    if place.is_root() {
        return Err(directory());
    }
    let Some(entry) = place.entry() else {
        return Ok(None);
    };
    let opened = match beneath::open_read_at(entry.dir, entry.name) {
        Ok(opened) => opened,
        Err(err) if is_missing(&err) => return Ok(None),
        Err(err) => return Err(open_failed(shown, &err)),
    };
    if opened.kind == Kind::Dir {
        return Err(directory());
    }
    if let Some(refusal) = refuse_odd(shown, opened.kind) {
        return Err(refusal);
    }
    if opened.size > MAX_FILE_BYTES {
        return Err(too_big(shown, opened.size));
    }
    Ok(Some(opened))
}

fn too_big(shown: &str, size: u64) -> ToolOutput {
    ToolOutput::error(format!(
        "`{shown}` is {size} bytes, more than patch handles ({MAX_FILE_BYTES}); edit it with bash_exec (e.g. sed) instead; nothing was changed"
    ))
}

fn edit_file(files: &FileEnv, path: &str, edits: &[Edit], through: &Through) -> ToolOutput {
    if edits.is_empty() {
        return ToolOutput::error("`edits` is empty; give at least one {old_text, new_text}");
    }
    let place = match files.workspace.locate_for_change(path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = &place.shown;
    let (bytes, mode) = match read_text(&place) {
        Ok(Some(found)) => found,
        Ok(None) => {
            return ToolOutput::error(format!(
                "`{shown}` does not exist. To create it, call patch with `content` instead of `edits`."
            ));
        }
        Err(refusal) => return refusal,
    };
    let bytes = through.base(bytes);
    let Some(text) = as_text(&bytes) else {
        return ToolOutput::error(format!(
            "`{shown}` is not UTF-8 text ({} bytes, binary or another encoding); patch edits only text files",
            bytes.len()
        ));
    };
    let applied = match apply(text, edits, shown) {
        Ok(applied) => applied,
        Err(message) => return ToolOutput::error(message),
    };
    let changed = |action| file_facts(&place, action);
    if applied.text == text {
        return ToolOutput::ok(format!(
            "No change to {shown}: the edits leave the text as it was."
        ))
        .with_facts(changed(FileAction::Unchanged));
    }
    let after = applied.text.as_bytes();
    if let Err(message) = replace(files, &place, bytes.clone(), after, mode, through) {
        return ToolOutput::error(message);
    }
    let count = edits.len();
    let mut message = format!(
        "Edited {shown} {}: {} (+{} −{} lines)",
        applied.lines.describe(),
        crate::text::counted(count as u64, "edit"),
        applied.added,
        applied.removed
    );
    for note in &applied.notes {
        message.push('\n');
        message.push_str(note);
    }
    ToolOutput::ok(message).with_facts(changed(FileAction::Edited {
        at_lines: applied.lines.starts(),
        added: applied.added,
        removed: applied.removed,
    }))
}

/// The facts of a change to the file at `place`.
fn file_facts(place: &Place, action: FileAction) -> ToolFacts {
    ToolFacts {
        file: Some(FileChange {
            path: place.shown.clone(),
            action,
        }),
        ..ToolFacts::default()
    }
}

/// Journals the old bytes, then gives the new text to the editor, or
/// replaces the file's content through the handle of its folder (temp
/// file, fsync, rename in that folder).
fn replace(
    files: &FileEnv,
    place: &Place,
    before: Vec<u8>,
    after: &[u8],
    mode: u32,
    through: &Through,
) -> Result<(), String> {
    let shown = &place.shown;
    let Some(entry) = place.entry() else {
        return Err(format!("`{shown}` does not exist"));
    };
    files.commit(Patch::NAME).map_err(|e| e.to_string())?;
    if let Err(err) = files
        .undo
        .record(UndoEntry::patch(place.rel(), before, mode))
    {
        return Err(format!(
            "could not record the undo entry ({err}), so `{shown}` was not changed"
        ));
    }
    if through.give_to_editor(place, after) {
        return Ok(());
    }
    if let Err(err) = write_atomic_at(entry.dir, entry.name, after, Some(mode)) {
        let _ = files.undo.discard_last();
        return Err(format!(
            "could not write `{shown}`: {err}; it was not changed"
        ));
    }
    Ok(())
}

fn write_file(files: &FileEnv, path: &str, content: &str, through: &Through) -> ToolOutput {
    let place = match files.workspace.locate_for_change(path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = &place.shown;
    if place.is_root() {
        return ToolOutput::error("`path` must name a file, not the workspace root");
    }
    let lines = content.lines().count();
    match read_text(&place) {
        Ok(Some((before, mode))) => {
            if as_text(&before).is_none() {
                return ToolOutput::error(format!(
                    "`{shown}` is not UTF-8 text ({} bytes); patch does not overwrite binary files. Remove it with rm first if you mean to replace it.",
                    before.len()
                ));
            }
            let before = through.base(before);
            let old_lines = String::from_utf8_lossy(&before).lines().count();
            if let Err(message) = replace(files, &place, before, content.as_bytes(), mode, through)
            {
                return ToolOutput::error(message);
            }
            ToolOutput::ok(format!(
                "Overwrote {shown}: {lines} lines (was {old_lines})."
            ))
            .with_facts(file_facts(
                &place,
                FileAction::Overwrote {
                    lines,
                    was_lines: old_lines,
                },
            ))
        }
        Ok(None) => match create(files, &place, content) {
            Ok(()) => ToolOutput::ok(format!("Created {shown}: {lines} lines."))
                .with_facts(file_facts(&place, FileAction::Created { lines })),
            Err(message) => ToolOutput::error(message),
        },
        Err(refusal) => refusal,
    }
}

/// Creates the file with its missing folders, each through the handle of
/// its parent; journalled first.
fn create(files: &FileEnv, place: &Place, content: &str) -> Result<(), String> {
    let shown = &place.shown;
    let created_dirs = place
        .missing_dirs()
        .map_err(|file| in_the_way(&file.0, &place.rel()))?;
    files.commit(Patch::NAME).map_err(|e| e.to_string())?;
    if let Err(err) = files
        .undo
        .record(UndoEntry::create(place.rel(), created_dirs))
    {
        return Err(format!(
            "could not record the undo entry ({err}), so `{shown}` was not created"
        ));
    }
    let written = place
        .create_dirs()
        .and_then(|dir| write_atomic_at(dir.as_fd(), place.name(), content.as_bytes(), None));
    if let Err(err) = written {
        let _ = files.undo.discard_last();
        return Err(format!("could not create `{shown}`: {err}"));
    }
    Ok(())
}

/// The refusal when the file `file` stands where a folder of `target`
/// should be created.
pub(crate) fn in_the_way(file: &str, target: &str) -> String {
    format!("`{file}` is a file, so `{target}` cannot be created inside it")
}

/// The file's text, when it is UTF-8 without NUL bytes.
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

struct Applied {
    text: String,
    added: usize,
    removed: usize,
    /// What the model should know about how the edits were applied.
    notes: Vec<String>,
    /// Per edit, the line of the final text where it starts.
    lines: EditLines,
}

/// Where each edit sits, tracked while they apply in order: an edit that
/// lands above an earlier one moves that one by its change in line count.
#[derive(Default)]
struct EditLines {
    /// (start line in the current text, line count change)
    placed: Vec<(usize, isize)>,
}

impl EditLines {
    /// Edit placed at byte `at` of `text` (before it was applied), turning
    /// `old` into `new` (`times` places, for `replace_all`).
    fn place(&mut self, text: &str, at: usize, old: &str, new: &str, times: usize) {
        let line = line_of(text, at);
        let change = (newlines(new) as isize - newlines(old) as isize) * times as isize;
        for (start, _) in &mut self.placed {
            if *start > line {
                *start = start.saturating_add_signed(change).max(1);
            }
        }
        self.placed.push((line, change));
    }

    /// The line each edit starts on in the edited text, in edit order.
    fn starts(&self) -> Vec<usize> {
        self.placed.iter().map(|(at, _)| *at).collect()
    }

    /// `at line 4` / `at lines 1, 4, 6`, for the result text.
    fn describe(&self) -> String {
        let lines: Vec<String> = self.starts().iter().map(usize::to_string).collect();
        let noun = if lines.len() == 1 { "line" } else { "lines" };
        format!("at {noun} {}", lines.join(", "))
    }
}

fn newlines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

/// Applies the edits in order, or says which one failed and why.
fn apply(original: &str, edits: &[Edit], shown: &str) -> Result<Applied, String> {
    // A model writes `\n`; a CRLF file gets its edits in CRLF.
    let crlf = original.contains("\r\n");
    let mut text = original.to_string();
    let (mut added, mut removed) = (0, 0);
    let mut notes = Vec::new();
    let mut edit_lines = EditLines::default();
    let total = edits.len();
    for (index, edit) in edits.iter().enumerate() {
        let label = if total == 1 {
            "old_text".to_string()
        } else {
            format!("edit {} of {total}: old_text", index + 1)
        };
        let after = if index == 0 {
            ""
        } else {
            " (after the earlier edits were applied)"
        };
        if edit.old_text.is_empty() {
            return Err(format!(
                "{label} is empty; copy the exact text to replace from the file (or use `content` to write the whole file). Nothing was changed."
            ));
        }
        let (old, new) = if crlf && !edit.old_text.contains('\r') {
            (
                edit.old_text.replace('\n', "\r\n"),
                edit.new_text.replace('\n', "\r\n"),
            )
        } else {
            (edit.old_text.clone(), edit.new_text.clone())
        };
        let found: Vec<usize> = text.match_indices(&old).map(|(at, _)| at).collect();
        match found.len() {
            0 => {
                let (loose, note, at) = loose_edit(&text, edit, &label, shown, after)?;
                edit_lines.place(&text, at, &edit.old_text, &edit.new_text, 1);
                let (plus, minus) = line_delta(&edit.old_text, &edit.new_text);
                added += plus;
                removed += minus;
                text = loose;
                notes.push(note);
                continue;
            }
            1 => {}
            n if !edit.replace_all => {
                let lines: Vec<String> = found
                    .iter()
                    .take(10)
                    .map(|&at| line_of(&text, at).to_string())
                    .collect();
                let more = if n > 10 { ", …" } else { "" };
                return Err(format!(
                    "{label} occurs {n} times in `{shown}`{after} (lines {}{more}). Add neighbouring lines to make it unique, or set replace_all to true. Nothing was changed.",
                    lines.join(", ")
                ));
            }
            _ => {}
        }
        let times = if edit.replace_all { found.len() } else { 1 };
        edit_lines.place(&text, found[0], &old, &new, times);
        let (plus, minus) = line_delta(&edit.old_text, &edit.new_text);
        added += plus * found.len();
        removed += minus * found.len();
        text = if edit.replace_all {
            text.replace(&old, &new)
        } else {
            text.replacen(&old, &new, 1)
        };
    }
    Ok(Applied {
        text,
        added,
        removed,
        notes,
        lines: edit_lines,
    })
}

/// An edit whose `old_text` is not in the file exactly: applied when it
/// matches one region except for whitespace (with a note saying so), else
/// the error shows the closest region and what differs.
fn loose_edit(
    text: &str,
    edit: &Edit,
    label: &str,
    shown: &str,
    after: &str,
) -> Result<(String, String, usize), String> {
    match fuzzy::loose_match(text, &edit.old_text, &edit.new_text) {
        fuzzy::Loose::Unique {
            start,
            end,
            first_line,
            last_line,
            replacement,
        } => {
            let mut edited = String::with_capacity(text.len() + replacement.len());
            edited.push_str(&text[..start]);
            edited.push_str(&replacement);
            edited.push_str(&text[end..]);
            Ok((
                edited,
                format!(
                    "Note: {label} matched lines {first_line}-{last_line} only when whitespace is ignored (indentation, trailing spaces, line endings); it was applied there, with new_text indented like the file."
                ),
                start,
            ))
        }
        fuzzy::Loose::Ambiguous(lines) => {
            let lines: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
            Err(format!(
                "{label} was not found exactly in `{shown}`{after}; ignoring whitespace it matches {} places (lines {}), so it was not applied. Copy old_text exactly, with enough neighbouring lines to be unique. Nothing was changed.",
                lines.len(),
                lines.join(", ")
            ))
        }
        fuzzy::Loose::None => {
            if let Some(line) = already_applied(text, &edit.new_text) {
                return Err(format!(
                    "{label} was not found in `{shown}`{after}, but its new_text is already there (line {line}): the edit appears to be applied already. Read the file to check it before changing it again. Nothing was changed."
                ));
            }
            let hint = fuzzy::closest_region(text, &edit.old_text);
            Err(format!(
                "{label} was not found in `{shown}`{after}. {hint} Nothing was changed."
            ))
        }
    }
}

/// Where `new_text` already stands in `text` (the line it starts on), when
/// an edit's `old_text` is gone: a model that does not see its earlier edit
/// succeed sends it again (Qwen2.5-Coder-1.5B repeated one three times until
/// its loop guard ended the turn).
fn already_applied(text: &str, new_text: &str) -> Option<usize> {
    if new_text.trim().is_empty() {
        return None;
    }
    let at = text
        .find(new_text)
        .or_else(|| text.find(&new_text.replace('\n', "\r\n")))?;
    Some(line_of(text, at))
}

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Lines added and removed by replacing `old` with `new`, leaving out the
/// lines they share at the start and the end.
fn line_delta(old: &str, new: &str) -> (usize, usize) {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    (new.len() - prefix - suffix, old.len() - prefix - suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolEnv;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, ToolEnv) {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        (dir, env)
    }

    /// The file change the tool reported, beside its text.
    fn change_of(out: &ToolOutput) -> FileChange {
        let facts = out.facts.as_deref().expect("a change reports facts");
        assert_eq!((&facts.command, &facts.truncation), (&None, &None));
        facts.file.clone().expect("a file change")
    }

    /// An editor with a buffer of `a.txt` that takes writes (`takes`) or
    /// refuses them; what it was given.
    struct Buffers {
        takes: bool,
        given: std::sync::Mutex<Vec<String>>,
    }

    impl crate::tools::editor::EditorFiles for Buffers {
        fn writes(&self) -> bool {
            true
        }

        fn read_text<'a>(&'a self, _: &'a std::path::Path) -> crate::tools::editor::EditorRead<'a> {
            Box::pin(async { Ok("unsaved\n".to_string()) })
        }

        fn write_text<'a>(
            &'a self,
            _: &'a std::path::Path,
            text: &'a str,
        ) -> crate::tools::editor::EditorWrite<'a> {
            self.given.lock().unwrap().push(text.to_string());
            let takes = self.takes;
            Box::pin(async move {
                if takes {
                    Ok(())
                } else {
                    Err(crate::tools::editor::EditorError::Refused {
                        request: "fs/write_text_file",
                        reason: "read-only buffer".into(),
                    })
                }
            })
        }
    }

    /// Through an editor that writes, the edit applies to its buffer and
    /// goes to it, the disk is left alone, and undo puts the buffer's old
    /// text back; an editor that refuses the write leaves it to the disk.
    #[tokio::test]
    async fn an_edit_goes_to_an_editor_that_writes_and_to_the_disk_when_it_refuses() {
        for takes in [true, false] {
            let (dir, mut env) = setup();
            fs::write(dir.path().join("a.txt"), "on disk\n").unwrap();
            let editor = std::sync::Arc::new(Buffers {
                takes,
                given: std::sync::Mutex::default(),
            });
            env.editor = Some(editor.clone());
            let edit =
                json!({"path": "a.txt", "edits": [{"old_text": "unsaved", "new_text": "edited"}]});
            let out = call(&Patch, &env, edit).await;
            assert!(out.ok, "{}", out.content);
            assert_eq!(*editor.given.lock().unwrap(), vec!["edited\n".to_string()]);
            let disk = fs::read_to_string(dir.path().join("a.txt")).unwrap();
            assert_eq!(disk, if takes { "on disk\n" } else { "edited\n" });
            env.undo.undo_last(&env.workspace).unwrap().unwrap();
            let undone = fs::read_to_string(dir.path().join("a.txt")).unwrap();
            assert_eq!(undone, "unsaved\n", "takes: {takes}");
        }
    }

    /// Edits that leave the text as it was are reported as such, and a
    /// refused change reports no facts.
    #[tokio::test]
    async fn an_edit_to_the_same_text_is_unchanged_and_a_failure_says_nothing() {
        let (dir, env) = setup();
        fs::write(dir.path().join("a.txt"), "same\n").unwrap();
        let same = json!({"path": "a.txt", "edits": [{"old_text": "same", "new_text": "same"}]});
        let out = call(&Patch, &env, same).await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(change_of(&out).action, FileAction::Unchanged);
        let missing = json!({"path": "a.txt", "edits": [{"old_text": "gone", "new_text": "x"}]});
        let out = call(&Patch, &env, missing).await;
        assert!(!out.ok);
        assert_eq!(out.facts, None);
    }

    #[tokio::test]
    async fn edits_apply_in_order_and_report_lines() {
        let (dir, env) = setup();
        let file = dir.path().join("a.rs");
        fs::write(&file, "fn a() {\n    1\n}\nfn b() {}\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o755)).unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.rs", "edits": [
                {"old_text": "    1\n", "new_text": "    2\n    3\n"},
                {"old_text": "    2", "new_text": "    two"},
                {"old_text": "fn b() {}\n", "new_text": ""}
            ]}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(
            out.content,
            "Edited a.rs at lines 2, 2, 5: 3 edits (+3 −3 lines)"
        );
        assert_eq!(
            change_of(&out),
            FileChange {
                path: "a.rs".into(),
                action: FileAction::Edited {
                    at_lines: vec![2, 2, 5],
                    added: 3,
                    removed: 3
                },
            }
        );
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "fn a() {\n    two\n    3\n}\n"
        );
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // No temp files left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2); // a.rs + .fido-state
    }

    #[tokio::test]
    async fn failing_edit_changes_nothing() {
        let (dir, env) = setup();
        let file = dir.path().join("a.txt");
        fs::write(&file, "one\ntwo\nthree\n").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.txt", "edits": [
                {"old_text": "one", "new_text": "1"},
                {"old_text": "four", "new_text": "4"}
            ]}),
        )
        .await;
        assert!(!out.ok);
        assert!(out.content.contains("edit 2 of 2"), "{}", out.content);
        assert!(out.content.contains("not found"));
        assert_eq!(fs::read_to_string(&file).unwrap(), "one\ntwo\nthree\n");
        assert!(env.undo.entries().unwrap().is_empty());
    }

    #[tokio::test]
    async fn repeating_an_applied_edit_says_it_is_applied_already() {
        let (dir, env) = setup();
        let file = dir.path().join("a.rs");
        fs::write(&file, "fn main() {\n    let x = 1;\n}\n").unwrap();
        let edit = json!({"path": "a.rs", "edits": [
            {"old_text": "    let x = 1;", "new_text": "    let x = 2;"}
        ]});
        assert!(call(&Patch, &env, edit.clone()).await.ok);
        let again = call(&Patch, &env, edit).await;
        assert!(!again.ok);
        assert!(
            again
                .content
                .contains("(line 2): the edit appears to be applied already"),
            "{}",
            again.content
        );
        assert!(again.content.ends_with("Nothing was changed."));
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "fn main() {\n    let x = 2;\n}\n"
        );
        // An old_text that is simply wrong still gets the closest region.
        let wrong = json!({"path": "a.rs", "edits": [
            {"old_text": "    let y = 1;", "new_text": "    let y = 3;"}
        ]});
        let out = call(&Patch, &env, wrong).await;
        assert!(!out.content.contains("applied already"), "{}", out.content);
        assert!(out.content.contains("closest region"), "{}", out.content);
    }

    #[tokio::test]
    async fn the_result_names_the_line_each_edit_starts_on_in_the_edited_file() {
        let (dir, env) = setup();
        let file = dir.path().join("fifty.txt");
        let text: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        fs::write(&file, text).unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "fifty.txt", "edits": [
                {"old_text": "line 40\n", "new_text": "line 40\nline 40b\n"},
                {"old_text": "line 10\nline 11\n", "new_text": "line 10-11\n"},
                {"old_text": "line 45", "new_text": "line 45!"}
            ]}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        // The second edit, above the first, took a line away: 40 moved to 39.
        assert!(
            out.content
                .starts_with("Edited fifty.txt at lines 39, 10, 45: 3 edits"),
            "{}",
            out.content
        );
        let after = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = after.lines().collect();
        assert_eq!(
            (lines[38], lines[9], lines[44]),
            ("line 40", "line 10-11", "line 45!")
        );
    }

    #[tokio::test]
    async fn whitespace_only_differences_are_applied_when_unique() {
        let (dir, env) = setup();
        let file = dir.path().join("a.py");
        fs::write(&file, "x = 1\ndef f():\n        return 1\n").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.py", "edits": [{"old_text": "def f():\n    return 1", "new_text": "def f():\n    return 2"}]}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        assert!(
            out.content
                .contains("matched lines 2-3 only when whitespace is ignored"),
            "{}",
            out.content
        );
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "x = 1\ndef f():\n        return 2\n"
        );
        assert_eq!(env.undo.entries().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn ambiguous_whitespace_matches_and_misses_change_nothing() {
        let (dir, env) = setup();
        let file = dir.path().join("b.py");
        let before = "if a:\n    x = 42\nif a:\n  x = 42\n";
        fs::write(&file, before).unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "b.py", "edits": [{"old_text": "if a:\nx = 42", "new_text": "y"}]}),
        )
        .await;
        assert!(!out.ok);
        assert!(
            out.content.contains("matches 2 places (lines 1, 3)"),
            "{}",
            out.content
        );
        let out = call(
            &Patch,
            &env,
            json!({"path": "b.py", "edits": [{"old_text": "    x = 41", "new_text": "    x = 43"}]}),
        )
        .await;
        assert!(!out.ok);
        assert!(out.content.contains("closest region"), "{}", out.content);
        assert!(
            out.content.contains("`x = 42` in the file but `x = 41`"),
            "{}",
            out.content
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), before);
        assert!(env.undo.entries().unwrap().is_empty());
    }

    #[tokio::test]
    async fn ambiguous_edit_names_the_lines_and_replace_all_works() {
        let (dir, env) = setup();
        let file = dir.path().join("a.txt");
        fs::write(&file, "x\ny\nx\n").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.txt", "edits": [{"old_text": "x", "new_text": "z"}]}),
        )
        .await;
        assert!(!out.ok);
        assert!(out.content.contains("occurs 2 times"), "{}", out.content);
        assert!(out.content.contains("lines 1, 3"), "{}", out.content);
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.txt", "edits": [{"old_text": "x", "new_text": "z", "replace_all": true}]}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(fs::read_to_string(&file).unwrap(), "z\ny\nz\n");
    }

    #[tokio::test]
    async fn content_creates_with_parents_and_undo_removes_them() {
        let (dir, env) = setup();
        let out = call(
            &Patch,
            &env,
            json!({"path": "new/dir/f.txt", "content": "hello\nworld\n"}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(out.content, "Created new/dir/f.txt: 2 lines.");
        assert_eq!(
            change_of(&out),
            FileChange {
                path: "new/dir/f.txt".into(),
                action: FileAction::Created { lines: 2 },
            }
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("new/dir/f.txt")).unwrap(),
            "hello\nworld\n"
        );
        env.undo.undo_last(&env.workspace).unwrap().unwrap();
        assert!(!dir.path().join("new").exists());
    }

    #[tokio::test]
    async fn content_overwrites_and_undo_restores_bytes() {
        let (dir, env) = setup();
        let file = dir.path().join("a.txt");
        fs::write(&file, "old\r\ntext").unwrap();
        let out = call(&Patch, &env, json!({"path": "a.txt", "content": "new"})).await;
        assert!(out.ok, "{}", out.content);
        assert!(out.content.starts_with("Overwrote a.txt"));
        assert_eq!(
            change_of(&out).action,
            FileAction::Overwrote {
                lines: 1,
                was_lines: 2
            }
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        env.undo.undo_last(&env.workspace).unwrap().unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"old\r\ntext");
    }

    #[tokio::test]
    async fn crlf_files_take_lf_edits() {
        let (dir, env) = setup();
        let file = dir.path().join("w.txt");
        fs::write(&file, "a\r\nb\r\nc\r\n").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "w.txt", "edits": [{"old_text": "a\nb", "new_text": "a\nB"}]}),
        )
        .await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(fs::read_to_string(&file).unwrap(), "a\r\nB\r\nc\r\n");
    }

    #[tokio::test]
    async fn argument_errors() {
        let (dir, env) = setup();
        fs::write(dir.path().join("bin"), b"\x00\x01\x02").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let cases = [
            (
                json!({"path": "a", "content": "x", "edits": []}),
                "not both",
            ),
            (json!({"path": "a"}), "pass `edits`"),
            (json!({"path": "a", "edits": []}), "empty"),
            (
                json!({"path": "missing", "edits": [{"old_text": "a", "new_text": "b"}]}),
                "does not exist",
            ),
            (
                json!({"path": "bin", "edits": [{"old_text": "a", "new_text": "b"}]}),
                "not UTF-8",
            ),
            (json!({"path": "bin", "content": "x"}), "not UTF-8"),
            (json!({"path": "d", "content": "x"}), "is a directory"),
            (
                json!({"path": "../x", "content": "x"}),
                "outside the workspace",
            ),
            (
                json!({"path": ".fido-plan.json", "content": "{}"}),
                "Fido's own state",
            ),
            (
                json!({"path": "a", "edits": [{"old_text": "", "new_text": "b"}]}),
                "does not exist",
            ),
            (json!({"path": "a", "contents": "x"}), "invalid arguments"),
        ];
        for (args, expected) in cases {
            let out = call(&Patch, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
        fs::write(dir.path().join("e"), "abc").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "e", "edits": [{"old_text": "", "new_text": "b"}]}),
        )
        .await;
        assert!(out.content.contains("empty"), "{}", out.content);
        assert!(!dir.path().join("a").exists());
    }

    #[tokio::test]
    async fn undo_recording_failure_leaves_the_file() {
        let (dir, env) = setup();
        let file = dir.path().join("a.txt");
        fs::write(&file, "x").unwrap();
        // A file where the journal directory should be makes recording fail.
        fs::write(dir.path().join(".fido-state"), "in the way").unwrap();
        let out = call(
            &Patch,
            &env,
            json!({"path": "a.txt", "edits": [{"old_text": "x", "new_text": "y"}]}),
        )
        .await;
        assert!(!out.ok);
        assert!(out.content.contains("undo"), "{}", out.content);
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
    }

    #[test]
    fn line_delta_counts_only_changed_lines() {
        assert_eq!(line_delta("a\nb\nc", "a\nB\nc"), (1, 1));
        assert_eq!(line_delta("a", "a\nb"), (1, 0));
        assert_eq!(line_delta("a\nb", ""), (0, 2));
    }
}
