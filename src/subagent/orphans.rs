//! The orphan sweep: a record of every running subagent process under
//! `.fido-state/run/`, and at session start the removal of what a parent
//! that died without cleaning up (crashed, SIGKILLed) left running.
//!
//! Each spawned child gets `<parent_pid>-<agent_id>.child.json` with the
//! parent's and the child's pid and start time; the run removes it once
//! the child is reaped. A starting Fido reads every record: when the
//! recorded parent is gone (no such pid, or the pid now belongs to a
//! process with another start time), the child is killed only if its pid
//! still has the recorded start time and its command line is that
//! subagent's (`__subagent --agent-id ID`), so a reused PID is never hit:
//! first its descendants (checked the same way), then its process group.
//! Then the record goes. The parent-death signal already stops most
//! children; the sweep catches the rest (a child stuck before it set it,
//! whatever its commands left behind).
//!
//! Blocking throughout (it reads `/proc` and files): call it on the
//! blocking pool.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::process::sweep;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildRecord {
    pub agent_id: String,
    pub parent_pid: i32,
    pub parent_start: u64,
    pub child_pid: i32,
    pub child_start: u64,
}

const SUFFIX: &str = ".child.json";

fn record_path(dir: &Path, parent_pid: i32, agent_id: &str) -> PathBuf {
    dir.join(format!("{parent_pid}-{agent_id}{SUFFIX}"))
}

/// Why a child could not be recorded for the sweep.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("pid out of range")]
    PidOutOfRange,
    #[error("cannot read the start time of pid {0}")]
    StartTime(i32),
    #[error("cannot create {}: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Records the running child `child_pid` of this process. Blocking.
pub fn record(dir: &Path, agent_id: &str, child_pid: u32) -> Result<(), RecordError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent_pid = std::process::id() as i32;
    let child_pid = i32::try_from(child_pid).map_err(|_| RecordError::PidOutOfRange)?;
    let (Some(parent_start), Some(child_start)) =
        (sweep::start_time(parent_pid), sweep::start_time(child_pid))
    else {
        return Err(RecordError::StartTime(child_pid));
    };
    let record = ChildRecord {
        agent_id: agent_id.to_string(),
        parent_pid,
        parent_start,
        child_pid,
        child_start,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| RecordError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    let text = serde_json::to_vec(&record)?;
    let path = record_path(dir, parent_pid, agent_id);
    write_unsynced(&path, &text).map_err(|source| RecordError::Write { path, source })
}

/// Writes `path` whole through a temp file and a rename, without fsync:
/// a reader never sees a torn record, and the record only has to outlive
/// this process (a power loss takes the children with it), so the two
/// fsyncs of an atomic write would only slow every spawn.
fn write_unsynced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".tmp-{:08x}", fastrand::u32(..)));
    let temp = std::path::PathBuf::from(temp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Removes this process's record of `agent_id` (its child is reaped).
/// Blocking.
pub fn forget(dir: &Path, agent_id: &str) {
    let path = record_path(dir, std::process::id() as i32, agent_id);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => warn!(path = %path.display(), %err, "cannot remove a subagent record"),
    }
}

/// What the sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Records of dead parents removed.
    pub records: usize,
    /// Leftover processes killed.
    pub killed: usize,
}

/// Kills the leftovers of dead parents recorded in `dir` and removes
/// their records; records of live parents stay. Blocking.
pub fn sweep(dir: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return swept;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        let is_record = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(SUFFIX));
        if !is_record {
            continue;
        }
        let record: Option<ChildRecord> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        if let Some(record) = &record {
            if sweep::start_time(record.parent_pid) == Some(record.parent_start) {
                continue; // The parent lives and looks after its child.
            }
            swept.killed += kill_leftovers(record);
        }
        // A torn or foreign record is removed too: nothing can be checked.
        if std::fs::remove_file(&path).is_ok() {
            swept.records += 1;
        }
    }
    if swept.records > 0 {
        info!(
            records = swept.records,
            killed = swept.killed,
            "orphan sweep: removed the records of dead parents"
        );
    }
    swept
}

/// Whether `pid` is still the recorded subagent: same start time, and its
/// command line runs `__subagent --agent-id ID`, or, for the keeper of a
/// subagent in a PID namespace of its own (`sandbox::pidns`), the command
/// line of one of its first descendants does.
fn is_recorded_child(record: &ChildRecord) -> bool {
    if sweep::start_time(record.child_pid) != Some(record.child_start) {
        return false;
    }
    let runs_it = |pid: i32| runs_the_subagent(pid, &record.agent_id);
    runs_it(record.child_pid)
        || sweep::descendants(record.child_pid)
            .iter()
            .take(2)
            .any(|found| runs_it(found.pid))
}

/// Whether `pid`'s command line is `… __subagent … --agent-id AGENT_ID …`.
fn runs_the_subagent(pid: i32, agent_id: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let has = |arg: &str| args.contains(&arg.as_bytes());
    let agent = args
        .windows(2)
        .any(|pair| pair[0] == b"--agent-id" && pair[1] == agent_id.as_bytes());
    has("__subagent") && agent
}

