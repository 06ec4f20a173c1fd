//! The command line: `botfleet run` starts a host; every other command
//! talks to a running host over the HTTP API.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use clap::Subcommand;
use serde_json::json;

use crate::client::Client;
use crate::client::segment;
use crate::host;
use crate::shell_words::shell_quote;

/// `println!` for the CLI: the line made safe for a terminal
/// ([`terminal::text`]), since most of what it prints is others' text.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::terminal::out(format_args!($($arg)*))
    };
}

/// `eprintln!` for the CLI, made safe as [`outln!`] is.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::terminal::err(format_args!($($arg)*))
    };
}

#[path = "cli_approvals.rs"]
mod approvals;
#[path = "cli_args.rs"]
mod args;
#[path = "cli_bots.rs"]
mod bots;
#[path = "cli_columns.rs"]
mod columns;
#[path = "cli_events.rs"]
mod events;
#[path = "cli_group.rs"]
mod group;
#[path = "cli_hints.rs"]
mod hints;
#[path = "cli_hooks.rs"]
mod hooks;
#[path = "cli_memory.rs"]
mod memory;
#[path = "cli_outcome.rs"]
mod outcome;
#[path = "cli_remove.rs"]
mod remove;
#[path = "cli_routines.rs"]
mod routines;
#[path = "cli_run.rs"]
mod run_host;
#[path = "cli_search.rs"]
mod search;
#[path = "cli_send.rs"]
mod send;
#[path = "cli_terminal.rs"]
mod terminal;
#[path = "cli_transcript.rs"]
mod transcript;
pub use group::GroupCommand;
pub use remove::BotsCommand;
pub use routines::RoutinesCommand;

