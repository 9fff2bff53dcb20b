//! The `fastview` command line.

/// Runs the command line; returns the process exit code.
pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
