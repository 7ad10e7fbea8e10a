//! The repositories inside the workspace that git's index does not name:
//! a clone the user keeps in `third_party/`, ignored or untracked.
//!
//! Git does not enter such a repository from the workspace's own, but the
//! user does, with `git -C third_party/lib pull` or a `cd` and a
//! `git status`: its configuration then runs as the user. A sandboxed
//! command that planted a `core.fsmonitor` there would be out. So the
//! `.git` of every repository below the top is protected like the
//! top-level one (`super::protect`), from the first command that starts
//! after it appeared: one there when the session starts, one the user
//! clones in another terminal an hour later, one a command made.
//!
//! At the session's first command the workspace is walked once (that
//! command waits for it), descending into ignored folders too (a clone is
//! often ignored) but not into a `.git` nor Fido's state, and an inotify
//! watch is put on every folder passed. Not before: a session that runs
//! no command (`fido exec` answering from files) makes no watch, whose
//! teardown would add milliseconds to its exit (the kernel waits out a
//! grace period). A thread of its own then reads the events as they come:
//! a `.git` made or moved into a watched folder is a repository, and a new
//! folder is walked and watched in turn. Before each command the events
//! the kernel has queued are read too, under the same lock, so whatever
//! was on the disk when the command was prepared has been seen: no timing
//! is involved.
//! A lost event (the kernel's queue overflowed) means a new walk. Where no
//! watch can be had (inotify's limits), each command walks instead, which
//! costs tens of milliseconds on a large tree; the log says so once.
//!
//! A folder once found stays on the list for the session, even when its
//! `.git` is gone, so that a command that renames a clone away and makes a
//! `.git` in its place is caught (`super::new_repository`). At most
//! [`MAX_CLONES`] are protected; those found when no command of the
//! session was running come first, so that a command cannot push the
//! user's clones off the list by making repositories of its own.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

use crate::workspace::STATE_DIR;

/// At most this many repositories are protected (each is a bind mount
/// per command).
pub const MAX_CLONES: usize = 64;
/// A walk stops after this many entries: a workspace past it is
/// searched in part, and the log says so.
const MAX_ENTRIES: usize = 500_000;
/// How often, in milliseconds, the watching thread looks whether its
/// session has ended.
const STOP_CHECK_MS: u16 = 500;

/// The nested repositories of one workspace, kept current for a session
/// (see the module comment). The walk and the watch start at the first
/// look; dropping it stops the watch.
#[derive(Debug)]
pub struct NestedClones {
    workspace: PathBuf,
    shared: OnceLock<Arc<Shared>>,
}

#[derive(Debug)]
struct Shared {
    workspace: PathBuf,
    /// `None`: no inotify instance could be made; each look walks.
    inotify: Option<Inotify>,
    found: Mutex<Found>,
    /// Commands of the session running now (see [`Origin`]).
    commands: AtomicUsize,
    stopped: AtomicBool,
}

/// When a repository was first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Origin {
    /// At the first walk, or while no command of the session ran: the
    /// user's.
    Outside,
    /// While a command ran: perhaps the command's own.
    DuringCommand,
}

#[derive(Debug, Default)]
struct Found {
    walked: bool,
    /// Watches are in place and kept; false: each look walks.
    watching: bool,
    /// A queued event was lost: the next drain walks again.
    overflowed: bool,
    /// Each watched folder, relative to the workspace.
    folders: HashMap<WatchDescriptor, PathBuf>,
    /// Each repository's folder, relative, in the order found.
    repositories: Vec<(PathBuf, Origin)>,
    /// What the log has already been told.
    warned_size: bool,
    warned_count: bool,
}

/// A command of the session is running while this lives
/// ([`NestedClones::command_started`]).
#[derive(Debug)]
pub struct CommandRunning {
    shared: Arc<Shared>,
}

impl Drop for CommandRunning {
    fn drop(&mut self) {
        self.shared.commands.fetch_sub(1, Ordering::SeqCst);
    }
}

