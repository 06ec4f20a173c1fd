//! The `botfleet` binary.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: the turn engine and the store writer
/// allocate and free many small objects across threads, where glibc spent
/// 15–20% of the host's CPU (docs/performance.md, "Allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = botfleet::cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            EnvFilter::new("warn,botfleet=info,botfleet_actors=info,botfleet_memory=info")
        }))
        .with_writer(std::io::stderr)
        // a log line that cannot be written (stderr redirected to a file on
        // a full disk) is dropped; by default the subscriber reports that
        // with `eprintln!`, which panics when stderr fails, and the panic
        // took down whichever thread logged: the store's writer, logging
        // the refused write, so the host stopped storing anything until a
        // restart, though the disk had space again
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(botfleet::cli::main(cli))
}
