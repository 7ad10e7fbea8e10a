//! The `fido` binary: a thin entry into the library.

fn main() -> std::process::ExitCode {
    fido::cli::main()
}
