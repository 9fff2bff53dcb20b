//! `fastview-loadtest`: parses the command line and hands it to the library.

use std::process::ExitCode;

use clap::Parser;
use fastview_loadtest::cli::{Cli, execute};

// The client's own cost per request decides how much load one core can
// offer: glibc's malloc was a fifth of it (ADR 0003, session 22).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(execute(cli)),
        Err(error) => {
            eprintln!("fastview-loadtest: cannot start the tokio runtime: {error}");
            ExitCode::from(2)
        }
    }
}
