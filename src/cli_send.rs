//! `botfleet send`: post a message to a bot, wait for the turn that
//! answers it and report it ([`super::outcome`]); its exit status says how
//! that turn ended ([`SEND_EXIT_CODES`]). With `--json`, stdout holds one
//! JSON object whatever happens, a failure included ([`json_failure`]).

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use reqwest::StatusCode;
use serde_json::Value;
use serde_json::json;
use tokio::signal::unix::Signal;
use tokio::signal::unix::SignalKind;
use tokio::time::Instant;
use tokio::time::timeout_at;

use super::events;
use super::exit;
use super::outcome;
use crate::client::Client;
use crate::client::HostAnswered;
use crate::client::NoAnswer;

/// `botfleet send --help`: what the exit status says (2 is clap's usage
/// error, so the turn's outcomes start at 3).
pub(super) const SEND_EXIT_CODES: &str = "\
Exit status:
  0    the turn that answered the message completed; its replies are printed
  1    an error: the message was not sent (also when the host did not answer within --timeout
       before it was sent), or the host refused a later request (stderr says why)
  2    a usage error (bad arguments, or one no request can carry: no token, a token with a
       newline, an over-long id, a --nonce that is not 1-200 printable ASCII characters, an
       empty member id, a --host ending in /v1, that is no http(s) address or that holds a
       user:password@, a ?query or a #fragment)
  3    the turn failed or was cancelled; stderr says why and how to retry
  4    the bot ended its turn without replying (undelivered); `botfleet retry TURN` runs it again
  5    no reply within --timeout, or none yet because the bot is paused (its daily token budget
       is spent; stderr says until when, at once); the message is saved (`botfleet transcript BOT`)
  130  interrupted (Ctrl-C), as a shell reports it; once the message is saved, stderr says so
       and names its key, to wait for the answer again with --nonce KEY

With --json, stdout holds one JSON object in cases 0, 1 and 3-5 (none for 2 or 130): the turn \
(for 3 and 4 with \"notice\", what stderr would say, and \"retry_turn\" and \"retry_command\" \
when a retry can help; stderr stays silent), {\"status\": \"timeout\", ...}, {\"status\": \"paused\", \"notice\", \"paused_until\", ...}, the host's \
refusal of the key as it answers it ({\"status\": \"conflict\", ...} for a --nonce reused with other text, \
{\"status\": \"unknown\", ...} for one it cannot check) or {\"status\": \"error\", \"error\": {\"message\", \"http_status\"?}} \
for any other refusal (a 409 for a removed bot or a closed room included).";

/// The host's answer to a message: `accepted` or `duplicate`, with its
/// session and seq.
pub(super) struct Admitted {
    /// `accepted` or `duplicate`.
    pub(super) status: String,
    /// The admission record (`session`, `seq`, …).
    pub(super) body: Value,
}

/// The host refused the message as sent: an idempotency key reused with
/// other text (`conflict`) or older than the ledger (`unknown`). `--json`
/// prints the host's answer as is.
#[derive(Debug)]
pub(super) struct NotSent {
    /// The host's answer (`{"status", "error": {"message"}}`).
    body: Value,
    /// The message's key (`--nonce`).
    key: String,
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the host names the API's header; a CLI user gave `--nonce`
        let said = self
            .body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .replace(
                "this Idempotency-Key",
                &format!("this key (`--nonce {}`)", self.key),
            )
            .replace(
                "use a new key for a new message",
                "send a new message with a new --nonce, or without --nonce",
            );
        write!(
            f,
            "message not sent ({}): {said}",
            self.body["status"].as_str().unwrap_or("?"),
        )
    }
}

impl std::error::Error for NotSent {}

/// The admission record of a message the host took, or the error of one
/// it refused; `key` is the message's (`--nonce`).
pub(super) fn admitted(status: StatusCode, body: Value, key: &str) -> anyhow::Result<Admitted> {
    match body["status"].as_str() {
        Some(s @ ("accepted" | "duplicate")) => Ok(Admitted {
            status: s.to_owned(),
            body,
        }),
        Some("conflict" | "unknown") => Err(NotSent {
            body,
            key: key.to_owned(),
        }
        .into()),
        _ => Err(HostAnswered {
            status,
            code: crate::client::error_code(&body),
            message: body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no details")
                .to_owned(),
        }
        .into()),
    }
}

/// What `--json` prints on stdout for a failure of a command (its message
/// goes to stderr as always): the host's answer when it refused the
/// message as sent, else `{"status": "error", "error": {"message",
/// "http_status"}}` (`http_status` when the host answered).
pub(super) fn json_failure(e: &anyhow::Error) -> Value {
    // the message as stderr words it: a CLI command where the host's
    // names an API route (QA: `--json` said "POST /v1/groups" where
    // stderr said `botfleet group create`)
    if let Some(refused) = e.downcast_ref::<NotSent>() {
        let mut body = refused.body.clone();
        if let Some(message) = body["error"]["message"].as_str() {
            body["error"]["message"] = json!(super::hints::for_cli(message));
        }
        return body;
    }
    let mut error = json!({ "message": super::hints::for_cli(&format!("{e:#}")) });
    if let Some(answered) = e.downcast_ref::<HostAnswered>() {
        error["http_status"] = json!(answered.status.as_u16());
    }
    json!({ "status": "error", "error": error })
}

/// Sends and waits for the end of the turn that answers the message.
/// Errors are the command's (with `--json`, [`json_failure`] prints them).
pub(super) async fn send(
    client: &Client,
    bot: &str,
    text: &str,
    nonce: Option<&str>,
    as_json: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let path = format!("/v1/bots/{}/messages", crate::client::segment(bot));
    let posted = subscribe_and_post(client, &path, text, nonce, as_json, timeout).await?;
    let Posted {
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
    let outcome = admitted(status, body, &key)?;
    let body = &outcome.body;
    let outcome = outcome.status;
    let session = body["session"]
        .as_str()
        .context("the answer has no session")?
        .to_owned();
    let seq = body["seq"].as_i64().context("the answer has no seq")?;
    let gid = body["gid"].as_i64();
    if outcome == "duplicate" && !as_json && !own_duplicate {
        errln!("(already sent with this key as message {seq}; waiting for its reply)");
    }
    // the bot is paused by its daily token budget: the message waits for
    // the end of the pause (the host's notice says so only to a
    // conversation's first message since the pause began)
    let mut paused_until = body["paused_until"].as_i64();
    // from here on the message is saved: a Ctrl-C says so, and how to
    // read or wait for its answer (before, the command dies as usual)
    let mut sigint = sigint();
    let interrupted = || {
        errln!(
            "interrupted: your message is saved (seq {seq}) and {bot} answers it all the same; \
             read the answer with `botfleet transcript {bot}`, or wait for it with `botfleet \
             send {bot} TEXT --nonce {key}` (the same text)"
        );
        ExitCode::from(exit::INTERRUPTED_SEND)
    };
    let mut cursor = seq;
    let mut deliveries: HashMap<String, Vec<Value>> = HashMap::new();
    // what runs over this message sent before another message interrupted
    // them: the reply it got may be there (the next turn sees it sent and
    // answers only the newer message)
    let mut earlier: Vec<Value> = Vec::new();
    let mut notices: HashMap<String, Value> = HashMap::new();
    // the host's `budget_exhausted` notice after the message, if read
    let mut pause_notice: Option<String> = None;
    // how long to wait for that notice, which the host writes just after
    // the message: a first read may come before it, and the signal of the
    // message itself may end a wait before it too (QA: the generic
    // "paused until" line where the notice was due)
    let mut notice_by: Option<Instant> = None;
    loop {
        // the host may be restarting: a failed poll waits for the next one
        let polled = timeout_at(deadline, client.entries_after(&session, cursor));
        let Some(polled) = or_interrupt(&mut sigint, polled).await else {
            return Ok(interrupted());
        };
        // a message sent before (the same key) may have been answered
        // before the pause: the entries after it say so first
        let read = matches!(&polled, Ok(Ok(_)));
        let polled = match polled {
            Ok(Ok(entries)) => entries,
            Ok(Err(e)) => {
                changes.poll_failed(e)?;
                Vec::new()
            }
            // no answer in the time left: the wait ends below
            Err(_elapsed) => Vec::new(),
        };
        // the newest turn of this read that ended over the message
        let mut answered: Option<Answered> = None;
        // a completed turn after it with later inputs: it had the message
        // in its context (a failed turn's message, answered so)
        let mut answered_later: Option<String> = None;
        for e in polled {
            cursor = cursor.max(e["seq"].as_i64().unwrap_or(cursor));
            let turn = e["turn"].as_str().unwrap_or("").to_owned();
            match e["kind"].as_str() {
                Some("delivery") => deliveries.entry(turn).or_default().push(e),
                // a paused bot writes this notice and no turn_end: its
                // reply waits for the end of the pause. Read on: a turn
                // that answered the message since (the pause ended, a
                // `--nonce` send) is its answer (QA: the old notice was
                // reported, exit 5, after the reply came)
                Some("notice") if e["code"] == "budget_exhausted" => {
                    pause_notice = e["text"].as_str().map(str::to_owned);
                    // the budget ran out in the turn over this message,
                    // after the host took it (its answer said nothing of
                    // a pause): paused now if the bot says so (QA: the
                    // notice was read and `send` waited out --timeout)
                    if paused_until.is_none() {
                        paused_until = timeout_at(deadline, bot_paused_until(client, bot))
                            .await
                            .ok()
                            .flatten();
                    }
                }
                Some("notice") => {
                    notices.insert(turn, e);
                }
                Some("turn_end") => {
                    let inputs: Vec<i64> = e["inputs"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default();
                    let ended = e["status"].as_str().unwrap_or("").to_owned();
                    let sent = deliveries.remove(&turn).unwrap_or_default();
                    if !inputs.contains(&seq) {
                        if answered.is_some()
                            && ended == "completed"
                            && inputs.iter().any(|s| *s > seq)
                        {
                            answered_later = Some(turn);
                        }
                        continue;
                    }
                    answered_later = None;
                    if ended == "interrupted" {
                        earlier.extend(sent);
                        continue;
                    }
                    let mut mine = std::mem::take(&mut earlier);
                    mine.extend(sent);
                    // not reported yet: a later turn_end in this read that
                    // lists the message is a retry of this turn (a failed,
                    // cancelled or undelivered one), and its outcome is the
                    // message's answer now (a `--nonce` send after the retry)
                    if let Some(before) = answered.take() {
                        let mut said = before.said;
                        said.extend(mine);
                        mine = said;
                    }
                    answered = Some(Answered {
                        turn,
                        status: ended,
                        said: mine,
                    });
                }
                _ => {}
            }
        }
        // a message sent again with its key after `botfleet retry TURN`:
        // the retry that runs now answers it, not the turn it retries
        let retrying = match (&answered, gid) {
            (Some(a), Some(gid)) if a.status != "completed" && outcome == "duplicate" => {
                timeout_at(deadline, retry_running(client, bot, &a.turn, gid))
                    .await
                    .unwrap_or(false)
            }
            _ => false,
        };
        if let Some(answered) = answered.filter(|_| !retrying) {
            let ended = outcome::Ended {
                turn: &answered.turn,
                status: &answered.status,
                notice: notices.get(&answered.turn),
                answered_later: answered_later
                    .as_deref()
                    .filter(|_| answered.status != "completed"),
            };
            return Ok(outcome::report(
                &ended,
                &answered.said,
                &session,
                seq,
                as_json,
            ));
        }
        // the bot is paused now (the host's answer says so): no reply
        // until the pause ends; a notice of a pause that ended is not
        // this one, and the wait goes on for the turn that answers
        if read && paused_until.is_some() {
            let by = *notice_by.get_or_insert_with(|| Instant::now() + NOTICE_WAIT);
            let left = by.min(deadline).saturating_duration_since(Instant::now());
            if pause_notice.is_none() && !left.is_zero() {
                // its signal comes within milliseconds when it is due; a
                // later message of the pause gets none, and its `send`
                // ends after this short wait
                let changed = changes.wait(&session, left);
                if or_interrupt(&mut sigint, changed).await.is_none() {
                    return Ok(interrupted());
                }
                continue;
            }
            let pause = outcome::Paused {
                bot,
                notice: pause_notice.as_deref(),
                until: paused_until,
            };
            return Ok(outcome::paused(&pause, &session, seq, as_json));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let lost = changes.lost_since();
            if as_json {
                let mut v =
                    json!({"status": "timeout", "session": session, "seq": seq, "nonce": key});
                if let Some(at) = lost {
                    v["host_unreachable_since"] = json!(at);
                }
                outln!("{}", super::terminal::json(&v));
            } else {
                errln!(
                    "no reply within {} s{}; your message is saved (seq {seq}); see `botfleet \
                     transcript {bot}`, or wait again with `botfleet send {bot} TEXT --nonce \
                     {key}` (the same text)",
                    timeout.as_secs(),
                    super::outcome::unreachable_since(lost)
                );
            }
            return Ok(ExitCode::from(exit::TIMEOUT));
        }
        // wait for a change of this session (or re-check every few seconds)
        let changed = changes.wait(&session, left.min(Duration::from_secs(5)));
        if or_interrupt(&mut sigint, changed).await.is_none() {
            return Ok(interrupted());
        }
    }
}

/// Longest wait, after a message to a paused bot, for the host's
/// `budget_exhausted` notice that follows the first message of a pause.
const NOTICE_WAIT: Duration = Duration::from_millis(500);

/// When `bot`'s pause for its spent daily token budget ends, if it is
/// paused now (its `paused_until` in `GET /v1/bots`); `None` when not, or
/// when the host did not answer.
async fn bot_paused_until(client: &Client, bot: &str) -> Option<i64> {
    let list = client.get("/v1/bots").await.ok()?;
    list["bots"].as_array()?.iter().find(|b| {
        b["id"]
            .as_str()
            .is_some_and(|id| id.eq_ignore_ascii_case(bot))
    })?["paused_until"]
        .as_i64()
}

/// Whether a turn later than `ended` runs, or ran, over the message of
/// `gid` (`GET /v1/bots/{bot}/turns` lists its inputs' gids, newest
/// first): a retry of the turn that ended over it. One that ended since
/// the entries were read counts too: the next read holds its end (a
/// retry that ended between that read and this one was missed, and the
/// old failure printed; CI). Unknown (the host did not answer) is
/// `false`.
async fn retry_running(client: &Client, bot: &str, ended: &str, gid: i64) -> bool {
    let path = format!("/v1/bots/{}/turns", crate::client::segment(bot));
    let Ok(list) = client.get(&path).await else {
        return false;
    };
    let over_it = |t: &Value| {
        t["inputs"]
            .as_array()
            .is_some_and(|inputs| inputs.contains(&json!(gid)))
    };
    let Some(turns) = list["turns"].as_array() else {
        return false;
    };
    match turns.iter().position(|t| t["id"] == ended) {
        // the turns listed before it are later
        Some(at) => turns[..at].iter().any(over_it),
        // past the listing's page: only a running one is known later
        None => turns.iter().any(|t| t["status"] == "running" && over_it(t)),
    }
}

/// Ctrl-C (SIGINT), caught from now on; `None` when it cannot be (the
/// command then dies of it, as before).
pub(super) fn sigint() -> Option<Signal> {
    tokio::signal::unix::signal(SignalKind::interrupt()).ok()
}

/// `fut`'s output, or `None` when Ctrl-C (SIGINT) comes first.
pub(super) async fn or_interrupt<T>(
    sigint: &mut Option<Signal>,
    fut: impl Future<Output = T>,
) -> Option<T> {
    match sigint {
        Some(sigint) => tokio::select! {
            out = fut => Some(out),
            _ = sigint.recv() => None,
        },
        None => Some(fut.await),
    }
}

/// A turn that ended over the message `send` waits for: its id, its
/// status, and what it (and turns before it over the message) delivered.
struct Answered {
    turn: String,
    status: String,
    said: Vec<Value>,
}

/// A message of `send` or `group send`, posted within `--timeout`.
pub(super) struct Posted<'a> {
    /// The host's answer to the post.
    pub status: StatusCode,
    pub body: Value,
    /// The change signals, subscribed to before the post.
    pub changes: events::Changes<'a>,
    /// When `--timeout` runs out, counted from the start of the command.
    pub deadline: Instant,
    /// A `duplicate` answer is this command's own attempt that got no
    /// answer (the key is one it made up, and it sent the message again):
    /// no news to the person, unlike a key they reused.
    pub own_duplicate: bool,
    /// The message's idempotency key (`--nonce`, or the one made up).
    pub key: String,
}

/// Subscribes to the host's change signals (so none is missed), then posts
/// `{"text": text}` to `path` with the idempotency key `nonce` (or a new
/// one), both within `timeout`. When it runs out first, the command ends:
/// `Err` with its exit code, what happened printed.
///
/// A post that got no answer (the host went away after the subscription:
/// it may have taken the message, and died before its answer reached us)
/// is sent again with the same key until `timeout`: the host admits a key
/// once, and answers `duplicate` if the lost attempt got through.
pub(super) async fn subscribe_and_post<'a>(
    client: &'a Client,
    path: &str,
    text: &str,
    nonce: Option<&str>,
    as_json: bool,
    timeout: Duration,
) -> anyhow::Result<Result<Posted<'a>, ExitCode>> {
    let deadline = Instant::now() + timeout;
    let key = nonce
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let Some(mut changes) = events::Changes::subscribe(client, deadline).await? else {
        return Ok(Err(not_sent_in_time(timeout, as_json)));
    };
    let body = json!({ "text": text });
    let mut resent = false;
    let (status, body) = loop {
        let Ok(posted) = timeout_at(deadline, client.post(path, &body, Some(&key))).await else {
            return Ok(Err(post_unanswered(timeout, &key, as_json)));
        };
        match posted {
            Ok(answer) => break answer,
            Err(e) if e.is::<NoAnswer>() => {
                changes.pause_after_no_answer(deadline).await;
                resent = true;
            }
            Err(e) => return Err(e),
        }
    };
    Ok(Ok(Posted {
        status,
        body: name_the_key(body, &key),
        changes,
        deadline,
        own_duplicate: resent && nonce.is_none(),
        key,
    }))
}

