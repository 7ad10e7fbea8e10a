//! A JSON state file in the workspace (`.fido-plan.json`, `.fido-todo.json`)
//! kept by Fido's rules, shared by every store (a subagent's own plan
//! takes the same steps in memory, [`StateFile::in_memory`]):
//!
//! - every read-modify-write happens under an exclusive advisory lock, so
//!   two Fido processes never interleave. The lock of a file in the
//!   checkout (the plan, the todo list) is `.fido-state/locks/<its path in
//!   the workspace>.lock`, out of the user's way (`.fido-state/` ignores
//!   itself); a file already under `.fido-state/` has a sidecar
//!   `<file>.lock`. Neither lock is opened through a symlink, nor is it
//!   anything but a regular file: a repository may hold a `.fido-state/` of
//!   its own, and writing the pid would truncate a link's target. The
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
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::atomic::{remove_stale_temps, write_atomic};
use super::in_memory::{InMemory, MemoryLock};
use crate::workspace::{STATE_DIR, normalise_lexically};

/// The folder of `.fido-state/` that holds the locks of the checkout's
/// state files.
const LOCKS_DIR: &str = "locks";
/// The longest lock name kept whole; a longer one keeps its end (two
/// files sharing a lock only take turns more often).
const MAX_LOCK_NAME: usize = 200;

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
pub struct StateLock(#[allow(dead_code)] Held);

enum Held {
    File(#[allow(dead_code)] Flock<File>),
    Memory(#[allow(dead_code)] MemoryLock),
}

#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    /// The file every process that changes `path` locks.
    lock_path: PathBuf,
    /// The workspace's `.fido-state/`, for a file in the checkout: made
    /// (ignoring itself) before its lock is.
    state_dir: Option<PathBuf>,
    /// What the file holds, for the warning (`plan`, `todo list`).
    what: &'static str,
    /// The longest wait for another process's lock.
    lock_wait: Duration,
    /// Kept in memory, not in `path` ([`StateFile::in_memory`]).
    memory: Option<Arc<InMemory>>,
}

impl StateFile {
    /// A file under `.fido-state/`, locked by its sidecar `<file>.lock`.
    pub fn new(path: PathBuf, what: &'static str) -> Self {
        StateFile {
            lock_path: sidecar(&path, ".lock"),
            state_dir: None,
            path,
            what,
            lock_wait: LOCK_WAIT,
            memory: None,
        }
    }

    /// A file of the checkout of `workspace` (the plan, the todo list),
    /// locked by a file under its `.fido-state/locks/` named after its
    /// path in the workspace, so every process finds the same lock.
    pub fn in_workspace(workspace: &Path, path: PathBuf, what: &'static str) -> Self {
        let state_dir = workspace.join(STATE_DIR);
        StateFile {
            lock_path: state_dir.join(LOCKS_DIR).join(lock_name(workspace, &path)),
            state_dir: Some(state_dir),
            path,
            what,
            lock_wait: LOCK_WAIT,
            memory: None,
        }
    }

    /// A state kept in this process's memory, never in a file: a
    /// subagent's own plan (clones share it). `name` stands for its path
    /// in messages.
    pub fn in_memory(name: &str, what: &'static str) -> Self {
        StateFile {
            path: PathBuf::from(name),
            lock_path: PathBuf::new(),
            state_dir: None,
            what,
            lock_wait: LOCK_WAIT,
            memory: Some(Arc::default()),
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
        if let Some(memory) = &self.memory {
            return Ok(StateLock(Held::Memory(memory.lock())));
        }
        let lock_path = &self.lock_path;
        let error = |source: io::Error| StateFileError::Lock {
            path: lock_path.display().to_string(),
            source,
        };
        if let Some(state_dir) = &self.state_dir {
            make_state_dir(state_dir).map_err(error)?;
        }
        if let Some(dir) = lock_path.parent() {
            fs::create_dir_all(dir)
                .and_then(|()| refuse_link(dir))
                .map_err(error)?;
        }
        let mut file = open_lock(lock_path).map_err(error)?;
        let start = Instant::now();
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    // Who holds it, for the message of a process that waits.
                    let _ = lock
                        .set_len(0)
                        .and_then(|()| write!(&mut *lock, "{}", std::process::id()));
                    return Ok(StateLock(Held::File(lock)));
                }
                Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                    if start.elapsed() >= self.lock_wait {
                        return Err(StateFileError::Busy {
                            what: self.what,
                            holder: holder(lock_path),
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
        if let Some(memory) = &self.memory {
            return Ok(self.in_memory_contents(memory, check));
        }
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

    /// A state kept in memory holds what was written, which parses; one
    /// that `check` rejects is forgotten, as a file would be set aside.
    fn in_memory_contents<T: DeserializeOwned, E: std::fmt::Display>(
        &self,
        memory: &InMemory,
        check: impl FnOnce(&T) -> Result<(), E>,
    ) -> Contents<T> {
        let Some(text) = memory.text() else {
            return Contents::Missing;
        };
        let problem = match serde_json::from_str::<T>(&text) {
            Ok(value) => match check(&value) {
                Ok(()) => return Contents::Valid(value),
                Err(problem) => problem.to_string(),
            },
            Err(err) => err.to_string(),
        };
        memory.set_text(None);
        Contents::SetAside {
            warning: format!(
                "{} was invalid ({problem}); Fido started an empty {}",
                self.path.display(),
                self.what
            ),
        }
    }

    /// Replaces the file with `value` as pretty JSON and a final newline.
    pub fn write<T: Serialize>(&self, _lock: &StateLock, value: &T) -> Result<(), StateFileError> {
        if let Some(memory) = &self.memory {
            let text = serde_json::to_string(value).map_err(|e| StateFileError::Write {
                path: self.path.display().to_string(),
                source: io::Error::other(e),
            })?;
            memory.set_text(Some(text));
            return Ok(());
        }
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

/// The lock's name for `path` in `workspace`: its path there, with `%`
/// and `/` escaped (`nested%2Fplan.json.lock`).
fn lock_name(workspace: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(workspace).unwrap_or(path);
    let escaped = relative
        .to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F");
    let mut start = escaped.len().saturating_sub(MAX_LOCK_NAME);
    while !escaped.is_char_boundary(start) {
        start += 1;
    }
    format!("{}.lock", &escaped[start..])
}

/// Makes the workspace's `.fido-state/` (a real folder, not a link) and
/// its `.gitignore` of `*`, so that nothing in it shows in `git status`.
fn make_state_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
        _ => {}
    }
    refuse_link(dir)?;
    let ignore = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(".gitignore"));
    match ignore {
        Ok(mut file) => file.write_all(b"*\n"),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// An error unless `dir` is a folder itself, not a symlink to one.
fn refuse_link(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir)?.is_dir() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "`{}` is not a folder (a symlink?); Fido keeps its locks only in a real one: remove it",
        dir.display()
    )))
}

/// Opens (creating) a lock file, never through a symlink, and only a
/// regular file (a FIFO would not even block the open: `O_NONBLOCK`).
fn open_lock(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other(
                "the lock file is a symlink; Fido does not follow it: remove the link",
            ),
            _ => err,
        })?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(io::Error::other(
            "the lock file is not a regular file: remove it",
        ))
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

    #[test]
    fn a_checkout_files_lock_is_under_fido_state_which_ignores_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let plan = StateFile::in_workspace(root, root.join(".fido-plan.json"), "plan");
        let nested = root.join("docs/100%/plan.json");
        let nested = StateFile::in_workspace(root, nested, "plan");
        for file in [&plan, &nested] {
            let lock = file.lock().unwrap();
            file.write(&lock, &serde_json::json!({"reason": "r"}))
                .unwrap();
        }
        let mut top: Vec<String> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(top, [".fido-plan.json", ".fido-state", "docs"]);
        let docs: Vec<_> = fs::read_dir(root.join("docs/100%")).unwrap().collect();
        assert_eq!(docs.len(), 1, "{docs:?}");
        let locks = root.join(".fido-state/locks");
        assert!(locks.join(".fido-plan.json.lock").is_file());
        assert!(locks.join("docs%2F100%25%2Fplan.json.lock").is_file());
        let ignore = fs::read_to_string(root.join(".fido-state/.gitignore")).unwrap();
        assert_eq!(ignore, "*\n");
    }

    #[test]
    fn a_planted_link_for_a_lock_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("profile");
        fs::write(&target, "precious\n").unwrap();
        let root = dir.path().join("ws");
        // The old sidecar name, as a repository could commit it: no longer
        // opened at all.
        fs::create_dir_all(root.join(".fido-state/locks")).unwrap();
        std::os::unix::fs::symlink(&target, root.join(".fido-plan.json.lock")).unwrap();
        let plan = StateFile::in_workspace(&root, root.join(".fido-plan.json"), "plan");
        drop(plan.lock().unwrap());
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
        // The lock's own name, planted as a link: refused, by name.
        let lock = root.join(".fido-state/locks/.fido-plan.json.lock");
        fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(&target, &lock).unwrap();
        let err = plan.lock().err().unwrap().to_string();
        assert!(err.contains("the lock file is a symlink"), "{err}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious\n");
        // A .fido-state that is a link out of the workspace: nothing is
        // made in its target.
        fs::remove_dir_all(root.join(".fido-state")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".fido-state")).unwrap();
        let err = plan.lock().err().unwrap().to_string();
        assert!(err.contains("is not a folder (a symlink?)"), "{err}");
        let left: Vec<_> = fs::read_dir(outside.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
