//! `fido undo [-C DIR]`: the terminal UI's `/undo` without the UI. It
//! reverts the workspace's latest undoable change: a file tool's edit or a
//! whole applied change set (`fido changes apply`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{fail, init_logging};

pub(super) fn run(dir: Option<PathBuf>) -> ExitCode {
    init_logging();
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    match undo_last(&dir) {
        Ok(text) => {
            println!("{}", crate::text::escape(&text));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err.to_string()),
    }
}

/// Reverts the latest undoable change of the workspace at `root`; the text
/// `fido undo` shows for it, the file's name escaped.
fn undo_last(root: &Path) -> Result<String, crate::runtime::local::UndoFailed> {
    // The file's name is the repository's: escaped, it is one line and
    // acts on no terminal.
    Ok(match crate::runtime::local::undo_last(root)? {
        Some(change) => format!(
            "undone: {} of {}",
            change.kind,
            crate::text::escape_line(&change.path)
        ),
        None => "nothing to undo".into(),
    })
}