/// botfleet: a host for a fleet of long-lived LLM bots.
#[derive(Debug, Parser)]
#[command(name = "botfleet", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// The host's base URL: http://HOST:PORT, or HOST:PORT (http is
    /// assumed); without the API's /v1. Not for run, check-config or reindex.
    #[arg(
        long,
        global = true,
        env = "BOTFLEET_HOST",
        // clap shows an unset variable as `[env: BOTFLEET_HOST=]`
        hide_env_values = true,
        default_value = "http://127.0.0.1:7878"
    )]
    pub host: String,
    /// Bearer token of your user (the example fleet's `alice` has
    /// `alice-secret`). Not for run, check-config or reindex.
    #[arg(long, global = true, env = "BOTFLEET_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the host (API, web page, bots).
    #[command(arg = not_for_host_commands("host"), arg = not_for_host_commands("token"))]
    Run {
        /// Fleet file (default: ./fleet.toml if present, else the built-in example fleet).
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// Data directory (overrides host.data_dir).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Listen address IP:PORT (overrides host.listen).
        #[arg(long, value_parser = args::listen_address)]
        listen: Option<String>,
    },
    /// Check a fleet file: print how many users, providers and bots it defines, or what is wrong.
    #[command(arg = not_for_host_commands("host"), arg = not_for_host_commands("token"))]
    CheckConfig {
        /// Fleet file (default as for `run`).
        #[arg(long)]
        fleet: Option<PathBuf>,
    },
    /// Send a message to a bot and print the reply it delivers.
    #[command(after_help = send::SEND_EXIT_CODES)]
    Send {
        /// Bot id.
        bot: String,
        /// Message text (quote it; unquoted words are joined with single
        /// spaces: `send assistant hello there` sends "hello there").
        /// It may start with `-`: `send r "-hi there"` sends it.
        #[arg(allow_hyphen_values = true)]
        text: String,
        /// More words of the text (joined to it with spaces).
        #[arg(hide = true)]
        more: Vec<String>,
        /// Idempotency key, 1-200 printable ASCII characters (default: a new
        /// UUIDv7). Reuse it to retry safely: within
        /// `runtime.ledger_retention_days` for any key, and after that a UUIDv7
        /// key is answered `unknown` while any other is taken as new.
        #[arg(long)]
        nonce: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Seconds to wait for the reply (at least 1; the message is
        /// saved when the wait ends first). The default is a minute past a
        /// model call's default limit, so a hung call ends in its failure.
        #[arg(long, default_value_t = args::SEND_WAIT_S, value_parser = args::wait_seconds, allow_negative_numbers = true)]
        timeout: u64,
    },
    /// Print your conversation with a bot (a subagent's: its task, its progress and its report).
    Transcript {
        /// Bot id.
        bot: String,
        /// Also show the bot's internal steps (notes, tool calls, results, events,
        /// compaction summaries).
        #[arg(long)]
        all: bool,
        /// Print JSON lines, one per entry (the same entries: `--all` adds the
        /// internal steps).
        #[arg(long)]
        json: bool,
        /// Only the last N entries it would print, not the whole history
        /// (with `--all`, the internal steps count among them).
        #[arg(long, value_name = "N", value_parser = args::last_entries, allow_negative_numbers = true)]
        last: Option<u32>,
        /// The runs of the bot's webhook NAME (its deliveries and what the
        /// bot did with them) instead of your conversation with it.
        #[arg(long, value_name = "NAME", conflicts_with = "routine")]
        hook: Option<String>,
        /// The runs of the bot's routine NAME instead of your conversation
        /// with it.
        #[arg(long, value_name = "NAME", conflicts_with = "with")]
        routine: Option<String>,
        /// The bot's conversation with another bot of yours, OTHER
        /// (SendToAgent messages between them), instead of yours with it.
        #[arg(long, value_name = "OTHER", conflicts_with = "hook")]
        with: Option<String>,
    },
    /// List your bots, or remove one made by CreateAgent (`bots remove BOT`).
    #[command(args_conflicts_with_subcommands = true)]
    Bots {
        /// Also every finished subagent (by default a parent's 20 latest
        /// finished ones are listed, and running ones).
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Instead of listing.
        #[command(subcommand)]
        action: Option<BotsCommand>,
    },
    /// List a bot's routines (when each fires next, in its time zone, and
    /// how its last run went), or change them (`routines put`, `routines
    /// remove`).
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Routines {
        /// Bot id.
        #[arg(required = true)]
        bot: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Instead of listing.
        #[command(subcommand)]
        action: Option<RoutinesCommand>,
    },
    /// List a bot's webhooks (defined in fleet.toml under
    /// [[bots.hooks]]): each one's path and limits, never its secret.
    Hooks {
        /// Bot id.
        bot: String,
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
        /// Also rank the log entries for this input, as the prompt would
        /// (at most 4,000 characters).
        #[arg(long, value_parser = args::preview_text)]
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
    /// Approve a pending action (an id from `botfleet approvals`); a note
    /// goes to the bot's conversation, and the action runs once if the bot
    /// repeats the exact call in time.
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
        /// What to find: one argument or several (`search buy milk` is
        /// `search "buy milk"`: both words); quote a phrase inside
        /// (`search '"buy milk"'`), and an -exclusion after the first
        /// word too (`search 'milk -cheese'`).
        #[arg(allow_hyphen_values = true)]
        query: String,
        /// More words of the query (joined to it with spaces).
        #[arg(hide = true)]
        more: Vec<String>,
        /// Only what this bot may see (its sessions and its rooms).
        #[arg(long)]
        bot: Option<String>,
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Most hits (1-100, default 10).
        #[arg(long, value_parser = args::search_limit, allow_negative_numbers = true)]
        limit: Option<u64>,
        /// Best hits to skip, for the next page (0-10000, default 0).
        #[arg(long, value_parser = args::search_offset, allow_negative_numbers = true)]
        offset: Option<u64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the transcript search index and the JSONL mirror from the
    /// store, with a progress bar. Offline: stop the host first
    ///
    /// Every transcripts/<bot>/<session>.jsonl and the mirror's resume
    /// marker are deleted and written again from the store
    /// (docs/operations.md).
    #[command(arg = not_for_host_commands("host"), arg = not_for_host_commands("token"))]
    Reindex {
        /// Data directory (default: host.data_dir of the fleet file).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Fleet file (default as for `run`).
        #[arg(long)]
        fleet: Option<PathBuf>,
    },
    /// The Shell tool's sandbox (not for people): confine this process
    /// with Landlock, then run PROGRAM in its place (src/sandbox.rs).
    #[command(
        hide = true,
        arg = not_for_host_commands("host"),
        arg = not_for_host_commands("token")
    )]
    SandboxExec {
        /// A directory the command may write in (the first holds TMPDIR).
        #[arg(long)]
        rw: Vec<PathBuf>,
        /// A path the command may not read.
        #[arg(long)]
        hide: Vec<PathBuf>,
        /// The soft open-file limit (`ulimit -n`) to give the program: the
        /// host's at its start, before `run` raised it.
        #[arg(long, value_name = "N")]
        open_files: Option<u64>,
        /// Only say how far this kernel enforces the sandbox, then exit.
        #[arg(long, conflicts_with_all = ["rw", "hide", "open_files", "program"])]
        probe: bool,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required_unless_present = "probe")]
        program: Vec<std::ffi::OsString>,
    },
}

