//! The editor a session runs in, when it holds the truth about the
//! workspace's files: an ACP client that advertised `fs.readTextFile`
//! or `fs.writeTextFile` (README "Use Fido in your editor"). Its unsaved
//! buffers are what the person sees, so `read_file` reads through it and
//! `patch` edits through it, after Fido's own checks (the path inside the
//! workspace, symlinks confined, a regular file, not a protected path)
//! passed on the disk.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

/// Longest wait for the editor's answer to a read or a write; past it the
/// tool uses the disk (an editor that never answers must not hold the
/// turn).
pub const EDITOR_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub type EditorRead<'a> = Pin<Box<dyn Future<Output = Result<String, EditorError>> + Send + 'a>>;
pub type EditorWrite<'a> = Pin<Box<dyn Future<Output = Result<(), EditorError>> + Send + 'a>>;

/// Why the editor gave no text or took none; the tool uses the disk and
/// logs this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    #[error("this editor does not write files")]
    NoWrites,
    #[error("the editor did not answer within {} s", EDITOR_WAIT.as_secs())]
    NoAnswer,
    /// The session the request would name is not made yet.
    #[error("the session has no id yet")]
    NoSession,
    /// The editor answered `request` (`fs/read_text_file`, …) with an error.
    #[error("{request}: {reason}")]
    Refused {
        request: &'static str,
        reason: String,
    },
}

pub trait EditorFiles: Send + Sync {
    /// Whether the editor gives its text of a file (`read_text`).
    fn reads(&self) -> bool {
        true
    }

    /// Whether the editor takes a file's new text (`write_text`).
    fn writes(&self) -> bool {
        false
    }

    /// The text of the file at `path` (absolute, inside the workspace) as
    /// the editor has it, unsaved changes included; `Err` says why not,
    /// and the tool reads the disk instead.
    fn read_text<'a>(&'a self, path: &'a Path) -> EditorRead<'a>;

    /// Gives the editor `text` as the new content of the existing file at
    /// `path` (absolute, inside the workspace); `Err` says why not, and
    /// the tool writes the disk instead.
    fn write_text<'a>(&'a self, path: &'a Path, text: &'a str) -> EditorWrite<'a> {
        let _ = (path, text);
        Box::pin(async { Err(EditorError::NoWrites) })
    }
}

/// [`EditorFiles::read_text`], given up after [`EDITOR_WAIT`].
pub async fn read_within(editor: &dyn EditorFiles, path: &Path) -> Result<String, EditorError> {
    within(editor.read_text(path)).await
}

/// [`EditorFiles::write_text`], given up after [`EDITOR_WAIT`].
pub async fn write_within(
    editor: &dyn EditorFiles,
    path: &Path,
    text: &str,
) -> Result<(), EditorError> {
    within(editor.write_text(path, text)).await
}

async fn within<T>(asked: impl Future<Output = Result<T, EditorError>>) -> Result<T, EditorError> {
    tokio::time::timeout(EDITOR_WAIT, asked)
        .await
        .unwrap_or(Err(EditorError::NoAnswer))
}
