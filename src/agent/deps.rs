//! What every turn of one agent shares: the provider (through the
//! session's gateway), the catalog, the tool environment, the identity,
//! the settings, the event sink and, for the main agent, the journal.

use std::sync::Arc;

use super::{AgentSettings, Conversation, EventSink};
use crate::provider::Provider;
use crate::store::journal::Journal;
use crate::tools::{InvocationContext, ToolCatalog, ToolEnv};

/// Everything a turn needs besides the conversation. Shared, immutable
/// (`/model` swaps in a copy with another provider between turns).
#[derive(Clone)]
pub struct AgentDeps {
    pub provider: Arc<dyn Provider>,
    pub catalog: Arc<ToolCatalog>,
    pub tool_env: Arc<ToolEnv>,
    pub ctx: InvocationContext,
    pub settings: AgentSettings,
    pub events: EventSink,
    /// The session journal (the main agent only): every step is on disk
    /// before the next one starts.
    pub journal: Option<Arc<Journal>>,
}

impl AgentDeps {
    /// Writes the calls about to run to the journal (the fsync comes with
    /// the next step boundary).
    pub(super) async fn journal_calls(&self, conversation: &Conversation) {
        if let Some(journal) = &self.journal {
            journal
                .record_unsynced(conversation.generation(), conversation.messages())
                .await;
        }
    }

    /// Appends what the conversation gained to the session journal, if
    /// any, and waits until it is on disk.
    pub(super) async fn journal_step(&self, conversation: &Conversation) {
        if let Some(journal) = &self.journal {
            journal
                .record(conversation.generation(), conversation.messages())
                .await;
        }
    }
}