/// The global `--host` or `--token` (`id`) as `run`, `check-config` and
/// `reindex` have it: taken from the environment (a `BOTFLEET_HOST` set
/// for the CLI's other commands is no error) but refused when typed
/// ([`parse`]), and not listed in their `--help`, since they start or read
/// a host rather than talk to one. clap does not copy a
/// global argument into a subcommand that has its own of that id.
fn not_for_host_commands(id: &'static str) -> clap::Arg {
    clap::Arg::new(id).long(id).hide(true)
}

/// Parses the process's command line as [`Cli`], exiting as clap does on
/// a usage error. `--host` given to `run` is one: it says where the CLI
/// connects to a host, and `run` is the host (it listens where `--listen`
/// or the fleet's `host.listen` says), so the flag would be silently
/// ignored. `BOTFLEET_HOST` in the environment is no error: it is set for
/// the CLI's other commands.
pub fn parse() -> Cli {
    use clap::CommandFactory as _;
    use clap::FromArgMatches as _;
    let matches = Cli::command().try_get_matches().unwrap_or_else(|e| {
        env_flags_out_of_usage(long_value_cut(list_hint(members_hint(exclusion_hint(e))))).exit()
    });
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let typed = |id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let host_typed = typed("host");
    let local = match &cli.command {
        Command::CheckConfig { .. } => Some("`check-config` reads the fleet file here"),
        Command::Reindex { .. } => Some("`reindex` rebuilds the data directory here, offline"),
        _ => None,
    };
    // typed for a command that talks to no host, each was ignored without
    // a word (QA): refused as `run --host` is
    if let Some(what) = local
        && host_typed
    {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--host is where the CLI's commands connect to a running host; {what} and \
                     connects to none: drop --host"
                ),
            )
            .exit();
    }
    if typed("token") && (local.is_some() || matches!(cli.command, Command::Run { .. })) {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--token is the token the CLI's commands send to a running host; `run`, \
                 `check-config` and `reindex` send none: the users' tokens are in the fleet file \
                 (`token` or `token_env` under [[users]])",
            )
            .exit();
    }
    if host_typed && matches!(cli.command, Command::Run { .. }) {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--host is where the CLI's commands connect to a running host; `run` starts \
                 one: give the address it listens on with --listen (e.g. botfleet run --listen \
                 127.0.0.1:7878)",
            )
            .exit();
    }
    cli
}

