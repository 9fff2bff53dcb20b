//! The `fastview` binary: a shim over [`fastview::cli`].

fn main() -> std::process::ExitCode {
    fastview::cli::main()
}
