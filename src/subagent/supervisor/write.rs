//! A write delegation's parent side, around the run: before it, the gate
//! (`delegate_write`), the claim, the worktree and the person's approval;
//! after it, the change set and the merge (`delegate_merge`). The run in
//! between is any subagent's, in the worktree ([`Job::write`]). What each
//! step decides is `changes::delegation`'s; this file only runs the steps
//! with the session's tools and the supervisor's events.

use crate::changes::delegation::MergeStep;
use crate::changes::{self, Claim, HeldClaim, Start, Worktree};
use crate::protocol::changes::{ChangeSet, ChangeSetState, MergeState};
use crate::protocol::delegate::{DelegateArgs, DelegateErrorCode, DelegateResult};
use crate::protocol::{ApprovalRequest, EventKind};
use crate::tools::ToolEnv;
use crate::tools::approval::Review;

use super::Shared;

/// A write delegation that may run: its worktree, and its claim held
/// until the change set is built.
pub(super) struct WriteRun {
    worktree: Worktree,
    start: Start,
    _claim: HeldClaim,
}

impl WriteRun {
    pub(super) fn roots(&self) -> changes::WriteRoots {
        self.worktree.roots()
    }
}

/// Everything before a write subagent starts; `Err` is the call's failed
/// result, and then nothing is left behind.
pub(super) async fn prepare(
    shared: &Shared,
    agent_id: &str,
    args: &DelegateArgs,
    env: Option<&ToolEnv>,
) -> Result<WriteRun, DelegateResult> {
    let invalid = |message: &str| {
        DelegateResult::failed(agent_id, DelegateErrorCode::InvalidArguments, message)
    };
    let paths = args
        .scope
        .as_ref()
        .map(|s| s.paths.clone())
        .unwrap_or_default();
    let claim = Claim::parse(&paths).map_err(|e| invalid(&e.to_string()))?;
    let Some(env) = env else {
        return Err(DelegateResult::failed(
            agent_id,
            DelegateErrorCode::Unavailable,
            "write delegation needs a session's tools (fido or fido exec); nothing was started",
        ));
    };
    if let crate::tools::guard::Gate::Deny(reason) =
        crate::tools::guard::write_delegation_gate(env.approvals.delegation().write)
    {
        return Err(DelegateResult::failed(
            agent_id,
            DelegateErrorCode::WriteNotAllowed,
            &reason.to_string(),
        ));
    }
    let held = shared.claims.hold(agent_id, &claim).map_err(|conflict| {
        DelegateResult::failed(
            agent_id,
            DelegateErrorCode::WriteConflict,
            &conflict.to_string(),
        )
    })?;
    let start = Start {
        task: args.task.trim().to_string(),
        claim: claim.paths().to_vec(),
        plan_item: args.plan_item.clone(),
    };
    let worktree = make_worktree(shared, agent_id, &start).await?;
    let request = ApprovalRequest::WriteDelegation {
        agent_id: agent_id.to_string(),
        task: crate::text::summary(&start.task, 300),
        claim: claim.paths().to_vec(),
        base: short(&worktree.base.commit),
    };
    if let Err(reason) = env.approvals.write_delegation(request).await {
        let worktree = worktree.clone();
        let _ = tokio::task::spawn_blocking(move || changes::abandon(&worktree)).await;
        return Err(DelegateResult::failed(
            agent_id,
            DelegateErrorCode::WriteNotAllowed,
            &reason.to_string(),
        ));
    }
    announce(shared, agent_id, &start, ChangeSetState::Running);
    Ok(WriteRun {
        worktree,
        start,
        _claim: held,
    })
}

/// Tells the UI where the change set of the plan item `start` serves
/// stands.
fn announce(shared: &Shared, id: &str, start: &Start, state: ChangeSetState) {
    shared.events.emit(EventKind::ChangeSet {
        id: id.to_string(),
        plan_item: start.plan_item.clone(),
        state,
    });
}

async fn make_worktree(
    shared: &Shared,
    agent_id: &str,
    start: &Start,
) -> Result<Worktree, DelegateResult> {
    let workspace = shared.settings.workspace.clone();
    let (id, start) = (agent_id.to_string(), start.clone());
    let made = tokio::task::spawn_blocking(move || changes::start(&workspace, &id, &start))
        .await
        .map_err(|e| changes::ChangesError::Io(std::io::Error::other(e.to_string())))
        .and_then(|made| made);
    made.map_err(|err| changes::delegation::failed_start(agent_id, err))
}

