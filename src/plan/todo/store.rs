//! Persistence of the `todo` state in `.fido-todo.json` (workspace root),
//! with the plan file's rules: every change happens under an exclusive
//! advisory lock on a sidecar lock file, re-reads the file (another Fido
//! process may have written it) and replaces it atomically through
//! [`write_atomic`] (temp file, fsync, rename, fsync of the directory).
//!
//! Only a call that changed the state writes: reads, no-op updates and
//! batches, and rejected calls leave the file (and its mtime) alone. A file
//! that cannot be read as a valid state (bad JSON, bad shapes, duplicate
//! ids, an invalid counter, dangling dependencies) is never overwritten
//! silently: it is moved aside to `<file>.corrupt-<timestamp>` and reported,
//! and the state starts empty.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::fcntl::{Flock, FlockArg};

use super::state::TodoState;
use crate::session::atomic::write_atomic;

/// The state file's name, in the workspace root.
pub const TODO_FILE: &str = ".fido-todo.json";

#[derive(Debug, thiserror::Error)]
pub enum TodoStoreError {
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// The result of reading the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub state: TodoState,
    /// Whether a state was ever saved (the file exists and was valid).
    pub saved: bool,
    /// Set when the file was corrupt and has been moved aside.
    pub warning: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TodoStore {
    path: PathBuf,
}

impl TodoStore {
    pub fn new(path: PathBuf) -> Self {
        TodoStore { path }
    }

    /// The store of the workspace at `root`.
    pub fn in_workspace(root: &Path) -> Self {
        TodoStore::new(root.join(TODO_FILE))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the state (empty when there is no file).
    pub fn load(&self) -> Result<Loaded, TodoStoreError> {
        let _lock = self.lock()?;
        self.read_unlocked()
    }

    /// Runs `change` on the current state under the lock and saves the
    /// state it returns when that differs from the current one.
    pub fn update<R>(
        &self,
        change: impl FnOnce(&TodoState) -> (TodoState, R),
    ) -> Result<(R, Loaded), TodoStoreError> {
        let _lock = self.lock()?;
        let current = self.read_unlocked()?;
        let (next, result) = change(&current.state);
        if next == current.state {
            return Ok((result, current));
        }
        self.write_unlocked(&next)?;
        Ok((
            result,
            Loaded {
                state: next,
                saved: true,
                warning: current.warning,
            },
        ))
    }

    fn lock(&self) -> Result<Flock<File>, TodoStoreError> {
        let lock_path = sidecar(&self.path, ".lock");
        let shown = || lock_path.display().to_string();
        if let Some(dir) = lock_path.parent() {
            fs::create_dir_all(dir).map_err(|source| TodoStoreError::Lock {
                path: shown(),
                source,
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| TodoStoreError::Lock {
                path: shown(),
                source,
            })?;
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| TodoStoreError::Lock {
            path: shown(),
            source: io::Error::from(errno),
        })
    }

    fn read_unlocked(&self) -> Result<Loaded, TodoStoreError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Ok(Loaded {
                    state: TodoState::empty(),
                    saved: false,
                    warning: None,
                });
            }
            Err(err) if err.kind() == io::ErrorKind::InvalidData => {
                return self.set_aside(&format!("not UTF-8 ({err})"));
            }
            Err(source) => {
                return Err(TodoStoreError::Read {
                    path: self.path.display().to_string(),
                    source,
                });
            }
        };
        let state = match serde_json::from_str::<TodoState>(&text) {
            Ok(state) => state,
            Err(err) => return self.set_aside(&err.to_string()),
        };
        match state.check() {
            Ok(()) => Ok(Loaded {
                state,
                saved: true,
                warning: None,
            }),
            Err(problem) => self.set_aside(&problem),
        }
    }

    fn set_aside(&self, cause: &str) -> Result<Loaded, TodoStoreError> {
        let stamp = humantime::format_rfc3339_millis(SystemTime::now())
            .to_string()
            .replace(':', "-");
        // Under the lock, so the name check cannot race another writer.
        let mut aside = sidecar(&self.path, &format!(".corrupt-{stamp}"));
        let mut n = 1;
        while fs::symlink_metadata(&aside).is_ok() {
            aside = sidecar(&self.path, &format!(".corrupt-{stamp}-{n}"));
            n += 1;
        }
        fs::rename(&self.path, &aside).map_err(|source| TodoStoreError::Write {
            path: aside.display().to_string(),
            source,
        })?;
        Ok(Loaded {
            state: TodoState::empty(),
            saved: false,
            warning: Some(format!(
                "{} was corrupt ({cause}); it was kept as {} and Fido started with an empty todo list",
                self.path.display(),
                aside.display()
            )),
        })
    }

    fn write_unlocked(&self, state: &TodoState) -> Result<(), TodoStoreError> {
        let written = serde_json::to_string_pretty(state)
            .map_err(io::Error::other)
            .and_then(|mut text| {
                text.push('\n');
                if let Some(dir) = self.path.parent() {
                    fs::create_dir_all(dir)?;
                }
                write_atomic(&self.path, text.as_bytes(), None)
            });
        written.map_err(|source| TodoStoreError::Write {
            path: self.path.display().to_string(),
            source,
        })
    }
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}
