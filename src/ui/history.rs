//! Prompt history per workspace, in `.fido-state/history.jsonl` (one JSON
//! string per line, so multi-line prompts survive).
//!
//! Loading happens once before the UI starts; appending happens in a
//! writer task fed through a channel, so the UI handler never touches the
//! disk and entries are written in the order they were entered.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use crate::workspace::HISTORY_FILE;

/// Entries kept when loading (the newest).
pub const MAX_LOADED: usize = 1000;

/// The history file of a workspace.
pub fn path_in(workspace: &Path) -> PathBuf {
    workspace.join(HISTORY_FILE)
}

/// The newest [`MAX_LOADED`] entries, oldest first; unreadable lines are
/// skipped and a missing file is an empty history.
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

/// What the UI starts with: the saved entries and where new ones go
/// (nowhere by default, as in tests).
#[derive(Debug, Default)]
pub struct PromptHistory {
    pub entries: Vec<String>,
    pub writer: Option<HistoryWriter>,
}

impl PromptHistory {
    /// Loads the workspace's history and starts its writer.
    pub fn for_workspace(workspace: &Path) -> PromptHistory {
        let path = path_in(workspace);
        PromptHistory {
            entries: load(&path),
            writer: Some(HistoryWriter::spawn(path)),
        }
    }
}

/// Appends entries from the UI; cloning it is cheap.
#[derive(Debug, Clone)]
pub struct HistoryWriter {
    sender: mpsc::UnboundedSender<String>,
}

impl HistoryWriter {
    /// Starts the writer task for `path` (on the current runtime).
    pub fn spawn(path: PathBuf) -> HistoryWriter {
        let (sender, mut receiver) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(entry) = receiver.recv().await {
                let path = path.clone();
                let written = tokio::task::spawn_blocking(move || append(&path, &entry)).await;
                if let Ok(Err(err)) = written {
                    tracing::warn!(error = %err, "cannot save the prompt history");
                }
            }
        });
        HistoryWriter { sender }
    }

    /// Queues one entry; never blocks.
    pub fn append(&self, entry: &str) {
        // The writer is gone only at shutdown; the entry is lost then.
        let _ = self.sender.send(entry.to_string());
    }
}

fn append(path: &Path, entry: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let line = serde_json::to_string(entry).map_err(io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(file, "{line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_survive_a_restart_in_order_newlines_included() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        assert!(load(&path).is_empty());
        let writer = HistoryWriter::spawn(path.clone());
        for entry in ["first", "two\nlines", "third"] {
            writer.append(entry);
        }
        for _ in 0..200 {
            if load(&path).len() == 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(load(&path), ["first", "two\nlines", "third"]);
        std::fs::write(&path, "\"ok\"\nnot json\n").unwrap();
        assert_eq!(load(&path), ["ok"], "a torn line is skipped");
    }
}
