//! A JSON state file in the workspace (`.fido-plan.json`, `.fido-todo.json`)
//! kept by Fido's rules, shared by every store:
//!
//! - every read-modify-write happens under an exclusive advisory lock on a
//!   sidecar `<file>.lock`, so two Fido processes never interleave. The
//!   wait for it is bounded (5 s): a lock held longer is the clear error
//!   `plan file locked by pid N for more than 5 s`, never a hang. The
//!   holder writes its pid into the lock file for that message. These are
//!   blocking calls: async callers run them with `spawn_blocking`;
//! - the file is re-read under the lock (another process may have written);
//! - writes replace the file atomically ([`write_atomic`]): a crash leaves
//!   the old or the new content, never a torn file;
//! - a file that does not parse, or that the store finds invalid, is never
//!   overwritten silently: it is moved aside to `<file>.corrupt-<timestamp>`
//!   (a unique name) and reported, and the store starts empty;
//! - a file that is a symlink out of its directory (the workspace root for
//!   Fido's own names) is never followed: reading it would report a file
//!   Fido does not own as corrupt. It is an error that says so, and neither
//!   the link nor its target is touched.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::atomic::{remove_stale_temps, write_atomic};
use crate::workspace::normalise_lexically;

/// The longest wait for another process's lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How often a busy lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(10);

#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("{what} file locked by {holder} for more than {} s", waited.as_secs())]
    Busy {
        what: &'static str,
        /// `pid N`, or `another process` when the holder did not say.
        holder: String,
        waited: Duration,
    },
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
    #[error(
        "`{path}` is a symlink to a path outside the workspace; Fido does not follow it: remove the link"
    )]
    OutsideLink { path: String },
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
    /// The longest wait for another process's lock.
    lock_wait: Duration,
}

impl StateFile {
    pub fn new(path: PathBuf, what: &'static str) -> Self {
        StateFile {
            path,
            what,
            lock_wait: LOCK_WAIT,
        }
    }

    /// The same file with another bound on the lock wait (tests).
    pub fn with_lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the exclusive lock, waiting at most the lock wait while
    /// another process holds it. Blocking: call off the async runtime.
    pub fn lock(&self) -> Result<StateLock, StateFileError> {
        let lock_path = sidecar(&self.path, ".lock");
        let error = |source: io::Error| StateFileError::Lock {
            path: lock_path.display().to_string(),
            source,
        };
        if let Some(dir) = lock_path.parent() {
            fs::create_dir_all(dir).map_err(error)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(error)?;
        let start = Instant::now();
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    // Who holds it, for the message of a process that waits.
                    let _ = lock
                        .set_len(0)
                        .and_then(|()| write!(&mut *lock, "{}", std::process::id()));
                    return Ok(StateLock(lock));
                }
                Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                    if start.elapsed() >= self.lock_wait {
                        return Err(StateFileError::Busy {
                            what: self.what,
                            holder: holder(&lock_path),
                            waited: self.lock_wait,
                        });
                    }
                    file = back;
                    std::thread::sleep(LOCK_POLL);
                }
                Err((_, errno)) => return Err(error(io::Error::from(errno))),
            }
        }
    }

    /// Reads and parses the file; `check` may reject a parsed value (the
    /// store's own invariants), which sets the file aside like bad JSON.
    pub fn read<T: DeserializeOwned, E: std::fmt::Display>(
        &self,
        _lock: &StateLock,
        check: impl FnOnce(&T) -> Result<(), E>,
    ) -> Result<Contents<T>, StateFileError> {
        if leaves_its_directory(&self.path) {
            return Err(StateFileError::OutsideLink {
                path: self.path.display().to_string(),
            });
        }
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
            Err(problem) => self.set_aside(&problem.to_string()),
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
                // Every writer holds the lock: what temp files there are
                // belong to writers killed mid-write.
                remove_stale_temps(&self.path);
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

/// `pid N` from the lock file, or `another process`.
fn holder(lock_path: &Path) -> String {
    fs::read_to_string(lock_path)
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .map_or_else(|| "another process".to_string(), |pid| format!("pid {pid}"))
}

/// Whether `path` is a symlink whose target (resolved, or lexically when
/// it dangles) lies outside the directory that holds it.
fn leaves_its_directory(path: &Path) -> bool {
    let (Ok(link), Some(dir)) = (fs::read_link(path), path.parent()) else {
        return false;
    };
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let target = fs::canonicalize(path).unwrap_or_else(|_| normalise_lexically(&dir.join(link)));
    !target.starts_with(&dir)
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_held_too_long_is_a_clear_error_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join(".fido-plan.json"), "plan")
            .with_lock_wait(Duration::from_millis(200));
        let held = file.lock().unwrap();
        let waiter = file.clone();
        let start = Instant::now();
        let err = std::thread::spawn(move || waiter.lock().err())
            .join()
            .unwrap()
            .expect("the second lock must fail while the first is held");
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(200), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "plan file locked by pid {} for more than 0 s",
                std::process::id()
            )
        );
        drop(held);
        file.lock().unwrap();
    }

    #[test]
    fn the_default_wait_is_five_seconds() {
        let file = StateFile::new(PathBuf::from("x"), "plan");
        assert_eq!(file.lock_wait, Duration::from_secs(5));
        let busy = StateFileError::Busy {
            what: "plan",
            holder: "pid 42".into(),
            waited: LOCK_WAIT,
        };
        assert_eq!(
            busy.to_string(),
            "plan file locked by pid 42 for more than 5 s"
        );
    }

    #[test]
    fn a_write_removes_the_temp_files_of_killed_writers_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".fido-plan.json");
        let stale = [
            ".fido-plan.json.tmp-4242-0000abcd",
            ".fido-plan.json.tmp-7-ffffffff",
        ];
        let kept = [
            ".fido-plan.json.corrupt-2026-12-01",
            ".fido-todo.json.tmp-4242-0000abcd",
            "notes.txt",
        ];
        for name in stale.iter().chain(&kept) {
            fs::write(dir.path().join(name), b"{").unwrap();
        }
        let file = StateFile::new(path.clone(), "plan");
        let lock = file.lock().unwrap();
        file.write(&lock, &serde_json::json!({"reason": "new"}))
            .unwrap();
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected: Vec<String> = kept
            .iter()
            .chain(&[".fido-plan.json", ".fido-plan.json.lock"])
            .map(|n| n.to_string())
            .collect();
        expected.sort();
        assert_eq!(left, expected);
    }
}
