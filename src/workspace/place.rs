//! Resolving a path a tool received to a place held by a directory handle,
//! under the invariants of [`crate::workspace`], so that what the tool then
//! does (open, create, rename, remove) names one entry of a directory it
//! holds open and no concurrent swap of a folder for a symlink can lead it
//! outside.
//!
//! The kernel resolves the path in one call when it has no symlink on the
//! way ([`beneath::open_dir_plain`]); otherwise it is walked one component
//! at a time from the root's handle, each step an `openat` with
//! `O_NOFOLLOW`. A symlink met on the way is read and its target walked the
//! same way (absolute targets from the root, `..` by the handles already
//! held, never the kernel's `..`), so a link that stays inside keeps
//! working and one that leaves is refused, as the invariants say.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use super::beneath::{self, Kind};
use super::{FinalLink, PathError, Workspace, is_state_name, normalise_lexically, slash_form};

/// Most symlinks one resolution follows, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// A path that passed confinement, held by the handle of its directory.
#[derive(Debug)]
pub struct Place {
    /// The deepest directory on the way that exists.
    dir: OwnedFd,
    /// Its workspace-relative path, symlinks followed.
    dir_rel: PathBuf,
    /// The components below `dir`; the last is the target's name. Empty
    /// only for the workspace root. Only the first may exist, and then as
    /// something other than a directory ([`Place::blocked`]).
    below: Vec<OsString>,
    /// Whether `below[0]` exists (a file where a folder is needed).
    blocked: bool,
    /// The path as the model named it, normalised, for messages.
    pub shown: String,
}

/// The workspace-relative path of a file that stands where creating a
/// place needs a folder (`/`-separated); the tools say so in their refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInTheWay(pub String);

/// The directory that holds a place's entry, and the entry's name.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub dir: BorrowedFd<'a>,
    pub name: &'a OsStr,
}

impl Place {
    /// Whether this is the workspace root itself.
    pub fn is_root(&self) -> bool {
        self.below.is_empty()
    }

    /// The workspace-relative path, symlinks followed (`/`-separated, `.`
    /// for the root), as the undo journal records it.
    pub fn rel(&self) -> String {
        slash_form(&self.rel_path())
    }

    /// Workspace-relative, the folders' symlinks followed.
    pub fn rel_path(&self) -> PathBuf {
        let mut rel = self.dir_rel.clone();
        rel.extend(&self.below);
        rel
    }

    /// The entry, when its directory exists (the entry itself may not).
    /// `None` for the root and when folders on the way are missing.
    pub fn entry(&self) -> Option<Entry<'_>> {
        match self.below.as_slice() {
            [name] => Some(Entry {
                dir: self.dir.as_fd(),
                name,
            }),
            _ => None,
        }
    }

    /// The handle of the root itself, for the root place.
    pub fn root_dir(&self) -> Option<BorrowedFd<'_>> {
        self.is_root().then(|| self.dir.as_fd())
    }

    /// The folders that creating the entry needs first, workspace-relative
    /// and outermost first; `Err` names the file standing where one of
    /// them should be.
    pub fn missing_dirs(&self) -> Result<Vec<String>, FileInTheWay> {
        let count = self.below.len().saturating_sub(1);
        let mut rel = self.dir_rel.clone();
        let mut missing = Vec::with_capacity(count);
        for name in &self.below[..count] {
            rel.push(name);
            if self.blocked {
                return Err(FileInTheWay(slash_form(&rel)));
            }
            missing.push(slash_form(&rel));
        }
        Ok(missing)
    }

    /// Creates the missing folders on the way ([`Place::missing_dirs`]),
    /// each through the handle of its parent, and returns the handle of
    /// the entry's directory.
    pub fn create_dirs(&self) -> io::Result<OwnedFd> {
        let mut dir = self.dir.try_clone()?;
        let count = self.below.len().saturating_sub(1);
        for name in &self.below[..count] {
            dir = beneath::make_dir_at(dir.as_fd(), name)?;
        }
        Ok(dir)
    }

    /// The entry's name (the last component); empty for the root.
    pub fn name(&self) -> &OsStr {
        self.below
            .last()
            .map_or(OsStr::new(""), OsString::as_os_str)
    }
}

