//! Secrets reach tools by reference and never a model request or a log.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

const SECRET: &str = "s3cr3t-value-4711";
const SUPPLIED: &str = "supplied-by-alice-0815";

fn model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    match last["role"].as_str() {
        Some("user") => Reply::tool_call(
            "c1",
            "Shell",
            json!({ "command": "echo token=$API_TOKEN; cat creds.txt" }).to_string(),
        ),
        Some("tool") if last["tool_call_id"] == "c1" => {
            let seen = last["content"].as_str().unwrap_or("").to_owned();
            Reply::tool_call(
                "c2",
                "SendMessage",
                json!({ "text": format!("the shell said: {seen}") }).to_string(),
            )
        }
        _ => Reply::text(""),
    }
}

#[tokio::test]
async fn a_config_secret_used_by_shell_never_reaches_the_model_or_the_logs() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "tools = [\"SendMessage\", \"Shell\"]",
        "tools = [\"SendMessage\", \"Shell\"]\nsecrets = [\"API_TOKEN\"]",
    );
    std::fs::write(
        &path,
        // enforce would ask before printing a secret (tests/suite/review.rs);
        // here the command runs so that its output's redaction is seen
        format!(
            "{text}\n[[secrets]]\nname = \"API_TOKEN\"\nvalue = \"{SECRET}\"\n[review]\nshell = \"shadow\"\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(fleet.path().join("data/workspace/alice")).unwrap();
    std::fs::write(
        fleet.path().join("data/workspace/alice/creds.txt"),
        format!("password: {SECRET}\n"),
    )
    .unwrap();
    let log = fleet.path().join("host.log");
    let host = HostProcess::start_with_log_level(&path, free_port(), &log, "trace").await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (_, sent) = client
        .send_message("r", "check the token", "k-1")
        .await
        .unwrap();
    let session = sent["session"].as_str().unwrap().to_owned();
    let mut delivered = String::new();
    for _ in 0..300 {
        let es = client.entries_after(&session, 0).await.unwrap();
        if let Some(d) = es.iter().find(|e| e["kind"] == "delivery") {
            delivered = d["text"].as_str().unwrap().to_owned();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // the command really had the value: it printed it, and it was redacted
    assert!(delivered.contains("token=[redacted]"), "{delivered}");
    assert!(delivered.contains("password: [redacted]"), "{delivered}");
    for r in server.requests() {
        assert!(
            !r.body.to_string().contains(SECRET),
            "a model request carried the secret"
        );
    }
    let es = client.entries_after(&session, 0).await.unwrap();
    assert!(
        !serde_json::to_string(&es).unwrap().contains(SECRET),
        "the transcript carries the secret"
    );
    host.kill9().await;
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.len() > 1000, "trace logs were written");
    assert!(!logs.contains(SECRET), "the logs carry the secret");
    server.shutdown().await;
}

#[tokio::test]
async fn a_person_supplies_a_secret_through_the_api() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Shell"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "tools = [\"SendMessage\", \"Shell\"]",
        "tools = [\"SendMessage\", \"Shell\"]\nsecrets = [\"API_TOKEN\"]",
    );
    // the command runs (shadow review) so that its output's redaction is seen
    std::fs::write(&path, format!("{text}\n[review]\nshell = \"shadow\"\n")).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let (status, body) = host
        .post_raw(
            "/v1/secrets/api-token",
            Some(TOKEN),
            None,
            r#"{"value":"x"}"#,
        )
        .await;
    assert_eq!(status, 405, "{body}");
    let put = host
        .http
        .put(format!("{}/v1/secrets/API_TOKEN", host.url))
        .bearer_auth(TOKEN)
        .body(json!({ "value": SUPPLIED }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 200);
    let bad = host
        .http
        .put(format!("{}/v1/secrets/api-token", host.url))
        .bearer_auth(TOKEN)
        .body(json!({ "value": "v" }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    // a secret becomes an environment variable of the bot's commands: one
    // named PATH broke every Shell call, LD_PRELOAD reached reviewed ones
    for name in ["PATH", "HOME", "LD_PRELOAD"] {
        let reserved = host
            .http
            .put(format!("{}/v1/secrets/{name}", host.url))
            .bearer_auth(TOKEN)
            .body(json!({ "value": "/tmp/evil" }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(reserved.status().as_u16(), 400, "{name}");
        let body: Value = reserved.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("reserved"), "{name}: {body}");
    }
    // a value too long says how long it is, in bytes and characters (it
    // said only "must be 1-16384 bytes": QA), and nothing is stored
    for (value, says) in [
        (
            "é".repeat(8_193),
            "the value has 16386 bytes (8193 characters: one past ASCII takes 2-4 bytes in UTF-8); the limit is 16384 bytes",
        ),
        (
            "x".repeat(16_385),
            "the value has 16385 bytes; the limit is 16384 bytes",
        ),
        (String::new(), "the value is empty"),
    ] {
        let long = host
            .http
            .put(format!("{}/v1/secrets/LONG_ONE", host.url))
            .bearer_auth(TOKEN)
            .body(json!({ "value": value }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(long.status().as_u16(), 400, "{says}");
        let body: Value = long.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}");
    }
    let (_, listed) = host.get("/v1/secrets", TOKEN).await;
    assert_eq!(listed["secrets"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["secrets"][0]["name"], "API_TOKEN");
    assert!(
        !listed.to_string().contains(SUPPLIED),
        "values are never returned"
    );
    let (_, sent) = host.send("r", "check", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let es = host.entries(&session).await;
    let all = serde_json::to_string(&es).unwrap();
    assert!(
        all.contains("token=[redacted]"),
        "the tool got the value: {all}"
    );
    assert!(!all.contains(SUPPLIED));
    for r in server.requests() {
        assert!(!r.body.to_string().contains(SUPPLIED));
    }
    host.shutdown().await;
    server.shutdown().await;
}

const PROVIDER_KEY: &str = "sk-provider-key-31337";
const OTHER_SECRET: &str = "not-this-bots-secret-2718";

fn reads_the_keys(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    let seen = last["content"].as_str().unwrap_or("").to_owned();
    match (last["role"].as_str(), last["tool_call_id"].as_str()) {
        (Some("user"), _) => Reply::tool_call(
            "c1",
            "Shell",
            json!({ "command": "cat keys.txt" }).to_string(),
        ),
        (Some("tool"), Some("c1")) => {
            Reply::tool_call("c2", "Read", json!({ "path": "keys.txt" }).to_string())
        }
        (Some("tool"), Some("c2")) => Reply::tool_call(
            "c3",
            "SendMessage",
            json!({ "text": format!("read: {seen}") }).to_string(),
        ),
        _ => Reply::text(""),
    }
}

/// A command can read the host's own credentials where the host keeps them
/// (its environment, `/proc/<pid>/environ`; here a copy in the workspace):
/// the provider's API key, the users' tokens and a fleet secret the bot
/// does not list are scrubbed from Shell output and Read results like the
/// bot's own secrets (before, only those were).
#[tokio::test]
async fn the_hosts_own_credentials_are_scrubbed_from_every_tool_result() {
    let server = OpenAiServer::builder()
        .responder(reads_the_keys)
        .start()
        .await;
    let fleet = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            "max_retries = 0\napi_key_env = \"BOTFLEET_TEST_PROVIDER_KEY\"",
        )
        .bot("r", "main", &["SendMessage", "Shell", "Read"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!(
            "{text}\n[[secrets]]\nname = \"OTHER\"\nvalue = \"{OTHER_SECRET}\"\n[review]\nshell = \"shadow\"\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(fleet.path().join("data/workspace/alice")).unwrap();
    std::fs::write(
        fleet.path().join("data/workspace/alice/keys.txt"),
        format!(
            "BOTFLEET_TEST_PROVIDER_KEY={PROVIDER_KEY}\nalice={TOKEN}\nbob={}\nother={OTHER_SECRET}\n",
            crate::support::fleet::BOB_TOKEN
        ),
    )
    .unwrap();
    let env = std::collections::HashMap::from([(
        "BOTFLEET_TEST_PROVIDER_KEY".to_owned(),
        PROVIDER_KEY.to_owned(),
    )]);
    let running = botfleet::host::start(botfleet::host::HostOptions {
        fleet: Some(path),
        data_dir: None,
        listen: None,
        env: Some(env),
        ..Default::default()
    })
    .await
    .unwrap();
    let host = crate::support::fleet::TestHost {
        url: running.url(),
        host: Some(running),
        fleet,
        http: reqwest::Client::new(),
    };
    let (_, sent) = host.send("r", "show me the keys", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let all = serde_json::to_string(&host.entries(&session).await).unwrap();
    // both tools really read the file: its names are there, its values not
    assert!(
        all.matches("BOTFLEET_TEST_PROVIDER_KEY=[redacted]").count() >= 2,
        "{all}"
    );
    assert!(all.contains("alice=[redacted]"), "{all}");
    assert!(all.contains("other=[redacted]"), "{all}");
    for value in [
        PROVIDER_KEY,
        TOKEN,
        crate::support::fleet::BOB_TOKEN,
        OTHER_SECRET,
    ] {
        assert!(!all.contains(value), "the transcript carries {value}");
        for r in server.requests() {
            assert!(
                !r.body.to_string().contains(value),
                "a model request carried {value}"
            );
        }
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// A user stores at most 256 secrets: one more is refused naming the
/// limit and what to do, a stored one still takes a new value, and after
/// a delete the new one is taken. Regression (QA): 2,000 values were
/// taken, and each turn of a bot with a secret read and searched them
/// all, holding other users' turns.
#[tokio::test]
async fn a_user_stores_at_most_256_secrets() {
    let host = TestFleet::new()
        .script("s", "[[rule]]\nsteps = []\n")
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let put = |name: String, value: &'static str| {
        let host = &host;
        async move {
            host.call(
                reqwest::Method::PUT,
                &format!("/v1/secrets/{name}"),
                TOKEN,
                Some(json!({ "value": value })),
            )
            .await
        }
    };
    for i in 0..256 {
        let (status, v) = put(format!("KEY_{i}"), "a-value-of-some-length").await;
        assert_eq!(status, 200, "{i}: {v}");
    }
    let (status, v) = put("KEY_256".into(), "a-value-of-some-length").await;
    assert_eq!(status, 409, "{v}");
    // and openapi.yaml says so (audit: its putSecret had no 409)
    let doc = super::api_schema::openapi();
    assert!(
        doc["paths"]["/v1/secrets/{name}"]["put"]["responses"]
            .get("409")
            .is_some(),
        "docs/openapi.yaml: PUT /v1/secrets/{{name}} answers 409"
    );
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("you have 256 secrets, the most a user may store")
            && message.contains("DELETE /v1/secrets/NAME"),
        "{message}"
    );
    let (status, v) = put("KEY_7".into(), "another-value-entirely").await;
    assert_eq!(status, 200, "a stored one takes a new value: {v}");
    let (status, v) = host
        .call(reqwest::Method::DELETE, "/v1/secrets/KEY_7", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = put("KEY_256".into(), "a-value-of-some-length").await;
    assert_eq!(status, 200, "{v}");
    host.shutdown().await;
}
