//! Work beneath a directory handle: the primitives the file tools build on,
//! so that no concurrent process can make them reach outside the workspace
//! by swapping a folder for a symlink between a check and a use.
//!
//! Every call names one entry of a directory held open (`*at(2)` calls with
//! `O_NOFOLLOW`), or a path below it that the kernel resolves beneath it
//! without symlinks (`openat2(2)` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, Linux 5.6+; where the kernel lacks it the caller
//! walks component by component instead). Files are opened non-blocking
//! and checked with `fstat` before use: FIFOs, sockets and devices are
//! refused by name, never waited on.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

/// Cleared the first time the kernel answers `openat2` with `ENOSYS`.
static OPENAT2: AtomicBool = AtomicBool::new(true);

/// What an entry is, as `lstat` or `fstat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl Kind {
    fn of_mode(mode: u32) -> Kind {
        match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Symlink,
            SFlag::S_IFIFO => Kind::Fifo,
            SFlag::S_IFSOCK => Kind::Socket,
            SFlag::S_IFCHR => Kind::CharDevice,
            SFlag::S_IFBLK => Kind::BlockDevice,
            _ => Kind::File,
        }
    }

    fn of_type(kind: std::fs::FileType) -> Kind {
        if kind.is_dir() {
            Kind::Dir
        } else if kind.is_symlink() {
            Kind::Symlink
        } else if kind.is_fifo() {
            Kind::Fifo
        } else if kind.is_socket() {
            Kind::Socket
        } else if kind.is_char_device() {
            Kind::CharDevice
        } else if kind.is_block_device() {
            Kind::BlockDevice
        } else {
            Kind::File
        }
    }

    /// What an odd file is, for a refusal; `None` for files, folders and
    /// symlinks.
    pub fn odd_name(self) -> Option<&'static str> {
        match self {
            Kind::Fifo => Some("a FIFO (named pipe)"),
            Kind::Socket => Some("a socket"),
            Kind::CharDevice => Some("a character device"),
            Kind::BlockDevice => Some("a block device"),
            Kind::File | Kind::Dir | Kind::Symlink => None,
        }
    }
}

/// The sentence refusing an odd file `shown`.
pub fn odd_file_message(shown: &str, what: &str) -> String {
    format!("`{shown}` is {what}; file tools read and write regular files only")
}

/// An entry's kind and permission bits (`lstat`: a symlink is itself).
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub kind: Kind,
    pub mode: u32,
    pub size: u64,
}

/// Opens the directory `root` as a handle to resolve beneath.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(root, dir_flags(), Mode::empty())?)
}

fn dir_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC
}

/// The directory at `rel` beneath `dir`, resolved by the kernel with no
/// symlink followed and nothing outside `dir` reached. `None` when the
/// kernel cannot do that (before 5.6) or the path needs the caller's own
/// walk: a symlink, a missing or non-directory component.
pub fn open_dir_plain(dir: BorrowedFd<'_>, rel: &Path) -> Option<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    open_plain(dir, rel, dir_flags())?.ok()
}

/// `rel` opened with `flags` beneath `dir`, with no symlink followed and
/// nothing outside `dir` reached; `None` when the kernel cannot resolve
/// beneath (before 5.6), which the first `ENOSYS` records for good.
fn open_plain(dir: BorrowedFd<'_>, rel: &Path, flags: OFlag) -> Option<Result<OwnedFd, Errno>> {
    if !resolves_beneath() {
        return None;
    }
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    match nix::fcntl::openat2(dir, rel, how) {
        Err(Errno::ENOSYS) => {
            OPENAT2.store(false, Ordering::Relaxed);
            None
        }
        opened => Some(opened),
    }
}

/// The regular file at `rel` beneath `dir`, opened for reading without
/// waiting on it: resolved by the kernel with no symlink followed and
/// nothing outside `dir` reached, so a folder swapped for a link between
/// a walk and the open is refused, never followed. A FIFO or device in
/// its place is refused, not read. `Ok(None)`: the kernel cannot resolve
/// beneath (before 5.6), and the caller opens as it can.
pub fn open_file_plain(dir: BorrowedFd<'_>, rel: &Path) -> io::Result<Option<File>> {
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let Some(opened) = open_plain(dir, rel, flags) else {
        return Ok(None);
    };
    regular_only(File::from(opened?)).map(Some)
}

