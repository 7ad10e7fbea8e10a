//! The probes themselves, one `const` [`super::table::Probe`] each, grouped
//! by what they touch. Each runs in the sandboxed child; the table in
//! [`super::table`] decides which run, and in what order.

pub(super) mod controls;
pub(super) mod environment;
pub(super) mod files;
pub(super) mod limits;
pub(super) mod processes;
pub(super) mod protected;
mod sleepers;
pub(super) mod sockets;
pub(super) mod terminal;
pub(super) mod worktree;

use crate::sandbox::policy::SandboxReport;

/// Why a probe is skipped when the sandbox lacks `available`: the Landlock
/// ABI it needs and the one this kernel has.
fn needs(report: &SandboxReport, available: bool, what: &str, min: i32) -> Option<String> {
    let abi = report.landlock_abi.unwrap_or(0);
    (!available).then(|| format!("{what} need landlock ABI {min}, this kernel has {abi}"))
}
