//! Persistence of the plan in `.fido-plan.json` (config `PLAN_FILE`).
//!
//! Every change happens under an exclusive advisory lock on a sidecar lock
//! file, reads the current file afresh (another Fido process may have
//! written it), and replaces it atomically: temp file in the same directory,
//! fsync, rename, fsync of the directory. A crash leaves either the old or
//! the new file, never a torn one. A corrupt file is never overwritten
//! silently: it is moved aside to `<file>.corrupt-<timestamp>` and reported.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::fcntl::{Flock, FlockArg};

use super::model::PlanState;
use crate::session::atomic::write_atomic;

#[derive(Debug, thiserror::Error)]
pub enum PlanStoreError {
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
    pub state: PlanState,
    /// Set when the file was corrupt and has been moved aside.
    pub warning: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PlanStore {
    path: PathBuf,
}

impl PlanStore {
    pub fn new(path: PathBuf) -> Self {
        PlanStore { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the plan (empty when there is no file).
    pub fn load(&self) -> Result<Loaded, PlanStoreError> {
        let _lock = self.lock()?;
        self.read_unlocked()
    }

    /// Applies `change` to the current state and saves the result, all under
    /// the lock. When `change` fails nothing is written.
    pub fn update<E>(
        &self,
        change: impl FnOnce(&PlanState) -> Result<PlanState, E>,
    ) -> Result<Result<(PlanState, Option<String>), E>, PlanStoreError> {
        let _lock = self.lock()?;
        let current = self.read_unlocked()?;
        let next = match change(&current.state) {
            Ok(next) => next,
            Err(err) => return Ok(Err(err)),
        };
        self.write_unlocked(&next)?;
        Ok(Ok((next, current.warning)))
    }

    fn lock(&self) -> Result<Flock<File>, PlanStoreError> {
        let lock_path = sidecar(&self.path, ".lock");
        let shown = || lock_path.display().to_string();
        if let Some(dir) = lock_path.parent() {
            fs::create_dir_all(dir).map_err(|source| PlanStoreError::Lock {
                path: shown(),
                source,
            })?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| PlanStoreError::Lock {
                path: shown(),
                source,
            })?;
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| PlanStoreError::Lock {
            path: shown(),
            source: io::Error::from(errno),
        })
    }

    fn read_unlocked(&self) -> Result<Loaded, PlanStoreError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Ok(Loaded {
                    state: PlanState::empty(),
                    warning: None,
                });
            }
            Err(err) if err.kind() == io::ErrorKind::InvalidData => {
                return self.set_aside(&format!("not UTF-8 ({err})"));
            }
            Err(source) => {
                return Err(PlanStoreError::Read {
                    path: self.path.display().to_string(),
                    source,
                });
            }
        };
        match serde_json::from_str::<PlanState>(&text) {
            Ok(state) => Ok(Loaded {
                state,
                warning: None,
            }),
            Err(err) => self.set_aside(&err.to_string()),
        }
    }

    fn set_aside(&self, cause: &str) -> Result<Loaded, PlanStoreError> {
        let stamp = humantime::format_rfc3339_millis(SystemTime::now())
            .to_string()
            .replace(':', "-");
        let aside = sidecar(&self.path, &format!(".corrupt-{stamp}"));
        fs::rename(&self.path, &aside).map_err(|source| PlanStoreError::Write {
            path: aside.display().to_string(),
            source,
        })?;
        Ok(Loaded {
            state: PlanState::empty(),
            warning: Some(format!(
                "{} was corrupt ({cause}); it was kept as {} and Fido started with an empty plan",
                self.path.display(),
                aside.display()
            )),
        })
    }

    fn write_unlocked(&self, state: &PlanState) -> Result<(), PlanStoreError> {
        let mut text = state.to_json_text();
        text.push('\n');
        let written = match self.path.parent() {
            Some(dir) => fs::create_dir_all(dir),
            None => Ok(()),
        }
        .and_then(|()| write_atomic(&self.path, text.as_bytes(), None));
        written.map_err(|source| PlanStoreError::Write {
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
