//! How a turn ends when the model's last steps go wrong, against the
//! loopback OpenAI server: a tool call written as text (the server did not
//! parse it into a call) is answered with its own reminder and never run;
//! a plain text reply still gets the delivery reminder; a model call that
//! fails after the reply was delivered ends the turn `completed`, with a
//! notice that offers no retry, and so do a refusal, a second loop and the
//! repeated-call guard's end after the reply.

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::openai_server::user_texts;

/// How prompts/written_call_reminder.md starts.
const WRITTEN_CALL: &str =
    "[runtime reminder] Your last message wrote a call to SendMessage as text.";

/// How prompts/delivery_reminder.md starts.
const DELIVERY: &str = "[runtime reminder] You ended your turn without sending anything";

/// Calls to SendMessage written as text, in the shapes of the chat
/// templates of servers that did not parse them.
const WRITTEN_CALLS: [&str; 7] = [
    // Hermes, Qwen
    "<tool_call>\n{\"name\": \"SendMessage\", \"arguments\": {\"text\": \"as text\"}}\n</tool_call>",
    // a bare JSON call (Llama 3.x writes `parameters`)
    "{\"name\": \"SendMessage\", \"parameters\": {\"text\": \"as text\"}}",
    // the same in a fence
    "Sure.\n```json\n{\"name\": \"SendMessage\", \"arguments\": {\"text\": \"as text\"}}\n```",
    // gpt-oss harmony
    "<|channel|>commentary to=functions.SendMessage <|constrain|>json<|message|>{\"text\": \"as text\"}<|call|>",
    "functions.SendMessage:\n{\"text\": \"as text\"}",
    // Mistral, old and new
    "[TOOL_CALLS][{\"name\": \"SendMessage\", \"arguments\": {\"text\": \"as text\"}}]",
    "[TOOL_CALLS]SendMessage[ARGS]{\"text\": \"as text\"}",
];

/// A host whose bot `r` (SendMessage) talks to `server`.
async fn host(server: &OpenAiServer, extra: &str) -> TestHost {
    TestFleet::new()
        .openai("main", &server.base_url(), extra)
        .bot("r", "main", &["SendMessage"])
        .start()
        .await
}

/// The reminders of a session's entries, in order.
fn reminders(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .filter(|e| e["kind"] == "reminder")
        .map(|e| e["text"].as_str().unwrap_or(""))
        .collect()
}

