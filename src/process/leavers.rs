//! What left a spawn's process group: a descendant that called `setsid`
//! or double-forked (daemonised), which `killpg` no longer reaches.
//!
//! Where a cgroup v2 hierarchy is mounted and Fido may write below its own
//! cgroup (root in a container, a delegated subtree under systemd), each
//! spawn gets a cgroup of its own, `fido-spawn-<pid ns>-<fido pid>-<n>` beside
//! Fido's, which the child joins between fork and exec (a write of `0` to
//! an fd opened before the fork). Whatever it starts stays in that cgroup
//! whatever session or parent it gets, and `cgroup.kill` (or, before Linux
//! 5.14, a SIGKILL to each of `cgroup.procs` until it is empty) ends it
//! all; the emptied cgroup is removed off the async workers.
//!
//! Elsewhere the `fido` binaries (and only they: [`adopt_orphans`]) make
//! Fido a child subreaper (`PR_SET_CHILD_SUBREAPER`), so an orphaned
//! descendant is re-parented to Fido instead of to init. When a spawn
//! ends, each child of Fido that no spawn started and that left Fido's
//! session (every spawn starts a session or group of its own) is killed
//! with its descendants and reaped by its pid: never `waitpid(-1)`, which
//! would steal the statuses of tokio's children. A spawn holds
//! [`Registration`] from before its fork until its pid is recorded, so a
//! child that has just forked is never taken for an orphan. A sandboxed
//! command has a PID namespace besides, whose PID 1 takes all with it.
//!
//! The sweep tells an orphan from a child only by that record, so a
//! process whose children are not all started here (a test binary) must
//! not adopt orphans: there it is left to the cgroup, where there is one.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard};

/// The pids this process spawned and has not reaped yet: its own
/// children, which the subreaper sweep leaves to their owners.
static SPAWNED: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Read-held by each spawn from before its fork until its pid is in
/// [`SPAWNED`]; write-held by the sweep while it tells its own children
/// from orphans.
static REGISTERING: RwLock<()> = RwLock::new(());

/// Whether the binary asked for orphans ([`adopt_orphans`]).
static ADOPT: AtomicBool = AtomicBool::new(false);
/// Whether this process is a child subreaper, and so sweeps.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// A spawn under way: hold it across the fork, then [`Registration::done`]
/// with the child's pid.
#[must_use = "a spawn holds its registration until its pid is recorded"]
pub struct Registration(#[allow(dead_code)] RwLockReadGuard<'static, ()>);

/// Starts a spawn's registration: call before the fork.
pub fn registration() -> Registration {
    Registration(REGISTERING.read().unwrap_or_else(PoisonError::into_inner))
}

impl Registration {
    /// Records `pid` as a child this process spawned, then lets the sweep
    /// run again.
    pub fn done(self, pid: i32) {
        let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
        spawned.get_or_insert_with(HashSet::new).insert(pid);
    }
}

/// Lets this process take in the orphans of its spawns where no cgroup
/// holds them: the binaries call it first thing, since only there is
/// every child started by this module.
pub fn adopt_orphans() {
    ADOPT.store(true, Ordering::Relaxed);
}

/// Forgets `pid` once it was reaped.
pub fn unregister(pid: i32) {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(spawned) = spawned.as_mut() {
        spawned.remove(&pid);
    }
}

fn is_spawned(pid: i32) -> bool {
    let spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    spawned.as_ref().is_some_and(|s| s.contains(&pid))
}

/// Where this process may make cgroups: the cgroup v2 directory it is in,
/// if a probe cgroup could be made and removed there. Detected once.
fn cgroup_base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| {
        let base = detect_cgroup_base();
        match &base {
            Some(dir) => {
                tracing::debug!(dir = %dir.display(), "spawns get a cgroup each");
                end_stale_cgroups(dir);
            }
            None if ADOPT.load(Ordering::Relaxed) => {
                // SAFETY: a prctl with constant arguments.
                let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
                SUBREAPER.store(rc == 0, Ordering::Relaxed);
                tracing::debug!(rc, "no writable cgroup v2: Fido is a child subreaper");
            }
            None => tracing::debug!("no writable cgroup v2, and orphans are not adopted"),
        }
        base
    })
    .as_deref()
}

