//! The sweep of a subagent's descendants: whatever its commands left
//! behind, also a process that called `setsid`, double-forked or was
//! `nohup`ed, and so left the process group the usual kill reaches.
//!
//! Theory of operation: the subagent is a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`, set in `sandbox::child`), so an orphan of its
//! commands is re-parented to it instead of to init, and stays in its tree
//! of descendants. The tree is read from the `children` lists of `/proc`
//! (or, on a kernel without them, from every `/proc/*/stat`), with each
//! process's parent pid and start time. Each process is killed with SIGKILL only if its start
//! time is still the one read, so a PID reused in between is never hit.
//! The subagent sweeps its own tree before it exits; the parent sweeps the
//! child's tree once more before it kills the child's group, for a child
//! that never got to do it (killed, crashed).
//!
//! Where the kernel allows it, each command of a subagent's shell also runs
//! in a PID namespace of its own (`sandbox::pidns`), so what it starts dies
//! when it ends; the subreaper and this sweep stay for kernels that allow
//! no namespace, and for anything the subagent itself starts.

use std::collections::HashMap;

/// The start time of `pid` (the one reader of `/proc` stat is
/// [`crate::procfs`]).
pub use crate::procfs::start_time;
use crate::procfs::stat;

/// A process found in the tree: its pid and its start time (clock ticks
/// after boot), which tells it apart from a later process with its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descendant {
    pub pid: i32,
    pub start_time: u64,
}

/// Every descendant of `root` (not `root` itself), parents before their
/// children. Blocking: reads `/proc`, the `children` lists of the tree
/// where the kernel has them (`CONFIG_PROC_CHILDREN`), else all of it.
pub fn descendants(root: i32) -> Vec<Descendant> {
    if children_lists() {
        descendants_by_children(root)
    } else {
        descendants_by_scan(root)
    }
}

/// Whether `/proc/PID/task/TID/children` exists on this kernel.
fn children_lists() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PRESENT.get_or_init(|| std::path::Path::new("/proc/thread-self/children").exists())
}

/// The walk down the `children` lists: as many reads as the tree has
/// processes, however many the machine runs.
fn descendants_by_children(root: i32) -> Vec<Descendant> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::from([root]);
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for pid in children(parent) {
            // Gone, or re-parented (and so read elsewhere) since the list.
            let Some((ppid, start_time)) = stat(pid) else {
                continue;
            };
            if ppid == parent && seen.insert(pid) {
                next.push(pid);
                found.push(Descendant { pid, start_time });
            }
        }
    }
    found
}

/// The children of every thread of `pid` (a child belongs to the thread
/// that started it); none for a process that is gone.
fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The scan of every process's parent pid, for kernels without `children`
/// lists.
fn descendants_by_scan(root: i32) -> Vec<Descendant> {
    let mut children: HashMap<i32, Vec<Descendant>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((ppid, start_time)) = stat(pid) {
            children
                .entry(ppid)
                .or_default()
                .push(Descendant { pid, start_time });
        }
    }
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for child in children.remove(&parent).unwrap_or_default() {
            next.push(child.pid);
            found.push(child);
        }
    }
    found
}

/// SIGKILL to each process that is still the one found. Returns how many
/// were killed. Blocking: reads `/proc`.
pub fn kill_all(found: &[Descendant]) -> usize {
    let mut killed = 0;
    for process in found {
        let same = stat(process.pid).is_some_and(|(_, start)| start == process.start_time);
        if !same {
            continue;
        }
        // SAFETY: kill(2) with a checked pid and a constant signal.
        if unsafe { libc::kill(process.pid, libc::SIGKILL) } == 0 {
            killed += 1;
        }
    }
    killed
}

/// Kills every descendant of `root`; how many were killed. Blocking.
pub fn kill_descendants(root: i32) -> usize {
    kill_all(&descendants(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_a_grandchild_that_left_its_group() {
        // sh starts a setsid'd sleep and waits on it: the sleep is a
        // grandchild of this test process, in a session of its own.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 300 & wait"])
            .spawn()
            .expect("sh runs");
        let me = std::process::id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Its own sleep, the child of its shell: other tests of this process
        // run `sleep` too, and killing theirs fails them and leaves this
        // one waiting on its shell for 300 s.
        let shell_pid = shell.id() as i32;
        let sleeper = loop {
            let found = descendants(me);
            if let Some(sleep) = found.iter().find(|d| {
                std::fs::read_to_string(format!("/proc/{}/comm", d.pid))
                    .is_ok_and(|c| c.trim() == "sleep")
                    && stat(d.pid).is_some_and(|(ppid, _)| ppid == shell_pid)
            }) {
                break *sleep;
            }
            assert!(std::time::Instant::now() < deadline, "no sleep appeared");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        // The full scan (kernels without `children` lists) sees it too.
        assert!(descendants_by_scan(me).contains(&sleeper));
        assert_eq!(kill_all(&[sleeper]), 1);
        let _ = shell.wait();
        // A stale entry (start time changed) is never signalled.
        let stale = Descendant {
            pid: sleeper.pid,
            start_time: sleeper.start_time + 1,
        };
        assert_eq!(kill_all(&[stale]), 0);
    }
}