/// A component still to walk, and the symlink it came from (the first one
/// met, for messages).
struct Step {
    part: Part,
    via: Option<String>,
}

enum Part {
    Name(OsString),
    Up,
}

/// The walk in progress: the handles from the root down, and the names
/// that lead to the last one.
struct Walk<'w> {
    workspace: &'w Workspace,
    final_link: FinalLink,
    shown: String,
    dirs: Vec<OwnedFd>,
    names: Vec<OsString>,
    todo: VecDeque<Step>,
    links: usize,
}

impl Workspace {
    /// Resolves `path` as [`Workspace::resolve_with`] does, to a place held
    /// by a directory handle (see the module's notes). Blocking.
    pub fn locate(&self, path: &str, final_link: FinalLink) -> Result<Place, PathError> {
        let relative = self.relative_of(path)?;
        let shown = slash_form(&relative);
        let io_err = |source: io::Error| PathError::Io {
            path: shown.clone(),
            source,
        };
        let root = beneath::open_root(&self.root).map_err(io_err)?;
        let place = match self.locate_plain(&root, &relative, final_link, &shown) {
            Some(found) => found.map_err(io_err)?,
            None => self.walk(root, &relative, final_link, shown)?,
        };
        if place
            .rel_path()
            .components()
            .any(|c| is_state_name(c.as_os_str()))
        {
            return Err(PathError::FidoState { path: place.shown });
        }
        Ok(place)
    }

    /// [`Workspace::locate`] for a path a tool is about to change,
    /// refusing the protected paths as written and as the handles found
    /// them.
    pub fn locate_for_change(&self, path: &str, final_link: FinalLink) -> Result<Place, PathError> {
        let place = self.locate(path, final_link)?;
        let lexical = self.root.join(self.relative_of(path)?);
        let found = self.root.join(place.rel_path());
        if super::is_protected(&self.root, &lexical) || super::is_protected(&self.root, &found) {
            return Err(PathError::Protected { path: place.shown });
        }
        Ok(place)
    }

    /// The place in one kernel call, when the kernel has `openat2` and no
    /// symlink is on the way; `None` sends the caller to the walk.
    fn locate_plain(
        &self,
        root: &OwnedFd,
        relative: &Path,
        final_link: FinalLink,
        shown: &str,
    ) -> Option<io::Result<Place>> {
        let Some(name) = relative.file_name() else {
            let dir = root.try_clone();
            return Some(dir.map(|dir| Place {
                dir,
                dir_rel: PathBuf::new(),
                below: Vec::new(),
                blocked: false,
                shown: shown.to_string(),
            }));
        };
        let parent = relative.parent().unwrap_or(Path::new(""));
        let dir = beneath::open_dir_plain(root.as_fd(), parent)?;
        match beneath::stat_at(dir.as_fd(), name) {
            Ok(stat) if stat.kind == Kind::Symlink && final_link == FinalLink::Follow => None,
            Ok(_) => Some(Ok(place_at(dir, parent, name, shown))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                Some(Ok(place_at(dir, parent, name, shown)))
            }
            Err(err) => Some(Err(err)),
        }
    }

    fn walk(
        &self,
        root: OwnedFd,
        relative: &Path,
        final_link: FinalLink,
        shown: String,
    ) -> Result<Place, PathError> {
        let todo = relative
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(Step {
                    part: Part::Name(name.to_os_string()),
                    via: None,
                }),
                _ => None,
            })
            .collect();
        Walk {
            workspace: self,
            final_link,
            shown,
            dirs: vec![root],
            names: Vec::new(),
            todo,
            links: 0,
        }
        .run()
    }
}

fn place_at(dir: OwnedFd, parent: &Path, name: &OsStr, shown: &str) -> Place {
    Place {
        dir,
        dir_rel: parent.to_path_buf(),
        below: vec![name.to_os_string()],
        blocked: false,
        shown: shown.to_string(),
    }
}