fn detect_cgroup_base() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent major:minor root mountpoint … - fstype source opts.
    let mount = mountinfo.lines().find_map(|line| {
        let (fields, tail) = line.split_once(" - ")?;
        let fstype = tail.split_whitespace().next()?;
        (fstype == "cgroup2" && fields.split_whitespace().nth(3) == Some("/"))
            .then(|| fields.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    let base = mount.join(own.trim_start_matches('/'));
    let probe = base.join(format!("fido-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let usable = probe.join("cgroup.procs").exists();
    let _ = std::fs::remove_dir(&probe);
    usable.then_some(base)
}

/// Ends the spawns' cgroups that a Fido which is gone left in `base` (it
/// was killed, or exited before it removed them): their members are
/// killed and the cgroups removed. Blocking, once per process.
fn end_stale_cgroups(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(spawn_cgroup_owner) else {
            continue;
        };
        // A Fido in another PID namespace (one that runs in a sandboxed
        // command's, say) cannot see its owner, which is not gone for that.
        if owner.0 != own_pid_namespace() || crate::procfs::start_time(owner.1).is_some() {
            continue;
        }
        let dir = entry.path();
        let procs = File::options().write(true).open(dir.join("cgroup.procs"));
        if let Ok(procs) = procs {
            tracing::info!(dir = %dir.display(), "ending a cgroup a gone Fido left");
            drop(Cgroup { dir, procs });
        }
    }
}

/// The PID namespace and the pid of the Fido that made the spawn cgroup
/// `name` (`fido-spawn-<pid ns>-<pid>-<n>`).
fn spawn_cgroup_owner(name: &str) -> Option<(u64, i32)> {
    let mut parts = name.strip_prefix("fido-spawn-")?.splitn(3, '-');
    let namespace = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((namespace, pid))
}

/// The inode of this process's PID namespace: its pids mean something
/// only there. 0 where `/proc` does not say (then every spawn cgroup is
/// someone else's, and none is judged stale).
fn own_pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    static NAMESPACE: OnceLock<u64> = OnceLock::new();
    *NAMESPACE.get_or_init(|| std::fs::metadata("/proc/self/ns/pid").map_or(0, |meta| meta.ino()))
}

/// Whether spawns get a cgroup each here.
pub fn has_cgroups() -> bool {
    cgroup_base().is_some()
}

/// The containment of one spawn: its cgroup, or the subreaper sweep.
#[derive(Debug)]
pub struct Leavers {
    cgroup: Option<Cgroup>,
}

#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    /// `cgroup.procs`, opened before the fork for the child to join.
    procs: File,
}

impl Leavers {
    /// A fresh cgroup for a spawn about to start (blocking: a `mkdir` in
    /// cgroupfs), or the subreaper sweep where there is none.
    pub fn prepare() -> Leavers {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let cgroup = cgroup_base().and_then(|base| {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!(
                "fido-spawn-{}-{}-{n}",
                own_pid_namespace(),
                std::process::id()
            ));
            std::fs::create_dir(&dir).ok()?;
            match File::options().write(true).open(dir.join("cgroup.procs")) {
                Ok(procs) => Some(Cgroup { dir, procs }),
                Err(err) => {
                    tracing::debug!(error = %err, "cannot open a spawn's cgroup.procs");
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
            }
        });
        Leavers { cgroup }
    }

    /// The descriptor the child writes `0` to, between fork and exec, to
    /// join the cgroup (see [`join`]); `-1` without one.
    pub fn join_fd(&self) -> libc::c_int {
        self.cgroup.as_ref().map_or(-1, |c| c.procs.as_raw_fd())
    }

    /// The cgroup's directory, if the spawn has one.
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.dir.as_path())
    }

    /// Kills whatever is left of the spawn, in or out of its group. Cheap
    /// with a cgroup (one write); the sweep reads `/proc`, so in a runtime
    /// it runs off the async workers.
    pub fn kill(&self) {
        match &self.cgroup {
            Some(cgroup) => cgroup.kill(),
            None if SUBREAPER.load(Ordering::Relaxed) => {
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => drop(runtime.spawn_blocking(sweep_orphans)),
                    Err(_) => sweep_orphans(),
                }
            }
            None => {}
        }
    }
}

