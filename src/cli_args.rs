//! What the CLI checks of its arguments before it sends a request: what
//! no request can carry (a token with a newline, an id longer than a URL
//! holds, a `--nonce` with a control character) and a `--host` that names
//! the API (`…/v1`) instead of the host. Each is refused as bad input,
//! exit status 2 as for clap's usage errors, saying which argument is
//! wrong: reqwest would fail to build the request, and the CLI reported
//! that as a host it could not reach.

use reqwest::header::HeaderValue;
use unicode_segmentation::UnicodeSegmentation;

use super::Command;
use super::GroupCommand;
use super::RoutinesCommand;
use crate::api::KEY_RULE;
use crate::api::MAX_KEY_LEN;
use crate::client::segment;

/// The most a URL may hold (the `http` crate's limit on a request's URI).
const MAX_URL: usize = 65_534;

/// Room in [`MAX_URL`] for the host's address and the fixed part of the
/// path (`/v1/bots/…/messages`, `?after=…&limit=1000`): the arguments
/// that go into the URL, percent-encoded, share the rest.
const URL_OVERHEAD: usize = 2_048;

/// An argument the CLI cannot send as it is (exit status 2).
#[derive(Debug)]
pub(super) struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// The longest `--timeout` of `send` and `group send`: a year, far past
/// any wait a person or script means (a deadline past the clock's range
/// would panic).
const MAX_WAIT_S: u64 = 365 * 24 * 3600;

/// The default `--timeout` of `send`: a minute past a model call's default
/// limit (`call_timeout_s`, 300 s). At 300 s, the same as that limit, a
/// `send` to a bot whose endpoint hung gave up a few milliseconds before
/// the turn failed and said "wait again", where the failure (exit 3, with
/// its `retry`) was the answer.
pub(super) const SEND_WAIT_S: u64 =
    botfleet_actors::model::OpenAiOptions::DEFAULT_CALL_TIMEOUT.as_secs() + 60;

/// Reads the `--timeout` of `send` and `group send`: seconds to wait, at
/// least 1. `0` was taken and never sent anything (the wait ended before
/// the message was posted, "the host did not answer within 0 s"); the
/// message is always sent, and `--timeout` bounds only the wait, so there
/// is no "do not wait" (a script that does not want the reply ignores it,
/// or reads it later with `botfleet transcript`).
/// Longest `memory --input` the host takes (`GET /v1/bots/{bot}/memory`'s
/// `input`), in characters.
const MAX_PREVIEW_CHARS: usize = 4000;

/// `memory --input`: at most [`MAX_PREVIEW_CHARS`] characters, said with
/// the flag's name (the host's answer names its API parameter `input`).
pub(super) fn preview_text(value: &str) -> Result<String, String> {
    let chars = value.chars().count();
    if chars > MAX_PREVIEW_CHARS {
        return Err(format!(
            "--input is {chars} characters; it takes at most {MAX_PREVIEW_CHARS}: give the \
             start of the message to preview"
        ));
    }
    Ok(value.to_owned())
}

pub(super) fn wait_seconds(value: &str) -> Result<u64, String> {
    let seconds = number(value, "seconds to wait for the answer", 1, MAX_WAIT_S)?;
    if seconds == 0 {
        return Err(format!(
            "the smallest --timeout is 1 (seconds to wait for the answer, 1 to {MAX_WAIT_S}): \
             the message is always sent, and a wait of 0 s would end before it was"
        ));
    }
    if seconds > MAX_WAIT_S {
        return Err(format!(
            "the largest --timeout is {MAX_WAIT_S} (a year); the message is saved whatever the \
             wait, and `botfleet transcript` shows its reply later"
        ));
    }
    Ok(seconds)
}

/// Reads `search --limit`: 1 to the most hits the host answers. `0` was
/// sent and refused by the host (exit 1), where a bad argument is a usage
/// error (2) for the CLI's other flags.
pub(super) fn search_limit(value: &str) -> Result<u64, String> {
    let most = botfleet_memory::MAX_SEARCH_LIMIT as u64;
    in_range(value, "hits to show", "--limit", 1, most)
}