/// Regression: a call the model wrote as text (its server lacked the
/// tool-call parser) got the generic delivery reminder ("send your answer
/// with the SendMessage tool"), which a model that believes it just did so
/// answers with the same text, and the turn ended `undelivered`. It is
/// told that its call was written as text and did not run; its real call
/// after that delivers, and the text call itself never ran.
#[tokio::test]
async fn a_call_written_as_text_is_told_so_and_the_real_call_delivers() {
    // the person's message is the index of the shape to write; a real
    // call only after the written-call reminder, text after any other
    let server = OpenAiServer::builder()
        .responder(|request| {
            let last = last_message(request).cloned().unwrap_or_default();
            if last["role"] == "tool" {
                return Reply::text("");
            }
            let said = last_user_text(request).unwrap_or("");
            if said.starts_with(WRITTEN_CALL) {
                return Reply::tool_call("c1", "SendMessage", r#"{"text": "the answer"}"#);
            }
            let shape = said.parse::<usize>().unwrap_or(0);
            Reply::text(WRITTEN_CALLS[shape])
        })
        .start()
        .await;
    let host = host(&server, "max_retries = 0").await;
    let mut session = String::new();
    for (shape, written) in WRITTEN_CALLS.iter().enumerate() {
        let (s, end) = host.end_turn("r", &shape.to_string()).await;
        let entries = host.entries(&s).await;
        assert_eq!(end["status"], "completed", "{written}: {entries:#?}");
        let last = reminders(&entries).last().copied().unwrap_or("");
        assert!(last.starts_with(WRITTEN_CALL), "{written}: {last}");
        session = s;
    }
    // each turn delivered its real call; no call written as text ran
    assert_eq!(
        deliveries(&host.entries(&session).await),
        vec!["the answer"; WRITTEN_CALLS.len()]
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A text reply that is no call (prose naming a tool, or JSON calling a
/// tool the bot does not have) still gets the delivery reminder, and ends
/// `undelivered` when the model keeps to text.
#[tokio::test]
async fn a_plain_text_reply_still_gets_the_delivery_reminder() {
    let texts = [
        "I will answer with SendMessage once I know more.",
        "{\"name\": \"Shell\", \"arguments\": {\"command\": \"ls\"}}",
    ];
    // the person's message is the index of the text to answer with, also
    // after the reminder
    let server = OpenAiServer::builder()
        .responder(move |request| {
            let asked = user_texts(request)
                .into_iter()
                .rev()
                .find(|t| !t.starts_with("[runtime reminder]"))
                .and_then(|t| t.parse::<usize>().ok())
                .unwrap_or(0);
            Reply::text(texts[asked])
        })
        .start()
        .await;
    let host = host(&server, "max_retries = 0").await;
    for (i, text) in texts.iter().enumerate() {
        let (session, end) = host.end_turn("r", &i.to_string()).await;
        let entries = host.entries(&session).await;
        assert_eq!(end["status"], "undelivered", "{text}: {entries:#?}");
        let reminded = reminders(&entries);
        assert_eq!(reminded.len(), i + 1, "{text}: {entries:#?}");
        assert!(reminded[i].starts_with(DELIVERY), "{text}: {}", reminded[i]);
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: the person had the complete answer (SendMessage ran), the
/// next model call, the one that would have ended the turn, failed past
/// its retries, and the turn failed: "I could not finish working on your
/// message … retry it" under the answer, a retry that would answer
/// twice, and `botfleet send` exiting 3. The turn ends `completed` with
/// its error kept on it, and a notice without a retry says the bot
/// stopped after its reply.
#[tokio::test]
async fn a_failed_call_after_the_reply_ends_the_turn_completed_without_a_retry() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call(
            "c1",
            "SendMessage",
            r#"{"text": "the answer is 42"}"#,
        ))
        .responder(|_| Reply::error(500, "upstream down").retry_after("0"))
        .start()
        .await;
    let host = host(&server, "max_retries = 1").await;
    let (session, end) = host.end_turn("r", "what is the answer?").await;
    let entries = host.entries(&session).await;
    // the reply, then the call that failed and its one retry
    assert_eq!(server.requests().len(), 3);
    replied_then_completed(&entries, &end);
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice")
        .and_then(|e| e["text"].as_str())
        .unwrap_or("");
    assert!(
        notice.starts_with("The bot's reply above was delivered") && notice.contains("500"),
        "{notice}"
    );
    // the error stays on the turn for the operator
    let turn = end["turn"].as_str().unwrap_or("");
    let (status, body) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["turn"]["status"], "completed", "{body}");
    assert!(
        body["turn"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("500")),
        "{body}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The notices of a session's entries: their codes and `retry_turn`s.
/// Asserts that the turn `end` closed ended `completed` after its one
/// reply, "the answer is 42", with one `failed_after_reply` notice that
/// offers no retry.
fn replied_then_completed(entries: &[Value], end: &Value) {
    assert_eq!(end["status"], "completed", "{entries:#?}");
    assert_eq!(deliveries(entries), ["the answer is 42"]);
    assert_eq!(
        notices(entries),
        [("failed_after_reply", &Value::Null)],
        "{entries:#?}"
    );
}

/// The notices of `entries`: their code, and the turn they offer to retry.
pub(super) fn notices(entries: &[Value]) -> Vec<(&str, &Value)> {
    entries
        .iter()
        .filter(|e| e["kind"] == "notice")
        .map(|e| (e["code"].as_str().unwrap_or(""), &e["retry_turn"]))
        .collect()
}

/// The notice text and the turn's error after a turn that ended
/// `completed` past its reply.
async fn after_reply(host: &TestHost, entries: &[Value], end: &Value) -> (String, String) {
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice")
        .and_then(|e| e["text"].as_str())
        .unwrap_or("")
        .to_owned();
    let turn = end["turn"].as_str().unwrap_or("");
    let (status, body) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["turn"]["status"], "completed", "{body}");
    let error = body["turn"]["error"].as_str().unwrap_or("").to_owned();
    (notice, error)
}

/// Regression (round 23): as with a failed call, the model refusing the
/// step after the reply failed the turn with a `model_refused` notice
/// offering a retry, which would answer twice. The turn ends `completed`,
/// the refusal kept as the step's text and on the turn, with one notice
/// without a retry.
#[tokio::test]
async fn a_refusal_after_the_reply_ends_the_turn_completed_without_a_retry() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call(
            "c1",
            "SendMessage",
            r#"{"text": "the answer is 42"}"#,
        ))
        .responder(|_| Reply::refusal("I can't continue with this"))
        .start()
        .await;
    let host = host(&server, "max_retries = 0").await;
    let (session, end) = host.end_turn("r", "what is the answer?").await;
    let entries = host.entries(&session).await;
    assert_eq!(server.requests().len(), 2);
    replied_then_completed(&entries, &end);
    // the refusal is the step's text: later turns see that it declined
    assert!(
        entries.iter().any(|e| e["kind"] == "assistant"
            && e["text"].as_str() == Some("I can't continue with this")),
        "{entries:#?}"
    );
    let (notice, error) = after_reply(&host, &entries, &end).await;
    assert!(
        notice.starts_with("The bot's reply above was delivered")
            && notice.contains("I can't continue with this"),
        "{notice}"
    );
    assert!(error.contains("refused"), "{error}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 23): the model's output looping again after its loop
/// reminder, once the reply was out, failed the turn with a retry. The
/// turn ends `completed`, with one notice without a retry; the looping
/// text is not kept.
#[tokio::test]
async fn a_second_loop_after_the_reply_ends_the_turn_completed_without_a_retry() {
    let looping = "I will repeat this sentence forever. ".repeat(500);
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call(
            "c1",
            "SendMessage",
            r#"{"text": "the answer is 42"}"#,
        ))
        .responder(move |_| Reply::text(looping.clone()))
        .start()
        .await;
    let host = host(&server, "max_retries = 0").await;
    let (session, end) = host.end_turn("r", "what is the answer?").await;
    let entries = host.entries(&session).await;
    // the reply, the loop, the loop after its reminder
    assert_eq!(server.requests().len(), 3);
    assert_eq!(end["status"], "completed", "{entries:#?}");
    assert_eq!(deliveries(&entries), ["the answer is 42"]);
    assert_eq!(reminders(&entries).len(), 1, "{entries:#?}");
    assert_eq!(
        notices(&entries),
        [("failed_after_reply", &Value::Null)],
        "{entries:#?}"
    );
    let (notice, error) = after_reply(&host, &entries, &end).await;
    assert!(notice.contains("kept looping"), "{notice}");
    assert!(error.contains("kept looping"), "{error}");
    assert!(
        entries
            .iter()
            .all(|e| !e["text"].as_str().unwrap_or("").contains("forever. I will")),
        "{entries:#?}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 24): the model sending its reply again and again
/// after it was delivered: the repeated-call guard refused the call, then
/// ended the turn `failed` with a `turn_failed` notice offering a retry,
/// which would answer twice (a failed call, a refusal or a second loop
/// after the reply already ended it `completed`). It ends `completed`,
/// with the guard's reason kept on the turn and one notice without a
/// retry, and a retry of it is refused as for any completed turn.
#[tokio::test]
async fn the_repeated_call_guard_after_the_reply_ends_the_turn_completed_without_a_retry() {
    let server = OpenAiServer::builder()
        .responder(|_| Reply::tool_call("c1", "SendMessage", r#"{"text": "the answer is 42"}"#))
        .start()
        .await;
    let host = host(&server, "max_retries = 0").await;
    let (session, end) = host.end_turn("r", "what is the answer?").await;
    let entries = host.entries(&session).await;
    replied_then_completed(&entries, &end);
    let (notice, error) = after_reply(&host, &entries, &end).await;
    assert!(
        notice.starts_with("The bot's reply above was delivered")
            && notice.contains("repeating the same SendMessage call"),
        "{notice}"
    );
    assert!(
        error.contains("repeating the same SendMessage call"),
        "{error}"
    );
    let turn = end["turn"].as_str().unwrap_or("");
    let (status, refused) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("completed"), "{refused}");
    host.shutdown().await;
    server.shutdown().await;
}