/// A message given as several arguments (`send assistant hello there`,
/// the quotes forgotten: clap refused "unexpected argument 'there'"), as
/// one text, the words joined with single spaces.
fn joined(first: &str, more: &[String]) -> String {
    std::iter::once(first)
        .chain(more.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Characters of a refused value clap's error quotes whole.
const QUOTED_VALUE_CHARS: usize = 100;

/// clap's error for a refused value longer than [`QUOTED_VALUE_CHARS`],
/// without the value: it quoted it whole (`memory BOT --input` of 4,001
/// characters printed them all, QA). The parser's reason stays.
fn long_value_cut(e: clap::Error) -> clap::Error {
    use clap::error::ContextKind;
    use clap::error::ContextValue;
    if e.kind() != clap::error::ErrorKind::ValueValidation {
        return e;
    }
    let (Some(ContextValue::String(value)), Some(ContextValue::String(arg))) = (
        e.get(ContextKind::InvalidValue),
        e.get(ContextKind::InvalidArg),
    ) else {
        return e;
    };
    let chars = value.chars().count();
    if chars <= QUOTED_VALUE_CHARS {
        return e;
    }
    let why = std::error::Error::source(&e)
        .map(ToString::to_string)
        .unwrap_or_default();
    // with the usage of the command it was given to, not the top level's
    // (QA, 2026-12-06)
    let args = typed_args();
    subcommand_error(
        command_word(&args).map_or("", |at| args[at].as_str()),
        clap::error::ErrorKind::ValueValidation,
        format!("invalid value for '{arg}' ({chars} characters): {why}"),
    )
}

/// The arguments as typed, for the hints above clap's errors: an
/// argument that is not UTF-8 as its lossy text (`std::env::args` panics
/// on one, and clap's own error for it is what such a command gets: QA, a
/// `send r $'\xff'` panicked with a backtrace instead).
fn typed_args() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Where the command is in `args`: the first word that is no option or
/// a global option's value.
fn command_word(args: &[String]) -> Option<usize> {
    let mut at = 0;
    while at < args.len() {
        match args[at].as_str() {
            "--host" | "--token" => at += 2,
            a if a.starts_with('-') => at += 1,
            _ => return Some(at),
        }
    }
    None
}

/// clap's error for `botfleet search milk -cheese`, whose `-cheese` is
/// read as options: clap's tip (`-- -c`) would search for `-c`. Said as
/// what it is: an exclusion goes inside the quoted query. So is `-hyena`,
/// which clap read as `-h` and answered with the help, exiting 0 with no
/// search run (QA, 2026-12-06); `-h` or `--help` typed as such still asks
/// for the help. Other errors are clap's own.
fn exclusion_hint(e: clap::Error) -> clap::Error {
    use clap::error::ContextKind;
    use clap::error::ContextValue;
    use clap::error::ErrorKind;
    let args = typed_args();
    let Some(at) = args.iter().position(|a| a == "search") else {
        return e;
    };
    let after = &args[at + 1..];
    let flag = match (e.kind(), e.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(flag))) => flag.clone(),
        (ErrorKind::DisplayHelp, _) if !after.iter().any(|a| a == "-h" || a == "--help") => {
            "-h".to_owned()
        }
        _ => return e,
    };
    // the word as typed (clap names only its first letter, `-c`)
    let Some(word) = after
        .iter()
        .find(|a| a.starts_with(flag.as_str()) && !a.starts_with("--"))
    else {
        return e;
    };
    // the query's words as typed, the `-word` in its place, and the
    // search's own options after the quoted query (the server's address
    // and token stay out of the suggestion: it is printed)
    let mut words = Vec::new();
    let mut options = Vec::new();
    let mut rest = args[at + 1..].iter();
    while let Some(a) = rest.next() {
        let own = ["--bot", "--session", "--limit", "--offset"].contains(&a.as_str());
        if own || ["--host", "--token"].contains(&a.as_str()) {
            let value = rest.next();
            if let (true, Some(v)) = (own, value) {
                options.push(format!("{a} {}", shell_quote(v)));
            }
        } else if a.starts_with("--") {
            if !a.starts_with("--host=") && !a.starts_with("--token=") {
                options.push(shell_quote(a));
            }
        } else {
            // every `-word` is a word of the query, not only the one clap
            // stopped at (QA, 2026-12-05: a second one was dropped, and
            // the suggested command found what it was to leave out)
            words.push(a.as_str());
        }
    }
    let options: String = options.iter().map(|o| format!(" {o}")).collect();
    // with the usage of `search`, not the top level's
    subcommand_error(
        "search",
        clap::error::ErrorKind::UnknownArgument,
        format!(
            "`{word}` reads as an option; to leave out a word, put it inside the quoted query: \
             botfleet search {}{options}",
            shell_quote(&words.join(" "))
        ),
    )
}

