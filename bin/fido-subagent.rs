//! `fido-subagent`: the child side of a subagent alone.

fn main() -> std::process::ExitCode {
    fido::cli::subagent_main()
}