impl NestedClones {
    /// The repositories of `workspace`, not looked for yet: a session that
    /// runs no command makes no watch, whose teardown would cost its exit
    /// a few milliseconds (the kernel waits out a grace period).
    pub fn new(workspace: &Path) -> NestedClones {
        NestedClones {
            workspace: workspace.to_path_buf(),
            shared: OnceLock::new(),
        }
    }

    /// Looked for by a walk at each look, with no watch (tests).
    #[cfg(test)]
    fn unwatched(workspace: &Path) -> NestedClones {
        NestedClones {
            workspace: workspace.to_path_buf(),
            shared: OnceLock::from(Shared::new(workspace, None)),
        }
    }

    /// The shared state, the watch and its thread started at the first
    /// call.
    fn shared(&self) -> &Arc<Shared> {
        self.shared.get_or_init(|| {
            let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
                .inspect_err(|err| {
                    tracing::warn!(error = %err, "cannot watch the workspace for new repositories; each command looks for them instead");
                })
                .ok();
            let shared = Shared::new(&self.workspace, inotify);
            let watched = Arc::clone(&shared);
            let started = std::thread::Builder::new()
                .name("fido-repositories".into())
                .spawn(move || watch(&watched));
            if let Err(err) = started {
                // Each look then reads the queued events itself.
                tracing::warn!(error = %err, "cannot start the watch for new repositories");
            }
            shared
        })
    }

    /// Marks a command of the session as running until the guard drops:
    /// a repository first seen meanwhile counts as perhaps its own.
    pub fn command_started(&self) -> CommandRunning {
        let shared = self.shared();
        shared.commands.fetch_add(1, Ordering::SeqCst);
        CommandRunning {
            shared: Arc::clone(shared),
        }
    }

    /// The folders (relative to the workspace) below its top that hold or
    /// held a `.git`, at most [`MAX_CLONES`], the user's first. Blocking:
    /// the first walk, the queued events, or a walk where nothing is
    /// watched.
    pub fn current(&self) -> Vec<PathBuf> {
        let shared = self.shared();
        let mut found = shared.lock();
        found.refresh(shared);
        found.listed()
    }
}

impl Drop for NestedClones {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.get() {
            shared.stopped.store(true, Ordering::SeqCst);
        }
    }
}

impl Shared {
    fn new(workspace: &Path, inotify: Option<Inotify>) -> Arc<Shared> {
        let found = Found {
            watching: inotify.is_some(),
            ..Found::default()
        };
        Arc::new(Shared {
            workspace: workspace.to_path_buf(),
            inotify,
            found: Mutex::new(found),
            commands: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Found> {
        self.found.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn origin(&self) -> Origin {
        match self.commands.load(Ordering::SeqCst) {
            0 => Origin::Outside,
            _ => Origin::DuringCommand,
        }
    }
}

/// The watching thread: each batch of events as it comes, until the
/// session drops its [`NestedClones`]. The first walk is the first look's
/// ([`NestedClones::current`]), which started this thread.
fn watch(shared: &Shared) {
    let Some(inotify) = &shared.inotify else {
        return;
    };
    while !shared.stopped.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(STOP_CHECK_MS)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "the watch for new repositories stopped");
                shared.lock().stop_watching(shared);
                return;
            }
        }
        let mut found = shared.lock();
        if !found.watching {
            return;
        }
        found.drain(shared);
    }
}

impl Found {
    /// Brings the list up to what is on the disk now.
    fn refresh(&mut self, shared: &Shared) {
        if !self.walked || !self.watching {
            self.walked = true;
            self.walk(shared, PathBuf::new());
        } else {
            self.drain(shared);
        }
    }

