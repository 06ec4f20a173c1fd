//! The `botfleet` binary.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: the turn engine and the store writer
/// allocate and free many small objects across threads, where glibc spent
/// 15–20% of the host's CPU (docs/performance.md, "Allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = botfleet::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            EnvFilter::new("warn,botfleet=info,botfleet_actors=info,botfleet_memory=info")
        }))
        .with_writer(std::io::stderr)
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