/// `file`, when it is a regular file; a FIFO, socket, device or folder
/// opened in its place is refused.
pub fn regular_only(file: File) -> io::Result<File> {
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Whether the kernel resolves paths beneath a handle (`openat2`, Linux
/// 5.6+): until a call found it missing, assumed so.
pub fn resolves_beneath() -> bool {
    OPENAT2.load(Ordering::Relaxed)
}

/// The subdirectory `name` of `dir`, refusing a symlink in its place.
pub fn open_subdir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::openat(
        dir,
        name,
        dir_flags() | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )?)
}

/// `lstat` of the entry `name` of `dir`.
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    let stat = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    Ok(Stat {
        kind: Kind::of_mode(stat.st_mode),
        mode: stat.st_mode & 0o7777,
        size: u64::try_from(stat.st_size).unwrap_or(0),
    })
}

/// The target of the symlink `name` of `dir`.
pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    Ok(nix::fcntl::readlinkat(dir, name)?)
}

/// An open file: its handle and what `fstat` said of it.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    pub kind: Kind,
    pub mode: u32,
    /// The size `fstat` claims: for messages and early refusals only,
    /// never to bound a read ([`read_capped`]).
    pub size: u64,
}

/// Why an odd file was not opened, inside an `io::Error`
/// ([`odd_kind`] reads it back).
#[derive(Debug)]
struct OddFile(Kind);

impl std::fmt::Display for OddFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.odd_name().unwrap_or("not a regular file"))
    }
}

impl std::error::Error for OddFile {}

/// The kind of odd file an error of [`open_read_at`] refused, if that is
/// why it failed.
pub fn odd_kind(err: &io::Error) -> Option<Kind> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<OddFile>())
        .map(|odd| odd.0)
}

/// Opens the entry `name` of `dir` to read. An odd file (FIFO, socket,
/// device) is refused from its `lstat` before any open, so no device
/// driver runs ([`odd_kind`] says which). Else: no symlink followed, no
/// controlling terminal taken, non-blocking (a FIFO swapped in meanwhile
/// still opens at once), then `fstat`, whose answer is returned for the
/// caller to check; blocking mode is restored for a file or folder.
pub fn open_read_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Opened> {
    if let Ok(stat) = stat_at(dir, name)
        && stat.kind.odd_name().is_some()
    {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            OddFile(stat.kind),
        ));
    }
    let flags = OFlag::O_RDONLY
        | OFlag::O_NONBLOCK
        | OFlag::O_NOFOLLOW
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, name, flags, Mode::empty())?;
    let file = File::from(fd);
    let metadata = file.metadata()?;
    let kind = Kind::of_type(metadata.file_type());
    if matches!(kind, Kind::File | Kind::Dir) {
        let blocking = OFlag::from_bits_truncate(nix::fcntl::fcntl(&file, nix::fcntl::F_GETFL)?)
            - OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&file, nix::fcntl::F_SETFL(blocking))?;
    }
    Ok(Opened {
        file,
        kind,
        mode: std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777,
        size: metadata.len(),
    })
}

/// Reads the opened file to its end, or `None` once more than `cap` bytes came:
/// the bytes actually read decide, never the size metadata claims (a
/// device or a growing file has none that holds).
pub fn read_capped(opened: &mut Opened, cap: u64) -> io::Result<Option<Vec<u8>>> {
    // The claimed size only sizes the buffer (one read for most files).
    let hint = opened.size.min(cap) + 1;
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    (&mut opened.file).take(cap + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= cap).then_some(bytes))
}

/// Creates the directory `name` in `dir` and opens it (refusing a symlink
/// swapped in between).
pub fn make_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    match nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(Errno::EEXIST) => open_subdir(dir, name),
        Err(err) => Err(err.into()),
    }
}

/// Renames `from` to `to`, both entries of `dir`.
pub fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    Ok(nix::fcntl::renameat(dir, from, dir, to)?)
}

