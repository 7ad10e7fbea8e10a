//! What a front end asks of the engine: [`Submission`]s in, while events
//! come out through [`super::event_queue`], the way codex-rs's front ends
//! submit `Submission { id, op }` and read `Event { id, msg }`. The TUI
//! holds an [`OpSender`] and an event receiver, nothing else of the
//! engine: no store handle, no engine trait. Every type here serialises,
//! so a front end could run in another process over the same types.
//!
//! An op that has an answer gets it as one `op_replied` event carrying the
//! submission's id ([`OpReply`]). What the engine asks the person
//! (approvals, `ask_user` questions) arrives as `approval_requested` and
//! `question_asked` events with an id of their own, answered by
//! [`Op::Approve`] and [`Op::Answer`] with that id. These UI-protocol
//! events are live-only: `fido exec --json` never prints them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::control::SessionSubagent;
pub use super::outcome::TurnOutcome;
use super::plan::PlanSnapshot;
use super::{ApprovalDecision, ApprovalPolicy, SandboxMode};

/// Which submission an answer belongs to: chosen by the front end, unique
/// per [`OpSender`] and its clones.
pub type SubmissionId = u64;

/// Which approval request or question an answer belongs to: chosen by the
/// engine, unique per session.
pub type AskId = u64;

/// One op with the id its answer will carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub id: SubmissionId,
    pub op: Op,
}

/// A command to the engine. The comment of each says what it is answered
/// with (an `op_replied` event with the submission's id), if anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Start a turn with this prompt: [`OpReply::TurnEnded`] when it ends.
    /// Refused (status `Failed`) while another turn runs.
    SubmitPrompt { prompt: String },
    /// Cancel the running turn, its subagents included. No reply: the
    /// turn's own [`OpReply::TurnEnded`] says `interrupted`.
    Interrupt,
    /// `/cancel ID|all`, Esc, `fido cancel`: cancel one subagent
    /// (`Some(agent_id)`) or every one (`None`); the turn goes on with
    /// their cancelled results. [`OpReply::Cancelled`]: the running ones
    /// asked to stop.
    CancelSubagent { agent_id: Option<String> },
    /// `/compact`: [`OpReply::Compacted`], or why not.
    Compact,
    /// `/model NAME`, from the next turn on: [`OpReply::ModelSwitched`]
    /// with the name the provider reports, or why not.
    SwitchModel { model: String },
    /// A session mode of an editor (ACP's `session/set_mode`): the main
    /// agent's commands run in a sandbox of `sandbox_mode` (rebuilt) and
    /// are asked about by `approval_policy`, from the next tool call on;
    /// the model hears it with the next prompt. [`OpReply::SafetySwitched`],
    /// or why not (a mode the workspace's trust forbids, a sandbox this
    /// machine cannot build).
    SwitchSafety {
        sandbox_mode: SandboxMode,
        approval_policy: ApprovalPolicy,
    },
    /// `/plan`: [`OpReply::Plan`], the normalised plan object.
    ShowPlan,
    /// `/plan clear`: [`OpReply::PlanCleared`]; the model gets the new plan
    /// on its next request.
    ClearPlan,
    /// `/undo`: [`OpReply::Undone`], what was reverted.
    Undo,
    /// `/suspend [NAME]`: [`OpReply::Bookmarked`], the bookmark set in the
    /// session's journal (`None`: a generated name).
    Suspend {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// `/recall [NAME]`: [`OpReply::Recalled`] after the conversation of
    /// the bookmark or session `NAME` (the newest session when no name is
    /// given) replaced the current one.
    Recall { name: Option<String> },
    /// `/sessions`: [`OpReply::Sessions`], newest first.
    ListSessions,
    /// `/changes [show|apply|discard ID]`: [`OpReply::Output`] (the open
    /// change sets, or one in full) or [`OpReply::Info`] (applied,
    /// discarded), or why not. On the wire as before: `verb`, and `id`
    /// for the verbs that work on one change set.
    Changes(ChangesOp),
    /// `/status`: [`OpReply::Status`].
    Status,
    /// `/agents`, `fido agents`: [`OpReply::Subagents`], every subagent of
    /// the session in start order, from the engine's own record of them.
    ListSubagents,
    /// `/diff`: [`OpReply::Diff`], the workspace's `git diff` (run by the
    /// engine), [`OpReply::Info`] when no tracked file changed, or why not.
    Diff,
    /// The workspace's prompt history, for a front end to walk:
    /// [`OpReply::PromptHistory`].
    PromptHistory,
    /// A line the person entered (a prompt or a command) goes to the end
    /// of the workspace's prompt history. No reply; lines are kept in the
    /// order sent, and every one sent before the engine shuts down is kept.
    RememberPrompt { line: String },
    /// The person's decision on the `approval_requested` event `id`. An
    /// unknown or stale id is ignored (logged).
    Approve {
        id: AskId,
        decision: ApprovalDecision,
    },
    /// The person's answer to the `question_asked` event `id` (`None`:
    /// dismissed). An unknown or stale id is ignored (logged).
    Answer { id: AskId, answer: Option<String> },
}

