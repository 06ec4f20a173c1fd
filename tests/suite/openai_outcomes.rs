//! Answers from an OpenAI-compatible server that a turn cannot act on as
//! they are: a refusal, an answer cut off at the token limit (finish
//! reason `length`) and one stopped by a content filter. Through a host,
//! against the loopback server, streamed and not.

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::RecordedRequest;
use crate::support::openai_server::Reply;
use crate::support::process::cli;

/// A host whose bot `r` (SendMessage) talks to `server`.
pub(super) async fn host(server: &OpenAiServer, stream: bool) -> TestHost {
    TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            &format!("stream = {stream}\nmax_retries = 0"),
        )
        .bot("r", "main", &["SendMessage"])
        .start()
        .await
}

/// Sends `text` to `r` and waits for the end of the turn answering it;
/// returns the session's entries and the turn_end entry.
pub(super) async fn turn(host: &TestHost, text: &str) -> (Vec<Value>, Value) {
    let (session, end) = host.end_turn("r", text).await;
    (host.entries(&session).await, end)
}

fn notices(entries: &[Value]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "notice")
        .map(|e| {
            (
                e["code"].as_str().unwrap_or("").to_owned(),
                e["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The content of the tool message answering `call` in `request`.
fn tool_result<'a>(request: &'a RecordedRequest, call: &str) -> &'a str {
    request
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {call}: {:#}", request.body))
}

/// Regression: a refusal was dropped (in no entry, not in the store); the
/// model was reminded to reply, and the turn ended `undelivered` with no
/// word of the refusal. The person now sees it in a `model_refused`
/// notice, the turn fails (retryable) and the refusal is the step's text.
#[tokio::test]
async fn a_refusal_is_shown_to_the_person_and_fails_the_turn() {
    for stream in [true, false] {
        let server = OpenAiServer::builder()
            .reply(Reply::refusal("I'm sorry, I can't help with that."))
            .responder(|_| Reply::text(""))
            .start()
            .await;
        let host = host(&server, stream).await;
        let (entries, end) = turn(&host, "do the forbidden thing").await;
        assert_eq!(end["status"], "failed", "stream {stream}: {end}");
        let turn = end["turn"].as_str().unwrap();
        let notice = entries
            .iter()
            .find(|e| e["kind"] == "notice")
            .unwrap_or_else(|| panic!("stream {stream}: {entries:#?}"));
        assert_eq!(notice["code"], "model_refused", "{notice}");
        assert_eq!(notice["retry_turn"], turn, "{notice}");
        let text = notice["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "The model refused to answer your message: I'm sorry, I can't help with that."
            ) && text.contains(&format!("`botfleet retry {turn}`")),
            "{text}"
        );
        let noted: Vec<&Value> = entries
            .iter()
            .filter(|e| e["kind"] == "assistant")
            .map(|e| &e["text"])
            .collect();
        assert_eq!(noted, ["I'm sorry, I can't help with that."]);
        // no reminder: the refusal is the model's answer
        assert_eq!(server.request_count(), 1, "stream {stream}");
        host.shutdown().await;
        server.shutdown().await;
    }
}

/// Regression: an empty answer cut off at the token limit was taken for
/// a normal stop: the model was told it had not replied, with no word of
/// the limit. It is told its answer was cut off, and goes on.
#[tokio::test]
async fn an_answer_cut_off_at_the_token_limit_is_retried_with_a_reminder() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("Let me write a very long").finish("length"))
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text":"short"}"#))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (entries, end) = turn(&host, "write an essay").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["short"]);
    assert_eq!(notices(&entries), Vec::<(String, String)>::new());
    let requests = server.requests();
    let told = requests[1].messages().last().unwrap();
    assert_eq!(told["role"], "user", "{told}");
    assert!(
        told["content"].as_str().unwrap().starts_with(
            "[runtime reminder] Your last answer was cut off at the output token limit (max tokens)"
        ),
        "{told}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A turn's answers: a reply (SendMessage `text` as call `id`), then two
/// answers cut off at the token limit, which stop the turn after it.
fn reply_then_cut_twice(id: &str, text: &str) -> [Reply; 3] {
    [
        Reply::tool_call(
            id,
            "SendMessage",
            serde_json::json!({ "text": text }).to_string(),
        ),
        Reply::text("and more").finish("length"),
        Reply::text("and more again").finish("length"),
    ]
}

/// A second cut-off after the turn delivered ends it `completed`, as a
/// model call that fails after the reply does (5fe6031): the person has
/// the reply, and a retry would answer twice. (Before, the turn failed
/// with a retry.)
#[tokio::test]
async fn a_second_cut_off_after_the_reply_ends_the_turn_completed_without_a_retry() {
    let server = OpenAiServer::builder()
        .replies(reply_then_cut_twice("c1", "the answer"))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (entries, end) = turn(&host, "write an essay").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["the answer"]);
    let [(code, text)] = notices(&entries)
        .try_into()
        .unwrap_or_else(|n| panic!("{n:?}"));
    assert_eq!(code, "failed_after_reply");
    assert!(text.contains("a second time in this turn"), "{text}");
    let notice = entries.iter().find(|e| e["kind"] == "notice").unwrap();
    assert!(notice["retry_turn"].is_null(), "{notice}");
    host.shutdown().await;
    server.shutdown().await;
}

/// `botfleet send` shows the notice of a turn that completed with one
/// (QA: a turn that stopped after its reply printed the reply and exited
/// 0, and the notice written for the person stayed in the transcript; a
/// CLI user took the bot to be still working).
#[tokio::test]
async fn send_shows_the_notice_of_a_turn_that_stopped_after_its_reply() {
    let server = OpenAiServer::builder()
        .replies(reply_then_cut_twice("c1", "Working on it"))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (code, out, err) = cli(&["send", "r", "check the logs"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "Working on it");
    assert!(err.contains("the bot stopped after it"), "{err}");
    for reply in reply_then_cut_twice("c2", "Working on it") {
        server.push_reply(reply);
    }
    let (code, out, err) = cli(
        &["send", "r", "check the logs", "--json", "--nonce", "n2"],
        host.url.as_str(),
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert!(
        v["notice"]
            .as_str()
            .is_some_and(|n| n.contains("the bot stopped after it")),
        "{v}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: a tool call cut off at the token limit was answered
/// "arguments are not valid JSON", and an answer that kept hitting the
/// limit ended `undelivered` with no word of it. The call is answered as
/// cut off (not run), and a second cut-off fails the turn naming the limit.
#[tokio::test]
async fn a_second_cut_off_fails_the_turn_naming_the_limit() {
    for stream in [true, false] {
        let server = OpenAiServer::builder()
            .reply(
                Reply::tool_call("c1", "SendMessage", r#"{"text":"a very long ans"#)
                    .finish("length"),
            )
            .reply(Reply::text("").finish("length"))
            .responder(|_| Reply::text(""))
            .start()
            .await;
        let host = host(&server, stream).await;
        let (entries, end) = turn(&host, "write an essay").await;
        assert_eq!(end["status"], "failed", "stream {stream}: {end}");
        assert_eq!(deliveries(&entries), Vec::<String>::new());
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "stream {stream}");
        let result = tool_result(&requests[1], "c1");
        assert!(
            result.starts_with(
                "not run: your answer was cut off at the output token limit (max tokens)"
            ),
            "{result}"
        );
        let [(code, text)] = notices(&entries)
            .try_into()
            .unwrap_or_else(|n| panic!("{n:?}"));
        assert_eq!(code, "turn_failed");
        assert!(
            text.contains(
                "the model's answer was cut off at its output token limit (max tokens, finish \
                 reason length) a second time in this turn"
            ),
            "{text}"
        );
        host.shutdown().await;
        server.shutdown().await;
    }
}

/// Regression: an answer stopped by the provider's content filter was
/// taken for a normal stop. The turn fails saying so.
#[tokio::test]
async fn a_content_filter_stop_fails_the_turn_saying_so() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("Here is how to").finish("content_filter"))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (entries, end) = turn(&host, "something filtered").await;
    assert_eq!(end["status"], "failed", "{end}");
    let [(code, text)] = notices(&entries)
        .try_into()
        .unwrap_or_else(|n| panic!("{n:?}"));
    assert_eq!(code, "turn_failed");
    assert!(
        text.contains("the provider's content filter stopped the model's answer"),
        "{text}"
    );
    assert_eq!(server.request_count(), 1);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (QA): the tokens of a refused answer and of one the content
/// filter stopped were never counted (the bot's usage and its daily
/// budget did not move), though the provider bills them, and an answer
/// cut off at the token limit was counted. Both count now.
#[tokio::test]
async fn a_refused_or_filtered_answer_counts_its_tokens() {
    for (what, reply) in [
        ("refused", Reply::refusal("I can't help with that.")),
        (
            "filtered",
            Reply::text("Here is how to").finish("content_filter"),
        ),
    ] {
        let server = OpenAiServer::builder()
            .reply(reply.usage(7_000, 300))
            .responder(|_| Reply::text(""))
            .start()
            .await;
        let host = host(&server, true).await;
        let (_, end) = turn(&host, "something").await;
        assert_eq!(end["status"], "failed", "{what}: {end}");
        let (_, bots) = host.get("/v1/bots", crate::support::fleet::TOKEN).await;
        let r = bots["bots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == "r")
            .unwrap();
        let today = &r["usage"]["today"];
        assert_eq!(today["prompt_tokens"], 7_000, "{what}: {r:#}");
        assert_eq!(today["completion_tokens"], 300, "{what}: {r:#}");
        host.shutdown().await;
        server.shutdown().await;
    }
}

/// Regression (QA, 2026-12-05): a turn that ended undelivered after its
/// reminder, the model answering nothing to it, left the reminder as the
/// newest message, and the next turn's request ran it into the person's
/// next message ("[runtime reminder] You ended your turn without sending
/// anything … \n\n second"). A reminder nothing answered is dropped when
/// a new input comes, after a restart too; one the model answered stays.
#[tokio::test]
async fn a_reminder_nothing_answered_does_not_run_into_the_next_message() {
    let server = OpenAiServer::builder()
        // turn 1: a private note, then nothing after the reminder
        .reply(Reply::text("thinking it over"))
        .reply(Reply::text(""))
        // turn 2
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text":"hi"}"#))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (_, end) = turn(&host, "first").await;
    assert_eq!(end["status"], "undelivered", "{end}");
    let (_, end) = turn(&host, "second").await;
    assert_eq!(end["status"], "completed", "{end}");
    let requests = server.requests();
    assert!(
        requests[1].body.to_string().contains("[runtime reminder]"),
        "the reminder is sent in its own turn"
    );
    let next = &requests[2];
    assert!(
        !next.body.to_string().contains("[runtime reminder]"),
        "{}",
        next.body
    );
    let last = next.messages().last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert!(
        last["content"].as_str().unwrap().ends_with("second"),
        "{last}"
    );
    // the context rebuilt from the store after a restart drops it alike
    let fleet = host.shutdown().await;
    let host = crate::support::fleet::restart(fleet).await;
    let _ = turn(&host, "third").await;
    let rebuilt = &server.requests()[3];
    assert!(
        !rebuilt.body.to_string().contains("[runtime reminder]"),
        "{}",
        rebuilt.body
    );
    assert!(rebuilt.body.to_string().contains("thinking it over"));
    host.shutdown().await;
    server.shutdown().await;
}

/// The same after a person cancels the turn while the model is answering
/// its reminder (QA, 2026-12-05: the reminder stayed, glued to every
/// later message of the session).
#[tokio::test]
async fn a_reminder_of_a_cancelled_turn_does_not_run_into_the_next_message() {
    let (release, held) = tokio::sync::watch::channel(false);
    let server = OpenAiServer::builder()
        .reply(Reply::text("thinking it over"))
        // the answer to the reminder: held until the turn is cancelled
        .reply(Reply::text("").hold_until(held))
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text":"hi"}"#))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (_, sent) = host.send("r", "first", None).await;
    // the reminder's request has come (its answer is held)
    server.wait_for_requests(2).await;
    assert!(
        server.requests()[1]
            .body
            .to_string()
            .contains("[runtime reminder]")
    );
    cancel_running(&host, &sent).await;
    let _ = release.send(true);
    let (_, end) = turn(&host, "second").await;
    assert_eq!(end["status"], "completed", "{end}");
    let next = server.requests().last().cloned().unwrap();
    assert!(
        !next.body.to_string().contains("[runtime reminder]"),
        "{}",
        next.body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The same after a turn that asked another bot and said nothing to its
/// reminder to tell the person so: it ends `completed` (the replies will
/// wake it), and its reminder ("You asked a and ended your turn without
/// a word …") ran into the reply that woke it.
#[tokio::test]
async fn a_reminder_of_a_turn_awaiting_replies_does_not_run_into_the_reply() {
    let server = OpenAiServer::builder()
        // r asks a, then says nothing, nor to its reminder
        .reply(Reply::tool_call(
            "c1",
            "SendToAgent",
            r#"{"agent":"a","text":"argue for tea"}"#,
        ))
        .reply(Reply::text(""))
        .reply(Reply::text(""))
        // woken by a's reply
        .reply(Reply::tool_call("c2", "SendMessage", r#"{"text":"tea"}"#))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "stream = true\nmax_retries = 0")
        .script(
            "s",
            r#"
[[rule]]
bot = "a"
steps = [ { tool = "SendMessage", args = { text = "TEA: it calms" } } ]
"#,
        )
        .bot("r", "main", &["SendMessage", "SendToAgent"])
        .bot("a", "s", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "tea or coffee?").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert!(
        server.requests()[2]
            .body
            .to_string()
            .contains("[runtime reminder] You asked a"),
        "the reminder is sent in its own turn"
    );
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "tea")
            .then_some(json!(true))
    })
    .await;
    let woken = &server.requests()[3];
    assert!(
        !woken.body.to_string().contains("[runtime reminder]"),
        "{}",
        woken.body
    );
    assert!(
        woken.body.to_string().contains("TEA: it calms"),
        "{}",
        woken.body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Cancels r's running turn over the message `sent` answered as a
/// person does, and waits for its end, `cancelled`.
async fn cancel_running(host: &TestHost, sent: &Value) -> Value {
    let (status, cancelled) = host
        .post_raw("/v1/bots/r/cancel", Some(TOKEN), None, "")
        .await;
    assert_eq!(
        (status, &cancelled["cancelled"]),
        (200, &json!(true)),
        "{cancelled}"
    );
    let session = sent["session"].as_str().unwrap();
    let end = host
        .wait_turn_end(session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "cancelled", "{end}");
    end
}

/// A host whose bot `r` answers every message with SendMessage `reply`,
/// after a first message, "delete the old backups", whose turn a person
/// cancelled while the model answered it: the server, the host, the
/// session and that turn's end.
/// A server that answers with `first`, one each, then every message with
/// SendMessage `reply` (and a call's result with a plain stop).
async fn sending_after(first: Vec<Reply>, reply: &str) -> OpenAiServer {
    let args = json!({ "text": reply }).to_string();
    OpenAiServer::builder()
        .replies(first)
        .responder(move |request| {
            let last = request["messages"].as_array().unwrap().last().unwrap();
            if last["role"] == "tool" {
                Reply::text("")
            } else {
                Reply::tool_call("c", "SendMessage", args.clone())
            }
        })
        .start()
        .await
}

async fn cancelled_first(reply: &str) -> (OpenAiServer, TestHost, String, Value) {
    let (release, held) = tokio::sync::watch::channel(false);
    // the answer to "delete the old backups": held until cancelled
    let server = sending_after(vec![Reply::text("").hold_until(held)], reply).await;
    let host = host(&server, true).await;
    let (_, sent) = host.send("r", "delete the old backups", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    server.wait_for_requests(1).await;
    let end = cancel_running(&host, &sent).await;
    let _ = release.send(true);
    (server, host, session, end)
}

/// Regression (QA, 2026-12-05): a message whose turn the person cancelled
/// before it answered was in the next turn's context as if still asked,
/// run into the new message, and the bot did what they had stopped. The
/// next input is now told it was not done and not to do it unless asked
/// again, after a restart too; a retry of that turn is not told so.
#[tokio::test]
async fn a_cancelled_message_is_not_taken_as_still_asked() {
    let (server, host, _, _) = cancelled_first("noon").await;
    let (_, end) = turn(&host, "what time is it?").await;
    assert_eq!(end["status"], "completed", "{end}");
    let next = server.requests()[1].clone();
    let last = next.messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let note = last.find("[runtime note] The person stopped your turn");
    let asked = last.find("what time is it?");
    assert!(
        note.is_some() && asked.is_some() && note < asked,
        "{}",
        next.body
    );
    // the context rebuilt from the store says so alike
    let fleet = host.shutdown().await;
    let host = crate::support::fleet::restart(fleet).await;
    let _ = turn(&host, "and the date?").await;
    let rebuilt = server.requests().last().cloned().unwrap();
    assert!(
        rebuilt
            .body
            .to_string()
            .contains("[runtime note] The person stopped your turn"),
        "{}",
        rebuilt.body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (QA, 2026-12-05): the cancel note spoke of "the message(s)
/// above", which covered an earlier message whose turn had failed (the
/// person told it was saved, to retry) as well as the cancelled one: the
/// model was told not to do it. The note names the cancelled messages.
#[tokio::test]
async fn the_cancel_note_names_only_the_cancelled_messages() {
    let (release, held) = tokio::sync::watch::channel(false);
    let server = sending_after(
        vec![
            Reply::error(400, "this test refuses the first message"),
            Reply::text("").hold_until(held),
        ],
        "ok",
    )
    .await;
    let host = host(&server, true).await;
    let (_, failed) = turn(&host, "A: please email Bob the report").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let (_, sent) = host.send("r", "B: also book a room", None).await;
    server.wait_for_requests(2).await;
    let end = cancel_running(&host, &sent).await;
    assert_eq!(end["status"], "cancelled", "{end}");
    let _ = release.send(true);
    let (_, end) = turn(&host, "C: thanks").await;
    assert_eq!(end["status"], "completed", "{end}");
    // the request answering C (the one after it reads the call's result)
    let text = server
        .requests()
        .iter()
        .filter_map(|r| r.messages().last()?["content"].as_str().map(str::to_owned))
        .find(|t| t.contains("C: thanks"))
        .unwrap();
    assert!(
        text.contains(
            "The person stopped your turn on the message(s) \u{201c}B: also book a room\u{201d} \
             before you answered"
        ) && !text.contains("stopped your turn on the message(s) above"),
        "{text}"
    );
    // and that work handed on for it was not stopped (QA: a subagent's
    // report came after "what they asked there was not done")
    assert!(
        text.contains("was not stopped with your turn and may still report"),
        "{text}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A retry of a cancelled turn asks its message again: its request does
/// not tell the model the message was not to be done.
#[tokio::test]
async fn a_retried_cancelled_turn_is_asked_again() {
    let (server, host, session, end) = cancelled_first("done").await;
    let turn_id = end["turn"].as_str().unwrap();
    let (status, body) = host
        .post_raw(
            &format!("/v1/turns/{turn_id}/retry"),
            Some(TOKEN),
            None,
            "{}",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "done")
            .then_some(json!(true))
    })
    .await;
    let retried = server.requests()[1].clone();
    assert!(
        !retried.body.to_string().contains("[runtime note]")
            && retried.body.to_string().contains("delete the old backups"),
        "{}",
        retried.body
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The scripted model neither matches nor echoes that note: it is the
/// runtime's, not something anyone said.
#[tokio::test]
async fn the_scripted_model_does_not_echo_the_cancel_note() {
    let host = TestFleet::new()
        .script(
            "s",
            r#"
[[rule]]
match = "^slow"
steps = [ { delay_ms = 60000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
match = "^hi"
steps = [ { tool = "SendMessage", args = { text = "said: {{inputs}}" } } ]
"#,
        )
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (_, sent) = host.send("r", "slow job", None).await;
    host.wait_get("/v1/bots", |v| {
        let r = v["bots"].as_array()?.iter().find(|b| b["id"] == "r")?;
        r["running_turn"].is_string().then_some(json!(true))
    })
    .await;
    cancel_running(&host, &sent).await;
    let (entries, end) = turn(&host, "hi there").await;
    assert_eq!(end["status"], "completed", "{end}");
    let said = deliveries(&entries);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("said: ") && !said[0].contains("[runtime note]"),
        "{said:?}"
    );
    host.shutdown().await;
}
