//! The editor a session runs in, when it holds the truth about the
//! workspace's files: an ACP client that advertised `fs.readTextFile`
//! (README "Use Fido in your editor"). Its unsaved buffers are what the
//! person sees, so `read_file` reads through it, after Fido's own checks
//! (the path inside the workspace, symlinks confined, a regular file)
//! passed on the disk.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

pub type EditorRead<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

pub trait EditorFiles: Send + Sync {
    /// The text of the file at `path` (absolute, inside the workspace) as
    /// the editor has it, unsaved changes included; `Err` says why not,
    /// and the tool reads the disk instead.
    fn read_text<'a>(&'a self, path: &'a Path) -> EditorRead<'a>;
}