impl Op {
    /// Whether the engine answers this op with an `op_replied` event
    /// (`Interrupt`, `Approve` and `Answer` are answered by what follows:
    /// the turn's end, the call going on; `RememberPrompt` by nothing).
    pub fn expects_reply(&self) -> bool {
        !matches!(
            self,
            Op::Interrupt | Op::Approve { .. } | Op::Answer { .. } | Op::RememberPrompt { .. }
        )
    }
}

super::schema::string_enum! {
    /// What `/changes` does with write subagents' change sets.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ChangesVerb {
        List = "list",
        Show = "show",
        Apply = "apply",
        Discard = "discard",
    }
}

/// What `/changes` does, each verb with exactly what it needs: listing
/// takes no id, every other verb one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case")]
pub enum ChangesOp {
    List,
    Show { id: String },
    Apply { id: String },
    Discard { id: String },
}

impl ChangesOp {
    /// The op of `verb` on change set `id` (`List` ignores it).
    pub fn on(verb: ChangesVerb, id: String) -> ChangesOp {
        match verb {
            ChangesVerb::List => ChangesOp::List,
            ChangesVerb::Show => ChangesOp::Show { id },
            ChangesVerb::Apply => ChangesOp::Apply { id },
            ChangesVerb::Discard => ChangesOp::Discard { id },
        }
    }

    /// Whether it changes the workspace (and so waits like a turn).
    pub fn writes(&self) -> bool {
        matches!(self, ChangesOp::Apply { .. } | ChangesOp::Discard { .. })
    }
}

/// The answer to one [`Submission`], in an `op_replied` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OpReply {
    /// The turn of [`Op::SubmitPrompt`] ended, or never started (`Failed`):
    /// how, its final answer and the usage of every request of the turn,
    /// its subagents' included.
    TurnEnded { outcome: TurnOutcome },
    /// Whether [`Op::Compact`] cut anything (its `compacted` event says what).
    Compacted { cut: bool },
    /// The model [`Op::SwitchModel`] switched to.
    ModelSwitched { model: String },
    /// The settings [`Op::SwitchSafety`] switched to.
    SafetySwitched {
        sandbox_mode: SandboxMode,
        approval_policy: ApprovalPolicy,
    },
    /// What [`Op::ClearPlan`] produced.
    PlanCleared(Box<PlanCleared>),
    /// `/status`'s settings.
    Status(StatusInfo),
    /// The plan [`Op::ShowPlan`] found.
    Plan(Box<PlanShown>),
    /// The sessions of the workspace, newest first, then the
    /// conversations older versions saved ([`Op::ListSessions`]).
    Sessions { sessions: Vec<SessionEntry> },
    /// Every subagent of the session, in start order ([`Op::ListSubagents`]).
    Subagents {
        #[serde(rename = "agents")]
        subagents: Vec<SessionSubagent>,
    },
    /// The running subagents [`Op::CancelSubagent`] asked to stop (empty:
    /// none matched).
    Cancelled {
        #[serde(rename = "agent_ids")]
        subagent_ids: Vec<String>,
    },
    /// The prompt history, oldest first ([`Op::PromptHistory`]).
    PromptHistory { entries: Vec<String> },
    /// What [`Op::Undo`] reverted (`None`: nothing was left to undo).
    Undone { change: Option<UndoneChange> },
    /// The bookmark [`Op::Suspend`] set.
    Bookmarked { name: String },
    /// What [`Op::Recall`] brought back: `from` names it (`bookmark NAME
    /// of session ID`, a session id, a saved conversation's name).
    Recalled { from: String, messages: usize },
    /// A line for the transcript (`/changes apply|discard`, `/diff` with
    /// nothing to show).
    Info { text: String },
    /// Output shown verbatim (`/changes`, `/changes show ID`).
    Output { text: String },
    /// `/diff`: the output of `git diff`, which the front end colours.
    Diff { text: String },
    /// Why the op did nothing: one sentence for the person.
    Failed { message: String },
}