/// clap's error for `botfleet routines list BOT` and the like: the
/// commands that list (`routines`, `hooks`, `bots`, `approvals`,
/// `memory`) take no `list` word, and clap said "the subcommand 'BOT'
/// cannot be used with '<BOT>'" or "unexpected argument" (QA). Said as
/// the command that lists. Other errors are clap's own.
fn list_hint(e: clap::Error) -> clap::Error {
    if e.kind() == clap::error::ErrorKind::DisplayHelp
        || e.kind() == clap::error::ErrorKind::DisplayVersion
    {
        return e;
    }
    let args = typed_args();
    let Some(at) = command_word(&args) else {
        return e;
    };
    let command = &args[at];
    let lists = ["routines", "hooks", "bots", "approvals", "memory"];
    if !lists.contains(&command.as_str())
        || !matches!(args.get(at + 1).map(String::as_str), Some("list" | "ls"))
    {
        return e;
    }
    let rest: String = args[at + 2..]
        .iter()
        .map(|a| format!(" {}", shell_quote(a)))
        .collect();
    subcommand_error(
        command,
        clap::error::ErrorKind::InvalidSubcommand,
        format!(
            "`{command}` takes no `{}`: `botfleet {command}{rest}` lists them",
            args[at + 1]
        ),
    )
}

/// clap's error with `--host <HOST>` and `--token <TOKEN>` left out of
/// its usage line where they were not typed: clap lists an argument that
/// has a value there, so one set by `BOTFLEET_HOST` or `BOTFLEET_TOKEN`
/// read as a required flag (`Usage: botfleet search --host <HOST> --token
/// <TOKEN> <QUERY>`, QA). Other errors are as clap made them.
fn env_flags_out_of_usage(e: clap::Error) -> clap::Error {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        return e;
    }
    let args = typed_args();
    let typed = |flag: &str| {
        args.iter()
            .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|v| v.starts_with('=')))
    };
    let hidden: Vec<&str> = [
        ("--host", " --host <HOST>"),
        ("--token", " --token <TOKEN>"),
    ]
    .into_iter()
    .filter(|(flag, _)| !typed(flag))
    .map(|(_, shown)| shown)
    .collect();
    let text = e.render().to_string();
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.starts_with("Usage: ") {
            out.push_str(&hidden.iter().fold(line.to_owned(), |l, h| l.replace(h, "")));
        } else {
            out.push_str(line);
        }
    }
    if out == text {
        return e;
    }
    let message = out.strip_prefix("error: ").unwrap_or(&out);
    clap::Error::raw(e.kind(), message)
}

/// clap's error for `botfleet group create NAME --members a1 a2`: the
/// members are one comma-separated word there (`group members ROOM a1
/// a2` takes either), and clap said "unexpected argument 'a2' found"
/// (QA). Said as the form to use. Other errors are clap's own.
fn members_hint(e: clap::Error) -> clap::Error {
    use clap::error::ContextKind;
    use clap::error::ContextValue;
    use clap::error::ErrorKind;
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(extra)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let args = typed_args();
    let Some(at) = command_word(&args) else {
        return e;
    };
    if args[at] != "group" || args.get(at + 1).map(String::as_str) != Some("create") {
        return e;
    }
    let Some(flag) = args.iter().position(|a| a == "--members") else {
        return e;
    };
    // the words after --members, up to the next option
    let members: Vec<&str> = args[flag + 1..]
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    if !members.contains(&extra.as_str()) {
        return e;
    }
    subcommand_error(
        "group create",
        ErrorKind::UnknownArgument,
        format!(
            "--members takes the member bots as one comma-separated word: --members {}",
            shell_quote(&members.join(","))
        ),
    )
}

/// A usage error of subcommand `name` (or a path of them: `group
/// create`), shown with its usage line (the nearest found's, the top
/// level's when there is no such subcommand).
fn subcommand_error(
    name: &str,
    kind: clap::error::ErrorKind,
    message: impl std::fmt::Display,
) -> clap::Error {
    use clap::CommandFactory as _;
    let mut cli = Cli::command();
    cli.build();
    // `name` may be a path of subcommands (`group create`)
    let mut found = cli;
    for word in name.split_whitespace() {
        match found.find_subcommand_mut(word).map(std::mem::take) {
            Some(sub) => found = sub,
            None => break,
        }
    }
    found.error(kind, message)
}

