//! A webhook payload sent compressed (`Content-Encoding: gzip`, as some
//! proxies do) is refused with `415`, naming the header and what to send,
//! whichever bytes the sender signed; `identity` is the body as is.

use botfleet::api::sign_hook;
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SECRET: &str = "a-hook-secret-for-encodings";

/// `{"action":"opened","n":1}`, gzip-compressed.
const GZIPPED: &str =
    "1f8b08000000000002ffab564a4c2ec9cccf53b252ca2f48cd4b4d51d25102720c6b01dfc7827719000000";
const PLAIN: &str = r#"{"action":"opened","n":1}"#;

async fn hooked_host() -> TestHost {
    TestFleet::new()
        .script("s", "[[rule]]\nsteps = [ { text = \"saw it\" } ]\n")
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .start()
        .await
}

/// Posts `body` under `delivery` with the signature of `signed` and these
/// extra headers: the status, the `Accept-Encoding` header and the answer.
async fn post(
    host: &TestHost,
    delivery: &str,
    body: Vec<u8>,
    signed: &[u8],
    extra: &[(&str, &str)],
) -> (u16, Option<String>, Value) {
    let mut req = host
        .http
        .post(format!("{}/v1/hooks/r/gh", host.url))
        .header("content-type", "application/json")
        .header("X-Botfleet-Delivery", delivery)
        .header("X-Botfleet-Signature", sign_hook(SECRET.as_bytes(), signed))
        .body(body);
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let accept = resp
        .headers()
        .get("accept-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, accept, resp.json().await.unwrap_or(Value::Null))
}

/// Regression: a gzip-compressed payload was answered `400 "the payload
/// is not UTF-8 text"` when the sender signed the compressed bytes, and
/// `401 "the X-Botfleet-Signature does not match"` when it signed the
/// JSON (a proxy compressed it on the way): neither named the encoding.
/// Both are `415 unsupported_encoding` naming `Content-Encoding` and what
/// to send, with `Accept-Encoding: identity`, and admit nothing; the same
/// delivery sent uncompressed is then admitted.
#[tokio::test]
async fn a_compressed_payload_is_refused_naming_the_encoding() {
    let host = hooked_host().await;
    let gzipped = hex::decode(GZIPPED).unwrap();
    let signed_as: [&[u8]; 2] = [&gzipped, PLAIN.as_bytes()];
    for (delivery, signed) in ["z-1", "z-2"].into_iter().zip(signed_as) {
        let gzip = [("content-encoding", "gzip")];
        let (status, accept, refused) = post(&host, delivery, gzipped.clone(), signed, &gzip).await;
        assert_eq!(
            (status, accept.as_deref(), &refused["error"]["code"]),
            (415, Some("identity"), &Value::from("unsupported_encoding")),
            "{delivery}: {refused}"
        );
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("Content-Encoding: \"gzip\"") && message.contains("uncompressed"),
            "{message}"
        );
    }
    // `identity` is no coding at all
    let identity = [("content-encoding", "identity")];
    let (status, _, first) = post(&host, "z-1", PLAIN.into(), PLAIN.as_bytes(), &identity).await;
    assert_eq!((status, &first["status"]), (202, &Value::from("accepted")));
    let session = first["session"].as_str().unwrap();
    let events = host.entries(session).await;
    let events: Vec<&Value> = events.iter().filter(|e| e["kind"] == "event").collect();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["text"], PLAIN);
    host.shutdown().await;
}

/// A body that is gzip without saying so (no `Content-Encoding`) is still
/// not UTF-8 (`400`), and the refusal says it looks compressed.
#[tokio::test]
async fn an_undeclared_gzip_payload_is_named() {
    let host = hooked_host().await;
    let gzipped = hex::decode(GZIPPED).unwrap();
    let (status, _, refused) = post(&host, "u-1", gzipped.clone(), &gzipped, &[]).await;
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not UTF-8") && message.contains("gzip-compressed"),
        "{message}"
    );
    host.shutdown().await;
}