/// Reads `transcript --last`: 1 to `u32::MAX` (QA: `--last 0` printed
/// nothing and exited 0, where other counts out of range are usage
/// errors; a count past the range its message states was taken as all).
pub(super) fn last_entries(value: &str) -> Result<u32, String> {
    let n = number(value, "last entries to print", 1, u64::from(u32::MAX))?;
    if n == 0 {
        return Err(
            "--last takes at least 1 (the last entries to print); leave it out for the whole \
             transcript"
                .to_owned(),
        );
    }
    u32::try_from(n).map_err(|_| {
        format!(
            "--last takes 1 to {} (the last entries to print); leave it out for the whole \
             transcript",
            u32::MAX
        )
    })
}

/// Reads `run --listen`: an IP:PORT, checked as a usage error (2), as
/// the other commands' bad values are (QA: a malformed one was exit 1,
/// found only when the start checked it).
pub(super) fn listen_address(value: &str) -> Result<String, String> {
    value
        .parse::<std::net::SocketAddr>()
        .map(|_| value.to_owned())
        .map_err(|_| {
            format!("{value:?} is not an address; expected IP:PORT such as 127.0.0.1:7878")
        })
}

/// Reads `search --offset`: 0 to the most hits the host skips.
pub(super) fn search_offset(value: &str) -> Result<u64, String> {
    let most = botfleet_memory::MAX_SEARCH_OFFSET as u64;
    in_range(value, "best hits to skip", "--offset", 0, most)
}

/// `value` as a whole number of `what` (for the message), any size.
fn number(value: &str, what: &str, least: u64, most: u64) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number of {what}, {least} to {most}"))
}

/// `value` as a number of `what` from `least` to `most`, else why not,
/// naming `flag`.
fn in_range(value: &str, what: &str, flag: &str, least: u64, most: u64) -> Result<u64, String> {
    let n = number(value, what, least, most)?;
    if n < least || n > most {
        return Err(format!(
            "{flag} takes {least} to {most} ({what}); {n} is out of that range"
        ));
    }
    Ok(n)
}

/// Refuses a `--host` (or `BOTFLEET_HOST`) that ends in the API's `/v1`:
/// every request would get 404 "no such route", since the CLI puts the
/// API's paths (`/v1/…`) after it.
pub(super) fn check_host(host: &str) -> Result<(), BadInput> {
    let address = host.trim().trim_end_matches('/');
    let Some(base) = address
        .len()
        .checked_sub(3)
        .filter(|&at| address.is_char_boundary(at))
        .filter(|&at| address[at..].eq_ignore_ascii_case("/v1"))
        .map(|at| &address[..at])
    else {
        return Ok(());
    };
    Err(BadInput(format!(
        "--host (or BOTFLEET_HOST) takes the host's base URL, without the API's /v1: \
         {base} rather than {host} (e.g. http://127.0.0.1:7878)"
    )))
}

/// Refuses a `--host` that is no http(s) address (`ftp://x`, a port out
/// of range, nothing): no request can go there, so it is a usage error,
/// not a failed request.
pub(super) fn check_address(host: &str) -> Result<(), BadInput> {
    crate::client::base_url(host)
        .map(drop)
        .map_err(|e| BadInput(format!("{e:#}")))
}

/// `command` given without the bot it is about (clap requires it, but
/// not beside a subcommand, so the type cannot say so).
pub(super) fn no_bot(command: &str) -> BadInput {
    BadInput(format!(
        "give the bot: botfleet {command} BOT (`botfleet bots` lists yours)"
    ))
}

/// Refuses a missing or empty token before anything is sent.
pub(super) fn require_token(token: Option<&str>) -> Result<&str, BadInput> {
    // an empty one was given (`--token ''`, or BOTFLEET_TOKEN set to
    // nothing): "no token" read as if it had not been (QA)
    let what = match token {
        Some(t) if !t.is_empty() => return Ok(t),
        Some(_) => "the token is empty",
        None => "no token",
    };
    Err(BadInput(format!(
        "{what}: pass --token or set BOTFLEET_TOKEN (the example fleet's user alice has token \
         alice-secret)"
    )))
}

