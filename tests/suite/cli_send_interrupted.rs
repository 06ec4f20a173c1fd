//! `botfleet send` prints the reply its message got, also when that reply
//! was sent by a run that another message then interrupted.
//!
//! (Round 19's race tester: with 30 `botfleet send`s to one bot at once,
//! 2–25 of them printed another message's reply. A run delivered the
//! answer to message A, then message B interrupted it; the next turn saw
//! A answered and only answered B, and its `turn_end` listed A; `send A`
//! printed only that last turn's reply, "re: B".)

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::process::cli;

#[tokio::test]
async fn send_prints_the_reply_an_interrupted_run_gave_its_message() {
    // request 1 (A's run) answers A; request 2 (the same run after its
    // SendMessage) waits for the gate, so B comes while it is out; then
    // each request answers the last person's message, or ends the turn
    // after a tool result
    let (gate, held) = watch::channel(false);
    let seen = Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder(move |request| {
            let n = seen.fetch_add(1, SeqCst);
            if last_message(request).is_some_and(|m| m["role"] == "tool") {
                let done = Reply::text("done");
                return if n == 1 {
                    done.hold_until(held.clone())
                } else {
                    done
                };
            }
            let said = last_user_text(request)
                .and_then(|t| t.lines().last())
                .unwrap_or("")
                .to_owned();
            Reply::tool_call(
                &format!("send-{}", n + 1),
                "SendMessage",
                json!({ "text": format!("re: {said}") }).to_string(),
            )
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let url = host.url.clone();
    let send_a = tokio::spawn(async move { cli(&["send", "r", "A"], &url, TOKEN).await });
    // A's run delivered "re: A" and is waiting for its second request
    server.wait_for_requests(2).await;
    let (status, sent) = host.send("r", "B", None).await;
    assert_eq!(status, 202, "{sent}");
    let (code, out, err) = send_a.await.unwrap();
    let _ = gate.send(true);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines().any(|l| l == "re: A"),
        "send A printed the reply A got: {out:?} (stderr {err:?})"
    );
    // the turns as the tester saw them: A's run interrupted after its
    // reply, the next turn over A and B answering B
    let session = sent["session"].as_str().unwrap();
    let ends: Vec<String> = host
        .entries(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .map(|e| e["status"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(ends, ["interrupted", "completed"], "{ends:?}");
    host.shutdown().await;
}