impl Walk<'_> {
    fn run(mut self) -> Result<Place, PathError> {
        while let Some(step) = self.todo.pop_front() {
            let name = match step.part {
                Part::Up => {
                    self.up(step.via)?;
                    continue;
                }
                Part::Name(name) => name,
            };
            let last = self.todo.is_empty();
            let top = self.top();
            let stat = match beneath::stat_at(top, &name) {
                Ok(stat) => stat,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return self.missing(name, step.via);
                }
                Err(err) => return Err(self.io_err(err)),
            };
            match stat.kind {
                Kind::Symlink if !(last && self.final_link == FinalLink::Keep) => {
                    self.follow(&name, step.via)?;
                }
                Kind::Dir if !last => {
                    let dir = beneath::open_subdir(top, &name).map_err(|e| self.io_err(e))?;
                    self.dirs.push(dir);
                    self.names.push(name);
                }
                _ if last => return Ok(self.place(vec![name], false)),
                _ => {
                    // A file where a folder is needed: the rest is as written.
                    let mut below = vec![name];
                    below.extend(self.rest());
                    return Ok(self.place(below, true));
                }
            }
        }
        // The walk ended on a folder reached by `..`: its parent holds it.
        match self.names.pop() {
            Some(name) => {
                self.dirs.pop();
                Ok(self.place(vec![name], false))
            }
            None => Ok(self.place(Vec::new(), false)),
        }
    }

    fn top(&self) -> BorrowedFd<'_> {
        match self.dirs.last() {
            Some(dir) => dir.as_fd(),
            None => unreachable!("the root's handle is never popped"),
        }
    }

    fn io_err(&self, source: io::Error) -> PathError {
        PathError::Io {
            path: self.shown.clone(),
            source,
        }
    }

    /// `..` in a symlink's target: back to the handle already held.
    fn up(&mut self, via: Option<String>) -> Result<(), PathError> {
        if self.names.pop().is_none() {
            return Err(PathError::SymlinkEscape {
                path: self.shown.clone(),
                link: via.unwrap_or_default(),
            });
        }
        self.dirs.pop();
        Ok(())
    }

    /// Nothing is at `name`: the rest is appended as written, unless a
    /// symlink's target led here, which is then dangling.
    fn missing(mut self, name: OsString, via: Option<String>) -> Result<Place, PathError> {
        if let Some(link) = via {
            return Err(PathError::DanglingSymlink {
                path: self.shown,
                link,
            });
        }
        let mut below = vec![name];
        below.extend(self.rest());
        Ok(self.place(below, false))
    }

    fn rest(&mut self) -> Vec<OsString> {
        self.todo
            .drain(..)
            .filter_map(|step| match step.part {
                Part::Name(name) => Some(name),
                Part::Up => None,
            })
            .collect()
    }

    /// Reads the symlink `name` of the current folder and puts its target
    /// in front of what is left to walk.
    fn follow(&mut self, name: &OsStr, via: Option<String>) -> Result<(), PathError> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(self.io_err(io::Error::from_raw_os_error(libc::ELOOP)));
        }
        let mut here = slash_form(&self.names.iter().collect::<PathBuf>());
        here = if here == "." {
            name.to_string_lossy().into_owned()
        } else {
            format!("{here}/{}", name.to_string_lossy())
        };
        let link = via.unwrap_or(here);
        let target = beneath::read_link_at(self.top(), name).map_err(|e| self.io_err(e))?;
        let target = Path::new(&target);
        let steps: Vec<Step> = if target.is_absolute() {
            let Some(inside) = self.inside_root(target) else {
                return Err(PathError::SymlinkEscape {
                    path: self.shown.clone(),
                    link,
                });
            };
            self.dirs.truncate(1);
            self.names.clear();
            steps_of(&inside, &link)
        } else {
            steps_of(target, &link)
        };
        for step in steps.into_iter().rev() {
            self.todo.push_front(step);
        }
        Ok(())
    }

    /// An absolute symlink target as a path relative to the root, when it
    /// names something inside. Its canonical form is only a spelling to
    /// walk again from the root's handle, never a path that is used.
    fn inside_root(&self, target: &Path) -> Option<PathBuf> {
        let normal = normalise_lexically(target);
        if let Some(inside) = self.workspace.strip_root(&normal) {
            return Some(inside.to_path_buf());
        }
        let canonical = target.canonicalize().ok()?;
        canonical
            .strip_prefix(&self.workspace.root)
            .ok()
            .map(Path::to_path_buf)
    }

    fn place(mut self, below: Vec<OsString>, blocked: bool) -> Place {
        let dir = match self.dirs.pop() {
            Some(dir) => dir,
            None => unreachable!("the root's handle is never popped"),
        };
        Place {
            dir,
            dir_rel: self.names.iter().collect(),
            below,
            blocked,
            shown: self.shown,
        }
    }
}

