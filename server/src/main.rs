//! The `fastview` binary: a shim over [`fastview::cli`], with mimalloc as the
//! global allocator (under load, glibc malloc took about a quarter of the
//! server's CPU in `perf`; see adr/0002).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fastview::cli::main()
}