impl OpReply {
    /// The reply to [`Op::SubmitPrompt`].
    pub fn turn_ended(outcome: &TurnOutcome) -> OpReply {
        OpReply::TurnEnded {
            outcome: outcome.clone(),
        }
    }

    /// A reply of [`OpReply::Info`], or the failure.
    pub fn info(result: Result<String, impl std::fmt::Display>) -> OpReply {
        match result {
            Ok(text) => OpReply::Info { text },
            Err(why) => OpReply::failed(why),
        }
    }

    /// A [`OpReply::Failed`] saying `why`.
    pub fn failed(why: impl std::fmt::Display) -> OpReply {
        OpReply::Failed {
            message: why.to_string(),
        }
    }

    /// A reply of [`OpReply::Output`], or the failure.
    pub fn output(result: Result<String, impl std::fmt::Display>) -> OpReply {
        match result {
            Ok(text) => OpReply::Output { text },
            Err(why) => OpReply::failed(why),
        }
    }
}

/// What `/status` shows from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusInfo {
    /// `None`: the engine has no configuration to tell (a test's).
    pub sandbox_mode: Option<SandboxMode>,
    pub approval_policy: Option<ApprovalPolicy>,
    /// Project instruction files loaded into the session.
    pub instruction_files: Vec<String>,
}

/// What `/plan` found: the flavour's normalised plan object, and the
/// same plan as `fido plan show` prints it (the `todo` flavour's text is
/// its contract's `list` text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanShown {
    pub plan: PlanSnapshot,
    /// Why the saved plan could not be used as it was (set aside, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    pub text: String,
}

super::schema::string_enum! {
    /// Where a session of the workspace stands, as `fido sessions` and
    /// `/sessions` list it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SessionStatus {
        /// A Fido process holds its journal.
        Running = "running",
        /// It ended as a session ends.
        Ended = "ended",
        /// Its process died before it ended.
        Interrupted = "interrupted",
        /// Its journal cannot be read (the listing says why).
        Unreadable = "unreadable",
        /// A conversation an older version saved: no journal at all.
        Saved = "saved",
    }
}

/// One session of the workspace as `/sessions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEntry {
    /// Its journal's id, or an older version's saved conversation's name.
    pub id: String,
    pub status: SessionStatus,
    /// Its first prompt on one line, cut short (a saved one's preview).
    pub preview: String,
    /// This very session.
    #[serde(default)]
    pub current: bool,
    /// Its `/suspend` bookmarks, oldest first.
    #[serde(default)]
    pub bookmarks: Vec<BookmarkEntry>,
}

/// One `/suspend` bookmark of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookmarkEntry {
    pub name: String,
    /// When it was set (RFC 3339).
    pub at: String,
}

super::schema::string_enum! {
    /// What a change `/undo` reverted was, in the words `/undo` and
    /// `fido undo` print.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum UndoneKind {
        /// A file's content was edited or overwritten.
        Patch = "patch",
        /// A file was created.
        Create = "create",
        /// A file, symlink or directory tree was removed.
        Rm = "rm",
        /// A directory was created.
        Mkdir = "mkdir",
        /// An empty directory was removed.
        Rmdir = "rmdir",
        /// A write subagent's change set was applied.
        ChangeSet = "change set",
    }
}

/// The file change `/undo` reverted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoneChange {
    pub kind: UndoneKind,
    /// The file (or change set) it touched, as the undo log has it.
    pub path: String,
}

