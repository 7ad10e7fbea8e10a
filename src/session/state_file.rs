//! A JSON state file in the workspace (`.fido-plan.json`, `.fido-todo.json`)
//! kept by Fido's rules, shared by every store:
//!
//! - every read-modify-write happens under an exclusive advisory lock on a
//!   sidecar `<file>.lock`, so two Fido processes never interleave;
//! - the file is re-read under the lock (another process may have written);
//! - writes replace the file atomically ([`write_atomic`]): a crash leaves
//!   the old or the new content, never a torn file;
//! - a file that does not parse, or that the store finds invalid, is never
//!   overwritten silently: it is moved aside to `<file>.corrupt-<timestamp>`
//!   (a unique name) and reported, and the store starts empty.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::atomic::write_atomic;

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
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

/// What reading the file found.
#[derive(Debug, Clone, PartialEq)]
pub enum Contents<T> {
    /// No file: nothing was ever saved.
    Missing,
    Valid(T),
    /// The file was corrupt and has been moved aside; the sentence says
    /// where to.
    SetAside {
        warning: String,
    },
}

/// Proof that the lock is held; released on drop.
pub struct StateLock(#[allow(dead_code)] Flock<File>);

#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    /// What the file holds, for the warning (`plan`, `todo list`).
    what: &'static str,
}

impl StateFile {
    pub fn new(path: PathBuf, what: &'static str) -> Self {
        StateFile { path, what }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the exclusive lock (blocking while another process holds it).
    pub fn lock(&self) -> Result<StateLock, StateFileError> {
        let lock_path = sidecar(&self.path, ".lock");
        let error = |source: io::Error| StateFileError::Lock {
            path: lock_path.display().to_string(),
            source,
        };
        if let Some(dir) = lock_path.parent() {
            fs::create_dir_all(dir).map_err(error)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(error)?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map(StateLock)
            .map_err(|(_, errno)| error(io::Error::from(errno)))
    }

    /// Reads and parses the file; `check` may reject a parsed value (the
    /// store's own invariants), which sets the file aside like bad JSON.
    pub fn read<T: DeserializeOwned>(
        &self,
        _lock: &StateLock,
        check: impl FnOnce(&T) -> Result<(), String>,
    ) -> Result<Contents<T>, StateFileError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Contents::Missing),
            Err(err) if err.kind() == io::ErrorKind::InvalidData => {
                return self.set_aside(&format!("not UTF-8 ({err})"));
            }
            Err(source) => {
                return Err(StateFileError::Read {
                    path: self.path.display().to_string(),
                    source,
                });
            }
        };
        let value = match serde_json::from_str::<T>(&text) {
            Ok(value) => value,
            Err(err) => return self.set_aside(&err.to_string()),
        };
        match check(&value) {
            Ok(()) => Ok(Contents::Valid(value)),
            Err(problem) => self.set_aside(&problem),
        }
    }

    /// Replaces the file with `value` as pretty JSON and a final newline.
    pub fn write<T: Serialize>(&self, _lock: &StateLock, value: &T) -> Result<(), StateFileError> {
        let written = serde_json::to_string_pretty(value)
            .map_err(io::Error::other)
            .and_then(|mut text| {
                text.push('\n');
                if let Some(dir) = self.path.parent() {
                    fs::create_dir_all(dir)?;
                }
                write_atomic(&self.path, text.as_bytes(), None)
            });
        written.map_err(|source| StateFileError::Write {
            path: self.path.display().to_string(),
            source,
        })
    }

    fn set_aside<T>(&self, cause: &str) -> Result<Contents<T>, StateFileError> {
        let stamp = humantime::format_rfc3339_millis(SystemTime::now())
            .to_string()
            .replace(':', "-");
        // Two corrupt files within one millisecond must not share a name: the
        // rename would silently replace the first one kept aside. Every
        // set-aside happens under the lock, so the check cannot race.
        let mut aside = sidecar(&self.path, &format!(".corrupt-{stamp}"));
        let mut n = 1;
        while fs::symlink_metadata(&aside).is_ok() {
            aside = sidecar(&self.path, &format!(".corrupt-{stamp}-{n}"));
            n += 1;
        }
        fs::rename(&self.path, &aside).map_err(|source| StateFileError::Write {
            path: aside.display().to_string(),
            source,
        })?;
        Ok(Contents::SetAside {
            warning: format!(
                "{} was corrupt ({cause}); it was kept as {} and Fido started with an empty {}",
                self.path.display(),
                aside.display(),
                self.what
            ),
        })
    }
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}