/// Exit codes (`send` and `group send` document theirs in `--help`). 2 is
/// clap's, for a usage error; a turn's outcomes come after it.
mod exit {
    /// An error: nothing was done, or a request was refused.
    pub const ERROR: u8 = 1;
    /// A usage error: clap's for bad arguments, ours for an argument no
    /// request can carry ([`super::args::BadInput`]).
    pub const USAGE: u8 = 2;
    /// The turn that answered the message failed or was cancelled; for
    /// `group send`, no member answered because member turns failed.
    pub const TURN_FAILED: u8 = 3;
    /// The bot ended its turn without replying; for `group send`, the
    /// message addressed nobody (no member answers it).
    pub const UNDELIVERED: u8 = 4;
    /// No answer within `--timeout`, or none yet because the bot is paused
    /// (its daily token budget is spent); the message is saved.
    pub const TIMEOUT: u8 = 5;
    /// `sandbox-exec` could not confine itself or run its program (as a
    /// shell says of a command it cannot execute).
    pub const NOT_RUN: u8 = 126;
    /// `run` stopped at once by a second Ctrl-C (128 + SIGINT).
    pub const INTERRUPTED: i32 = 130;
    /// `send` interrupted (Ctrl-C) while it waited for the answer to a
    /// saved message: the code a shell reports for a SIGINT.
    pub const INTERRUPTED_SEND: u8 = 130;
}

/// Runs a parsed command line.
pub async fn main(cli: Cli) -> ExitCode {
    match dispatch(cli).await {
        Ok(code) => code,
        Err(e) => {
            // the host's hints name API routes; a CLI user reads commands
            errln!("error: {}", hints::for_cli(&format!("{e:#}")));
            if is_bad_input(&e) {
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::from(exit::ERROR)
            }
        }
    }
}

/// Whether `e` is an argument the CLI refused to send ([`args`]): a usage
/// error (2), with no JSON object on stdout, as for clap's.
fn is_bad_input(e: &anyhow::Error) -> bool {
    e.downcast_ref::<args::BadInput>().is_some()
}

