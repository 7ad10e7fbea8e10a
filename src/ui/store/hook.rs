//! User hooks in the transcript: one line when a hook blocks something or
//! fails ([`HookNotice`]); hooks that run quietly are not shown.

use super::{Entry, Store};
use crate::protocol::EventKind;
use crate::protocol::hook::HookNotice;

impl Store {
    /// A hook event; returns whether the transcript changed.
    pub(super) fn hook(&mut self, event: &EventKind) -> bool {
        let entry = match HookNotice::of(event) {
            None => return false,
            Some(HookNotice::Blocked(text)) => Entry::Info(text),
            Some(HookNotice::Failed(text)) => Entry::Error(text),
        };
        self.push(entry);
        true
    }
}
