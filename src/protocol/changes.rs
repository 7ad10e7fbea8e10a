//! Write delegation on the wire: the policies (`delegate_write`,
//! `delegate_merge`) and the `changes` object a write subagent's
//! `delegate_result` carries, which `fido changes --json` prints too.

use serde::{Deserialize, Serialize};

use super::schema::string_enum;

string_enum! {
    /// Whether a `delegate` call with `mode: "write"` may run
    /// (`delegate_write`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DelegateWrite {
        /// Refused with `write_not_allowed` (`fido exec`'s default).
        Never = "never",
        /// The person approves each one (the terminal UI's default).
        Ask = "ask",
        /// Runs without asking (`--allow-write-delegation`).
        Allow = "allow",
    }
}

string_enum! {
    /// What happens to a write subagent's change set when it ends
    /// (`delegate_merge`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DelegateMerge {
        /// The person reviews it in the terminal UI: apply or discard.
        Ask = "ask",
        /// A clean change set is applied at once.
        Auto = "auto",
        /// It stays pending until `fido changes apply ID` (`fido exec`'s
        /// default).
        Manual = "manual",
    }
}

/// The session's write-delegation policies, which the invocation guard
/// reads (never the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationPolicy {
    pub write: DelegateWrite,
    pub merge: DelegateMerge,
}

impl DelegationPolicy {
    /// `fido exec`'s defaults: no write delegation, change sets left
    /// pending.
    pub const HEADLESS: DelegationPolicy = DelegationPolicy {
        write: DelegateWrite::Never,
        merge: DelegateMerge::Manual,
    };
    /// The terminal UI's defaults: ask for both.
    pub const INTERACTIVE: DelegationPolicy = DelegationPolicy {
        write: DelegateWrite::Ask,
        merge: DelegateMerge::Ask,
    };
}

impl Default for DelegationPolicy {
    fn default() -> Self {
        DelegationPolicy::HEADLESS
    }
}

/// A change set's state as the plan panel shows it: the subagent is still
/// writing, or its change set's [`MergeState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeSetState {
    Running,
    Pending,
    Applied,
    Conflict,
    Discarded,
}

impl ChangeSetState {
    /// How the plan panel says it.
    pub fn label(self) -> &'static str {
        match self {
            ChangeSetState::Running => "running",
            ChangeSetState::Pending => "pending review",
            ChangeSetState::Applied => "applied",
            ChangeSetState::Conflict => "conflict",
            ChangeSetState::Discarded => "discarded",
        }
    }
}

impl From<MergeState> for ChangeSetState {
    fn from(state: MergeState) -> Self {
        match state {
            MergeState::Pending => ChangeSetState::Pending,
            MergeState::Applied => ChangeSetState::Applied,
            MergeState::Conflict => ChangeSetState::Conflict,
            MergeState::Discarded => ChangeSetState::Discarded,
        }
    }
}

string_enum! {
    /// How a file differs between the base and the subagent's worktree.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FileStatus {
        Added = "added",
        Modified = "modified",
        Deleted = "deleted",
        Renamed = "renamed",
        /// Only the mode (the executable bit) changed.
        Mode = "mode",
    }
}

/// What kind of thing a changed path is in the worktree (or was, if
/// deleted): binary files and symlinks are named, never inlined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    Text,
    Binary,
    Symlink,
}

/// One changed file of a change set. Paths are workspace-relative with
/// `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub status: FileStatus,
    /// The old path of a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub kind: FileKind,
    pub added: u64,
    pub removed: u64,
}

string_enum! {
    /// Where a change set stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MergeState {
        /// Built, not yet applied or discarded.
        Pending = "pending",
        /// Merged into the main checkout (one undoable edit).
        Applied = "applied",
        /// The last apply met edits it cannot merge; nothing was written.
        Conflict = "conflict",
        Discarded = "discarded",
    }
}

impl MergeState {
    /// Whether it can still be applied or discarded.
    pub fn is_open(self) -> bool {
        matches!(self, MergeState::Pending | MergeState::Conflict)
    }
}

/// Why one file of a change set could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileConflict {
    pub path: String,
    /// What conflicted, e.g. "2 hunks overlap edits made since the base".
    pub reason: String,
    /// The conflicting hunks' line ranges in the main checkout's file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<String>,
}

/// A write subagent's change set: what its worktree changed against the
/// base, and where the merge stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// The change set's id (the subagent's `agent_id`).
    pub id: String,
    /// The commit the worktree started from: HEAD plus the uncommitted and
    /// untracked changes at call time (an object only Fido's private
    /// repository holds).
    pub base: String,
    /// The changed files inside the claim: what an apply writes.
    pub files: Vec<FileChange>,
    /// Changed files outside the claim: reported, never applied.
    pub outside_claim: Vec<FileChange>,
    /// The full patch of `files`, workspace-relative (under
    /// `.fido-state/`).
    pub patch: String,
    /// A unified diff of `files`, capped at `delegate_diff_bytes`.
    pub diff: String,
    /// Whether `diff` was cut short (the full diff is `patch`).
    pub diff_truncated: bool,
    pub merge: MergeState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<FileConflict>,
    /// The control files among `files` (`fido.toml`, `.fido/`,
    /// `AGENTS.md`, `.gitattributes`, `.gitmodules`, at any depth): a
    /// change set that touches one is never applied without a person's
    /// review (README: "Write-capable delegation").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control_files: Vec<String>,
}

impl ChangeSet {
    /// "3 files (+12 -4)".
    pub fn summary(&self) -> String {
        let added: u64 = self.files.iter().map(|f| f.added).sum();
        let removed: u64 = self.files.iter().map(|f| f.removed).sum();
        format!(
            "{} (+{added} -{removed})",
            crate::text::counted(self.files.len() as u64, "file")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_set_keeps_its_wire_format() {
        let line = r#"{"id":"subagent-1","base":"abc","files":[{"path":"src/a.rs","status":"renamed","from":"src/b.rs","kind":"text","added":2,"removed":1}],"outside_claim":[{"path":"x","status":"added","kind":"binary","added":0,"removed":0}],"patch":".fido-state/changes/subagent-1/patch","diff":"d","diff_truncated":false,"merge":"conflict","conflicts":[{"path":"src/a.rs","reason":"r","hunks":["3-5"]}]}"#;
        let set: ChangeSet = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&set).unwrap(), line);
        assert_eq!(set.summary(), "1 file (+2 -1)");
        assert!(set.merge.is_open());
        assert!(!MergeState::Applied.is_open());
        assert!(set.control_files.is_empty());
    }

    #[test]
    fn control_files_travel_only_when_there_are_some() {
        let line = r#"{"id":"subagent-2","base":"abc","files":[{"path":"fido.toml","status":"modified","kind":"text","added":1,"removed":0}],"outside_claim":[],"patch":"p","diff":"d","diff_truncated":false,"merge":"pending","control_files":["fido.toml"]}"#;
        let set: ChangeSet = serde_json::from_str(line).unwrap();
        assert_eq!(set.control_files, ["fido.toml"]);
        assert_eq!(serde_json::to_string(&set).unwrap(), line);
    }

    #[test]
    fn policies_travel_as_their_names() {
        assert_eq!(
            serde_json::to_string(&DelegationPolicy::INTERACTIVE).unwrap(),
            r#"{"write":"ask","merge":"ask"}"#
        );
        assert_eq!(DelegationPolicy::default(), DelegationPolicy::HEADLESS);
        assert!(serde_json::from_str::<DelegateWrite>("\"sometimes\"").is_err());
    }
}