/// Joins the cgroup whose `cgroup.procs` is `fd` (no-op for `-1`). Runs
/// between fork and exec: one `write`, no allocation.
pub fn join(fd: libc::c_int) -> io::Result<()> {
    if fd < 0 {
        return Ok(());
    }
    // SAFETY: a write of a static byte to a descriptor the parent opened.
    if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Cgroup {
    fn kill(&self) {
        if let Ok(mut kill) = File::options()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            && kill.write_all(b"1").is_ok()
        {
            return;
        }
        // Before Linux 5.14: SIGKILL each member until none is left.
        for _ in 0..100 {
            let members = members(&self.dir);
            if members.is_empty() {
                return;
            }
            for pid in members {
                // SAFETY: kill(2) of a member of our spawn's cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.parse().ok()).collect())
        .unwrap_or_default()
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill();
        let dir = std::mem::take(&mut self.dir);
        let remove = move || remove_when_empty(&dir);
        // The members take a moment to exit: wait for that off the async
        // workers.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }
}

/// Removes a killed cgroup once its last member has exited (`rmdir`
/// fails with EBUSY before).
fn remove_when_empty(dir: &Path) {
    for _ in 0..500 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(err) => {
                tracing::debug!(dir = %dir.display(), error = %err, "cannot remove a spawn's cgroup");
                return;
            }
        }
    }
    tracing::warn!(dir = %dir.display(), "a spawn's cgroup did not empty");
}

/// The subreaper sweep: kills and reaps each orphan re-parented to this
/// process (a child it did not spawn that left its session), with its
/// descendants. Blocking: reads `/proc`.
fn sweep_orphans() {
    let me = std::process::id() as i32;
    // SAFETY: getsid(0) cannot fail for the calling process.
    let my_session = unsafe { libc::getsid(0) };
    let children: Vec<i32> = super::sweep::descendants(me)
        .into_iter()
        .filter(|d| crate::procfs::stat(d.pid).is_some_and(|(ppid, _)| ppid == me))
        .map(|d| d.pid)
        .collect();
    // No spawn is between its fork and its record while this is held.
    let orphans: Vec<i32> = {
        let _registering = REGISTERING.write().unwrap_or_else(PoisonError::into_inner);
        children.into_iter().filter(|&c| !is_spawned(c)).collect()
    };
    for orphan in orphans {
        // SAFETY: getsid of a pid; -1 when it is gone.
        let session = unsafe { libc::getsid(orphan) };
        if session == my_session || session == -1 {
            continue;
        }
        let mut tree = super::sweep::descendants(orphan);
        if let Some(start_time) = super::sweep::start_time(orphan) {
            tree.insert(
                0,
                super::sweep::Descendant {
                    pid: orphan,
                    start_time,
                },
            );
        }
        super::sweep::kill_all(&tree);
        // SAFETY: waitpid on one pid that is our child and no one's spawn.
        unsafe { libc::waitpid(orphan, std::ptr::null_mut(), 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake spawn cgroup in `base` whose `cgroup.procs` lists `pid`.
    fn fake_cgroup(base: &Path, name: &str, pid: u32) {
        let dir = base.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), format!("{pid}\n")).unwrap();
    }

    /// A spawn cgroup is stale when its owner is gone from this PID
    /// namespace; one made in another namespace is never judged, since
    /// its owner cannot be seen from here (a Fido in a sandboxed
    /// command's namespace once killed its parent's running git so).
    #[test]
    fn only_a_gone_owner_of_this_pid_namespace_makes_a_cgroup_stale() {
        let base = tempfile::tempdir().unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut ours = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // No pid is ever this large (pid_max is at most 2^22).
        let gone = i32::MAX;
        let ns = own_pid_namespace();
        assert_ne!(ns, 0, "/proc/self/ns/pid");
        fake_cgroup(
            base.path(),
            &format!("fido-spawn-{}-{gone}-0", ns + 1),
            other.id(),
        );
        fake_cgroup(base.path(), &format!("fido-spawn-{ns}-{gone}-1"), ours.id());
        end_stale_cgroups(base.path());
        let ended = ours.wait().unwrap();
        assert!(!ended.success(), "{ended:?}");
        assert!(
            other.try_wait().unwrap().is_none(),
            "the other namespace's was killed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn a_spawn_cgroup_name_says_its_owner_and_its_namespace() {
        assert_eq!(
            spawn_cgroup_owner("fido-spawn-4026531836-77-3"),
            Some((4026531836, 77))
        );
        assert_eq!(spawn_cgroup_owner("fido-spawn-77-3"), None);
        assert_eq!(spawn_cgroup_owner("fido-probe-77"), None);
    }
}
