//! The prompt history of a workspace, in `.fido-state/history.jsonl`: the
//! lines the person entered (prompts and commands), one JSON string per
//! line so that multi-line prompts survive. The engine keeps it
//! (`Op::PromptHistory`, `Op::RememberPrompt`); a front end only asks.
//!
//! Lines are appended with `O_APPEND`, one `write` each, so two Fido
//! processes in the same workspace interleave whole lines.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use crate::workspace::HISTORY_FILE;

/// Entries kept when loading (the newest).
pub const MAX_LOADED: usize = 1000;

/// The history file of a workspace.
pub fn path_in(workspace: &Path) -> PathBuf {
    workspace.join(HISTORY_FILE)
}

/// The newest [`MAX_LOADED`] entries, oldest first; unreadable lines are
/// skipped and a missing file is an empty history. Blocking.
pub fn load(path: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut entries: Vec<String> = io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<String>(&line).ok())
        .collect();
    let skip = entries.len().saturating_sub(MAX_LOADED);
    entries.drain(..skip);
    entries
}

/// Appends one entry. Blocking.
pub fn append(path: &Path, entry: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_string(entry).map_err(io::Error::other)?;
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_restart_in_order_newlines_included() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        assert!(load(&path).is_empty());
        for entry in ["first", "two\nlines", "third"] {
            append(&path, entry).unwrap();
        }
        assert_eq!(load(&path), ["first", "two\nlines", "third"]);
        std::fs::write(&path, "\"ok\"\nnot json\n").unwrap();
        assert_eq!(load(&path), ["ok"], "a torn line is skipped");
    }

    #[test]
    fn only_the_newest_are_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        let lines: String = (0..MAX_LOADED + 5).map(|n| format!("\"{n}\"\n")).collect();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, lines).unwrap();
        let loaded = load(&path);
        assert_eq!(loaded.len(), MAX_LOADED);
        assert_eq!(loaded[0], "5");
    }
}