/// What `/plan clear` produced: the new plan for the panel, and one line for
/// the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanCleared {
    /// Said to the user, e.g. `Plan cleared (version 4).`
    pub message: String,
    /// The complete normalised state after clearing: what a
    /// `plan_updated` event carries.
    pub plan: PlanSnapshot,
}

/// Ops a front end can have queued before the engine takes them. A person
/// types them, so the limit is never met in use; a full queue is refused,
/// never waited on, because the UI's handler must not block.
pub const OP_QUEUE_LIMIT: usize = 64;

/// The front end's end of the op queue: numbers each op it queues.
#[derive(Debug, Clone)]
pub struct OpSender {
    queue: mpsc::Sender<Submission>,
    next_id: Arc<AtomicU64>,
}

/// The engine's end of the op queue.
pub type OpReceiver = mpsc::Receiver<Submission>;

/// Why an op was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpRefused {
    #[error("the agent is not running")]
    EngineGone,
    #[error("the agent has {OP_QUEUE_LIMIT} commands waiting; try again")]
    Full,
}

pub fn op_channel() -> (OpSender, OpReceiver) {
    let (queue, receiver) = mpsc::channel(OP_QUEUE_LIMIT);
    let next_id = Arc::new(AtomicU64::new(1));
    (OpSender { queue, next_id }, receiver)
}

impl OpSender {
    /// Queues `op` without waiting: the id its answer will carry.
    pub fn send(&self, op: Op) -> Result<SubmissionId, OpRefused> {
        let id = self.next_id();
        self.submit(Submission { id, op })?;
        Ok(id)
    }

