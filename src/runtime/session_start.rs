//! A session's start from its journal: prune old journals, then open a new
//! one or continue the one `--resume` names, and rebuild its conversation.

use std::sync::Arc;

use tracing::{info, warn};

use crate::agent::{Conversation, EventSink, restore_plan};
use crate::config::Config;
use crate::plan::PlanFlavour;
use crate::protocol::EventKind;
use crate::protocol::journal_record::JournalRecord;
use crate::store::journal::{self, Journal, JournalError, Pick, Replayed, SessionInfo};
use crate::tools::ToolEnv;

/// Why a session could not continue from its journal.
#[derive(Debug, thiserror::Error)]
pub enum SessionJournalError {
    /// The session `--resume` names cannot be found, read or taken over.
    #[error(transparent)]
    Resume(#[from] JournalError),
    /// The blocking task that opens the journal died.
    #[error("the journal task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// The blocking task that rebuilds the conversation died.
    #[error("cannot build the conversation: {0}")]
    Conversation(#[source] tokio::task::JoinError),
    /// The replayed messages do not start with a system prompt.
    #[error("session {0} has no system prompt")]
    NoSystemPrompt(String),
}

/// Why the blocking half of [`open`] did not open a journal.
enum NotOpened {
    /// A new journal: the session runs unjournaled.
    Create(std::io::Error),
    /// The session to resume: the session does not start.
    Resume(JournalError),
}

/// Which earlier session to continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeFrom {
    Id(String),
    Last,
}

/// The journal of this session, and what it held when it was resumed.
/// Without `resume`, a journal that cannot be created is a warning (the
/// session runs unjournaled); a session that cannot be resumed is an error.
pub async fn open(
    config: &Config,
    info: SessionInfo,
    resume: Option<ResumeFrom>,
) -> Result<(Option<Arc<Journal>>, Option<Replayed>), SessionJournalError> {
    let workspace = config.workspace.clone();
    let days = config.session_retention_days;
    let opened = tokio::task::spawn_blocking(move || {
        match journal::prune(&workspace, days) {
            Ok(0) => {}
            Ok(n) => info!(removed = n, days, "pruned old session journals"),
            Err(err) => warn!(error = %err, "cannot prune old session journals"),
        }
        match &resume {
            None => journal::create(&workspace, &info, None)
                .map(|journal| (journal, None))
                .map_err(NotOpened::Create),
            Some(from) => {
                let pick = match from {
                    ResumeFrom::Id(id) => Pick::Id(id),
                    ResumeFrom::Last => Pick::Last,
                };
                journal::resume(&workspace, pick)
                    .map(|(journal, replayed)| (journal, Some(replayed)))
                    .map_err(NotOpened::Resume)
            }
        }
    })
    .await
    .map_err(SessionJournalError::Task)?;
    match opened {
        Ok((journal, replayed)) => {
            if replayed.is_some() {
                journal.note(JournalRecord::Resumed { at: now() }).await;
            }
            Ok((Some(Arc::new(journal)), replayed))
        }
        Err(NotOpened::Resume(err)) => Err(err.into()),
        Err(NotOpened::Create(err)) => {
            warn!(
                "cannot create the session journal: {err}; this session is not journaled and cannot be resumed"
            );
            Ok((None, None))
        }
    }
}

/// The resumed conversation: the journaled messages exactly as they were
/// sent (so the provider's cached prefix still matches), a result for any
/// call the crash left unanswered, then the current workspace plan.
pub fn resumed_conversation(
    replayed: &Replayed,
    env: &ToolEnv,
    flavour: PlanFlavour,
    events: &EventSink,
) -> Result<Conversation, SessionJournalError> {
    let mut conversation = Conversation::from_messages(replayed.messages.clone())
        .ok_or_else(|| SessionJournalError::NoSystemPrompt(replayed.id.clone()))?;
    conversation.answer_unanswered("the session ended before this call finished");
    if let Some(note) = &replayed.note {
        events.emit(EventKind::Error {
            message: note.clone(),
        });
    }
    restore_plan(&mut conversation, env, flavour, events);
    Ok(conversation)
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
