//! The protocol's own stdin and stdout. They are taken over at start: the
//! protocol keeps private copies (closed on exec), file descriptor 1
//! becomes a copy of stderr and 0 reads `/dev/null`. Then nothing else in
//! the process, nor any child it starts (a hook, an MCP server, a
//! command), can write into the JSON-RPC stream or read the client's
//! frames; a stray print lands on stderr, with the logs.

use std::fs::File;
use std::os::fd::AsFd;

/// The protocol's input and output.
pub struct ProtocolPipes {
    pub input: File,
    pub output: File,
}

/// Takes stdin and stdout for the protocol (see the module's doc).
pub fn claim() -> std::io::Result<ProtocolPipes> {
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    nix::unistd::dup2_stdout(std::io::stderr().as_fd())?;
    let null = File::open("/dev/null")?;
    nix::unistd::dup2_stdin(null.as_fd())?;
    Ok(ProtocolPipes {
        input: File::from(input),
        output: File::from(output),
    })
}
