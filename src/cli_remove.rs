//! `botfleet bots remove BOT`: removes a bot made by CreateAgent
//! (`DELETE /v1/bots/{bot}`).

use std::process::ExitCode;

use clap::Subcommand;

use crate::client::Client;
use crate::client::segment;

/// What `botfleet bots` does besides listing.
#[derive(Debug, Subcommand)]
pub enum BotsCommand {
    /// Remove a bot made by CreateAgent.
    ///
    /// It takes no more messages and runs no turns (a running turn is
    /// cancelled), and its conversations stay readable. A bot of fleet.toml
    /// is removed there (delete its [[bots]] table and restart); a subagent
    /// goes with its parent.
    Remove {
        /// Bot id.
        bot: String,
    },
}

/// Removes `bot` and says what became of it.
pub(super) async fn remove(client: &Client, bot: &str) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/bots/{}", segment(bot));
    // an earlier removal answers the same record: say so rather than
    // claim this one removed it
    let before = client.get(&path).await?;
    let removed = client.delete(&path).await?;
    let id = removed["id"].as_str().unwrap_or(bot);
    if before["settings"]["removed_at"].is_i64() {
        outln!("{id} was already removed; its conversations stay readable");
    } else {
        outln!(
            "removed {id}: it takes no more messages and runs no turns; its conversations stay \
             readable (`botfleet transcript {id}`)"
        );
    }
    Ok(ExitCode::SUCCESS)
}
