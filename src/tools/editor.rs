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

pub type EditorRead<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;
pub type EditorWrite<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

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
        Box::pin(async { Err("this editor does not write files".to_string()) })
    }
}

/// [`EditorFiles::read_text`], given up after [`EDITOR_WAIT`].
pub async fn read_within(editor: &dyn EditorFiles, path: &Path) -> Result<String, String> {
    within(editor.read_text(path)).await
}

/// [`EditorFiles::write_text`], given up after [`EDITOR_WAIT`].
pub async fn write_within(editor: &dyn EditorFiles, path: &Path, text: &str) -> Result<(), String> {
    within(editor.write_text(path, text)).await
}

async fn within<T>(asked: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::time::timeout(EDITOR_WAIT, asked)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the editor did not answer within {} s",
                EDITOR_WAIT.as_secs()
            ))
        })
}
