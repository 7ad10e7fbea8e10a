//! `fido undo [-C DIR]`: the terminal UI's `/undo` without the UI. It
//! reverts the workspace's latest undoable change: a file tool's edit or a
//! whole applied change set (`fido changes apply`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{fail, init_logging};
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

pub(super) fn run(dir: Option<PathBuf>) -> ExitCode {
    init_logging();
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    match undo_last(&dir) {
        Ok(text) => {
            println!("{}", crate::text::escape(&text));
            ExitCode::SUCCESS
        }
        Err(message) => fail(&message),
    }
}

/// Reverts the latest undoable change of the workspace at `root`; the text
/// `/undo` and `fido undo` show for it, the file's name escaped.
pub(super) fn undo_last(root: &Path) -> Result<String, String> {
    let workspace =
        Workspace::new(root).map_err(|e| format!("workspace {}: {e}", root.display()))?;
    let undo = UndoLog::new(&workspace.root);
    match undo.undo_last(&workspace) {
        // The file's name is the repository's: escaped, it is one line
        // and acts on no terminal.
        Ok(Some(entry)) => Ok(format!(
            "undone: {} of {}",
            entry.kind,
            crate::text::escape_line(&entry.path)
        )),
        Ok(None) => Ok("nothing to undo".into()),
        Err(err) => Err(format!("cannot undo: {err}")),
    }
}
