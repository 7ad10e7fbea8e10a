//! Delegation: subagents as separate, sandboxed OS processes, read-only
//! investigations or, with `mode: "write"`, workers in a worktree of
//! their own whose change set the parent merges (`crate::changes`).
//!
//! # Theory of operation
//!
//! Parent side ([`supervisor`]): the `delegate` tool hands a
//! [`DelegationRequest`](crate::tools::delegate::DelegationRequest) to the
//! `SupervisorActor`, which runs up to `delegate_concurrency` subagents at
//! once (more wait their turn), each in a task of its own:
//!
//! 1. Assign the identity (`subagent-<hex>`), build the deep fork from the
//!    parent's messages at the instant of the call ([`fork`]). A write
//!    delegation first passes `delegate_write`, claims its paths and gets
//!    its worktree (`supervisor::write`).
//! 2. Open a local socket (`interprocess`, abstract namespace) with a random
//!    per-spawn name, and spawn `fido __subagent` as the leader of its own
//!    process group, with a scrubbed environment (no keys), stdin closed,
//!    stderr captured into the parent's log. The program is the
//!    `fido-subagent` binary beside the running one ([`child_program`]).
//! 3. Accept exactly one connection and check that its peer pid is the
//!    child's; then close the listener, so no second connection can be made.
//! 4. Read `Hello` (protocol version, sandbox status), send `Fork`.
//! 5. Serve the child: each `ModelRequest` is answered by the parent's
//!    provider (the only holder of credentials) with one `ModelDone` or
//!    `ModelError`, at most `max_steps` of them (the gateway keeps the
//!    budget, not the child). The words the provider streams meanwhile go
//!    to the child's session on the parent's side (a call the model wrote
//!    into its text held back); the child itself gets whole answers.
//!    `Lifecycle` frames become sanitised `subagent` events, `Plan` frames
//!    the child's own plan under its id; `McpCall` and `Browse` run through
//!    the parent's connections and host rules; `Final` ends the run.
//! 6. On timeout or cancel, send `Cancel`; the child has `grace` to answer
//!    with a partial `Final`; then SIGTERM to its group, then SIGKILL. The
//!    time limit counts from the spawn, and a timeout, cancel or shutdown
//!    during steps 2–4 stops the child at once (it has nothing to return
//!    yet). The child is always reaped, whatever happened.
//! 7. Normalise the final text ([`result`]) into the `delegate_result` that
//!    becomes the tool result in the parent's conversation; a write
//!    delegation's change set is built and merged as `delegate_merge` says.
//!
//! Any malformed, oversized or out-of-order frame, a flood of frames, a
//! child that crashes or exits without `Final`: the child is killed and the
//! parent gets a `failed` result naming the cause, and goes on.
//!
//! Child side ([`runner`]): connect, sandbox itself (no_new_privs,
//! parent-death signal, Landlock read-only: its commands write only a
//! scratch folder, a write subagent its worktree too; no network), say
//! `Hello`, read the fork, and
//! run the same turn loop as the parent with identity `subagent` and depth
//! 1, its model requests going to the parent through the socket. The
//! invocation guard refuses nested delegation, and every tool that
//! changes files to a read-only subagent; its plan tool keeps a plan in
//! its memory.
//!
//! Frames (`crate::protocol::ipc`): parent → child `Fork`, `ModelDone`,
//! `ModelError`, `Cancel`, `McpResult`, `BrowseResult`; child → parent
//! `Hello`, `ModelRequest`, `Lifecycle`, `Plan`, `McpCall`, `Browse`,
//! `Final`. Each is a 4-byte big-endian length and a JSON object
//! ([`ipc`]).

use std::path::{Path, PathBuf};

pub mod control;
pub mod fork;
pub mod ipc;
pub mod limits;
pub mod orphans;
pub mod profiles;
pub mod result;
pub mod runner;
pub mod supervisor;

pub use limits::{DelegationLimits, MAX_DELEGATE_CONCURRENCY};

/// The binary of the child side alone: the same library code as `fido
/// __subagent`, without the terminal UI, the HTTP client or the MCP client.
/// A third of the size, it starts and exits faster (the start-up and the
/// exit count in every delegation), and the sandboxed process holds no
/// network code at all.
pub const CHILD_BINARY: &str = "fido-subagent";

/// The program a subagent runs, given the running `fido` binary: the
/// [`CHILD_BINARY`] installed beside it, else `fido` itself (`fido
/// __subagent` is the same child). Only that folder is looked in, never
/// `PATH` or the workspace.
pub fn child_program(fido: &Path) -> PathBuf {
    let beside = fido.with_file_name(CHILD_BINARY);
    if beside.is_file() {
        beside
    } else {
        fido.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_binary_beside_fido_is_preferred() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fido = dir.path().join("fido");
        std::fs::write(&fido, b"").expect("fido");
        assert_eq!(child_program(&fido), fido, "no fido-subagent: fido itself");
        std::fs::create_dir(dir.path().join(CHILD_BINARY)).expect("a folder");
        assert_eq!(
            child_program(&fido),
            fido,
            "a folder of that name is no program"
        );
        std::fs::remove_dir(dir.path().join(CHILD_BINARY)).expect("rmdir");
        std::fs::write(dir.path().join(CHILD_BINARY), b"").expect("fido-subagent");
        assert_eq!(child_program(&fido), dir.path().join(CHILD_BINARY));
    }
}