/// A client for the host of `cli`, once its arguments are checked
/// ([`args`]): a token, an address and ids that a request can carry.
fn client(cli: &Cli) -> anyhow::Result<Client> {
    let token = args::require_token(cli.token.as_deref())?;
    args::check_host(&cli.host)?;
    args::check_address(&cli.host)?;
    args::check_token(token)?;
    args::check_command(&cli.command)?;
    Client::new(&cli.host, token)
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Run {
            fleet,
            data,
            listen,
        } => {
            run_host::run(host::HostOptions {
                fleet: fleet.clone(),
                data_dir: data.clone(),
                listen: listen.clone(),
                env: None,
                // this binary is the Shell sandbox's launcher (`sandbox-exec`)
                shell_launcher: std::env::current_exe().ok(),
                clock: None,
            })
            .await
        }
        Command::CheckConfig { fleet } => {
            // the check `run` starts with: what one refuses, the other does
            let opts = host::HostOptions {
                fleet: fleet.clone(),
                ..Default::default()
            };
            let checked = host::check(&opts)?;
            let loaded = &checked.fleet;
            // and its bots against those bots made, and the rooms' ids, as
            // a start checks them (what it would log, said here too)
            let store_notes = host::check_store_bots(loaded)?;
            outln!(
                "{}: ok — {} user(s), {} provider(s), {} bot(s)",
                loaded.source,
                loaded.file.users.len(),
                loaded.file.providers.len(),
                loaded.file.bots.len()
            );
            // and what a start would say of the data directory now, and
            // of where it listens (QA: `run` warned, the check did not)
            let exposed =
                run_host::exposed_warning(checked.listen, &run_host::published_tokens(&opts));
            for note in checked
                .notes
                .iter()
                .chain(&store_notes)
                .chain(&host::check_notes(&loaded.file.host))
                .chain(&exposed)
            {
                outln!("{note}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Send {
            bot,
            text,
            more,
            nonce,
            json,
            timeout,
        } => {
            let text = joined(text, more);
            let sent = match client(&cli) {
                Ok(c) => {
                    let wait = Duration::from_secs(*timeout);
                    send::send(&c, bot, &text, nonce.as_deref(), *json, wait).await
                }
                Err(e) => Err(e),
            };
            if *json
                && let Err(e) = &sent
                && !is_bad_input(e)
            {
                outln!("{}", terminal::json(&send::json_failure(e)));
            }
            sent
        }
        Command::Transcript {
            bot,
            all,
            json,
            last,
            hook,
            routine,
            with,
        } => {
            let client = client(&cli)?;
            let runs = match (hook, routine) {
                (Some(name), _) => Some(transcript::Runs::Hook(name)),
                (None, Some(name)) => Some(transcript::Runs::Routine(name)),
                (None, None) => None,
            };
            match (runs, with) {
                (Some(runs), _) => transcript::runs(&client, bot, &runs, *all, *json, *last).await,
                (None, Some(other)) => {
                    transcript::with_bot(&client, bot, other, *all, *json, *last).await
                }
                (None, None) => transcript::transcript(&client, bot, *all, *json, *last).await,
            }
        }
        Command::Bots {
            action: Some(BotsCommand::Remove { bot }),
            ..
        } => remove::remove(&client(&cli)?, bot).await,
        Command::Bots {
            all,
            json,
            action: None,
        } => bots::bots(&client(&cli)?, *all, *json).await,
        Command::Routines {
            action: Some(action),
            ..
        } => routines::run(&client(&cli)?, action).await,
        Command::Routines {
            bot: Some(bot),
            json,
            action: None,
        } => routines::list(&client(&cli)?, bot, *json).await,
        Command::Routines {
            bot: None,
            action: None,
            ..
        } => Err(args::no_bot("routines").into()),
        Command::Hooks { bot, json } => hooks::list(&client(&cli)?, bot, *json).await,
        Command::Retry { turn } => {
            let c = client(&cli)?;
            let v = c
                .post_ok(&format!("/v1/turns/{}/retry", segment(turn)), &json!({}))
                .await?;
            let v = c.expect(v, "requeued")?;
            outln!("requeued {} input(s) of turn {turn}", v["requeued"]);
            // what they wait for, if anything (QA: a paused bot, one no
            // config lists, were said to answer them)
            if v["waits_for_config"] == json!(true) {
                errln!(
                    "the bot is no longer in the fleet's config: they wait until a config lists \
                     it again and the host restarts"
                );
            } else if let Some(until) = v["paused_until"].as_i64().and_then(terminal::minute_utc) {
                errln!(
                    "the bot is paused by its daily token budget until {until}: it answers them \
                     then"
                );
            }
            // where the answer comes: the command ended at the requeue and
            // said nothing of how to see what the bot does (QA)
            if let Ok(t) = c.get(&format!("/v1/turns/{}", segment(turn))).await
                && let Some(bot) = t["turn"]["bot"].as_str()
            {
                let session = t["turn"]["session"].as_str().unwrap_or_default();
                let page = c
                    .get(&format!(
                        "/v1/sessions/{}/entries?after=0&limit=1",
                        segment(session)
                    ))
                    .await
                    .unwrap_or_default();
                errln!("{}", hints::retried_where(bot, session, &page));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Group { action } => group::run(&client(&cli)?, action).await,
        Command::Search {
            query,
            more,
            bot,
            session,
            limit,
            offset,
            json,
        } => {
            let args = search::SearchArgs {
                query: joined(query, more),
                bot: bot.clone(),
                session: session.clone(),
                limit: *limit,
                offset: *offset,
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
            let c = client(&cli)?;
            let v = c
                .post_ok(&format!("/v1/bots/{}/cancel", segment(bot)), &json!({}))
                .await?;
            let v = c.expect(v, "cancelled")?;
            if v["cancelled"] == json!(true) {
                outln!("cancelled the running turn of {bot}");
            } else {
                // `false` is also the answer to a cancel of a turn that
                // is being cancelled already (audit: told "no running
                // turn" while one ran)
                outln!(
                    "{bot} has no running turn to cancel (or its turn is being cancelled already)"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Approvals { all, json } => approvals::list(&client(&cli)?, *all, *json).await,
        Command::SandboxExec {
            rw,
            hide,
            open_files,
            probe,
            program,
        } => {
            if *probe {
                outln!("{}", crate::sandbox::probe()?.line());
                return Ok(ExitCode::SUCCESS);
            }
            // returns only if the program could not be run
            let e = crate::sandbox::exec(rw, hide, *open_files, program);
            errln!("botfleet sandbox-exec: {e:#}");
            Ok(ExitCode::from(exit::NOT_RUN))
        }
        Command::Approve { id } => approvals::decide(&client(&cli)?, id, "approve").await,
        Command::Deny { id } => approvals::decide(&client(&cli)?, id, "deny").await,
    }
}
