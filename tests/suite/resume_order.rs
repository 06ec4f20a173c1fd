//! What a turn rebuilt from the store after a restart sees of an earlier
//! run over some of its inputs that a person's message interrupted: the
//! context is in the order the tail kept in memory holds, so an input that
//! run never saw comes after its steps and is answered.

use botfleet::api::sign_hook;
use serde_json::Value;
use serde_json::json;

use super::crash::entries;
use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

pub(super) const SECRET: &str = "a-hook-secret-of-some-length";

/// The model: a message (last in the request) is answered with
/// SendMessage "got <marker>" (`qa`, `qb`, or `dm` for a person's
/// message); after a tool result it ends with a text. Both stream
/// slowly, so the next input comes while a run is out.
async fn slow_model() -> OpenAiServer {
    OpenAiServer::builder()
        .responder(|request| {
            let last = last_message(request).cloned().unwrap_or(Value::Null);
            if last["role"] == "tool" {
                return Reply::text("that is all for now");
            }
            let text = last["content"].as_str().unwrap_or("");
            let marker = ["qa", "qb"]
                .into_iter()
                .find(|m| text.contains(&format!("{m}-marker")))
                .unwrap_or("dm");
            Reply::tool_call(
                &format!("send-{marker}"),
                "SendMessage",
                json!({ "text": format!("got {marker}") }).to_string(),
            )
        })
        .arg_chunk_bytes(1)
        .text_chunk_chars(1)
        .chunk_delay(std::time::Duration::from_millis(60))
        .start()
        .await
}

/// Bot `r` on `server`'s model, with webhook `gh`, answering each input
/// at once (no debounce) and extracting nothing.
fn hook_fleet(server: &OpenAiServer) -> TestFleet {
    TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .runtime("debounce_ms = 0\nextract_memory = false")
}

/// The id of `r`'s webhook session.
pub(super) fn hook_session() -> String {
    botfleet_memory::SessionKey {
        bot: botfleet_memory::BotId::new("r").unwrap(),
        kind: botfleet_memory::SessionKind::Hook,
        peer: "gh".into(),
    }
    .id()
    .to_string()
}

/// Posts a signed webhook delivery with `marker` in its payload; its seq.
pub(super) async fn hook(url: &str, delivery: &str, marker: &str) -> i64 {
    let body = json!({ "note": format!("{marker}-marker") }).to_string();
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/hooks/r/gh"))
        .header("content-type", "application/json")
        .header("X-Botfleet-Delivery", delivery)
        .header(
            "X-Botfleet-Signature",
            sign_hook(SECRET.as_bytes(), body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    let body: Value = resp.json().await.unwrap();
    body["seq"].as_i64().unwrap_or_else(|| panic!("{body}"))
}

/// Regression (round 18, F8 finding 1): webhook A started a turn; webhook
/// B came while its model call was out; a person's message interrupted
/// the run after its SendMessage was committed, and the host was killed.
/// After the restart the turn over A and B was rebuilt from the store as
/// `user(A), user(B), assistant(SendMessage), tool`: B read as handled
/// before the interrupted run's reply, the model stopped, and B was never
/// answered. Now B comes after that run's steps, and is answered.
#[tokio::test]
async fn an_input_that_came_during_an_interrupted_run_is_answered_after_a_restart() {
    let server = slow_model().await;
    let (fleet, port) = (hook_fleet(&server), free_port());
    let (path, log) = (fleet.write(), fleet.path().join("host.log"));
    let host = HostProcess::start(&path, port, &log).await;
    let url = host.url.clone();

    let qa = hook(&url, "d-a", "qa").await;
    // B comes while A's first model call streams
    server.wait_for_requests(1).await;
    let qb = hook(&url, "d-b", "qb").await;
    // A's SendMessage is committed once its second model call is out; a
    // person's message interrupts that run, and the host is killed
    server.wait_for_requests(2).await;
    let client = botfleet::client::Client::new(&url, TOKEN).unwrap();
    let (status, dm) = client.send_message("r", "hello", "k-dm").await.unwrap();
    assert_eq!(status.as_u16(), 202, "{dm}");
    let dm_session = dm["session"].as_str().unwrap().to_owned();
    let hook_session = hook_session();
    // killed once A's run has ended: the next turn over A and B builds its
    // context from the store after the restart
    let interrupted = |es: &[Value]| {
        es.iter().any(|e| {
            e["kind"] == "turn_end" && e["status"] == "interrupted" && e["inputs"] == json!([qa])
        })
    };
    wait_until(&url, &hook_session, interrupted).await;
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    wait_until(&url, &hook_session, turn_ended(qb)).await;
    // the request of the turn over both after the restart: B after A's steps
    let requests = server.requests();
    let request = requests
        .iter()
        .rev()
        .find(|r| {
            r.messages().iter().any(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("qb-marker"))
            })
        })
        .unwrap_or_else(|| panic!("no request showed B; log at {}", log.display()));
    let messages = request.messages();
    let shown = serde_json::to_string_pretty(messages).unwrap();
    let at = |pick: &dyn Fn(&Value) -> bool| {
        messages
            .iter()
            .position(pick)
            .unwrap_or_else(|| panic!("not in the request: {shown}"))
    };
    let input = |m: &'static str| {
        move |v: &Value| v["role"] == "user" && v["content"].as_str().is_some_and(|c| c.contains(m))
    };
    let sent_a = at(&|v: &Value| {
        v["role"] == "assistant"
            && v["tool_calls"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["id"] == "send-qa"))
    });
    let order = [at(&input("qa-marker")), sent_a, at(&input("qb-marker"))];
    assert!(order.is_sorted(), "{order:?}: {shown}");
    // and B was answered, once
    let _ = wait_until(&url, &dm_session, |es| {
        deliveries(es).iter().any(|d| d.contains("got qb"))
    })
    .await;
    let delivered = deliveries(&entries(&url, &dm_session).await);
    let count = |t: &str| delivered.iter().filter(|d| d.contains(t)).count();
    assert_eq!((count("got qa"), count("got qb")), (1, 1), "{delivered:?}");
    host.kill9().await;
    server.shutdown().await;
}

/// Regression (round 18, F8 finding 2): a webhook's turn delivers to its
/// owner's DM, not to its own session. A turn killed after its
/// SendMessage and resumed counted its deliveries only in its own
/// session, so its `turn_end` said `deliveries: 0` (and a resumed
/// webhook or routine turn that then met the step limit would have been
/// failed as undelivered, its retry messaging the owner twice).
#[tokio::test]
async fn a_resumed_webhook_turn_counts_the_message_it_delivered_before_the_crash() {
    let server = slow_model().await;
    let (fleet, port) = (hook_fleet(&server), free_port());
    let (path, log) = (fleet.write(), fleet.path().join("host.log"));
    let host = HostProcess::start(&path, port, &log).await;
    let url = host.url.clone();
    let hook_session = hook_session();

    let qa = hook(&url, "d-a", "qa").await;
    // the step with SendMessage is committed once the second model call
    // (after its tool result) is out: the host is killed during that call
    server.wait_for_requests(2).await;
    host.kill9().await;

    let host = HostProcess::start(&path, port, &log).await;
    let ended = wait_until(&url, &hook_session, turn_ended(qa)).await;
    let end = ended
        .iter()
        .find(|e| e["kind"] == "turn_end" && e["inputs"] == json!([qa]))
        .unwrap_or_else(|| panic!("no turn_end over {qa}: {ended:?}"));
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        end["deliveries"], 1,
        "the resumed turn forgot the message it delivered before the crash: {end}"
    );
    host.kill9().await;
    server.shutdown().await;
}