fn short(commit: &str) -> String {
    commit.chars().take(12).collect()
}

/// After the run, however it ended: builds the change set, merges it as
/// `delegate_merge` says, and puts it in `result`.
pub(super) async fn conclude(
    shared: &Shared,
    run: WriteRun,
    result: &mut DelegateResult,
    env: Option<&ToolEnv>,
) {
    let workspace = shared.settings.workspace.clone();
    let cap = shared.settings.limits.diff_bytes;
    let WriteRun {
        mut worktree,
        start,
        ..
    } = run;
    let started = start.clone();
    let deny = shared.settings.deny_read.clone();
    let built = tokio::task::spawn_blocking(move || {
        // The git that reads the child's tree runs boxed (a second wall).
        let wall = crate::sandbox::git_wall::git_wall(&worktree.layout.dir, deny)
            .map_err(|err| changes::ChangesError::Unsafe(format!("cannot box git: {err}")))?;
        worktree.git_wall = Some(wall);
        let mut record = changes::finish(&workspace, &worktree, &start, cap)?;
        // Also the files a control file of the checkout links to.
        record.set.control_files = changes::control::touched(&workspace, &record.set.files);
        Ok::<_, changes::ChangesError>(record)
    })
    .await;
    let record = match built {
        Ok(Ok(record)) => record,
        Ok(Err(err)) => return note_failure(result, &err.to_string()),
        Err(err) => return note_failure(result, &err.to_string()),
    };
    let mut set = record.set;
    if set.merge == MergeState::Pending
        && let Some(env) = env
        && let Some(reason) = merge(shared, &mut set, &record.task, env).await
    {
        result.recommended_next_steps.push(format!(
            "The user discarded the change set and said: {reason}"
        ));
    }
    announce(shared, &set.id, &started, set.merge.into());
    changes::delegation::advise(result, &set);
    result.changes = Some(set);
}

fn note_failure(result: &mut DelegateResult, message: &str) {
    result.uncertainties.push(format!(
        "Fido could not build this write subagent's change set: {message}. Its worktree is kept under .fido-state/changes/ for the next start's sweep."
    ));
}

/// `delegate_merge`: apply at once, ask the person, or leave it pending.
/// Returns the person's reason for a discard, for the model.
async fn merge(shared: &Shared, set: &mut ChangeSet, task: &str, env: &ToolEnv) -> Option<String> {
    let review = match changes::delegation::merge_step(env.approvals.delegation().merge, set) {
        MergeStep::Leave => return None,
        MergeStep::Apply => Review::Apply,
        MergeStep::Ask => {
            let request = changes::delegation::review_request(set, task);
            env.approvals.review_change_set(request).await?
        }
    };
    let workspace = shared.settings.workspace.clone();
    let id = set.id.clone();
    let (outcome, reason) = match review {
        Review::Apply => (apply_now(env, id).await, None),
        Review::Discard { reason } => {
            let discarded =
                tokio::task::spawn_blocking(move || changes::apply::discard(&workspace, &id)).await;
            (flatten(discarded), reason)
        }
    };
    match outcome {
        Ok(record) => {
            set.merge = record.set.merge;
            set.conflicts = record.set.conflicts;
        }
        Err(error) => {
            tracing::warn!(id = %set.id, message = %error, "the change set stays pending");
        }
    }
    reason.map(|reason| crate::text::sanitize(&reason, false))
}

/// Why applying or discarding a change set at once failed (it stays
/// pending).
#[derive(Debug, thiserror::Error)]
enum MergeError {
    #[error(transparent)]
    Changes(#[from] changes::ChangesError),
    /// The blocking task died.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

async fn apply_now(env: &ToolEnv, id: String) -> Result<changes::Record, MergeError> {
    // The undo journal and the workspace are the session's own: the
    // tools' mutex serialises this apply with their edits.
    let workspace = env.workspace.clone();
    let undo = env.undo.clone();
    flatten(
        tokio::task::spawn_blocking(move || changes::apply::apply(&workspace, &undo, &id)).await,
    )
}

fn flatten(
    joined: Result<Result<changes::Record, changes::ChangesError>, tokio::task::JoinError>,
) -> Result<changes::Record, MergeError> {
    Ok(joined??)
}
