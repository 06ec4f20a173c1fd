//! The CLI's side of the API contract, as a client written from the docs
//! found it: `send --json` carries why a turn did not complete and how to
//! retry it, `transcript --json` shows what the text shows (`--all`
//! included), a `--nonce` the host would refuse is refused before sending,
//! a `--host` with credentials, a query or a fragment is a usage error,
//! and `group list` says which rooms are closed.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// Replies to `hello`; fails on `break`; anything else gets no reply
/// (the delivery reminder too).
const SCRIPT: &str = r#"
[[rule]]
match = "^hello"
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]

[[rule]]
match = "^break"
steps = [ { fail = "provider down" } ]

[[rule]]
steps = [ { text = "thinking, and never replying" } ]
"#;

fn fleet() -> TestFleet {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
}

/// Regression: `send --json` printed `{"status": "failed", ...}` without
/// the reason, and nothing on stderr: a script could not say why, nor
/// which turn to retry.
#[tokio::test]
async fn send_json_says_why_a_turn_did_not_complete_and_how_to_retry() {
    let host = fleet().start().await;
    for (text, code, status) in [("break it", 3, "failed"), ("quiet", 4, "undelivered")] {
        let (got, out, err) = cli(&["send", "r", text, "--json"], &host.url, TOKEN).await;
        assert_eq!(got, code, "{text}: {out} {err}");
        assert!(err.trim().is_empty(), "--json keeps stderr silent: {err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["status"], status, "{v}");
        let turn = v["turn"].as_str().unwrap();
        let notice = v["notice"].as_str().unwrap_or_default();
        assert!(notice.contains(turn), "{v}");
        assert_eq!(v["retry_turn"], turn, "{v}");
        assert_eq!(v["retry_command"], format!("botfleet retry {turn}"), "{v}");
        // the text mode says the same on stderr
        let (_, _, said) = cli(&["send", "r", text], &host.url, TOKEN).await;
        assert!(said.contains("botfleet retry"), "{said}");
        // the notice names the command and its API route; the CLI prints
        // the command alone (QA: "`botfleet retry T` or `POST /v1/turns/T/retry`")
        assert!(!said.contains("/v1/"), "{said}");
        assert!(!notice.contains("/v1/"), "{notice}");
    }
    let (code, out, err) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let failed: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("[turn_failed]"))
        .collect();
    assert!(!failed.is_empty(), "{out}");
    for line in failed {
        assert!(
            line.contains("`botfleet retry ") && !line.contains("/v1/"),
            "{line}"
        );
    }
    assert!(
        notice_of(&host.url, "break again")
            .await
            .contains("provider down"),
        "the failure's reason"
    );
    // a completed turn has nothing to explain
    let (code, out, _) = cli(&["send", "r", "hello", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v.get("notice").is_none() && v.get("retry_turn").is_none(),
        "{v}"
    );
    let (_, help, _) = cli(&["send", "--help"], &host.url, TOKEN).await;
    assert!(help.contains("retry_command"), "{help}");
    host.shutdown().await;
}

async fn notice_of(url: &str, text: &str) -> String {
    let (_, out, _) = cli(&["send", "r", text, "--json"], url, TOKEN).await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["notice"].as_str().unwrap_or_default().to_owned()
}

/// Regression: `transcript --json` printed the bot's internal steps
/// (notes, turn ends) without `--all`, as the text does not.
#[tokio::test]
async fn transcript_json_follows_all() {
    let host = fleet().start().await;
    let (code, _, err) = cli(&["send", "r", "quiet"], &host.url, TOKEN).await;
    assert_eq!(code, 4, "{err}");
    let kinds = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].to_string())
            .collect()
    };
    let (code, out, err) = cli(&["transcript", "r", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let public = kinds(&out);
    assert!(
        public.contains(&"\"user_message\"".to_owned()),
        "{public:?}"
    );
    for internal in ["\"assistant\"", "\"turn_end\""] {
        assert!(!public.contains(&internal.to_owned()), "{public:?}");
    }
    let (code, out, _) = cli(&["transcript", "r", "--json", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    let all = kinds(&out);
    for internal in ["\"assistant\"", "\"turn_end\""] {
        assert!(all.contains(&internal.to_owned()), "{all:?}");
    }
    host.shutdown().await;
}

/// `transcript --all` lists the same entries as text and as `--json`, so
/// `--last N` picks the same ones (QA: a bot's step with no text and no
/// call, which the text leaves out, was in the JSON).
#[tokio::test]
async fn transcript_text_and_json_list_the_same_entries() {
    let host = fleet().start().await;
    let (code, _, err) = cli(&["send", "r", "hello"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let text_seqs = |out: &str| -> Vec<String> {
        let mut seqs: Vec<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix('#')?.split(' ').next().map(str::to_owned))
            .collect();
        seqs.dedup();
        seqs
    };
    let json_seqs = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].to_string())
            .collect()
    };
    for last in [None, Some("3")] {
        let mut args = vec!["transcript", "r", "--all"];
        args.extend(last.map(|n| ["--last", n]).into_iter().flatten());
        let (code, text, err) = cli(&args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{err}");
        args.push("--json");
        let (code, json, err) = cli(&args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{err}");
        assert_eq!(text_seqs(&text), json_seqs(&json), "{text}\n{json}");
    }
    host.shutdown().await;
}

/// Regression: `--nonce é` passed the CLI's check and the host answered
/// `400 the Idempotency-Key header is not text`; the CLI refuses it with
/// the rule, and the host's refusal says the rule too.
#[tokio::test]
async fn a_nonce_the_host_would_refuse_is_a_usage_error() {
    let host = fleet().start().await;
    for nonce in ["café", "\u{200b}key", &"k".repeat(201), "   "] {
        for args in [
            &["send", "r", "hello", "--nonce", nonce][..],
            &["group", "send", "room", "hello", "--nonce", nonce],
        ] {
            let (code, out, err) = cli(args, &host.url, TOKEN).await;
            assert_eq!(code, 2, "{args:?}: {out} {err}");
            assert!(err.contains("printable ASCII"), "{err}");
        }
    }
    // nothing was sent
    let (_, v) = host.get("/v1/bots/r/session", TOKEN).await;
    assert_eq!(v["last_seq"], 0, "{v}");
    let (status, v) = host
        .post_raw(
            "/v1/bots/r/messages",
            Some(TOKEN),
            None,
            json!({"text": "hello"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let resp = host
        .http
        .post(format!("{}/v1/bots/r/messages", host.url))
        .bearer_auth(TOKEN)
        .header(
            "Idempotency-Key",
            reqwest::header::HeaderValue::from_bytes("café".as_bytes()).unwrap(),
        )
        .body(json!({"text": "hello"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("1-200 printable ASCII characters"),
        "{message}"
    );
    host.shutdown().await;
}

/// Regression: a `--host` with `user:password@`, a `?query` or a
/// `#fragment` was taken, and the requests went to a mangled URL (the
/// query swallowed `/v1/…`); each is a usage error naming what is wrong.
#[tokio::test]
async fn a_host_with_credentials_a_query_or_a_fragment_is_a_usage_error() {
    for (host, says) in [
        ("http://u:p@127.0.0.1:1", "user:password@"),
        ("http://u@127.0.0.1:1", "user:password@"),
        ("http://127.0.0.1:1?x=1", "query"),
        ("http://127.0.0.1:1/?x=1", "query"),
        ("http://127.0.0.1:1#frag", "fragment"),
    ] {
        let (code, out, err) = cli(&["bots"], host, TOKEN).await;
        assert_eq!(code, 2, "{host}: {out} {err}");
        assert!(err.contains(says), "{host}: {err}");
        assert!(!err.contains(":p@"), "the password is not repeated: {err}");
        let (code, _, err) = cli(&["--host", host, "bots"], "http://127.0.0.1:1", TOKEN).await;
        assert_eq!(code, 2, "--host {host}: {err}");
    }
}

/// A user with no bots: `bots` prints nothing on stdout and says so on
/// stderr, as every empty listing does (QA: a bare header line).
#[tokio::test]
async fn bots_of_a_user_with_none_prints_no_header() {
    let host = fleet().start().await;
    let (code, out, err) = cli(&["bots"], &host.url, crate::support::fleet::BOB_TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("you have no bots"), "{err}");
    host.shutdown().await;
}

/// Regression: `group list` showed closed rooms like open ones.
#[tokio::test]
async fn group_list_says_which_rooms_are_closed() {
    let host = fleet().start().await;
    // in no room yet: nothing on stdout (a header row alone read as a
    // room to a script, QA), said on stderr
    let (code, out, err) = cli(&["group", "list"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("you are in no room yet"), "{err}");
    for name in ["kept", "gone"] {
        let (code, _, err) = cli(
            &["group", "create", name, "--members", "r,b"],
            &host.url,
            TOKEN,
        )
        .await;
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = cli(&["group", "close", "gone"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&["group", "list"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap_or("").contains("STATE"), "{out}");
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no {id} in {out}"))
            .to_owned()
    };
    assert!(line("kept").contains(" open "), "{out}");
    assert!(line("gone").contains(" closed "), "{out}");
    host.shutdown().await;
}

/// Regression: `group create 房间` (a name that is no room id) said
/// "pass an `id`", the API's field; the CLI's flag is `--id`.
#[tokio::test]
async fn group_create_names_the_id_flag() {
    let host = fleet().start().await;
    let (code, out, err) = cli(
        &["group", "create", "房间", "--members", "r,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 1, "{out} {err}");
    assert!(err.contains("pass --id"), "{err}");
    assert!(!err.contains("pass an `id`"), "{err}");
    let (code, _, err) = cli(
        &[
            "group",
            "create",
            "房间",
            "--members",
            "r,b",
            "--id",
            "room",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    // a name that is a bot's id: "pass another --id", not the API's field
    let (code, _, err) = cli(
        &["group", "create", "r", "--members", "r,b"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("is taken by a bot") && err.contains("pass another --id"),
        "{err}"
    );
    assert!(!err.contains("`id`"), "{err}");
    host.shutdown().await;
}