/// Refuses a token that cannot go in the `Authorization` header (it is
/// not repeated: it is a secret).
pub(super) fn check_token(token: &str) -> Result<(), BadInput> {
    if HeaderValue::from_str(&format!("Bearer {token}")).is_ok() {
        return Ok(());
    }
    Err(BadInput(
        "the token (--token or BOTFLEET_TOKEN) contains characters not allowed in an HTTP \
         header (a newline or another control character)"
            .to_owned(),
    ))
}

/// Refuses the arguments of `command` that no request can carry: a
/// `--nonce` that cannot go in the `Idempotency-Key` header, and ids or
/// query text too long for a URL (named, the longest first).
pub(super) fn check_command(command: &Command) -> Result<(), BadInput> {
    if let Some(nonce) = nonce(command) {
        let Ok(header) = HeaderValue::from_str(nonce) else {
            return Err(BadInput(format!(
                "the --nonce contains characters not allowed in an HTTP header (a newline or \
                 another control character); it must be {KEY_RULE}"
            )));
        };
        // a header carries bytes past ASCII, but the host reads the key as
        // printable ASCII only (`é` would be refused after sending)
        if header.to_str().is_err() {
            return Err(BadInput(format!(
                "the --nonce holds a character that is not printable ASCII (such as `é`); it \
                 must be {KEY_RULE}"
            )));
        }
        // a header carries a tab, but the host refuses one in the key
        if nonce.trim().contains('\t') {
            return Err(BadInput(format!(
                "the --nonce contains a tab (a control character); it must be {KEY_RULE}"
            )));
        }
        // the host trims the key
        let len = nonce.trim().len();
        if len == 0 || len > MAX_KEY_LEN {
            return Err(BadInput(format!(
                "the --nonce has {len} characters; it must be {KEY_RULE}, or leave it out for a \
                 fresh one"
            )));
        }
    }
    check_member_lists(command)?;
    check_message_text(command)?;
    let arguments = in_url(command);
    for (what, value) in &arguments {
        check_id_length(what, value)?;
    }
    let encoded: usize = arguments.iter().map(|(_, v)| segment(v).len()).sum();
    if encoded + URL_OVERHEAD <= MAX_URL {
        return Ok(());
    }
    let Some((what, value)) = arguments.iter().max_by_key(|(_, v)| v.len()) else {
        return Ok(());
    };
    Err(BadInput(format!(
        "the {what} is too long to send: {} characters ({} bytes in a URL, where a request \
         holds at most {MAX_URL})",
        value.chars().count(),
        segment(value).len()
    )))
}