    /// An id no other submission of this sender (or its clones) carries,
    /// for a caller that must know it before the op is queued.
    pub fn next_id(&self) -> SubmissionId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues `submission` as it is, without waiting.
    pub fn submit(&self, submission: Submission) -> Result<(), OpRefused> {
        self.queue.try_send(submission).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => OpRefused::Full,
            mpsc::error::TrySendError::Closed(_) => OpRefused::EngineGone,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fido sessions --json` and `/sessions` keep their status words; a
    /// word Fido does not know is refused where an entry is read.
    #[test]
    fn every_session_status_keeps_its_word() {
        let words = ["running", "ended", "interrupted", "unreadable", "saved"];
        assert_eq!(SessionStatus::ALL.len(), words.len());
        for (status, word) in SessionStatus::ALL.iter().zip(words) {
            assert_eq!(serde_json::to_value(status).unwrap(), word);
        }
        let entry = SessionEntry {
            id: "s1".into(),
            status: SessionStatus::Interrupted,
            preview: "fix it".into(),
            current: false,
            bookmarks: Vec::new(),
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            line,
            r#"{"id":"s1","status":"interrupted","preview":"fix it","current":false,"bookmarks":[]}"#
        );
        let unknown = line.replace("interrupted", "paused");
        let err = serde_json::from_str::<SessionEntry>(&unknown).unwrap_err();
        assert!(err.to_string().contains("paused"), "{err}");
    }

    /// `/undo` keeps its words for what it reverted (a change set's has a
    /// space); a word Fido does not know is refused where a reply is read.
    #[test]
    fn every_undone_kind_keeps_its_word() {
        let words = ["patch", "create", "rm", "mkdir", "rmdir", "change set"];
        assert_eq!(UndoneKind::ALL.len(), words.len());
        for (kind, word) in UndoneKind::ALL.iter().zip(words) {
            assert_eq!(serde_json::to_value(kind).unwrap(), word);
        }
        let change = UndoneChange {
            kind: UndoneKind::ChangeSet,
            path: "subagent-1".into(),
        };
        let line = serde_json::to_string(&change).unwrap();
        assert_eq!(line, r#"{"kind":"change set","path":"subagent-1"}"#);
        let unknown = line.replace("change set", "write");
        let err = serde_json::from_str::<UndoneChange>(&unknown).unwrap_err();
        assert!(err.to_string().contains("write"), "{err}");
    }

    #[test]
    fn a_full_queue_and_a_gone_engine_are_refused_without_waiting() {
        let (sender, receiver) = op_channel();
        for _ in 0..OP_QUEUE_LIMIT {
            sender.send(Op::Interrupt).unwrap();
        }
        assert_eq!(receiver.len(), OP_QUEUE_LIMIT);
        assert_eq!(sender.send(Op::Interrupt), Err(OpRefused::Full));
        drop(receiver);
        assert_eq!(sender.send(Op::Interrupt), Err(OpRefused::EngineGone));
    }

    #[test]
    fn submissions_are_numbered_across_clones() {
        let (sender, mut receiver) = op_channel();
        let clone = sender.clone();
        let first = sender.send(Op::Interrupt).unwrap();
        let second = clone.send(Op::Status).unwrap();
        assert_ne!(first, second);
        assert_eq!(receiver.try_recv().unwrap().id, first);
        assert_eq!(receiver.try_recv().unwrap().id, second);
    }

    /// `/changes` keeps its wire form (`verb`, and `id` for the verbs on
    /// one change set), and the forms that made no sense are refused.
    #[test]
    fn changes_ops_carry_exactly_what_their_verb_needs() {
        let wire = |op: &Op| serde_json::to_value(op).unwrap();
        assert_eq!(
            wire(&Op::Changes(ChangesOp::List)),
            serde_json::json!({"type": "changes", "verb": "list"})
        );
        assert_eq!(
            wire(&Op::Changes(ChangesOp::Show { id: "s-1".into() })),
            serde_json::json!({"type": "changes", "verb": "show", "id": "s-1"})
        );
        let parse = |text: &str| serde_json::from_str::<Op>(text);
        assert_eq!(
            parse(r#"{"type": "changes", "verb": "discard", "id": "s-2"}"#).unwrap(),
            Op::Changes(ChangesOp::Discard { id: "s-2".into() })
        );
        assert!(parse(r#"{"type": "changes", "verb": "apply"}"#).is_err());
        assert!(parse(r#"{"type": "changes", "verb": "remove", "id": "x"}"#).is_err());
    }

    fn every_op() -> Vec<Op> {
        vec![
            Op::SubmitPrompt {
                prompt: "hi".into(),
            },
            Op::Interrupt,
            Op::CancelSubagent {
                agent_id: Some("sub-1".into()),
            },
            Op::CancelSubagent { agent_id: None },
            Op::Compact,
            Op::SwitchModel { model: "m".into() },
            Op::SwitchSafety {
                sandbox_mode: SandboxMode::ReadOnly,
                approval_policy: ApprovalPolicy::OnRequest,
            },
            Op::ShowPlan,
            Op::ClearPlan,
            Op::Undo,
            Op::Suspend { name: None },
            Op::Suspend {
                name: Some("before-refactor".into()),
            },
            Op::Recall { name: None },
            Op::Recall {
                name: Some("20261201T120000-abcd".into()),
            },
            Op::ListSessions,
            Op::Changes(ChangesOp::List),
            Op::Changes(ChangesOp::Apply {
                id: "subagent-1".into(),
            }),
            Op::Status,
            Op::ListSubagents,
            Op::Diff,
            Op::Approve {
                id: 3,
                decision: ApprovalDecision::Denied {
                    reason: Some("not now".into()),
                },
            },
            Op::Answer {
                id: 4,
                answer: Some("postgres".into()),
            },
        ]
    }

    fn every_reply() -> Vec<OpReply> {
        vec![
            OpReply::turn_ended(&TurnOutcome::failed("boom")),
            OpReply::Compacted { cut: true },
            OpReply::ModelSwitched { model: "m".into() },
            OpReply::SafetySwitched {
                sandbox_mode: SandboxMode::DangerFullAccess,
                approval_policy: ApprovalPolicy::Never,
            },
            OpReply::PlanCleared(Box::new(PlanCleared {
                message: "Plan cleared (version 2).".into(),
                plan: PlanSnapshot::UpdatePlan(crate::protocol::plan::PlanState::empty()),
            })),
            OpReply::Status(StatusInfo {
                sandbox_mode: Some(SandboxMode::WorkspaceWrite),
                approval_policy: Some(ApprovalPolicy::OnRequest),
                instruction_files: vec!["AGENTS.md".into()],
            }),
            OpReply::Status(StatusInfo::default()),
            OpReply::info(Ok::<_, String>("undone".into())),
            OpReply::output(Ok::<_, String>("plan".into())),
            OpReply::Diff {
                text: "--- a/a.txt\n+++ b/a.txt\n-one\n+two\n".into(),
            },
            OpReply::info(Err::<String, _>("cannot")),
        ]
    }

    /// The front end could run in another process: every op and every
    /// event of the UI protocol survives JSON unchanged.
    /// `/suspend` without a name is the frame it was before it took one.
    #[test]
    fn a_suspend_without_a_name_keeps_its_earlier_frame() {
        let plain = Op::Suspend { name: None };
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"type":"suspend"}"#
        );
        let earlier: Op = serde_json::from_str(r#"{"type":"suspend"}"#).unwrap();
        assert_eq!(earlier, plain);
    }

    #[test]
    fn submissions_and_ui_protocol_events_round_trip_through_json() {
        for (id, op) in every_op().into_iter().enumerate() {
            let submission = Submission { id: id as u64, op };
            let line = serde_json::to_string(&submission).unwrap();
            let back: Submission = serde_json::from_str(&line).unwrap();
            assert_eq!(back, submission, "{line}");
        }
        let request = crate::protocol::ApprovalRequest::FileChange {
            tool: "patch".into(),
            path: "a.txt".into(),
            diff: "-a\n+b".into(),
        };
        let mut kinds = vec![
            crate::protocol::EventKind::ApprovalRequested { id: 1, request },
            crate::protocol::EventKind::QuestionAsked {
                id: 2,
                question: "Which one?".into(),
            },
        ];
        let replies = every_reply().into_iter().enumerate();
        kinds.extend(
            replies.map(|(id, reply)| crate::protocol::EventKind::OpReplied {
                id: id as u64,
                reply,
            }),
        );
        for kind in kinds {
            assert!(kind.is_live_only(), "never in --json: {kind:?}");
            let event = crate::protocol::Event::now(kind);
            let line = serde_json::to_string(&event).unwrap();
            let back: crate::protocol::Event = serde_json::from_str(&line).unwrap();
            assert_eq!(back, event, "{line}");
        }
    }

    /// A mode switch names both settings in their config spellings.
    #[test]
    fn a_safety_switch_has_the_config_spellings_on_the_wire() {
        let op = Op::SwitchSafety {
            sandbox_mode: SandboxMode::ReadOnly,
            approval_policy: ApprovalPolicy::OnRequest,
        };
        assert_eq!(
            serde_json::to_string(&op).unwrap(),
            r#"{"type":"switch_safety","sandbox_mode":"read-only","approval_policy":"on-request"}"#
        );
        let reply = OpReply::SafetySwitched {
            sandbox_mode: SandboxMode::DangerFullAccess,
            approval_policy: ApprovalPolicy::Never,
        };
        assert_eq!(
            serde_json::to_string(&reply).unwrap(),
            r#"{"kind":"safety_switched","sandbox_mode":"danger-full-access","approval_policy":"never"}"#
        );
    }

    #[test]
    fn agents_and_diff_ops_have_snake_case_frames() {
        let frames = [(Op::ListSubagents, "list_subagents"), (Op::Diff, "diff")];
        for (op, name) in frames {
            let line = serde_json::to_string(&op).unwrap();
            assert_eq!(line, format!(r#"{{"type":"{name}"}}"#));
        }
        let reply = OpReply::Diff { text: "+a".into() };
        assert_eq!(
            serde_json::to_string(&reply).unwrap(),
            r#"{"kind":"diff","text":"+a"}"#
        );
    }

    #[test]
    fn a_reply_on_the_wire_names_its_submission_and_kind() {
        let kind = crate::protocol::EventKind::OpReplied {
            id: 9,
            reply: OpReply::Compacted { cut: false },
        };
        assert_eq!(
            serde_json::to_string(&kind).unwrap(),
            r#"{"type":"op_replied","id":9,"reply":{"kind":"compacted","cut":false}}"#
        );
    }
}