fn steps_of(path: &Path, link: &str) -> Vec<Step> {
    path.components()
        .filter_map(|c| {
            let part = match c {
                Component::Normal(name) => Part::Name(name.to_os_string()),
                Component::ParentDir => Part::Up,
                Component::CurDir | Component::RootDir | Component::Prefix(_) => return None,
            };
            Some(Step {
                part,
                via: Some(link.to_string()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("real/deep")).unwrap();
        std::fs::write(root.join("real/f.txt"), "x").unwrap();
        let ws = Workspace::new(&root).unwrap();
        (dir, ws)
    }

    #[test]
    fn plain_paths_name_their_entry() {
        let (_dir, ws) = setup();
        let place = ws.locate("real/f.txt", FinalLink::Follow).unwrap();
        assert_eq!(place.rel(), "real/f.txt");
        assert!(place.entry().is_some());
        assert!(ws.locate(".", FinalLink::Follow).unwrap().is_root());
        let new = ws.locate("real/a/b/new.txt", FinalLink::Follow).unwrap();
        assert!(new.entry().is_none());
        assert_eq!(new.missing_dirs().unwrap(), ["real/a", "real/a/b"]);
        let blocked = ws.locate("real/f.txt/sub/x", FinalLink::Follow).unwrap();
        assert_eq!(blocked.missing_dirs().unwrap_err().0, "real/f.txt");
    }

    #[test]
    fn symlinks_inside_are_followed_absolute_relative_and_through_dot_dot() {
        let (_dir, ws) = setup();
        symlink(ws.root.join("real"), ws.root.join("abs")).unwrap();
        symlink("real/deep/..", ws.root.join("rel")).unwrap();
        symlink("../f.txt", ws.root.join("real/deep/up")).unwrap();
        for path in ["abs/f.txt", "rel/f.txt", "real/deep/up", "abs/deep/up"] {
            let place = ws.locate(path, FinalLink::Follow).unwrap();
            assert_eq!(place.rel(), "real/f.txt", "{path}");
        }
        // Kept, the final link is the entry itself.
        let kept = ws.locate("real/deep/up", FinalLink::Keep).unwrap();
        assert_eq!(kept.rel(), "real/deep/up");
    }

    #[test]
    fn links_that_leave_dangle_or_loop_are_refused() {
        let (dir, ws) = setup();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        symlink(dir.path().join("outside"), ws.root.join("out")).unwrap();
        symlink("../..", ws.root.join("real/up2")).unwrap();
        symlink("nowhere", ws.root.join("dangling")).unwrap();
        symlink("loop", ws.root.join("loop")).unwrap();
        let escape = |path| {
            matches!(
                ws.locate(path, FinalLink::Follow),
                Err(PathError::SymlinkEscape { .. })
            )
        };
        assert!(escape("out/x"));
        assert!(escape("real/up2/x"));
        assert!(matches!(
            ws.locate("dangling", FinalLink::Follow),
            Err(PathError::DanglingSymlink { .. })
        ));
        assert!(ws.locate("dangling", FinalLink::Keep).is_ok());
        assert!(matches!(
            ws.locate("loop/x", FinalLink::Follow),
            Err(PathError::Io { .. })
        ));
    }

    #[test]
    fn state_and_protected_paths_are_refused_through_links() {
        let (_dir, ws) = setup();
        std::fs::create_dir(ws.root.join(".git")).unwrap();
        std::fs::write(ws.root.join(".fido-plan.json"), "{}").unwrap();
        symlink(".fido-plan.json", ws.root.join("plan")).unwrap();
        symlink(".git", ws.root.join("g")).unwrap();
        assert!(matches!(
            ws.locate("plan", FinalLink::Follow),
            Err(PathError::FidoState { .. })
        ));
        assert!(ws.locate("g/config", FinalLink::Follow).is_ok());
        assert!(matches!(
            ws.locate_for_change("g/config", FinalLink::Follow),
            Err(PathError::Protected { .. })
        ));
    }
}
