//! `botfleet group …`: create a room, post to it and print the public
//! replies of the discussion the message starts, list rooms, read one,
//! and (its owner) change its members or close it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;
use serde_json::json;
use tokio::time::Instant;
use tokio::time::timeout_at;

use super::columns::Align;
use super::columns::cell;
use super::columns::cut;
use super::columns::table;
use crate::client::Client;
use crate::client::segment;

/// Most terminal cells a room's name takes in `botfleet group list`
/// (a name of 100 Chinese characters is 200 wide): a longer one is cut
/// with `…`; `--json` gives it whole.
const NAME_CELLS: usize = 40;

/// `botfleet group send --help`: what the exit status says.
const GROUP_SEND_EXIT_CODES: &str = "\
Exit status:
  0    the discussion the message started ended; the public replies are printed
  1    an error: the message was not sent (also when the host did not answer within --timeout
       before it was sent), or the host refused a later request (stderr says why)
  2    a usage error (bad arguments, or one no request can carry: no token, a token with a
       newline, an over-long id, a --nonce that is not 1-200 printable ASCII characters, an
       empty member id, a --host ending in /v1, that is no http(s) address or that holds a
       user:password@, a ?query or a #fragment)
  3    no member answered: every member that took a turn in the discussion failed (a model
       endpoint down, a spent budget), so it ended with no public reply; the notices on stderr
       say whose and why. A member that took its turn and chose to say nothing answered: 0,
       as did one whose messages auto-review refused (outcome `held`) or that waits for its
       owner to approve an action (outcome `awaiting_approval`); the end notice says so
  4    the message addressed nobody: its @names match no member that takes turns, so nobody
       answers; stderr says so and names the room's members (the message is saved)
  5    the discussion did not end within --timeout; the message is saved
  130  interrupted (Ctrl-C), as a shell reports it; once the message is saved, stderr says so
       and names its key, to wait for the discussion's end again with --nonce KEY

With --json, stdout holds one JSON object in each of these cases but 2 and 130.";

/// Group room commands.
#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Create a room of bots (2-6; yours, or others' marked shareable).
    /// They speak in the order given.
    Create {
        /// Room name (also its id unless --id is given).
        name: String,
        /// Member bot ids, comma-separated, in speaking order.
        #[arg(long, value_delimiter = ',', required = true)]
        members: Vec<String>,
        /// Room id, if the name is not one (letters, digits, '-', '_', '.').
        #[arg(long)]
        id: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Post a message to a room, wait for the discussion it starts, and
    /// print the public replies. `@Name` addresses only that member,
    /// `@everyone` (or no mention) every member.
    #[command(after_help = GROUP_SEND_EXIT_CODES)]
    Send {
        /// Room id.
        room: String,
        /// Message text (quote it; unquoted words are joined with single
        /// spaces). It may start with `-`.
        #[arg(allow_hyphen_values = true)]
        text: String,
        /// More words of the text (joined to it with spaces).
        #[arg(hide = true)]
        more: Vec<String>,
        /// Idempotency key, 1-200 printable ASCII characters (default: a new
        /// UUIDv7). Reuse it to retry safely.
        #[arg(long)]
        nonce: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Seconds to wait for the discussion to end (at least 1; the
        /// message is saved when the wait ends first).
        #[arg(long, default_value_t = 600, value_parser = super::args::wait_seconds, allow_negative_numbers = true)]
        timeout: u64,
    },
    /// List your rooms, closed ones too (STATE says which).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a room's public timeline.
    Transcript {
        /// Room id.
        room: String,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
        /// Only the last N entries it would print, not the whole timeline.
        #[arg(long, value_name = "N", value_parser = super::args::last_entries, allow_negative_numbers = true)]
        last: Option<u32>,
    },
    /// Replace a room's members (you must own the room; 2-6 bots, yours or
    /// others' marked shareable). Discussions that start afterwards have
    /// them; one already running finishes with the members it had.
    Members {
        /// Room id.
        room: String,
        /// The new member bot ids, comma-separated, in speaking order.
        #[arg(value_delimiter = ',', required = true)]
        members: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Close a room you own: it takes no more messages; its timeline stays
    /// readable.
    Close {
        /// Room id.
        room: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a group command.
pub async fn run(client: &Client, command: &GroupCommand) -> anyhow::Result<ExitCode> {
    match command {
        GroupCommand::Create {
            name,
            members,
            id,
            json,
        } => {
            let mut body = json!({"name": name, "members": members});
            if let Some(id) = id {
                body["id"] = json!(id);
            }
            // the API names its `id` field; here it is the --id flag (QA:
            // a room named like a bot was told "pass another `id`")
            let v = client.post_ok("/v1/groups", &body).await.map_err(|e| {
                let said = format!("{e:#}");
                let flagged = said
                    .replace("pass an `id`", "pass --id")
                    .replace("pass another `id`", "pass another --id");
                if flagged == said {
                    e
                } else {
                    anyhow::anyhow!(flagged)
                }
            })?;
            if *json {
                outln!("{}", super::terminal::json(&v));
            } else {
                let ids: Vec<&str> = v["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["id"].as_str())
                    .collect();
                outln!(
                    "created room {} with {}{}",
                    v["id"].as_str().unwrap_or(name),
                    ids.join(", "),
                    if v["shared"] == json!(true) {
                        " (shared)"
                    } else {
                        ""
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        GroupCommand::Send {
            room,
            text,
            more,
            nonce,
            json,
            timeout,
        } => {
            let wait = Duration::from_secs(*timeout);
            let text = super::joined(text, more);
            let sent = send(client, room, &text, nonce.as_deref(), *json, wait).await;
            if *json && let Err(e) = &sent {
                outln!("{}", super::terminal::json(&super::send::json_failure(e)));
            }
            sent
        }
        GroupCommand::List { json } => {
            let v = client.expect(client.get("/v1/groups").await?, "groups")?;
            if *json {
                outln!("{}", super::terminal::json_pretty(&v));
                return Ok(ExitCode::SUCCESS);
            }
            if v["groups"].as_array().is_none_or(Vec::is_empty) {
                // said on stderr, as an empty list elsewhere: a header row
                // alone on stdout read as a room to a script (QA)
                errln!(
                    "you are in no room yet; create one with `botfleet group create NAME \
                     --members a,b`"
                );
                return Ok(ExitCode::SUCCESS);
            }
            // closed rooms are listed too (their timelines stay readable):
            // the STATE column says which take no more messages
            let mut rows = vec![["ID", "NAME", "SHARED", "STATE", "MEMBERS"].map(str::to_owned)];
            for g in v["groups"].as_array().into_iter().flatten() {
                // a member that takes no turns says why: `b (removed)`
                let ids: Vec<String> = g["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| {
                        let id = m["id"].as_str()?;
                        Some(match m["absent"].as_str() {
                            Some(why) => format!("{id} ({why})"),
                            None => id.to_owned(),
                        })
                    })
                    .collect();
                rows.push([
                    cell(g["id"].as_str().unwrap_or("")),
                    cut(&cell(g["name"].as_str().unwrap_or("")), NAME_CELLS),
                    if g["shared"] == json!(true) {
                        "yes"
                    } else {
                        "no"
                    }
                    .to_owned(),
                    if g["closed_at"].is_null() {
                        "open"
                    } else {
                        "closed"
                    }
                    .to_owned(),
                    cell(&ids.join(", ")),
                ]);
            }
            for line in table(&rows, &[Align::Left; 5]) {
                outln!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        GroupCommand::Members {
            room,
            members,
            json,
        } => {
            let v = client
                .put_ok(
                    &format!("/v1/groups/{}/members", segment(room)),
                    &json!({ "members": members }),
                )
                .await?;
            if *json {
                outln!("{}", super::terminal::json(&v));
            } else {
                // the same list again: said as it is, not as a change (QA)
                let (has, unchanged) = if v["changed"] == json!(false) {
                    ("already has", ": nothing changed")
                } else {
                    ("now has", "")
                };
                outln!(
                    "room {} {has} {}{}{unchanged}{}",
                    v["id"].as_str().unwrap_or(room),
                    member_ids(&v).join(", "),
                    if v["shared"] == json!(true) {
                        " (shared)"
                    } else {
                        " (not shared)"
                    },
                    readers(&v)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        GroupCommand::Close { room, json } => {
            let v = client
                .delete(&format!("/v1/groups/{}", segment(room)))
                .await?;
            if *json {
                outln!("{}", super::terminal::json(&v));
            } else {
                outln!(
                    "room {} is closed; its timeline stays readable (`botfleet group transcript {room}`)",
                    v["id"].as_str().unwrap_or(room)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        GroupCommand::Transcript { room, json, last } => {
            let mut hidden_before = false;
            // the timeline's head: where it starts for you, where it ends
            let head = client
                .get(&format!("/v1/groups/{}/entries?limit=1", segment(room)))
                .await?;
            if !*json && let Some(from) = head["visible_from"].as_i64().filter(|f| *f > 1) {
                hidden_before = true;
                outln!(
                    "(the room's entries before #{from} are not shown: it was shared with you there)"
                );
            }
            let shown = |e: &Value| *json || render(e).is_some();
            let entries = match last {
                None => entries_after(client, room, 0).await?,
                Some(n) => last_entries(client, room, &head, *n, shown).await?,
            };
            for e in &entries {
                if *json {
                    outln!("{}", super::terminal::json(e));
                } else if let Some(line) = render(e) {
                    outln!("{line}");
                }
            }
            if entries.is_empty() && !*json && !hidden_before {
                // told from a command that printed nothing (QA)
                let room = super::terminal::text(room);
                errln!(
                    "nothing was said in {room} yet; start with `botfleet group send {room} \"hello\"`"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// For a change of members' answer: from where each other user reads
/// the room, when not from its start (`; bob reads it from #7 on, …`).
fn readers(answer: &Value) -> String {
    let Some(map) = answer["visible_from"].as_object() else {
        return String::new();
    };
    map.iter()
        .filter_map(|(user, from)| from.as_i64().filter(|f| *f > 1).map(|f| (user, f)))
        .map(|(user, from)| {
            format!(
                "; {user} reads it from #{from} on (its earlier entries stay hidden from {user} \
                 and {user}'s bots)"
            )
        })
        .collect()
}

/// The member ids of a room as the API shows it, in speaking order.
fn member_ids(room: &Value) -> Vec<&str> {
    room["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str())
        .collect()
}

/// A timeline entry as one line for people, if it is one they read.
fn render(e: &Value) -> Option<String> {
    let seq = e["seq"].as_i64().unwrap_or(0);
    let who = e["author"].as_str().unwrap_or("?");
    let text = e["text"].as_str().unwrap_or("");
    let line = match e["kind"].as_str().unwrap_or("") {
        "user_message" => Some(format!("#{seq} {who}: {text}")),
        "delivery" => Some(format!("#{seq} {} ▸ {text}", speaker(e))),
        // written for API clients too: the CLI's command, not the route
        "notice" => Some(format!(
            "#{seq} [{}] {}",
            e["code"].as_str().unwrap_or("notice"),
            super::hints::for_cli(text)
        )),
        _ => None,
    };
    line.map(super::terminal::entry)
}

/// The member that published reply `e`, by its name with its id beside
/// it (`Bob's helper (bot b1)`) as `botfleet transcript` labels a bot, or
/// its id when it has no other name: in a shared room another user's bot,
/// which the viewer does not list, read as its bare id.
fn speaker(e: &Value) -> String {
    let id = e["author"].as_str().unwrap_or("?");
    super::transcript::named_bot(id, e["author_name"].as_str()).unwrap_or_else(|| id.to_owned())
}

/// Entries of a room's timeline after `after`, all pages.
async fn entries_after(client: &Client, room: &str, after: i64) -> anyhow::Result<Vec<Value>> {
    client
        .entries_between_of(&format!("/v1/groups/{}", segment(room)), after, None)
        .await
}

/// The last `n` entries of `room`'s timeline that `shown` keeps, oldest
/// first, `head` its first page (`?limit=1`, which says where it starts
/// for you and where it ends): read back from its end in growing windows until `n` are found
/// or its start (for you) is reached, so a long timeline is not read whole
/// for its end (QA: `group transcript` of a 6,400-entry room printed 28 MB
/// in 6 s, with no way to ask for the end, as `transcript --last` does).
async fn last_entries(
    client: &Client,
    room: &str,
    head: &Value,
    n: u32,
    shown: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let wanted = usize::try_from(n).unwrap_or(usize::MAX);
    let of = format!("/v1/groups/{}", segment(room));
    let (Some(last_seq), Some(visible_from)) =
        (head["last_seq"].as_i64(), head["visible_from"].as_i64())
    else {
        anyhow::bail!(
            "the host answered GET {of}/entries without `last_seq` and `visible_from`, so the \
             timeline's end cannot be found; is it a botfleet host (check --host or \
             BOTFLEET_HOST, and any proxy in front of it)?"
        );
    };
    let start = visible_from.max(1) - 1;
    let mut until = last_seq;
    let mut window = (i64::from(n) * 4).max(16);
    let mut read: Vec<Value> = Vec::new();
    while until > start && read.iter().filter(|e| shown(e)).count() < wanted {
        let after = until.saturating_sub(window).max(start);
        let mut older = client.entries_between_of(&of, after, Some(until)).await?;
        older.append(&mut read);
        read = older;
        until = after;
        window = window.saturating_mul(2);
    }
    let mut kept: Vec<Value> = read.into_iter().filter(|e| shown(e)).collect();
    let cut = kept.len().saturating_sub(wanted);
    Ok(kept.split_off(cut))
}

/// Posts and waits for the `turn_end` entry that lists the message: the
/// coordinator writes it when the discussion the message started is over.
async fn send(
    client: &Client,
    room: &str,
    text: &str,
    nonce: Option<&str>,
    as_json: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/groups/{}/messages", segment(room));
    let posted =
        super::send::subscribe_and_post(client, &path, text, nonce, as_json, timeout).await?;
    let super::send::Posted {
        status,
        body,
        mut changes,
        deadline,
        own_duplicate,
        key,
    } = match posted {
        Ok(posted) => posted,
        Err(code) => return Ok(code),
    };
    let outcome = super::send::admitted(status, body, &key)?;
    let body = &outcome.body;
    let outcome = outcome.status;
    let session = body["session"]
        .as_str()
        .context("the answer has no session")?
        .to_owned();
    let seq = body["seq"].as_i64().context("the answer has no seq")?;
    let unknown: Vec<String> = body["unknown_mentions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    // the room answers that nobody will: its notice after the message
    // says why and names the members, printed when the wait reads it
    let nobody = body["addressed"].as_array().is_some_and(Vec::is_empty);
    if !as_json {
        if outcome == "duplicate" && !own_duplicate {
            errln!("(already sent with this key as message {seq}; waiting for its discussion)");
        }
        if !unknown.is_empty() && !nobody {
            let names: Vec<String> = unknown.iter().map(|u| format!("@{u}")).collect();
            errln!("no member of {room} is called {}", names.join(", "));
        }
    }
    // mentioned members that take no turns: the room's `removed_member`
    // notice after the message says which and why (removed from the
    // fleet's config or by their owner, or a subagent that was stopped),
    // printed when the wait reads it
    let removed: Vec<String> = body["removed_mentions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let mut removed_told = as_json || removed.is_empty();
    // from here on the message is saved: a Ctrl-C says so (as `send`)
    let mut sigint = super::send::sigint();
    let interrupted = || {
        errln!(
            "interrupted: your message is saved (#{seq}) and its discussion goes on; read it \
             with `botfleet group transcript {room}`, or wait for its end with `botfleet group \
             send {room} TEXT --nonce {key}` (the same text)"
        );
        ExitCode::from(super::exit::INTERRUPTED_SEND)
    };
    let mut seen: Vec<Value> = Vec::new();
    // the room's notices about the message's mentions, written with it
    // (so the first entries after it): why nobody was addressed
    let mut explained: Vec<Value> = Vec::new();
    let mut explaining = true;
    let mut cursor = seq;
    loop {
        // the host may be restarting: a failed poll waits for the next one
        let polled = timeout_at(deadline, entries_after(client, room, cursor));
        let Some(polled) = super::send::or_interrupt(&mut sigint, polled).await else {
            return Ok(interrupted());
        };
        let polled = match polled {
            Ok(Ok(entries)) => entries,
            Ok(Err(e)) => {
                changes.poll_failed(e)?;
                Vec::new()
            }
            // no answer in the time left: the wait ends below
            Err(_elapsed) => Vec::new(),
        };
        for e in polled {
            cursor = cursor.max(e["seq"].as_i64().unwrap_or(cursor));
            explaining = explaining && mention_notice(&e);
            if explaining {
                explained.push(e.clone());
                if nobody && !as_json && e["code"] == "unknown_mention" {
                    errln!("{}", e["text"].as_str().unwrap_or(""));
                }
            }
            if !removed_told && e["kind"] == "notice" && e["code"] == "removed_member" {
                removed_told = true;
                errln!("{}", e["text"].as_str().unwrap_or(""));
            }
            let ends_mine = e["kind"] == "turn_end"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&json!(seq)));
            if ends_mine {
                let ended = seen.iter().find(|n| n["code"] == "room_run_no_members");
                // why nobody was, as the room said it with the message
                // (printed when read if the answer to the post said so)
                let said = explained.first().and_then(|n| n["text"].as_str());
                if ended.is_some()
                    && !nobody
                    && !as_json
                    && unknown.is_empty()
                    && let Some(said) = said
                {
                    errln!("{said}");
                }
                let why = ended.map(|n| said.or(n["text"].as_str()).unwrap_or(""));
                let discussion = Discussion {
                    room,
                    seq,
                    mentions: (&unknown, &removed),
                    entries: &seen,
                    end: &e,
                    nobody: why,
                };
                print_discussion(&discussion, as_json);
                if why.is_some() {
                    return Ok(ExitCode::from(super::exit::UNDELIVERED));
                }
                if every_turn_failed(&e) {
                    return Ok(ExitCode::from(super::exit::TURN_FAILED));
                }
                return Ok(ExitCode::SUCCESS);
            }
            if e["kind"] == "turn_end" {
                // an earlier message's discussion ended (runs take turns):
                // what came so far was its, not this message's
                seen.clear();
                continue;
            }
            seen.push(e);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let lost = changes.lost_since();
            if as_json {
                let mut v = json!({"status": "timeout", "room": room, "session": session, "seq": seq, "nonce": key});
                if let Some(at) = lost {
                    v["host_unreachable_since"] = json!(at);
                }
                outln!("{}", super::terminal::json(&v));
            } else {
                errln!(
                    "the discussion did not end within {} s{}; your message is saved (#{seq}); see \
                     `botfleet group transcript {room}`, or wait again with `botfleet group send \
                     {room} TEXT --nonce {key}` (the same text)",
                    timeout.as_secs(),
                    super::outcome::unreachable_since(lost)
                );
            }
            return Ok(ExitCode::from(super::exit::TIMEOUT));
        }
        // wait for a change of the timeline (signals reach the room owner;
        // others re-check every second)
        let changed = changes.wait(&session, left.min(Duration::from_secs(1)));
        if super::send::or_interrupt(&mut sigint, changed)
            .await
            .is_none()
        {
            return Ok(interrupted());
        }
    }
}

/// Whether no member answered in the discussion that `end` (its
/// `turn_end`) closed because every member that took a turn failed: by
/// the members' outcomes the host gives there (`members`), none spoke or
/// passed, and one failed. (It exited 0 as a discussion that ended, so a
/// script could not tell a room whose every member's model was down from
/// one that answered; then 3 on a `room_run_failed_round` notice with no
/// reply, also when another member had taken its turn and said nothing.)
fn every_turn_failed(end: &Value) -> bool {
    let outcomes: Vec<&str> = end["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["outcome"].as_str())
        .collect();
    // a member whose messages review refused took its turn, and did not
    // fail; nor did one waiting for its owner's approval
    let answered = outcomes
        .iter()
        .any(|o| matches!(*o, "spoke" | "passed" | "held" | "awaiting_approval"));
    outcomes.contains(&"failed") && !answered
}

/// Whether `e` is one of the notices the room writes with a message
/// about its mentions (members it names that take no turns, names no
/// member has).
fn mention_notice(e: &Value) -> bool {
    e["kind"] == "notice"
        && matches!(
            e["code"].as_str(),
            Some("unknown_mention" | "removed_member")
        )
}

/// The discussion of message `seq` that `end` (its `turn_end`) closed.
struct Discussion<'a> {
    room: &'a str,
    seq: i64,
    /// The message's mentions that addressed nobody (names as written,
    /// ids of members that take no turns), from the answer to its post.
    mentions: (&'a [String], &'a [String]),
    /// The timeline's entries of the discussion.
    entries: &'a [Value],
    end: &'a Value,
    /// When the message addressed nobody: the room's notice of why.
    nobody: Option<&'a str>,
}

/// Prints a discussion: its replies and why it ended. A message that
/// addressed nobody is `"status": "nobody_addressed"` in JSON, with the
/// room's `notice` of why.
fn print_discussion(discussion: &Discussion<'_>, as_json: bool) {
    let Discussion {
        room,
        seq,
        mentions: (unknown, removed),
        entries,
        end,
        nobody,
    } = *discussion;
    let replies: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "delivery").collect();
    // the notice of why the discussion ended (unknown mentions were said
    // from the answer to the post)
    let notices: Vec<&Value> = entries
        .iter()
        .filter(|e| {
            e["kind"] == "notice"
                && e["code"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("room_run_"))
        })
        .collect();
    if as_json {
        let mut out = json!({
            "status": if nobody.is_some() { "nobody_addressed" } else { "completed" },
            "room": room,
            "seq": seq,
            "unknown_mentions": unknown,
            "removed_mentions": removed,
            "replies": replies.iter().map(|d| json!({"author": d["author"], "author_name": d["author_name"], "seq": d["seq"], "text": d["text"]})).collect::<Vec<_>>(),
            "notices": notices.iter().map(|n| json!({"code": n["code"], "text": n["text"]})).collect::<Vec<_>>(),
            "members": end["members"],
        });
        if let Some(why) = nobody {
            out["notice"] = json!(why);
        }
        outln!("{}", super::terminal::json(&out));
        return;
    }
    for d in &replies {
        let line = format!("{} ▸ {}", speaker(d), d["text"].as_str().unwrap_or(""));
        outln!("{}", super::terminal::entry(line));
    }
    for n in &notices {
        errln!(
            "({})",
            super::hints::for_cli(n["text"].as_str().unwrap_or(""))
        );
    }
}
