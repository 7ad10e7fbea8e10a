//! Write delegation's policy, in one place: what a failed start tells the
//! model, how `delegate_merge` treats a change set, what the person is
//! asked to review, and what the model is advised to do next. The
//! supervisor runs a write delegation (`subagent::supervisor::write`) and
//! asks these; the gate that lets one start at all is the approvals'
//! (`tools::guard::write_delegation_gate`).

use std::path::PathBuf;

use super::ChangesError;
use crate::protocol::ApprovalRequest;
use crate::protocol::changes::{ChangeSet, DelegateMerge, FileChange, MergeState};
use crate::protocol::delegate::{DelegateErrorCode, DelegateResult};

/// The failed result of a write delegation whose worktree could not be
/// made; nothing was started.
pub fn failed_start(agent_id: &str, err: ChangesError) -> DelegateResult {
    match err {
        ChangesError::NotARepository(_) => DelegateResult::failed(
            agent_id,
            DelegateErrorCode::NotAGitRepository,
            &format!(
                "{err}; nothing was started. Make the change yourself, or delegate a read_only investigation"
            ),
        ),
        ChangesError::Claimed(conflict) => DelegateResult::failed(
            agent_id,
            DelegateErrorCode::WriteConflict,
            &conflict.to_string(),
        ),
        other => DelegateResult::failed(
            agent_id,
            DelegateErrorCode::SpawnFailed,
            &format!("cannot make the write subagent's worktree: {other}"),
        ),
    }
}

/// What `delegate_merge` does with a finished change set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStep {
    /// It stays pending, for `/changes` or `fido changes`.
    Leave,
    /// It is applied at once.
    Apply,
    /// The person is asked ([`review_request`]).
    Ask,
}

/// `delegate_merge` for `set`: an empty set is left alone; control files
/// configure what runs outside the sandbox, so a person reads them first
/// even under `auto` (README: "Write-capable delegation").
pub fn merge_step(merge: DelegateMerge, set: &ChangeSet) -> MergeStep {
    if set.files.is_empty() {
        return MergeStep::Leave;
    }
    match merge {
        DelegateMerge::Manual => MergeStep::Leave,
        DelegateMerge::Auto if !set.control_files.is_empty() => {
            tracing::info!(id = %set.id, files = ?set.control_files, "touches control files: left pending");
            MergeStep::Leave
        }
        DelegateMerge::Auto => MergeStep::Apply,
        DelegateMerge::Ask => MergeStep::Ask,
    }
}

/// What the person reads to apply or discard `set`, made for `task`.
pub fn review_request(set: &ChangeSet, task: &str) -> ApprovalRequest {
    let line = |f: &FileChange| {
        let path = match &f.from {
            Some(from) => format!("{from} → {}", f.path),
            None => f.path.clone(),
        };
        format!("{} {path} +{} -{}", f.status.as_str(), f.added, f.removed)
    };
    ApprovalRequest::ChangeSet {
        id: set.id.clone(),
        task: crate::text::summary(task, 200),
        summary: set.summary(),
        files: super::control::control_first(&set.files, &set.control_files)
            .into_iter()
            .map(line)
            .collect(),
        outside_claim: set.outside_claim.iter().map(|f| f.path.clone()).collect(),
        diff: set.diff.clone(),
        control_files: set.control_files.clone(),
    }
}

/// What the parent model should do next with the change set.
pub fn advise(result: &mut DelegateResult, set: &ChangeSet) {
    let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("fido"));
    let fido = program.display();
    let step = match set.merge {
        MergeState::Discarded if set.files.is_empty() && set.outside_claim.is_empty() => {
            "The write subagent changed no file; there is nothing to review.".to_string()
        }
        MergeState::Applied => format!(
            "The change set {} is applied to the workspace ({}); review it, then build and test. The user can revert it as one edit with /undo.",
            set.id,
            set.summary()
        ),
        MergeState::Pending if set.files.is_empty() => format!(
            "The subagent changed nothing inside its claim; {} is pending only for the files outside it, which are never applied. Discard it with `{fido} changes discard {}`.",
            set.id, set.id
        ),
        MergeState::Pending if !set.control_files.is_empty() => format!(
            "The change set {id} touches control files: {}; it was not applied, because they configure Fido or git. Do not apply it yourself: tell the user to review it with `{fido} changes show {id}`, then apply it with `{fido} changes apply {id}` or drop it with `{fido} changes discard {id}`.",
            set.control_files.join(", "),
            id = set.id
        ),
        MergeState::Pending => format!(
            "Review the diff (full patch: {}), then apply it with bash_exec: `{fido} changes apply {}` (a three-way merge; nothing is written on a conflict), or drop it with `{fido} changes discard {}`.",
            set.patch, set.id, set.id
        ),
        MergeState::Conflict => format!(
            "Applying {} met edits made here since its base; nothing was written. Resolve by hand from the patch {} or discard it with `{fido} changes discard {}`.",
            set.id, set.patch, set.id
        ),
        MergeState::Discarded => format!(
            "The change set {} was discarded; nothing was applied.",
            set.id
        ),
    };
    result.recommended_next_steps.insert(0, step);
    if !set.outside_claim.is_empty() {
        let names: Vec<&str> = set.outside_claim.iter().map(|f| f.path.as_str()).collect();
        result.uncertainties.push(format!(
            "The subagent also changed files outside its claim, which are never applied: {}",
            names.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::changes::{FileKind, FileStatus};

    fn set(files: &[&str], control_files: &[&str]) -> ChangeSet {
        let change = |path: &&str| FileChange {
            path: path.to_string(),
            status: FileStatus::Modified,
            from: None,
            kind: FileKind::Text,
            added: 1,
            removed: 1,
        };
        ChangeSet {
            id: "subagent-1".into(),
            base: "abc".into(),
            files: files.iter().map(change).collect(),
            outside_claim: Vec::new(),
            patch: ".fido-state/changes/subagent-1/patch".into(),
            diff: String::new(),
            diff_truncated: false,
            merge: MergeState::Pending,
            conflicts: Vec::new(),
            control_files: control_files.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// `auto` applies a set at once unless it touches a control file; an
    /// empty set is never applied nor asked about.
    #[test]
    fn delegate_merge_applies_asks_or_leaves_as_the_set_allows() {
        let plain = set(&["src/a.rs"], &[]);
        let control = set(&["fido.toml", "src/a.rs"], &["fido.toml"]);
        let empty = set(&[], &[]);
        use DelegateMerge::*;
        assert_eq!(merge_step(Auto, &plain), MergeStep::Apply);
        assert_eq!(merge_step(Auto, &control), MergeStep::Leave);
        assert_eq!(merge_step(Ask, &control), MergeStep::Ask);
        assert_eq!(merge_step(Manual, &plain), MergeStep::Leave);
        for merge in [Auto, Ask, Manual] {
            assert_eq!(merge_step(merge, &empty), MergeStep::Leave);
        }
    }

    /// The review lists control files first and carries the diff.
    #[test]
    fn a_review_names_control_files_first() {
        let mut control = set(&["src/a.rs", "fido.toml"], &["fido.toml"]);
        control.diff = "--- a/fido.toml".into();
        let ApprovalRequest::ChangeSet { files, diff, .. } = review_request(&control, "task")
        else {
            panic!("not a change-set review");
        };
        assert!(files[0].contains("fido.toml"), "{files:?}");
        assert_eq!(diff, "--- a/fido.toml");
    }
}