    /// Reads every queued event; a lost one means a new walk.
    fn drain(&mut self, shared: &Shared) {
        let Some(inotify) = &shared.inotify else {
            return;
        };
        while self.watching {
            match inotify.read_events() {
                Ok(events) => {
                    for event in events {
                        self.take(shared, event);
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read the watch for new repositories");
                    self.stop_watching(shared);
                }
            }
            if std::mem::take(&mut self.overflowed) {
                tracing::debug!("events were lost; walking the workspace again");
                self.walk(shared, PathBuf::new());
            }
        }
    }

    fn take(&mut self, shared: &Shared, event: InotifyEvent) {
        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            self.overflowed = true;
            return;
        }
        if event.mask.contains(AddWatchFlags::IN_IGNORED) {
            self.folders.remove(&event.wd);
            return;
        }
        let (Some(name), Some(parent)) = (event.name, self.folders.get(&event.wd)) else {
            return;
        };
        let path = parent.join(&name);
        if name == ".git" {
            let parent = parent.clone();
            self.record(parent, shared.origin());
        } else if event.mask.contains(AddWatchFlags::IN_ISDIR) && name != STATE_DIR {
            self.walk(shared, path);
        }
    }

    /// Walks the folder `start` (relative) and all below it, watching
    /// each folder before reading it, so that an entry made after the read
    /// comes as an event.
    fn walk(&mut self, shared: &Shared, start: PathBuf) {
        let origin = shared.origin();
        let mut stack = vec![start];
        let mut entries = 0usize;
        while let Some(folder) = stack.pop() {
            let absolute = shared.workspace.join(&folder);
            if self.watching && !self.watch_folder(shared, &absolute, &folder) {
                continue;
            }
            let Ok(listing) = std::fs::read_dir(&absolute) else {
                continue;
            };
            for entry in listing.flatten() {
                entries += 1;
                let name = entry.file_name();
                if name == ".git" {
                    if !folder.as_os_str().is_empty() {
                        self.record(folder.clone(), origin);
                    }
                } else if name != STATE_DIR && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    stack.push(folder.join(name));
                }
            }
            if entries >= MAX_ENTRIES {
                self.warn_size();
                return;
            }
        }
    }

    /// Watches one folder; false when it is no folder (any more). Past
    /// inotify's limit, stops watching for the session.
    fn watch_folder(&mut self, shared: &Shared, absolute: &Path, folder: &Path) -> bool {
        let Some(inotify) = &shared.inotify else {
            return true;
        };
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        match inotify.add_watch(absolute, mask) {
            Ok(wd) => {
                self.folders.insert(wd, folder.to_path_buf());
                true
            }
            Err(Errno::ENOSPC | Errno::ENOMEM) => {
                tracing::warn!(
                    folders = self.folders.len(),
                    "too many folders to watch (fs.inotify.max_user_watches); each command looks for new repositories instead"
                );
                self.stop_watching(shared);
                true
            }
            Err(_) => false,
        }
    }

    /// From now on each look walks: the watches go.
    fn stop_watching(&mut self, shared: &Shared) {
        self.watching = false;
        if let Some(inotify) = &shared.inotify {
            for (wd, _) in self.folders.drain() {
                let _ = inotify.rm_watch(wd);
            }
        }
    }

    fn record(&mut self, folder: PathBuf, origin: Origin) {
        if !self.repositories.iter().any(|(known, _)| *known == folder) {
            self.repositories.push((folder, origin));
        }
    }

    /// The list, the user's repositories first, cut at [`MAX_CLONES`].
    fn listed(&mut self) -> Vec<PathBuf> {
        let mut ordered: Vec<&(PathBuf, Origin)> = self.repositories.iter().collect();
        // Stable: within an origin, the order found.
        ordered.sort_by_key(|(_, origin)| *origin);
        if ordered.len() > MAX_CLONES && !self.warned_count {
            self.warned_count = true;
            tracing::warn!(
                "more than {MAX_CLONES} nested repositories; the rest are not protected from commands"
            );
        }
        ordered
            .into_iter()
            .take(MAX_CLONES)
            .map(|(folder, _)| folder.clone())
            .collect()
    }

    fn warn_size(&mut self) {
        if !self.warned_size {
            self.warned_size = true;
            tracing::warn!(
                entries = MAX_ENTRIES,
                "the workspace is too large to look for every nested repository"
            );
        }
    }
}

#[cfg(test)]
#[path = "nested_clones_tests.rs"]
mod tests;
