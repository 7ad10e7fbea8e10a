//! What `/proc` says of one process: its parent and its start time. The
//! start time (clock ticks after boot) tells a process apart from a later
//! one the kernel gave the same pid, so whatever records a pid to find
//! its process again (the subagent sweep, the orphan records, a change
//! set's owner) records the start time beside it and checks both.
//!
//! Blocking: each call reads a file of `/proc`.

/// The start time of `pid`, `None` when no such process exists.
pub fn start_time(pid: i32) -> Option<u64> {
    stat(pid).map(|(_, start)| start)
}

/// Whether the process that had `pid` and started at `start` still runs:
/// a later process with that pid does not count.
pub fn is_running(pid: i32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// The command name of `pid` (`/proc/PID/comm`: the executable's file
/// name, at most 15 bytes), `None` when no such process exists.
pub fn command_name(pid: i32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(name.trim_end_matches('\n').to_string())
}

/// Parent pid and start time from `/proc/PID/stat`.
pub fn stat(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything, so the
    // fields are counted from the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), …, starttime (22).
    let ppid = fields.get(1)?.parse().ok()?;
    let start_time = fields.get(19)?.parse().ok()?;
    Some((ppid, start_time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_later_start_is_another_process() {
        let me = std::process::id() as i32;
        let (ppid, start) = stat(me).unwrap();
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
        assert!(is_running(me, start));
        assert!(!is_running(me, start + 1));
        // The test binary is named after the crate: `fido-<hash>`.
        assert!(command_name(me).unwrap().starts_with("fido"));
        // No process has the largest pid the kernel can hand out.
        assert_eq!(start_time(i32::MAX), None);
        assert_eq!(command_name(i32::MAX), None);
    }
}
