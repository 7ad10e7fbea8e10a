//! The parent's git for change sets: Fido's one hardened git runner
//! ([`crate::git`]), named here for the change-set code.

pub use crate::git::{EMPTY_TREE, Git, GitError};
