//! Claims across Fido processes. Two Fidos in one workspace each keep their
//! own write subagents apart ([`super::Claims`]); to keep them apart from
//! each other's, a write subagent's claim is also staked on disk: its start
//! record and owner stamp, written into its change set's folder under one
//! lock for the workspace, once no live write subagent of another Fido
//! holds an overlapping claim.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::claim::{Claim, ClaimConflict};
use super::records::Layout;
use super::worktree::{self, Owner};
use super::{ChangesError, START_FILE, Start, records};
use crate::store::state_file::StateFile;

/// The longest wait for another Fido that is staking a claim (a few file
/// reads and writes; only a stuck process holds it long).
const STAKE_WAIT: Duration = Duration::from_secs(10);

/// Stakes the claim of `start` for the write subagent `id`, or refuses it
/// when a live write subagent of another Fido holds part of it.
/// Blocking: takes a file lock.
pub fn stake(workspace: &Path, id: &str, start: &Start) -> Result<(), ChangesError> {
    let claim = Claim::parse(&start.claim).map_err(|e| ChangesError::Unsafe(e.to_string()))?;
    let lock_file = StateFile::new(
        records::changes_dir(workspace).join("claims"),
        "write claims",
    );
    let _lock = lock_file.with_lock_wait(STAKE_WAIT).lock()?;
    if let Some(conflict) = held_elsewhere(workspace, &claim) {
        return Err(conflict.into());
    }
    let layout = Layout::new(workspace, id);
    fs::create_dir_all(&layout.dir)?;
    let json = serde_json::to_vec(start).map_err(std::io::Error::other)?;
    fs::write(layout.dir.join(START_FILE), json)?;
    fs::write(layout.owner(), worktree::owner_stamp())?;
    Ok(())
}

/// The first live write subagent of another Fido whose claim overlaps
/// `claim`.
fn held_elsewhere(workspace: &Path, claim: &Claim) -> Option<ClaimConflict> {
    let entries = fs::read_dir(records::changes_dir(workspace)).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|id| records::valid_id(id))
        .find_map(|id| conflict_with(workspace, &id, claim))
}

fn conflict_with(workspace: &Path, id: &str, claim: &Claim) -> Option<ClaimConflict> {
    let layout = Layout::new(workspace, id);
    let Owner::Another(pid) = worktree::owner(&layout) else {
        return None;
    };
    let start: Start = serde_json::from_slice(&fs::read(layout.dir.join(START_FILE)).ok()?).ok()?;
    let theirs = Claim::parse(&start.claim).ok()?;
    claim.conflict_with(format!("{id} (of another Fido, pid {pid})"), &theirs)
}