/// Refuses a message of `send` or `group send` with nothing in it (`send
/// assistant ""`): a usage error naming the argument, as the host's
/// refusal (exit 1, "`text` is empty") named its API field (QA). The
/// host's check of invisible characters stays its own.
fn check_message_text(command: &Command) -> Result<(), BadInput> {
    let text = match command {
        Command::Send { text, more, .. } if more.is_empty() => text,
        Command::Group {
            action: super::group::GroupCommand::Send { text, more, .. },
        } if more.is_empty() => text,
        _ => return Ok(()),
    };
    if text.trim().is_empty() {
        return Err(BadInput(
            "the message TEXT is empty; give the text to send (quoted when it has spaces)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Longer than any id the host takes in any of its forms (a name id has
/// at most 64 characters, a UUID at most 45 as `urn:uuid:…`).
const MAX_ID_CHARS: usize = 64;

/// How much of an over-long id its refusal shows (grapheme clusters).
const PREFIX_CHARS: usize = 24;

/// What an id argument named `what` (as [`in_url`] calls it) must be, or
/// `None` when `what` is not an id (a query, a text).
fn id_rule(what: &str) -> Option<&'static str> {
    Some(match what {
        "bot id" | "--bot id" => "a bot id has 1 to 64 characters",
        "room id" => "a room id has 1 to 64 characters",
        "turn id" => "a turn id is a UUID of 36 characters",
        "approval id" => "an approval id is a UUID of 36 characters",
        "--session id" => "a session id is a UUID of 36 characters",
        "memory item id" => {
            "a memory item id is m- and 12 characters a-z or 2-7, e.g. m-abcdefgh2345"
        }
        "routine name" => "a routine name has 1 to 64 characters",
        _ => return None,
    })
}

/// Refuses an id far longer than any id can be, naming the argument, what
/// it should be and the first characters given (echoing it whole would
/// bury the message); the host judges ids of a plausible length.
fn check_id_length(what: &str, value: &str) -> Result<(), BadInput> {
    let Some(rule) = id_rule(what) else {
        return Ok(());
    };
    // an empty path segment reaches no route: the host could only answer
    // "no such route" (`botfleet forget ""`)
    if value.trim().is_empty() {
        return Err(BadInput(format!("the {what} is empty, where {rule}")));
    }
    let chars = value.chars().count();
    if chars <= MAX_ID_CHARS {
        return Ok(());
    }
    // whole grapheme clusters: an emoji sequence is not shown in half
    let start: String = value.graphemes(true).take(PREFIX_CHARS).collect();
    Err(BadInput(format!(
        "the {what} is too long to send: {chars} characters (it begins \"{start}\"), where {rule}"
    )))
}

/// Refuses an empty id in a member list (`--members ''`, `a,,b`, a
/// trailing comma): sent, it reads as a bot named nothing, and the host's
/// count of members is not what the user typed.
fn check_member_lists(command: &Command) -> Result<(), BadInput> {
    let members = match command {
        Command::Group {
            action: GroupCommand::Create { members, .. } | GroupCommand::Members { members, .. },
        } => members,
        Command::Group {
            action:
                GroupCommand::Send { .. }
                | GroupCommand::List { .. }
                | GroupCommand::Transcript { .. }
                | GroupCommand::Close { .. },
        }
        | Command::Run { .. }
        | Command::CheckConfig { .. }
        | Command::Send { .. }
        | Command::Transcript { .. }
        | Command::Bots { .. }
        | Command::Routines { .. }
        | Command::Hooks { .. }
        | Command::Retry { .. }
        | Command::Memory { .. }
        | Command::Forget { .. }
        | Command::Cancel { .. }
        | Command::Approvals { .. }
        | Command::Approve { .. }
        | Command::Deny { .. }
        | Command::Search { .. }
        | Command::Reindex { .. }
        | Command::SandboxExec { .. } => return Ok(()),
    };
    match members.iter().position(|m| m.trim().is_empty()) {
        None => Ok(()),
        Some(at) => Err(BadInput(format!(
            "member {} of the list is empty; give bot ids separated by commas, with nothing \
             between two commas or after the last (e.g. a,b){}",
            at + 1,
            // `a, b`: the shell passes `a,` and `b` (QA: the message named
            // an empty member, not the space)
            if at + 1 < members.len() {
                ", and no space after a comma (`a, b` is read as `a,` then `b`)"
            } else {
                ""
            }
        ))),
    }
}

fn nonce(command: &Command) -> Option<&str> {
    match command {
        Command::Send { nonce, .. }
        | Command::Group {
            action: GroupCommand::Send { nonce, .. },
        } => nonce.as_deref(),
        Command::Group {
            action:
                GroupCommand::Create { .. }
                | GroupCommand::List { .. }
                | GroupCommand::Transcript { .. }
                | GroupCommand::Members { .. }
                | GroupCommand::Close { .. },
        }
        | Command::Run { .. }
        | Command::CheckConfig { .. }
        | Command::Transcript { .. }
        | Command::Bots { .. }
        | Command::Routines { .. }
        | Command::Hooks { .. }
        | Command::Retry { .. }
        | Command::Memory { .. }
        | Command::Forget { .. }
        | Command::Cancel { .. }
        | Command::Approvals { .. }
        | Command::Approve { .. }
        | Command::Deny { .. }
        | Command::Search { .. }
        | Command::Reindex { .. }
        | Command::SandboxExec { .. } => None,
    }
}

/// The arguments of `command` that go into a request's URL (a path
/// segment or a query parameter), each with what to call it.
fn in_url(command: &Command) -> Vec<(&'static str, &str)> {
    match command {
        Command::Send { bot, .. } | Command::Transcript { bot, .. } | Command::Cancel { bot } => {
            vec![("bot id", bot)]
        }
        Command::Memory { bot, input, .. } => {
            let mut args = vec![("bot id", bot.as_str())];
            args.extend(input.as_deref().map(|i| ("--input text", i)));
            args
        }
        Command::Retry { turn } => vec![("turn id", turn)],
        Command::Forget { id } => vec![("memory item id", id)],
        Command::Approve { id } | Command::Deny { id } => vec![("approval id", id)],
        Command::Search {
            query,
            more,
            bot,
            session,
            ..
        } => {
            let mut args: Vec<(&str, &str)> = std::iter::once(query)
                .chain(more)
                .map(|q| ("search query", q.as_str()))
                .collect();
            args.extend(bot.as_deref().map(|b| ("--bot id", b)));
            args.extend(session.as_deref().map(|s| ("--session id", s)));
            args
        }
        Command::Group { action } => match action {
            GroupCommand::Send { room, .. }
            | GroupCommand::Transcript { room, .. }
            | GroupCommand::Members { room, .. }
            | GroupCommand::Close { room, .. } => {
                vec![("room id", room)]
            }
            GroupCommand::Create { .. } | GroupCommand::List { .. } => Vec::new(),
        },
        Command::Bots {
            action: Some(super::BotsCommand::Remove { bot }),
            ..
        } => vec![("bot id", bot)],
        Command::Routines {
            action:
                Some(RoutinesCommand::Put { bot, name, .. } | RoutinesCommand::Remove { bot, name }),
            ..
        } => vec![("bot id", bot), ("routine name", name)],
        Command::Routines {
            bot, action: None, ..
        } => bot.iter().map(|b| ("bot id", b.as_str())).collect(),
        Command::Hooks { bot, .. } => vec![("bot id", bot)],
        Command::Run { .. }
        | Command::CheckConfig { .. }
        | Command::Bots { action: None, .. }
        | Command::Approvals { .. }
        | Command::Reindex { .. }
        | Command::SandboxExec { .. } => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_waits_past_a_model_calls_default_limit() {
        use clap::Parser;
        let cli = super::super::Cli::try_parse_from(["botfleet", "send", "b", "hi"]).unwrap();
        let Command::Send { timeout, .. } = cli.command else {
            panic!("not send");
        };
        let call = botfleet_actors::model::OpenAiOptions::DEFAULT_CALL_TIMEOUT.as_secs();
        assert!(
            timeout > call,
            "--timeout {timeout} s ends before a call's {call} s"
        );
    }

    #[test]
    fn a_host_ending_in_the_api_path_is_refused() {
        for host in [
            "http://127.0.0.1:7878/v1",
            "http://127.0.0.1:7878/v1/",
            "127.0.0.1:7878/V1",
        ] {
            let e = check_host(host).unwrap_err().to_string();
            assert!(e.contains("rather than"), "{host}: {e}");
        }
        let e = check_host("http://h:1/v1").unwrap_err().to_string();
        assert!(e.contains("http://h:1 rather than http://h:1/v1"), "{e}");
        for host in [
            "http://127.0.0.1:7878",
            "https://example.com/botfleet",
            "http://h/xv1",
            "v1",
            "é",
        ] {
            assert!(check_host(host).is_ok(), "{host}");
        }
    }

    /// `botfleet forget ""` sent an empty path segment and printed the
    /// host's "no such route; see docs/api.md".
    #[test]
    fn an_empty_id_is_refused_naming_what_it_should_be() {
        let e = check_id_length("memory item id", "")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "the memory item id is empty, where a memory item id is m- and 12 characters a-z or 2-7, e.g. m-abcdefgh2345"
        );
        assert!(check_id_length("bot id", " ").is_err());
        // not an id: an empty query is the host's to judge
        assert!(check_id_length("search query", "").is_ok());
    }

    /// Regression (round 20, Chinese-user tester): the prefix was cut by
    /// chars and showed half a family emoji.
    #[test]
    fn an_over_long_ids_start_is_shown_in_whole_characters() {
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        let e = check_id_length("bot id", &family.repeat(20))
            .unwrap_err()
            .to_string();
        // 20 clusters of 7 characters each: all of them, not 3½
        assert!(
            e.contains(&format!("(it begins \"{}\")", family.repeat(20))),
            "{e}"
        );
    }
}
