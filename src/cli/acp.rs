//! `fido acp`: Fido as an Agent Client Protocol agent on stdio, for
//! editors (Zed, the JetBrains IDEs, Neovim, `acpx`). The work is in
//! [`crate::acp`]; stdout carries JSON-RPC only, logs go to stderr.

use std::process::ExitCode;

use super::fail;
use super::preamble::run_configured;
use crate::config::Overrides;

pub fn run(overrides: &Overrides) -> ExitCode {
    // First, before anything can print or start a child: from here on
    // file descriptor 1 is stderr and only the protocol has stdout.
    let pipes = match crate::acp::claim_stdio() {
        Ok(pipes) => pipes,
        Err(err) => return fail(&format!("cannot take stdin and stdout: {err}")),
    };
    // The configuration is loaded here to report its errors at once;
    // each session loads it again for its own `cwd`.
    let session_overrides = overrides.clone();
    run_configured(overrides, |_config| async move {
        match crate::acp::serve(session_overrides, pipes).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => fail(&err.to_string()),
        }
    })
}
