//! Capabilities: what a sandboxed process keeps when it runs as root.
//!
//! Landlock does not stop a process that holds `CAP_SYS_PTRACE` from
//! reading `/proc/<fido>/environ` on every kernel (it did not on the one
//! this was built on), and `CAP_SYS_MODULE`, `CAP_SYS_ADMIN` or
//! `CAP_DAC_READ_SEARCH` (`open_by_handle_at`) would undermine the rest.
//! So every sandboxed process keeps only Docker's default set, in its
//! bounding set (for what it executes) and in its own sets. Both calls are
//! plain syscalls without allocation, safe between `fork` and `exec`; for
//! a process without capabilities (not root) they change nothing.

/// Capabilities kept (Docker's default set less `CAP_MKNOD`: a device
/// node made in the workspace could reach the user's terminal or disk):
/// enough for root to own, chmod and chown its files and drop privileges.
const KEPT: &[u32] = &[
    0,  // CAP_CHOWN
    1,  // CAP_DAC_OVERRIDE
    3,  // CAP_FOWNER
    4,  // CAP_FSETID
    5,  // CAP_KILL
    6,  // CAP_SETGID
    7,  // CAP_SETUID
    8,  // CAP_SETPCAP
    10, // CAP_NET_BIND_SERVICE
    18, // CAP_SYS_CHROOT
    29, // CAP_AUDIT_WRITE
    31, // CAP_SETFCAP
];
/// Above the highest capability any kernel defines today.
const LIMIT: u32 = 64;
/// `CAP_SYS_PTRACE`, which must never be kept.
pub const CAP_SYS_PTRACE: u32 = 19;
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn kept(cap: u32) -> bool {
    KEPT.contains(&cap)
}

/// Drops every capability outside [`KEPT`] from the bounding set, so that
/// nothing this process executes gains it. EINVAL (no such capability)
/// and EPERM (nothing to drop without `CAP_SETPCAP`) are both fine.
pub fn drop_from_bounding_set() {
    for cap in 0..LIMIT {
        if !kept(cap) {
            // SAFETY: a prctl with integer arguments.
            unsafe {
                libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0);
            }
        }
    }
}

/// Drops every capability outside [`KEPT`] from this process's own
/// effective, permitted and inheritable sets.
pub fn drop_from_own_sets() -> std::io::Result<()> {
    let mut sets = [Data::default(); 2];
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    // SAFETY: `header` and `sets` are the kernel's v3 layout (two data
    // words), both live for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, sets.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    for (word, data) in sets.iter_mut().enumerate() {
        let mask = (0..32u32)
            .filter(|bit| kept(word as u32 * 32 + bit))
            .fold(0u32, |mask, bit| mask | (1 << bit));
        data.effective &= mask;
        data.permitted &= mask;
        data.inheritable &= mask;
    }
    // SAFETY: as above.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, sets.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this process holds `cap` in its effective set.
    fn has_effective(cap: u32) -> bool {
        let mut sets = [Data::default(); 2];
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        // SAFETY: as in `drop_from_own_sets`.
        let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, sets.as_mut_ptr()) };
        rc == 0 && sets[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0
    }

    #[test]
    fn ptrace_is_never_kept() {
        assert!(!kept(CAP_SYS_PTRACE));
        assert!(!kept(21), "CAP_SYS_ADMIN");
        assert!(!kept(16), "CAP_SYS_MODULE");
        assert!(!kept(2), "CAP_DAC_READ_SEARCH");
    }

    /// On a thread of the test process (capability sets are per thread).
    #[test]
    fn dropping_leaves_no_ptrace_capability() {
        std::thread::spawn(|| {
            drop_from_own_sets().unwrap();
            assert!(!has_effective(CAP_SYS_PTRACE));
        })
        .join()
        .unwrap();
    }
}