/// What the host's refusal of a message says to do when sending it again
/// is safe (`507 storage_full`, `503 storage_error`: nothing was saved).
const SAME_KEY: &str = "the same Idempotency-Key";

/// The host's answer `body`, its advice to send the message again with
/// [`SAME_KEY`] naming the key this command used (`--nonce KEY`): one the
/// CLI made up (no `--nonce`) was never shown to the person told to reuse
/// it.
fn name_the_key(mut body: Value, key: &str) -> Value {
    if let Some(Value::String(message)) = body.pointer_mut("/error/message")
        && message.contains(SAME_KEY)
        && !message.contains("--nonce")
    {
        *message = message.replacen(SAME_KEY, &format!("{SAME_KEY} (`--nonce {key}`)"), 1);
    }
    body
}

/// Ends a `send` or `group send` whose `--timeout` passed before the host
/// answered the subscription to its change signals: the message was not
/// sent. An error (1), not "saved, no reply yet" (5), so a script that
/// keys on the code sends it again.
fn not_sent_in_time(timeout: Duration, as_json: bool) -> ExitCode {
    let message = format!(
        "the host did not answer within {} s; your message was not sent",
        timeout.as_secs()
    );
    if as_json {
        outln!(
            "{}",
            super::terminal::json(
                &json!({"status": "error", "sent": false, "error": {"message": message}})
            )
        );
    }
    // on stderr with `--json` too, as every other error (QA)
    errln!("error: {message}");
    ExitCode::from(exit::ERROR)
}

/// Ends a `send` or `group send` whose `--timeout` passed while the host
/// held the message's POST: it may or may not be saved, and sending it
/// again with the same key admits it at most once. An error (1).
fn post_unanswered(timeout: Duration, key: &str, as_json: bool) -> ExitCode {
    let message = format!(
        "the host did not answer the message within {} s; it may or may not be saved: send \
         it again with `--nonce {key}` (the same key is admitted once)",
        timeout.as_secs()
    );
    if as_json {
        outln!(
            "{}",
            super::terminal::json(
                &json!({"status": "error", "sent": null, "nonce": key, "error": {"message": message}})
            )
        );
    }
    // on stderr with `--json` too, as every other error (QA)
    errln!("error: {message}");
    ExitCode::from(exit::ERROR)
}
