//! Delegation: subagents as separate, sandboxed OS processes.
//!
//! # Theory of operation
//!
//! Parent side ([`supervisor`]): the `delegate` tool hands a
//! [`DelegationRequest`](crate::tools::delegate::DelegationRequest) to the
//! `SupervisorActor`, which allows one subagent at a time and runs each in a
//! task of its own:
//!
//! 1. Assign the identity (`subagent-<hex>`), build the deep fork from the
//!    parent's messages at the instant of the call ([`fork`]).
//! 2. Open a local socket (`interprocess`, abstract namespace) with a random
//!    per-spawn name, and spawn `fido __subagent` (the current binary) as the
//!    leader of its own process group, with a scrubbed environment (no keys),
//!    stdin closed, stderr captured into the parent's log.
//! 3. Accept exactly one connection and check that its peer pid is the
//!    child's; then close the listener, so no second connection can be made.
//! 4. Read `Hello` (protocol version, sandbox status), send `Fork`.
//! 5. Serve the child: each `ModelRequest` is answered by the parent's
//!    provider (the only holder of credentials) with one `ModelDone` or
//!    `ModelError` (no streamed chunks: the child shows no text), at most `max_steps` of them (the gateway
//!    keeps the budget, not the child); `Lifecycle` frames become sanitised
//!    `subagent` events; `Final` ends the run.
//! 6. On timeout or cancel, send `Cancel`; the child has `grace` to answer
//!    with a partial `Final`; then SIGTERM to its group, then SIGKILL. The
//!    time limit counts from the spawn, and a timeout, cancel or shutdown
//!    during steps 2–4 stops the child at once (it has nothing to return
//!    yet). The child is always reaped, whatever happened.
//! 7. Normalise the final text ([`result`]) into the `delegate_result` that
//!    becomes the tool result in the parent's conversation.
//!
//! Any malformed, oversized or out-of-order frame, a flood of frames, a
//! child that crashes or exits without `Final`: the child is killed and the
//! parent gets a `failed` result naming the cause, and goes on.
//!
//! Child side ([`runner`]): connect, sandbox itself (no_new_privs,
//! parent-death signal, Landlock read-only, no network), say `Hello`, read
//! the fork, and run the same turn loop as the parent with identity
//! `subagent` and depth 1, its model requests going to the parent through
//! the socket. The invocation guard refuses every mutating tool and nested
//! delegation.
//!
//! Frames (`crate::protocol::ipc`): parent → child `Fork`,
//! `ModelDone`, `ModelError`, `Cancel`; child → parent `Hello`,
//! `ModelRequest`, `Lifecycle`, `Final`. Each is a 4-byte big-endian length
//! and a JSON object ([`ipc`]).

pub mod control;
pub mod fork;
pub mod ipc;
pub mod orphans;
pub mod profiles;
pub mod result;
pub mod runner;
pub mod supervisor;
