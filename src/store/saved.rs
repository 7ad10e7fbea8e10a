//! Conversations that the `/suspend` of earlier versions saved, each one a
//! JSON file under `.fido-state/sessions/`: `/recall NAME` and `/sessions`
//! still read them; nothing writes them any more (`/suspend` now sets a
//! bookmark in the session journal). The plan is not part of a saved
//! conversation: it describes the workspace, and a recall always
//! re-delivers the current one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::Message;
use crate::workspace::SESSIONS_DIR;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedFile {
    saved_at: String,
    messages: Vec<Message>,
}

/// Why a saved conversation could not be recalled.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("cannot list saved conversations: {0}")]
    List(#[source] io::Error),
    #[error("there is no suspended conversation to recall (use /suspend first)")]
    NothingSaved,
    #[error("{0:?} is not the name of a saved conversation")]
    BadName(String),
    #[error("cannot read the saved conversation {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("the saved conversation {name} is not valid: {source}")]
    Invalid {
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

/// One saved conversation, for listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedConversation {
    /// The file name without `.json`; what `/recall NAME` takes.
    pub name: String,
    pub saved_at: String,
    /// The first user prompt, cut short.
    pub preview: String,
}

fn dir(workspace: &Path) -> PathBuf {
    workspace.join(SESSIONS_DIR)
}

/// Saved conversations, newest first. Unreadable files are skipped.
pub fn list(workspace: &Path) -> io::Result<Vec<SavedConversation>> {
    let entries = match fs::read_dir(dir(workspace)) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut saved: Vec<SavedConversation> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry
                .file_name()
                .to_str()?
                .strip_suffix(".json")?
                .to_string();
            let file: SavedFile = serde_json::from_slice(&fs::read(entry.path()).ok()?).ok()?;
            let preview = super::journal::first_prompt(&file.messages);
            Some(SavedConversation {
                name,
                saved_at: file.saved_at,
                preview,
            })
        })
        .collect();
    saved.sort_by(|a, b| b.saved_at.cmp(&a.saved_at).then(b.name.cmp(&a.name)));
    Ok(saved)
}

/// The messages of the named conversation, or of the newest when `name`
/// is `None`.
pub fn load(workspace: &Path, name: Option<&str>) -> Result<(String, Vec<Message>), SavedError> {
    let name = match name {
        Some(name) => name.trim_end_matches(".json").to_string(),
        None => list(workspace)
            .map_err(SavedError::List)?
            .first()
            .map(|s| s.name.clone())
            .ok_or(SavedError::NothingSaved)?,
    };
    if name.contains('/') || name.contains("..") {
        return Err(SavedError::BadName(name));
    }
    let path = dir(workspace).join(format!("{name}.json"));
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(source) => return Err(SavedError::Read { name, source }),
    };
    match serde_json::from_slice::<SavedFile>(&bytes) {
        Ok(file) => Ok((name, file.messages)),
        Err(source) => Err(SavedError::Invalid { name, source }),
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::store::atomic::write_atomic;

    /// Saves `messages` as earlier versions did; returns the name to recall
    /// them by.
    fn suspend(workspace: &Path, messages: &[Message]) -> io::Result<String> {
        let saved_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let mut name = saved_at.replace([':', '.'], "-");
        let dir = dir(workspace);
        fs::create_dir_all(&dir)?;
        let mut n = 1;
        while dir.join(format!("{name}.json")).exists() {
            n += 1;
            name = format!("{}-{n}", saved_at.replace([':', '.'], "-"));
        }
        let file = SavedFile {
            saved_at,
            messages: messages.to_vec(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
        write_atomic(&dir.join(format!("{name}.json")), &text, None)?;
        Ok(name)
    }

    #[test]
    fn suspend_list_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list(dir.path()).unwrap().is_empty());
        assert!(matches!(
            load(dir.path(), None),
            Err(SavedError::NothingSaved)
        ));
        let messages = vec![
            Message::System {
                content: "s".into(),
            },
            Message::user("fix the parser please"),
        ];
        let first = suspend(dir.path(), &messages).unwrap();
        let second = suspend(dir.path(), &messages[..1]).unwrap();
        assert_ne!(first, second);
        let listed = list(dir.path()).unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].name, second, "newest first");
        assert_eq!(listed[1].preview, "fix the parser please");
        assert_eq!(load(dir.path(), Some(&first)).unwrap().1, messages);
        assert_eq!(load(dir.path(), None).unwrap().0, second);
        assert!(matches!(
            load(dir.path(), Some("../../etc/passwd")),
            Err(SavedError::BadName(_))
        ));
        std::fs::write(dir.path().join(".fido-state/sessions/bad.json"), "{").unwrap();
        let invalid = load(dir.path(), Some("bad")).unwrap_err();
        assert!(matches!(invalid, SavedError::Invalid { .. }), "{invalid}");
        assert!(
            invalid
                .to_string()
                .starts_with("the saved conversation bad is not valid: "),
            "{invalid}"
        );
        assert_eq!(
            list(dir.path()).unwrap().len(),
            2,
            "unreadable files are skipped"
        );
    }
}
