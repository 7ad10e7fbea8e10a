//! The local commands (`/plan`, `/plan clear`, `/undo`, `/suspend`,
//! `/recall`, `/sessions`, and what `/status` and `/model` need from the
//! configuration), behind a trait so that the TUI and the command line
//! share one implementation (the CLI provides it). They run without a
//! model turn.

/// What `/status` shows from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusInfo {
    /// `None`: the configuration has no such setting (yet).
    pub sandbox_mode: Option<String>,
    pub approval_policy: Option<String>,
    /// Project instruction files loaded into the session.
    pub instruction_files: Vec<String>,
}

/// What `/plan clear` produced: the new plan for the panel, and one line for
/// the transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCleared {
    /// Said to the user, e.g. `Plan cleared (version 4).`
    pub message: String,
    /// The complete normalised state after clearing: what a
    /// `plan_updated` event carries.
    pub plan: crate::protocol::plan::PlanSnapshot,
}

/// Errors are one sentence for the user.
pub trait LocalCommands: Send + Sync {
    /// The current plan as text, exactly as `fido plan show` prints it.
    fn show(&self) -> Result<String, String>;
    /// Starts a new, empty plan, as `fido plan clear` does.
    fn clear(&self) -> Result<PlanCleared, String>;
    /// `/undo`: reverts the last file change of the file tools.
    fn undo(&self) -> Result<String, String> {
        Err("/undo is not available here".into())
    }
    /// `/suspend`: saves the conversation; returns what to tell the user.
    fn suspend(&self, _messages: &[crate::protocol::Message]) -> Result<String, String> {
        Err("/suspend is not available here".into())
    }
    /// `/recall [NAME]`: the saved conversation's name and messages (the
    /// newest when no name is given).
    fn recall(
        &self,
        _name: Option<&str>,
    ) -> Result<(String, Vec<crate::protocol::Message>), String> {
        Err("/recall is not available here".into())
    }
    /// `/sessions`: the saved conversations, one per line.
    fn sessions(&self) -> Result<String, String> {
        Err("/sessions is not available here".into())
    }
    /// `/status`: the settings it shows.
    fn status(&self) -> StatusInfo {
        StatusInfo::default()
    }
}

/// A question of `ask_user` on its way to the UI, with where the answer goes.
pub struct Question {
    pub text: String,
    pub answer: tokio::sync::oneshot::Sender<Option<String>>,
}

/// An approval request of the invocation guard on its way to the UI, with
/// where the decision goes. Dropped unanswered when the turn is
/// interrupted.
pub struct ApprovalPrompt {
    pub request: crate::protocol::ApprovalRequest,
    pub answer: tokio::sync::oneshot::Sender<crate::protocol::ApprovalDecision>,
}

/// What the agent asks the person through the UI.
pub enum UserRequest {
    Question(Question),
    Approval(ApprovalPrompt),
}

/// The UI's side of `ask_user` and of approvals: requests travel over a
/// channel that the UI drains once it runs (the agent starts before the UI
/// exists).
pub struct UiUser {
    questions: tokio::sync::mpsc::UnboundedSender<UserRequest>,
}

impl UiUser {
    pub fn new() -> (UiUser, tokio::sync::mpsc::UnboundedReceiver<UserRequest>) {
        let (questions, receiver) = tokio::sync::mpsc::unbounded_channel();
        (UiUser { questions }, receiver)
    }

    /// Asks the person `request`'s question and waits for the answer:
    /// `None` when the UI is gone or the question was dropped.
    pub async fn ask_person<T>(
        &self,
        request: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> UserRequest,
    ) -> Option<T> {
        let (answer, reply) = tokio::sync::oneshot::channel();
        self.questions.send(request(answer)).ok()?;
        reply.await.ok()
    }
}
