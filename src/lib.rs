//! Fido: a terminal coding agent with a durable plan and safe delegation.
//!
//! The binary (`bin/fido.rs`) is a thin entry; everything lives here so that
//! tests and benches drive the real code. See `README.md` for the shape.

// Unit tests panic on the unexpected: that is how a test fails.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod acp;
pub mod agent;
pub mod changes;
pub mod cli;
pub mod config;
pub mod git;
pub mod hooks;
pub mod mcp;
pub mod net;
pub mod plan;
pub mod process;
pub mod procfs;
pub mod protocol;
pub mod provider;
pub mod runtime;
pub mod sandbox;
pub mod sandbox_check;
pub mod store;
pub mod subagent;
pub mod text;
pub mod tools;
pub mod ui;
pub mod workspace;
