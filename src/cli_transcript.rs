//! `botfleet transcript BOT`: a conversation with a bot, as text (one
//! line or more per entry) or JSON lines, with or without the bot's
//! internal steps (`--all`), whole or only its end (`--last N`).
//!
//! A subagent's conversation is its task: what its parent asked (the
//! task, its later messages), its progress and its report, in its task
//! session, with any direct messages a person sent it, in the fleet's
//! order (`gid`), those marked `(direct)` after their `#seq` (each session
//! numbers its own). It printed the person's DM with it alone, empty
//! for a subagent nobody wrote to: nothing, as if it had done nothing.

use std::collections::HashMap;
use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;

use super::terminal;
use crate::client::Client;
use crate::client::HostAnswered;
use crate::client::segment;

/// How many entries before the end `--last N` reads first, per entry it
/// prints: most entries of a turn are internal steps (a tool call, its
/// result, the turn's end), and some print nothing at all (an `assistant`
/// entry with no text and no call ends each turn).
const ENTRIES_PER_SHOWN: i64 = 4;

/// The fewest entries `--last N` reads at a time.
const MIN_WINDOW: i64 = 64;

/// Prints the conversation of the user with `bot`: the whole of it, or its
/// last `last` printed entries.
pub(super) async fn transcript(
    client: &Client,
    bot: &str,
    all: bool,
    as_json: bool,
    last: Option<u32>,
) -> anyhow::Result<ExitCode> {
    let session = client
        .get(&format!("/v1/bots/{}/session", segment(bot)))
        .await?;
    let id = session["session"]
        .as_str()
        .context("no session id in the answer")?;
    let last_seq = session["last_seq"]
        .as_i64()
        .context("no last_seq in the answer")?;
    let shown = |e: &Value| !lines(e, all, as_json).is_empty();
    // a subagent's task session, named by the host
    // (`GET /v1/bots/{bot}/session`, `task`)
    let task = session["task"]["session"]
        .as_str()
        .zip(session["task"]["last_seq"].as_i64());
    let mut entries = Vec::new();
    let mut merged = false;
    if let Some((task, task_seq)) = task {
        // unreadable (a bot given to another user since: your DM with it
        // stays yours to print), it is left out
        if let Ok(es) = read(client, task, task_seq, last, shown).await {
            entries.extend(es);
            merged = true;
        }
    }
    entries.extend(read(client, id, last_seq, last, shown).await?);
    if merged {
        // one conversation in the fleet's order
        entries.sort_by_key(|e| e["gid"].as_i64().unwrap_or(0));
        if let Some(n) = last {
            // each session's last `n` printed entries: the last `n` of both
            let skip = entries
                .len()
                .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
            entries.drain(..skip);
        }
    }
    for e in &entries {
        // merged, the person's DM with the subagent numbers its entries
        // apart from the task's: its lines say so, as `#4 (direct)` (QA,
        // 2026-12-05: two `#4`, one a reply to the person, one progress)
        let mut printed = lines(e, all, as_json);
        if merged
            && !as_json
            && e["session"].as_str() == Some(id)
            && let (Some(first), Some(seq)) = (printed.first_mut(), e["seq"].as_i64())
            && let Some(rest) = first.strip_prefix(&format!("#{seq} "))
        {
            *first = format!("#{seq} (direct) {rest}");
        }
        for line in printed {
            outln!("{line}");
        }
    }
    if last_seq == 0 && task.is_none() && !as_json {
        // an empty conversation, told from a command that printed nothing
        // (QA: a new user could not tell them apart); on stderr, so that
        // stdout stays the transcript (none)
        errln!(
            "no messages with {} yet; start with `botfleet send {} \"hello\"`",
            terminal::text(bot),
            terminal::text(bot)
        );
        // a bot that worked only with other bots is not idle: where its
        // work is (QA: "no messages" for a bot with 42 turns)
        let turns = client
            .get_query(
                &format!("/v1/bots/{}/turns", segment(bot)),
                &[("limit", "1")],
            )
            .await;
        if turns.is_ok_and(|t| t["turns"].as_array().is_some_and(|t| !t.is_empty())) {
            // where, this command does not know: each place's command
            // (QA: it named `--with` alone, for a bot that had worked
            // only in a room)
            let b = terminal::text(bot);
            errln!(
                "{b} has worked elsewhere: in rooms (`botfleet group transcript ROOM`), with \
                 other bots (`botfleet transcript {b} --with BOT`), or in its routines' and \
                 webhooks' runs (`botfleet transcript {b} --routine NAME` or `--hook NAME`)"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The session of `bot` of `kind` with `peer` (a hook's or routine's
/// name, another bot's id), and its newest seq; `None` when the host has
/// no such session for the user (none began, or not theirs).
async fn session_head(
    client: &Client,
    bot: &str,
    kind: SessionKind,
    peer: &str,
) -> anyhow::Result<Option<(String, i64)>> {
    let key = SessionKey {
        bot: BotId::new(bot).map_err(|e| anyhow::anyhow!("{e}"))?,
        kind,
        peer: peer.to_owned(),
    };
    let session = key.id().to_string();
    let page = match client
        .get_query(
            &format!("/v1/sessions/{session}/entries"),
            &[("after", "0"), ("limit", "1")],
        )
        .await
    {
        Ok(page) => page,
        Err(e)
            if e.downcast_ref::<HostAnswered>()
                .is_some_and(|a| a.status == reqwest::StatusCode::NOT_FOUND) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let last_seq = page["last_seq"]
        .as_i64()
        .context("no last_seq in the answer")?;
    Ok(Some((session, last_seq)))
}

/// The id of the bot `given` names for `--with`: one of the user's bots
/// by its id, or by its id or display name as a mention matches them
/// (SendToAgent takes names, QA: `--with Boss` said Boss never sent a
/// message), and `true`; else `given` itself when it can be an id
/// (another user's bot may share a conversation), and `false`; an error
/// naming it when not even that.
async fn other_bot(client: &Client, given: &str) -> anyhow::Result<(String, bool)> {
    let listed = client.get("/v1/bots").await?;
    let bots = listed["bots"].as_array().cloned().unwrap_or_default();
    if bots.iter().any(|b| b["id"] == given) {
        return Ok((given.to_owned(), true));
    }
    let key = botfleet_memory::name_key(given.trim_start_matches('@'));
    let matches: Vec<&str> = bots
        .iter()
        .filter(|b| {
            [&b["id"], &b["name"]]
                .iter()
                .filter_map(|v| v.as_str())
                .any(|n| botfleet_memory::name_key(n) == key)
        })
        .filter_map(|b| b["id"].as_str())
        .collect();
    match matches.as_slice() {
        [one] => Ok(((*one).to_owned(), true)),
        [] if BotId::new(given).is_ok() => Ok((given.to_owned(), false)),
        [] => anyhow::bail!(
            "no bot {} for you; list yours with `botfleet bots`",
            botfleet_memory::quote_short(given)
        ),
        many => anyhow::bail!(
            "{} names {} of your bots ({}); give its id",
            botfleet_memory::quote_short(given),
            many.len(),
            many.join(", ")
        ),
    }
}

/// Prints `bot`'s conversation with `other`, another bot of the user's:
/// the messages `other` sent it (SendToAgent) and, with `--all`, what it
/// did with them. The CLI printed no bot-to-bot conversation: `transcript`
/// of a bot that worked only for other bots said it had no messages (QA).
pub(super) async fn with_bot(
    client: &Client,
    bot: &str,
    other: &str,
    all: bool,
    as_json: bool,
    last: Option<u32>,
) -> anyhow::Result<ExitCode> {
    // yours (else the host's 404, naming how to list yours); `other` may
    // be another user's bot it shares a conversation with
    client.get(&format!("/v1/bots/{}", segment(bot))).await?;
    let (other, mine) = other_bot(client, other).await?;
    let other = other.as_str();
    let Some((session, last_seq)) = session_head(client, bot, SessionKind::Agent, other).await?
    else {
        if other == bot {
            anyhow::bail!("bot {bot} never sent itself a message (SendToAgent)");
        }
        if !mine {
            anyhow::bail!(
                "bot {bot} has no conversation with {other}: no bot of yours is called so, and \
                 no bot of that id sent it a message; list yours with `botfleet bots`"
            );
        }
        // a reply to the bot's message lands in the conversation the bot
        // sent from, not here (QA: "ponger never sent it a message" of a
        // bot that had answered it ten times)
        anyhow::bail!(
            "bot {bot} has no conversation with bot {other}: {other} never started one \
             (SendToAgent of its own); its replies to {bot}'s messages are in the conversation \
             {bot} sent from (`botfleet transcript {bot}`, or a room's); the other way round \
             is `botfleet transcript {other} --with {bot}`"
        );
    };
    // what the bot answered with SendToAgent (as the message it gets
    // asks it to) is a step of its own, which `lines` shows only with
    // `--all`: printed as a message (QA: only the other bot's side showed);
    // a call refused (its result an error: a spent hop budget, an unknown
    // agent) sent nothing, and is neither printed nor counted by `--last`
    // (QA: it read as a message the other bot got)
    let answers = |e: &Value, refused: &dyn Fn(&str) -> bool| {
        if all {
            return Vec::new();
        }
        let by = named_bot(bot, e["author_name"].as_str()).unwrap_or_else(|| bot.to_owned());
        let seq = e["seq"].as_i64().unwrap_or(0);
        sent_to_agents(e)
            .into_iter()
            .filter(|(id, _, _)| !refused(id))
            .map(|(_, to, text)| {
                if as_json {
                    terminal::json(e)
                } else {
                    format!("#{seq} {by} ▸ {to}: {text}")
                }
            })
            .take(if as_json { 1 } else { usize::MAX })
            .collect::<Vec<_>>()
    };
    let shown = |e: &Value, read: &[Value]| {
        !lines(e, all, as_json).is_empty() || !answers(e, &|id| refused_in(read, id)).is_empty()
    };
    // with the calls' results, which say whether each was refused
    let entries = match last {
        None => client.entries_after(&session, 0).await?,
        Some(n) => last_read(client, &session, last_seq, n, shown).await?,
    };
    let refused = refused_calls(&entries);
    for e in &entries {
        let sent = answers(e, &|id| refused.contains(id));
        for line in lines(e, all, as_json).into_iter().chain(sent) {
            outln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The messages an `assistant` entry sent with SendToAgent: (the call's
/// id, the agent as the call named it, the text), in call order.
fn sent_to_agents(e: &Value) -> Vec<(&str, String, String)> {
    calls_of(e, "SendToAgent")
        .into_iter()
        .filter_map(|(id, args)| {
            Some((
                id,
                args["agent"].as_str()?.to_owned(),
                args["text"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The ids of the calls whose results in `entries` are errors: refused,
/// they sent or delivered nothing.
fn refused_calls(entries: &[Value]) -> HashSet<&str> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["is_error"] == true)
        .filter_map(|e| e["call_id"].as_str())
        .collect()
}

/// Whose runs `transcript --hook` / `--routine` prints.
pub(super) enum Runs<'a> {
    /// A webhook of the bot's, by name.
    Hook(&'a str),
    /// A routine of the bot's, by name.
    Routine(&'a str),
}

/// Prints the runs of one of `bot`'s webhooks or routines: its session
/// (one per hook or routine, the bot's own work, which its owner reads).
/// A failed run's notice and its retry were there, which no command
/// printed: `transcript` read only the person's conversation.
pub(super) async fn runs(
    client: &Client,
    bot: &str,
    runs: &Runs<'_>,
    all: bool,
    as_json: bool,
    last: Option<u32>,
) -> anyhow::Result<ExitCode> {
    // the bot is yours (else the host's 404, naming how to list yours),
    // named as a bot's messages are (`Researcher (bot r) ▸ …`, QA: its
    // runs printed the bare id)
    let record = client.get(&format!("/v1/bots/{}", segment(bot))).await?;
    let by = named_bot(bot, record["name"].as_str()).unwrap_or_else(|| bot.to_owned());
    let owner = record["owner"].as_str();
    let (kind, name, what, listed, route) = match runs {
        Runs::Hook(name) => (
            SessionKind::Hook,
            *name,
            "webhook",
            format!("list its webhooks with `botfleet hooks {bot}`"),
            "hooks",
        ),
        Runs::Routine(name) => (
            SessionKind::Routine,
            *name,
            "routine",
            format!("list its routines with `botfleet routines {bot}`"),
            "routines",
        ),
    };
    // a routine or hook the bot no longer has is refused as one it never
    // had (QA: its old runs printed, exit 0, where the docs say exit 1;
    // a removed hook's runs still printed, no route listing hooks then)
    let listing = client
        .get(&format!("/v1/bots/{}/{route}", segment(bot)))
        .await?;
    let found = listing[route]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == *name);
    let Some(found) = found else {
        anyhow::bail!(
            "bot {bot} has no {what} {} (removed, or never made); {listed}",
            botfleet_memory::quote_short(name)
        );
    };
    // it has it (above): it has not run yet, said as such (QA: "none came
    // yet, or the bot has no such routine", of one it lists), with when a
    // routine runs next
    let Some((session, last_seq)) = session_head(client, bot, kind, name).await? else {
        let next = found["next_fire_ms"]
            .as_i64()
            .and_then(terminal::minute_utc)
            .map(|at| format!("; it runs next at {at}"))
            .unwrap_or_default();
        let none = match runs {
            Runs::Hook(_) => "no delivery came yet",
            Runs::Routine(_) => "it has not run yet",
        };
        anyhow::bail!(
            "no runs of {what} {} of bot {bot}: {none}{next}",
            botfleet_memory::quote_short(name)
        );
    };
    // what the bot sent is delivered to its owner's conversation, not
    // written here: its SendMessage calls say it (QA, 2026-12-04: a run
    // that delivered printed nothing without --all)
    // a call refused (its result an error) delivered nothing: not counted
    // by `--last`, nor printed (below)
    let shown = |e: &Value, read: &[Value]| {
        !lines(e, all, as_json).is_empty()
            || (!all && sent(e).iter().any(|(id, _)| !refused_in(read, id)))
    };
    // with the results of the calls shown: whether and where they delivered
    // (`--last` read only the entries it printed, and showed a refused
    // SendMessage as delivered to you, QA)
    let entries = match last {
        None => client.entries_after(&session, 0).await?,
        Some(n) => last_read(client, &session, last_seq, n, shown).await?,
    };
    let refused = refused_calls(&entries);
    // whose conversation each call delivered to, as its result says: the
    // bot's owner then, who may not be the reader (fleet.toml gave the bot
    // to another user since: its runs came along, QA 2026-12-05)
    let to: HashMap<&str, &str> = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["is_error"] != true)
        .filter_map(|e| {
            let user = e["content"].as_str()?.strip_prefix("delivered to ")?;
            Some((e["call_id"].as_str()?, user))
        })
        .collect();
    let mut printed = 0_usize;
    for e in &entries {
        for line in lines(e, all, as_json) {
            outln!("{line}");
            printed += 1;
        }
        if all {
            continue;
        }
        let texts: Vec<(&str, String)> = sent(e)
            .into_iter()
            .filter(|(id, _)| !refused.contains(id))
            .collect();
        if as_json && !texts.is_empty() {
            outln!("{}", terminal::json(e));
            continue;
        }
        let seq = e["seq"].as_i64().unwrap_or(0);
        for (id, text) in texts {
            match to.get(id) {
                // the reader of a run's session is the bot's owner
                Some(user) if Some(*user) != owner => {
                    let line =
                        format!("#{seq} {by} ▸ {text} (to {user}'s conversation, its owner then)");
                    outln!("{}", terminal::entry(line));
                }
                // no result yet: the call runs, or a restart cut it off
                _ => outln!(
                    "{}",
                    terminal::entry(format!("#{seq} {by} ▸ {text} (to your conversation)"))
                ),
            }
            printed += 1;
        }
    }
    if printed == 0 && !as_json {
        // runs that sent nothing (a routine may stay silent), told from a
        // command that printed nothing (QA: exit 0, nothing on either
        // stream); on stderr, so that stdout stays the transcript (none)
        let ran = entries.iter().filter(|e| e["kind"] == "event").count();
        errln!(
            "{by} sent nothing from the {what}'s {ran} {} read; `--all` shows what it did",
            if ran == 1 { "run" } else { "runs" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `read` holds call `id`'s result, an error (it delivered nothing).
fn refused_in(read: &[Value], id: &str) -> bool {
    read.iter().any(|e| {
        e["kind"] == "tool_result" && e["is_error"] == true && e["call_id"].as_str() == Some(id)
    })
}

/// The calls of `tool` an `assistant` entry made, as (call id, its
/// arguments parsed), in call order; none of another entry.
fn calls_of<'e>(e: &'e Value, tool: &str) -> Vec<(&'e str, Value)> {
    if e["kind"] != "assistant" {
        return Vec::new();
    }
    e["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == tool)
        .filter_map(|c| {
            let args: Value = serde_json::from_str(c["arguments"].as_str()?).ok()?;
            Some((c["id"].as_str()?, args))
        })
        .collect()
}

/// The SendMessage calls of an `assistant` entry, as (call id, text).
fn sent(e: &Value) -> Vec<(&str, String)> {
    calls_of(e, "SendMessage")
        .into_iter()
        .filter_map(|(id, args)| Some((id, args["text"].as_str()?.to_owned())))
        .collect()
}

/// The entries of `session` (whose last entry is `last_seq`) to print:
/// all, or the last `last` that `shown` keeps.
async fn read(
    client: &Client,
    session: &str,
    last_seq: i64,
    last: Option<u32>,
    shown: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    Ok(match last {
        None => client.entries_after(session, 0).await?,
        Some(n) => last_shown(client, session, last_seq, n, shown).await?,
    })
}

/// The last `n` entries of `session` (whose last entry is `last_seq`) that
/// `shown` keeps, oldest first. `--last N` counts what it prints: it
/// counted entries back from the end, printed or not, so `--last 2` after
/// a reply printed nothing (the turn's end and its empty `assistant`
/// entry). Read back from the end in growing windows until `n` are found
/// or the conversation's start is reached (a long conversation is not read
/// whole for its end).
async fn last_shown(
    client: &Client,
    session: &str,
    last_seq: i64,
    n: u32,
    shown: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let read = last_read(client, session, last_seq, n, |e, _| shown(e)).await?;
    Ok(read.into_iter().filter(|e| shown(e)).collect())
}

/// The entries of `session` (whose last entry is `last_seq`) from the
/// `n`th last that `shown` keeps to the end, every entry between them
/// included (a SendMessage call's result, which says whether and where it
/// was delivered), oldest first. `shown` is given each entry with every
/// entry read so far, the later ones among them.
async fn last_read(
    client: &Client,
    session: &str,
    last_seq: i64,
    n: u32,
    shown: impl Fn(&Value, &[Value]) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let wanted = usize::try_from(n).unwrap_or(usize::MAX);
    if wanted == 0 {
        return Ok(Vec::new());
    }
    // where the `wanted`th last shown entry of `read` is, if it has as many
    let start_of = |read: &[Value]| {
        let mut count = 0;
        read.iter().enumerate().rev().find_map(|(i, e)| {
            count += usize::from(shown(e, read));
            (count == wanted).then_some(i)
        })
    };
    let mut read: Vec<Value> = Vec::new();
    let mut until = last_seq;
    let mut window = (i64::from(n) * ENTRIES_PER_SHOWN).max(MIN_WINDOW);
    while until > 0 {
        let after = until.saturating_sub(window).max(0);
        let mut older = client.entries_between(session, after, Some(until)).await?;
        older.append(&mut read);
        read = older;
        until = after;
        window = window.saturating_mul(2);
        if let Some(start) = start_of(&read) {
            return Ok(read.split_off(start));
        }
    }
    // fewer than `wanted` in the whole conversation: from its first shown
    let first = read
        .iter()
        .position(|e| shown(e, &read))
        .unwrap_or(read.len());
    Ok(read.split_off(first))
}

/// A notice's text with how to retry its turn, where the notice offers a
/// retry (`retry_turn`) its text does not name: an `undelivered` notice
/// says only that the bot did not reply, and someone reading the
/// transcript later (after `send` ran out of time, say) had no turn id
/// to retry (QA). A text that names the command already is kept.
fn with_retry(text: &str, retry_turn: Option<&str>) -> String {
    match retry_turn {
        Some(t) if !text.contains(&format!("`botfleet retry {t}`")) => {
            let clause = text.trim_end().trim_end_matches('.');
            format!("{clause}; retry with `botfleet retry {t}`")
        }
        _ => text.to_owned(),
    }
}

/// What `transcript` prints of entry `e`: nothing, one line or more (a
/// message of several lines, a bot's note and its tool calls).
fn lines(e: &Value, all: bool, as_json: bool) -> Vec<String> {
    let kind = e["kind"].as_str().unwrap_or("");
    if as_json {
        // the same entries as the text, with `--all` and without (QA: a
        // bot's step with no text and no call, which the text leaves out,
        // was listed, so `--last 3` gave other entries)
        let listed = if all {
            // every entry (kinds this CLI does not know too), but a bot's
            // step that says and calls nothing, which the text leaves out
            kind != "assistant" || !lines(e, true, false).is_empty()
        } else {
            is_public(kind) || is_task(e)
        };
        return if listed {
            vec![terminal::json(e)]
        } else {
            Vec::new()
        };
    }
    let seq = e["seq"].as_i64().unwrap_or(0);
    let who = e["author"].as_str().unwrap_or("?");
    let text = e["text"].as_str().unwrap_or("");
    let s = |key: &str| e[key].as_str().unwrap_or("");
    // a bot's internal steps, events, notices and approvals with every
    // control and format character escaped, as the web page shows them
    // (a zero-width or bidi mark could make a command read as another);
    // people's and bots' messages as written, the terminal's escapes aside
    let st = |t: &str| terminal::strict_text(t).into_owned();
    let lines = match kind {
        "user_message" => vec![format!("#{seq} {who}: {text}")],
        // the bot by its name beside its id, as a bot's message is
        // (`Researcher (bot r) ▸ …`), or by its id alone (`r ▸ …`)
        "delivery" => {
            let by = named_bot(who, e["author_name"].as_str()).unwrap_or_else(|| who.to_owned());
            vec![format!("#{seq} {by} ▸ {text}")]
        }
        // written for API clients too: the CLI's command, not the route
        "notice" => vec![format!(
            "#{seq} [{}] {}",
            e["code"].as_str().unwrap_or("notice"),
            st(&with_retry(
                &super::hints::for_cli(text),
                e["retry_turn"].as_str()
            ))
        )],
        "reaction" => vec![format!(
            "#{seq} {who} reacted {} to #{}",
            s("emoji"),
            e["target_seq"]
        )],
        "assistant" if all => {
            let note = (!text.is_empty()).then(|| format!("#{seq} ({who} thinks) {}", st(text)));
            let calls = e["tool_calls"].as_array().into_iter().flatten().map(|c| {
                format!(
                    "#{seq} ({who} calls) {} {}",
                    st(c["name"].as_str().unwrap_or("")),
                    st(c["arguments"].as_str().unwrap_or(""))
                )
            });
            note.into_iter().chain(calls).collect()
        }
        "tool_result" if all => vec![format!(
            "#{seq} (result of {}) {}",
            st(s("name")),
            st(s("content"))
        )],
        "turn_end" if all => vec![format!("#{seq} (turn {} {})", s("turn"), s("status"))],
        "reminder" if all => vec![format!("#{seq} (reminder) {}", st(text))],
        "agent_message" => vec![format!("#{seq} {} {text}", sender(e))],
        // a subagent's task and its parent's later messages: what it was
        // asked, as a person's message is in a DM
        "event" if is_task(e) => vec![format!("#{seq} {}: {text}", s("origin"))],
        // by its origin (`routine:daily`, `hook:gh`): a routine's stored
        // before it was its author read `system` (QA)
        "event" if all => vec![format!(
            "#{seq} (event from {}) {}",
            e["origin"].as_str().unwrap_or(who),
            st(text)
        )],
        "summary" if all => vec![format!(
            "#{seq} (summary up to #{}) {}",
            e["covers_to_seq"],
            st(text)
        )],
        "approval" => vec![format!(
            "#{seq} [approval {} {}] {} — {}",
            s("status"),
            s("approval"),
            st(s("summary")),
            st(s("reason"))
        )],
        _ => Vec::new(),
    };
    lines.into_iter().map(terminal::entry).collect()
}

/// Who sent a message from a bot, as `transcript` labels it: its name
/// next to its id, `Boss · job six (bot boss.sub-334003c86248):`, or its
/// id alone, `b (bot):`, when it has no name (`author_name`) or the name
/// is its id. Eight reports of a bot's subagents read
/// `boss.sub-… (bot):` alike, and only `botfleet bots` told which task
/// each was.
fn sender(e: &Value) -> String {
    let id = e["from"]
        .as_str()
        .or_else(|| e["author"].as_str())
        .unwrap_or("?");
    match named_bot(id, e["author_name"].as_str()) {
        Some(label) => format!("{label}:"),
        None => format!("{id} (bot):"),
    }
}

/// Bot `id` by its display name `name` (an entry's `author_name`) with
/// its id beside it, `Boss · job six (bot boss.sub-334003c86248)`; `None`
/// when it has no name or the name only spells its id (the web page's
/// rule: such a name adds nothing). `transcript` and `group transcript`
/// / `group send` label bots this way.
pub(super) fn named_bot(id: &str, name: Option<&str>) -> Option<String> {
    name.filter(|name| !same_as_id(name, id))
        .map(|name| format!("{name} (bot {id})"))
}

/// Whether display name `name` only spells bot id `id` (case and white
/// space aside), as the web page tells them apart (`dom.js`, `speaker`).
fn same_as_id(name: &str, id: &str) -> bool {
    let spelled: String = name.chars().filter(|c| !c.is_whitespace()).collect();
    spelled.to_lowercase() == id.to_lowercase()
}

/// Whether `transcript` shows entries of `kind` without `--all`: what was
/// said to and by people and bots, not the bot's internal steps (notes,
/// tool calls and results, turn ends, reminders, events, summaries) nor
/// kinds this CLI does not know.
fn is_public(kind: &str) -> bool {
    matches!(
        kind,
        "user_message" | "delivery" | "notice" | "reaction" | "agent_message" | "approval"
    )
}

/// Whether `e` is a subagent's task or a later message of its parent to
/// it (an `event` whose origin is `task from <parent>` or `message from
/// <parent>`, in its task session).
fn is_task(e: &Value) -> bool {
    e["kind"] == "event"
        && e["origin"]
            .as_str()
            .is_some_and(|o| o.starts_with("task from ") || o.starts_with("message from "))
}
