//! The command line: `botfleet run` starts a host; every other command
//! talks to a running host over the HTTP API.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use anyhow::bail;
use clap::Parser;
use clap::Subcommand;
use serde_json::Value;
use serde_json::json;

use crate::client::Client;
use crate::host;

#[path = "cli_approvals.rs"]
mod approvals;
#[path = "cli_events.rs"]
mod events;
#[path = "cli_group.rs"]
mod group;
#[path = "cli_memory.rs"]
mod memory;
#[path = "cli_outcome.rs"]
mod outcome;
#[path = "cli_search.rs"]
mod search;
pub use group::GroupCommand;

/// botfleet: a host for a fleet of long-lived LLM bots.
#[derive(Debug, Parser)]
#[command(name = "botfleet", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// The host's API address (commands other than `run`).
    #[arg(
        long,
        global = true,
        env = "BOTFLEET_HOST",
        default_value = "http://127.0.0.1:7878"
    )]
    pub host: String,
    /// Bearer token of your user (the example fleet's `alice` has `alice-secret`).
    #[arg(long, global = true, env = "BOTFLEET_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the host (API, web page, bots).
    Run {
        /// Fleet file (default: ./fleet.toml if present, else the built-in example fleet).
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// Data directory (overrides host.data_dir).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Listen address IP:PORT (overrides host.listen).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Check a fleet file and print what it defines.
    CheckConfig {
        /// Fleet file (default as for `run`).
        #[arg(long)]
        fleet: Option<PathBuf>,
    },
    /// Send a message to a bot and print the reply it delivers.
    Send {
        /// Bot id.
        bot: String,
        /// Message text.
        text: String,
        /// Idempotency key (default: a new UUIDv7). Reuse it to retry safely.
        #[arg(long)]
        nonce: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Seconds to wait for the reply.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Print your conversation with a bot.
    Transcript {
        /// Bot id.
        bot: String,
        /// Also show the bot's internal steps (notes, tool calls, results).
        #[arg(long)]
        all: bool,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// List your bots.
    Bots {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Retry the inputs of a failed or undelivered turn.
    Retry {
        /// Turn id (shown in the failure notice).
        turn: String,
    },
    /// Show what a bot remembers (every scope it reaches), with ids.
    Memory {
        /// Bot id.
        bot: String,
        /// Also rank the log entries for this input, as the prompt would.
        #[arg(long)]
        input: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget one memory item for good (an id from `botfleet memory`).
    Forget {
        /// Memory item id (m-…).
        id: String,
    },
    /// Cancel a bot's running turn.
    Cancel {
        /// Bot id.
        bot: String,
    },
    /// List the actions your bots wait to have approved (pending ones).
    Approvals {
        /// Also decided and expired ones.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending action (an id from `botfleet approvals`); the bot
    /// is told and may run it once.
    Approve {
        /// Approval id.
        id: String,
    },
    /// Deny a pending action; the bot is told not to retry it.
    Deny {
        /// Approval id.
        id: String,
    },
    /// Group rooms: create one, post to it and print the public replies.
    Group {
        /// What to do.
        #[command(subcommand)]
        action: GroupCommand,
    },
    /// Search the transcripts of your bots and rooms. Words are all
    /// required; "exact phrase", -word (exclude) and a OR b work.
    Search {
        /// What to find.
        #[arg(allow_hyphen_values = true)]
        query: String,
        /// Only what this bot may see (its sessions and its rooms).
        #[arg(long)]
        bot: Option<String>,
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Most hits (1-100, default 10).
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the transcript search index from the store, with a progress
    /// bar. Offline: stop the host first.
    Reindex {
        /// Data directory (default: host.data_dir of the fleet file).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Fleet file (default as for `run`).
        #[arg(long)]
        fleet: Option<PathBuf>,
    },
}

/// Exit codes of `send`.
mod exit {
    pub const ERROR: u8 = 1;
    pub const TURN_FAILED: u8 = 2;
    pub const UNDELIVERED: u8 = 3;
    pub const TIMEOUT: u8 = 4;
}

/// Runs a parsed command line.
pub async fn main(cli: Cli) -> ExitCode {
    match dispatch(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

fn client(cli: &Cli) -> anyhow::Result<Client> {
    let Some(token) = cli.token.as_deref().filter(|t| !t.is_empty()) else {
        bail!(
            "no token: pass --token or set BOTFLEET_TOKEN (the example fleet's user alice has token alice-secret)"
        );
    };
    Client::new(&cli.host, token)
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Run {
            fleet,
            data,
            listen,
        } => {
            run(host::HostOptions {
                fleet: fleet.clone(),
                data_dir: data.clone(),
                listen: listen.clone(),
                env: None,
            })
            .await
        }
        Command::CheckConfig { fleet } => {
            // the check `run` starts with: what one refuses, the other does
            let checked = host::check(&host::HostOptions {
                fleet: fleet.clone(),
                ..Default::default()
            })?;
            let loaded = &checked.fleet;
            println!(
                "{}: ok — {} user(s), {} provider(s), {} bot(s)",
                loaded.source,
                loaded.file.users.len(),
                loaded.file.providers.len(),
                loaded.file.bots.len()
            );
            for note in &checked.notes {
                println!("{note}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Send {
            bot,
            text,
            nonce,
            json,
            timeout,
        } => {
            send(
                &client(&cli)?,
                bot,
                text,
                nonce.as_deref(),
                *json,
                Duration::from_secs(*timeout),
            )
            .await
        }
        Command::Transcript { bot, all, json } => {
            transcript(&client(&cli)?, bot, *all, *json).await
        }
        Command::Bots { json } => bots(&client(&cli)?, *json).await,
        Command::Retry { turn } => {
            let v = client(&cli)?
                .post_ok(&format!("/v1/turns/{turn}/retry"), &json!({}))
                .await?;
            println!("requeued {} input(s) of turn {turn}", v["requeued"]);
            Ok(ExitCode::SUCCESS)
        }
        Command::Group { action } => group::run(&client(&cli)?, action).await,
        Command::Search {
            query,
            bot,
            session,
            limit,
            json,
        } => {
            let args = search::SearchArgs {
                query: query.clone(),
                bot: bot.clone(),
                session: session.clone(),
                limit: *limit,
                json: *json,
            };
            search::search(&client(&cli)?, &args).await
        }
        Command::Reindex { data, fleet } => search::reindex(fleet.clone(), data.clone()).await,
        Command::Memory { bot, input, json } => {
            memory::show(&client(&cli)?, bot, input.as_deref(), *json).await
        }
        Command::Forget { id } => memory::forget(&client(&cli)?, id).await,
        Command::Cancel { bot } => {
            let v = client(&cli)?
                .post_ok(&format!("/v1/bots/{bot}/cancel"), &json!({}))
                .await?;
            if v["cancelled"] == json!(true) {
                println!("cancelled the running turn of {bot}");
            } else {
                println!("{bot} has no running turn");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Approvals { all, json } => approvals::list(&client(&cli)?, *all, *json).await,
        Command::Approve { id } => approvals::decide(&client(&cli)?, id, "approve").await,
        Command::Deny { id } => approvals::decide(&client(&cli)?, id, "deny").await,
    }
}

async fn run(opts: host::HostOptions) -> anyhow::Result<ExitCode> {
    let running = host::start(opts).await?;
    for line in &running.banner {
        println!("{line}");
    }
    println!("{}", host::send_hint(running.addr));
    shutdown_signal().await;
    println!("stopping…");
    running.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Sends and waits for the end of the turn that answers the message.
async fn send(
    client: &Client,
    bot: &str,
    text: &str,
    nonce: Option<&str>,
    as_json: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let key = nonce
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    // subscribe before sending, so no change signal is missed
    let mut changes = events::Changes::subscribe(client).await?;
    let (status, body) = client.send_message(bot, text, &key).await?;
    let outcome = body["status"].as_str().unwrap_or("").to_owned();
    match outcome.as_str() {
        "accepted" | "duplicate" => {}
        "conflict" | "unknown" => {
            let msg = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            if as_json {
                println!("{body}");
            }
            bail!("message not sent ({outcome}): {msg}");
        }
        _ => {
            let msg = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no details");
            bail!("the host answered {status}: {msg}");
        }
    }
    let session = body["session"]
        .as_str()
        .context("the answer has no session")?
        .to_owned();
    let seq = body["seq"].as_i64().context("the answer has no seq")?;
    if outcome == "duplicate" && !as_json {
        eprintln!("(already sent with this key as message {seq}; waiting for its reply)");
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut cursor = seq;
    let mut deliveries: HashMap<String, Vec<Value>> = HashMap::new();
    let mut notices: HashMap<String, Value> = HashMap::new();
    loop {
        // the host may be restarting: a failed poll waits for the next one
        let polled = match client.entries_after(&session, cursor).await {
            Ok(entries) => entries,
            Err(e) => {
                changes.poll_failed(e)?;
                Vec::new()
            }
        };
        for e in polled {
            cursor = cursor.max(e["seq"].as_i64().unwrap_or(cursor));
            let turn = e["turn"].as_str().unwrap_or("").to_owned();
            match e["kind"].as_str() {
                Some("delivery") => deliveries.entry(turn).or_default().push(e),
                Some("notice") => {
                    notices.insert(turn, e);
                }
                Some("turn_end") => {
                    let inputs: Vec<i64> = e["inputs"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default();
                    let ended = e["status"].as_str().unwrap_or("").to_owned();
                    if !inputs.contains(&seq) || ended == "interrupted" {
                        if ended != "interrupted" {
                            deliveries.remove(&turn);
                        }
                        continue;
                    }
                    let mine = deliveries.remove(&turn).unwrap_or_default();
                    let ended = outcome::Ended {
                        turn: &turn,
                        status: &ended,
                        notice: notices.get(&turn),
                    };
                    return Ok(outcome::report(&ended, &mine, &session, seq, as_json));
                }
                _ => {}
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            if as_json {
                println!(
                    "{}",
                    json!({"status": "timeout", "session": session, "seq": seq})
                );
            } else {
                eprintln!(
                    "no reply within {} s; your message is saved (seq {seq}); see `botfleet transcript {bot}`",
                    timeout.as_secs()
                );
            }
            return Ok(ExitCode::from(exit::TIMEOUT));
        }
        // wait for a change of this session (or re-check every few seconds)
        changes
            .wait(&session, left.min(Duration::from_secs(5)))
            .await;
    }
}

async fn transcript(
    client: &Client,
    bot: &str,
    all: bool,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let session = client.get(&format!("/v1/bots/{bot}/session")).await?;
    let id = session["session"]
        .as_str()
        .context("no session id in the answer")?;
    for e in client.entries_after(id, 0).await? {
        if as_json {
            println!("{e}");
            continue;
        }
        let seq = e["seq"].as_i64().unwrap_or(0);
        let who = e["author"].as_str().unwrap_or("?");
        let text = e["text"].as_str().unwrap_or("");
        match e["kind"].as_str().unwrap_or("") {
            "user_message" => println!("#{seq} {who}: {text}"),
            "delivery" => println!("#{seq} {who} ▸ {text}"),
            "notice" => println!("#{seq} [{}] {text}", e["code"].as_str().unwrap_or("notice")),
            "reaction" => println!(
                "#{seq} {who} reacted {} to #{}",
                e["emoji"].as_str().unwrap_or(""),
                e["target_seq"]
            ),
            "assistant" if all => {
                if !text.is_empty() {
                    println!("#{seq} ({who} thinks) {text}");
                }
                for c in e["tool_calls"].as_array().into_iter().flatten() {
                    println!(
                        "#{seq} ({who} calls) {} {}",
                        c["name"].as_str().unwrap_or(""),
                        c["arguments"].as_str().unwrap_or("")
                    );
                }
            }
            "tool_result" if all => println!(
                "#{seq} (result of {}) {}",
                e["name"].as_str().unwrap_or(""),
                e["content"].as_str().unwrap_or("")
            ),
            "turn_end" if all => println!(
                "#{seq} (turn {} {})",
                e["turn"].as_str().unwrap_or(""),
                e["status"].as_str().unwrap_or("")
            ),
            "reminder" if all => println!("#{seq} (reminder) {text}"),
            "approval" => println!(
                "#{seq} [approval {} {}] {} — {}",
                e["status"].as_str().unwrap_or(""),
                e["approval"].as_str().unwrap_or(""),
                e["summary"].as_str().unwrap_or(""),
                e["reason"].as_str().unwrap_or("")
            ),
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn bots(client: &Client, as_json: bool) -> anyhow::Result<ExitCode> {
    let v = client.get("/v1/bots").await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<16} {:<20} {:<10} {:<8} {:>7} {:>10}",
        "ID", "NAME", "PROVIDER", "STATE", "QUEUED", "COMPLETED"
    );
    for b in v["bots"].as_array().into_iter().flatten() {
        let state = if b["running_turn"].is_string() {
            "working"
        } else if b["active"] == json!(true) {
            "idle"
        } else {
            "asleep"
        };
        println!(
            "{:<16} {:<20} {:<10} {:<8} {:>7} {:>10}",
            b["id"].as_str().unwrap_or(""),
            b["name"].as_str().unwrap_or(""),
            b["provider"].as_str().unwrap_or(""),
            state,
            b["queued"].as_u64().unwrap_or(0),
            b["turns"]["completed"].as_i64().unwrap_or(0),
        );
    }
    Ok(ExitCode::SUCCESS)
}