/// Kills the recorded child's descendants and its group, if it is still
/// the recorded process; how many processes were signalled.
fn kill_leftovers(record: &ChildRecord) -> usize {
    if !is_recorded_child(record) {
        return 0;
    }
    let descendants = sweep::descendants(record.child_pid);
    let mut killed = sweep::kill_all(&descendants);
    // The child leads its own group (it was spawned so): the group kill
    // reaches what is left in it, the child included.
    let group = nix::unistd::Pid::from_raw(record.child_pid);
    if nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).is_ok() {
        killed += 1;
    }
    warn!(
        agent_id = %record.agent_id,
        pid = record.child_pid,
        dead_parent = record.parent_pid,
        "orphan sweep: killed a subagent whose parent died"
    );
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// A stand-in for a stranded subagent: `sh` with the subagent's
    /// arguments in its command line, leading its own group, with a
    /// grandchild in the group.
    fn fake_child(agent_id: &str) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        Command::new("sh")
            .args(["-c", "sleep 300 & sleep 300; :", "__subagent", "__subagent"])
            .args(["--agent-id", agent_id])
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn gone(child: &mut std::process::Child) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Gone or a zombie (killed, not yet reaped by whoever inherited it),
    /// within a few seconds.
    fn dead(pid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|text| {
                    let rest = text.get(text.rfind(')')? + 1..)?;
                    rest.split_whitespace().next().map(String::from)
                });
            if state.is_none_or(|s| s == "Z" || s == "X") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn write(dir: &Path, record: &ChildRecord) {
        std::fs::create_dir_all(dir).unwrap();
        let path = record_path(dir, record.parent_pid, &record.agent_id);
        std::fs::write(path, serde_json::to_vec(record).unwrap()).unwrap();
    }

    fn record_of(child: &std::process::Child, agent_id: &str, parent_start: u64) -> ChildRecord {
        let pid = child.id() as i32;
        ChildRecord {
            agent_id: agent_id.into(),
            // Our own pid with another start time: a parent whose pid was
            // reused, i.e. dead (a simulated crash).
            parent_pid: std::process::id() as i32,
            parent_start,
            child_pid: pid,
            child_start: sweep::start_time(pid).unwrap(),
        }
    }

    #[test]
    fn a_dead_parents_child_is_killed_with_its_group_and_the_record_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fake_child("subagent-dead0001");
        std::thread::sleep(Duration::from_millis(100));
        let grandchildren = sweep::descendants(child.id() as i32);
        assert!(!grandchildren.is_empty());
        let own_start = sweep::start_time(std::process::id() as i32).unwrap();
        write(
            dir.path(),
            &record_of(&child, "subagent-dead0001", own_start + 1),
        );

        let swept = sweep(dir.path());
        assert_eq!(swept.records, 1);
        assert!(swept.killed >= 1, "{swept:?}");
        assert!(gone(&mut child), "the stranded child was killed");
        for process in grandchildren {
            assert!(dead(process.pid), "{process:?} survived");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A subagent in a PID namespace of its own is recorded by its keeper,
    /// whose command line is its parent's; its descendant runs the
    /// subagent. The sweep kills the keeper's group and all below.
    #[test]
    fn a_dead_parents_keeper_is_known_by_the_subagent_below_it() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let id = "subagent-keeper01";
        let inner = format!("sh -c 'sleep 300; :' __subagent --agent-id {id} & wait");
        let mut keeper = Command::new("sh")
            .args(["-c", &inner])
            .process_group(0)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let below = sweep::descendants(keeper.id() as i32);
        assert!(!below.is_empty());
        let own_start = sweep::start_time(std::process::id() as i32).unwrap();
        let record = record_of(&keeper, id, own_start + 1);
        assert!(!runs_the_subagent(record.child_pid, id));
        write(dir.path(), &record);
        let swept = sweep(dir.path());
        assert!(swept.killed >= 1, "{swept:?}");
        assert!(gone(&mut keeper), "the keeper was killed");
        for process in below {
            assert!(dead(process.pid), "{process:?} survived");
        }
    }

    #[test]
    fn a_reused_pid_or_a_live_parent_is_never_hit() {
        let dir = tempfile::tempdir().unwrap();
        let own_start = sweep::start_time(std::process::id() as i32).unwrap();
        // The pid now belongs to another process (another start time).
        let mut reused = fake_child("subagent-reused01");
        let mut record = record_of(&reused, "subagent-reused01", own_start + 1);
        record.child_start += 1;
        write(dir.path(), &record);
        // The pid is right but it runs something else (another agent id).
        let mut other = fake_child("subagent-other001");
        write(
            dir.path(),
            &record_of(&other, "subagent-elsewhere", own_start + 1),
        );
        // The parent lives: its child is its own business.
        let mut kept = fake_child("subagent-alive001");
        write(
            dir.path(),
            &record_of(&kept, "subagent-alive001", own_start),
        );

        let swept = sweep(dir.path());
        assert_eq!(
            swept,
            Swept {
                records: 2,
                killed: 0
            }
        );
        for child in [&mut reused, &mut other, &mut kept] {
            assert!(
                child.try_wait().unwrap().is_none(),
                "a process that is not ours was hit"
            );
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "the live parent's record stays");
        for child in [reused, other, kept] {
            let group = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            let mut child = child;
            let _ = child.wait();
        }
    }
}