/// Removes the entry `name` of `dir`: a file or symlink, or with `dir_too`
/// an empty directory.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, empty_dir: bool) -> io::Result<()> {
    let flag = if empty_dir {
        UnlinkatFlags::RemoveDir
    } else {
        UnlinkatFlags::NoRemoveDir
    };
    Ok(nix::unistd::unlinkat(dir, name, flag)?)
}

/// The names in the directory `name` of `dir` (not `.` and `..`),
/// refusing a symlink in its place.
pub fn list_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<OsString>> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, name, flags, Mode::empty())?;
    let mut listing = nix::dir::Dir::from_fd(fd)?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(std::os::unix::ffi::OsStringExt::from_vec(name));
        }
    }
    Ok(names)
}

/// Removes the entry `name` of `dir` and, for a directory, everything in
/// it, one entry at a time through handles: a symlink inside is removed,
/// never followed.
pub fn remove_tree_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    if stat_at(dir, name)?.kind != Kind::Dir {
        return unlink_at(dir, name, false);
    }
    let inner = open_subdir(dir, name)?;
    for child in list_at(dir, name)? {
        remove_tree_at(inner.as_fd(), &child)?;
    }
    unlink_at(dir, name, true)
}

/// A path that names the directory `dir` holds, whatever is renamed or
/// swapped meanwhile: its `/proc/self/fd` entry, for code that takes
/// paths (the listing walker). `None` without procfs.
pub fn fd_path(dir: BorrowedFd<'_>) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd;
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    path.is_dir().then_some(path)
}

/// Syncs the directory `dir` (makes renames in it durable); `dir` may be
/// a path-only handle, so it is reopened for reading first.
pub fn sync_dir_at(dir: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, ".", flags, Mode::empty())?;
    File::from(fd).sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn plain_dirs_open_and_symlinks_do_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        symlink(dir.path().join("a"), dir.path().join("link")).unwrap();
        let root = open_root(dir.path()).unwrap();
        assert!(open_dir_plain(root.as_fd(), Path::new("a/b")).is_some());
        assert!(open_dir_plain(root.as_fd(), Path::new("")).is_some());
        assert!(open_dir_plain(root.as_fd(), Path::new("link/b")).is_none());
        assert!(open_dir_plain(root.as_fd(), Path::new("../")).is_none());
        assert!(open_subdir(root.as_fd(), OsStr::new("link")).is_err());
        assert_eq!(
            stat_at(root.as_fd(), OsStr::new("link")).unwrap().kind,
            Kind::Symlink
        );
    }

    #[test]
    fn a_fifo_is_refused_at_once_and_named() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("p"), Mode::from_bits_truncate(0o600)).unwrap();
        let root = open_root(dir.path()).unwrap();
        let err = open_read_at(root.as_fd(), OsStr::new("p")).unwrap_err();
        assert_eq!(odd_kind(&err), Some(Kind::Fifo));
        assert_eq!(Kind::Fifo.odd_name(), Some("a FIFO (named pipe)"));
    }

    #[test]
    fn reads_are_capped_by_bytes_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "0123456789").unwrap();
        let root = open_root(dir.path()).unwrap();
        let mut opened = open_read_at(root.as_fd(), OsStr::new("f")).unwrap();
        assert_eq!(read_capped(&mut opened, 9).unwrap(), None);
        let mut opened = open_read_at(root.as_fd(), OsStr::new("f")).unwrap();
        assert_eq!(
            read_capped(&mut opened, 10).unwrap().as_deref(),
            Some(&b"0123456789"[..])
        );
    }

    #[test]
    fn trees_are_removed_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("t/u")).unwrap();
        std::fs::write(dir.path().join("t/u/f"), "x").unwrap();
        symlink(outside.path(), dir.path().join("t/out")).unwrap();
        let root = open_root(dir.path()).unwrap();
        remove_tree_at(root.as_fd(), OsStr::new("t")).unwrap();
        assert!(!dir.path().join("t").exists());
        assert!(outside.path().join("keep").exists());
    }
}
