//! `patch` through the editor (`tools::editor`), when the session runs in
//! one that writes files: the edits apply to the editor's text of the file
//! (its unsaved changes included), the undo entry keeps that text, and the
//! new text goes to the editor, which shows it in its buffer. Fido's own
//! checks run on the disk first, so a path they refuse is never sent; a
//! file the editor cannot give or take is read or written on the disk, as
//! without an editor. A new file is created on the disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileEnv, open_text};
use crate::tools::editor::{EditorError, EditorFiles, read_within, write_within};
use crate::workspace::{FinalLink, Place};

/// Where a change's text comes from and where it goes.
#[derive(Default)]
pub(super) struct Through {
    /// The editor's text of the file: what the edits apply to and what
    /// undo restores. `None`: the disk's.
    buffer: Option<String>,
    editor: Option<EditorSink>,
}

/// The editor that takes the new text, and the runtime its request runs
/// on (the change itself runs on a blocking thread).
struct EditorSink {
    editor: Arc<dyn EditorFiles>,
    runtime: tokio::runtime::Handle,
    root: PathBuf,
}

impl Through {
    /// The disk, both ways.
    pub(super) fn disk() -> Through {
        Through::default()
    }

    /// Through `editor`, which writes files: its text of the file at
    /// `path`, where the editor reads files and has one, is the base.
    pub(super) async fn editor(
        editor: Arc<dyn EditorFiles>,
        files: &FileEnv,
        path: &str,
    ) -> Through {
        let buffer = if editor.reads() {
            buffer(editor.as_ref(), files, path).await
        } else {
            None
        };
        Through {
            buffer,
            editor: Some(EditorSink {
                editor,
                runtime: tokio::runtime::Handle::current(),
                root: files.workspace.root.clone(),
            }),
        }
    }

    /// The text the edits apply to: the editor's, else the disk's bytes.
    pub(super) fn base(&self, disk: Vec<u8>) -> Vec<u8> {
        match &self.buffer {
            Some(text) => text.clone().into_bytes(),
            None => disk,
        }
    }

    /// The editor's text, for the approval's preview.
    pub(super) fn buffer(&self) -> Option<&str> {
        self.buffer.as_deref()
    }

    /// Gives the editor the new text of the existing file at `place`;
    /// `false` where there is no editor or it did not take it (the caller
    /// writes the disk). Blocking: called off the runtime's workers.
    pub(super) fn give_to_editor(&self, place: &Place, after: &[u8]) -> bool {
        let (Some(sink), Ok(text)) = (&self.editor, std::str::from_utf8(after)) else {
            return false;
        };
        let abs = sink.root.join(place.rel_path());
        let asked = write_within(sink.editor.as_ref(), &abs, text);
        match sink.runtime.block_on(asked) {
            Ok(()) => true,
            Err(why) => not_taken(&place.shown, &why),
        }
    }
}

fn not_taken(shown: &str, why: &EditorError) -> bool {
    tracing::info!(path = %shown, %why, "the editor did not take the new text; wrote the disk");
    false
}

/// The editor's text of the file at `path`, once Fido's checks passed on
/// the disk (inside the workspace, not protected, an existing regular
/// file within patch's size, opened but not read: the change reads it);
/// `None` where they fail or the editor cannot say.
async fn buffer(editor: &dyn EditorFiles, files: &FileEnv, path: &str) -> Option<String> {
    let (checker, path) = (files.clone(), path.to_string());
    let checked = tokio::task::spawn_blocking(move || existing_file(&checker, &path));
    let abs = checked.await.ok().flatten()?;
    match read_within(editor, &abs).await {
        Ok(text) => Some(text),
        Err(why) => not_given(&abs, &why),
    }
}

fn not_given(abs: &Path, why: &EditorError) -> Option<String> {
    tracing::info!(path = %abs.display(), %why, "the editor did not give the file; patch reads the disk");
    None
}

/// The absolute path of the existing regular file `path` names, where a
/// change to it passes Fido's checks.
fn existing_file(files: &FileEnv, path: &str) -> Option<PathBuf> {
    let place = files
        .workspace
        .locate_for_change(path, FinalLink::Follow)
        .ok()?;
    match open_text(&place) {
        Ok(Some(_)) => Some(files.workspace.root.join(place.rel_path())),
        Ok(None) | Err(_) => None,
    }
}
