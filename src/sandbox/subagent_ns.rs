//! A subagent's own process in a PID namespace of its own
//! ([`contain_subagent`]), and how the subagent knows it is there
//! ([`in_own_namespace`]).

use super::pidns::PidNamespace;

/// Makes `command` (a subagent's `fido __subagent`) start in a session
/// of its own, die with Fido, and run as PID 2 of a PID namespace of its
/// own ([`PidNamespace::for_subagent`]): `pid_max` there keeps the
/// subagent and every command it runs to `max_processes` processes and
/// threads together, whatever uid they run as, and whatever they start
/// ends with the subagent. Where no namespace can be made the subagent
/// runs without one, as a child of Fido.
pub fn contain_subagent(command: &mut tokio::process::Command, max_processes: u32) {
    let namespace = PidNamespace::for_subagent(max_processes);
    let fido = std::process::id() as libc::pid_t;
    // SAFETY: the session, the death signal, an atomic store and the
    // namespace's set-up are plain syscalls on memory prepared before the
    // fork.
    unsafe {
        command.pre_exec(move || {
            crate::process::own_session(fido)?;
            if namespace.enter()? {
                crate::process::confined(crate::process::Confined::InNamespace);
            }
            Ok(())
        });
    }
}

/// Whether this process is PID 2 of a namespace made for it by
/// [`contain_subagent`] (its parent is the namespace's init, PID 1), seen
/// from a `/proc` of an outer namespace (`NSpid` lists more than one pid,
/// the last being 2). There `/proc/PID` names other processes than the
/// pids this process sees, so it must not sweep by pid. Read once, on
/// the first call (make it before the sandbox).
pub fn in_own_namespace() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(read_in_own_namespace)
}

fn read_in_own_namespace() -> bool {
    // SAFETY: getpid and getppid cannot fail.
    let (pid, parent) = unsafe { (libc::getpid(), libc::getppid()) };
    if pid != 2 || parent != 1 {
        return false;
    }
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("NSpid:"))
            .is_some_and(|pids| {
                let pids: Vec<&str> = pids.split_whitespace().collect();
                pids.len() > 1 && pids.last() == Some(&"2")
            })
    })
}

/// Kills whatever a subagent's commands left behind, as it ends. It is
/// their subreaper, so orphans that left their group are found too. In a
/// namespace of its own there is nothing to do: the namespace's init ends
/// them all with this process, and `/proc` names other processes than the
/// pids this process sees.
pub fn sweep_left_behind() {
    if in_own_namespace() {
        return;
    }
    let killed = crate::process::sweep::kill_descendants(std::process::id() as i32);
    if killed > 0 {
        tracing::info!(
            killed,
            "killed processes the subagent's commands left behind"
        );
    }
}
