//! Transcript recall for people, end to end: `GET /v1/search` and
//! `botfleet search` with clear errors, the bots named in hits, and
//! `botfleet reindex`. The bots' own recall tools and who may find what
//! are in `recall.rs`, which holds the helpers shared here.

use std::time::Instant;

use botfleet::memory::SearchQuery;
use botfleet::memory::TranscriptIndex;
use serde_json::Value;
use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use super::recall::chat;
use super::recall::flush;
use super::recall::topic;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;
use crate::support::process::cli;
use crate::support::process::poll;

#[tokio::test]
async fn search_through_the_api_and_the_cli_with_clear_errors() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS)
        .bot("s", "s", RECALL_TOOLS)
        .start()
        .await;
    chat(&host, TOKEN, "r", "the deploy to staging failed at 3am").await;
    chat(&host, TOKEN, "s", "生产环境部署完成了").await;

    // a new entry becomes searchable within about a second, no flush
    let sent = Instant::now();
    chat(&host, TOKEN, "r", "the pelican report is ready").await;
    poll(3, async || {
        let (_, v) = host.get("/v1/search?q=pelican", TOKEN).await;
        if v["total"] == json!(1) {
            Ok(())
        } else {
            Err(format!("not searchable after {:?}: {v}", sent.elapsed()))
        }
    })
    .await;
    eprintln!("searchable {:?} after sending", sent.elapsed());
    flush(&host).await;

    let (status, v) = host
        .get("/v1/search?q=%22deploy%20to%20staging%22&limit=5", TOKEN)
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total"], 1);
    assert_eq!(v["hits"][0]["bot"], "r");
    assert_eq!(v["hits"][0]["role"], "user");
    assert_eq!(v["hits"][0]["session_kind"], "dm");
    assert!(
        v["hits"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("«deploy» «to» «staging»"),
        "{v}"
    );
    let (_, v) = host.get("/v1/search?q=部署&bot=s", TOKEN).await;
    assert_eq!(v["hits"][0]["snippet"], "生产环境«部署»完成了", "{v}");

    // bad input → 400 with what to fix
    let long = "a".repeat(600);
    let cases = [
        ("/v1/search?q=", "q: the search query is empty"),
        (
            &format!("/v1/search?q={long}") as &str,
            "q: the search query is 600 characters long; the limit is 512",
        ),
        (
            "/v1/search?q=say%20%22hi",
            "q: unbalanced quote: the \" at character 5 opens a phrase that is never closed; add a closing \" or remove it",
        ),
        (
            "/v1/search",
            "missing q: pass the words to search for as ?q=WORDS",
        ),
        (
            "/v1/search?q=x&limit=0",
            "limit \"0\" is out of range: give a number of hits from 1 to 100",
        ),
        (
            "/v1/search?q=x&limit=many",
            "limit \"many\" is not a number",
        ),
        // as the other routes read numbers (a space or a `+` was taken)
        (
            "/v1/search?q=x&limit=%2010",
            "limit \" 10\" is not a number",
        ),
        ("/v1/search?q=x&offset=+1", "offset \" 1\" is not a number"),
        (
            "/v1/search?q=x&offset=%2B1",
            "offset \"+1\" is not a number",
        ),
        (
            "/v1/search?q=x&session=nope",
            "session \"nope\" is not a session id",
        ),
        (
            "/v1/search?q=x&colour=red",
            "`colour` is not a parameter of this route",
        ),
        ("/v1/search?q=hi&q=ho", "`q` is given twice: give it once"),
    ];
    for (path, message) in cases {
        let (status, v) = host.get(path, TOKEN).await;
        assert_eq!(status, 400, "{path}: {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{path}: {v}");
        let got = v["error"]["message"].as_str().unwrap();
        assert!(got.contains(message), "{path}: {got}");
    }
    let (status, _) = host.get("/v1/search?q=x", "wrong-token").await;
    assert_eq!(status, 401);

    // the CLI
    let (code, out, err) = cli(&["search", "deploy staging"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1 match(es), showing 1:"), "{out}");
    assert!(out.contains("DM of r with alice · #1 ·"), "{out}");
    assert!(
        out.contains("the «deploy» to «staging» failed at 3am"),
        "{out}"
    );
    let (code, out, err) = cli(
        &["search", "部署", "--bot", "s", "--json"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hits"][0]["bot"], "s", "{v}");
    let (code, out, err) = cli(&["search", "部署", "--bot", "r"], &host.url, TOKEN).await;
    // nothing on stdout: a script counting its lines counts no hit
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(err.trim(), "no matches for \"部署\"");
    for (query, message) in [
        ("", "the search query is empty: give at least one word"),
        (long.as_str(), "the search query is 600 characters long"),
        ("say \"hi", "unbalanced quote"),
        ("-staging", "the query only excludes terms"),
    ] {
        let (code, _, err) = cli(&["search", query], &host.url, TOKEN).await;
        assert_eq!(code, 1, "{query}");
        assert!(
            err.contains("400 Bad Request") && err.contains(message),
            "{query}: {err}"
        );
    }
    let (code, _, err) = cli(&["search", "x", "--bot", "nobody"], &host.url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("no bot \"nobody\" for you"), "{err}");
    // the host's parameters said as the command's flags (QA: "search
    // without `session`")
    for session in ["nope", "01a24c33-0000-7000-8000-000000000000"] {
        let (code, _, err) = cli(&["search", "x", "--session", session], &host.url, TOKEN).await;
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("session of a hit (--session)") && !err.contains("`session`"),
            "{err}"
        );
    }
    host.shutdown().await;
}

#[tokio::test]
async fn reindex_rebuilds_offline_and_refuses_while_a_host_runs() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await;
    for i in 0..5 {
        chat(
            &host,
            TOKEN,
            "r",
            &format!("{} (the walrus file {i})", topic(i)),
        )
        .await;
    }
    flush(&host).await;
    let fleet_file = host.fleet.path().join("fleet.toml");
    let fleet_arg = fleet_file.to_str().unwrap();
    let (code, out, err) = cli(&["reindex", "--fleet", fleet_arg], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("is running on")
            && err.contains("stop it (Ctrl-C), then run `botfleet reindex` again"),
        "{err}"
    );

    let fleet = host.shutdown().await;
    let data = fleet.path().join("data");
    std::fs::remove_dir_all(data.join("index")).unwrap();
    let (code, out, err) = cli(&["reindex", "--fleet", fleet_arg], "", "").await;
    assert_eq!(code, 0, "{err}");
    // 5 turns: messages, replies, tool results, notes, turn ends
    assert!(out.starts_with("reindexed "), "{out}");
    assert!(out.contains("entries ("), "{out}");
    let index = TranscriptIndex::open(data.join("index")).unwrap();
    let found = index
        .search_blocking(&SearchQuery::new("walrus").with_limit(10))
        .unwrap();
    assert_eq!(found.total, 5, "{found:?}");
    drop(index);

    // a `host.listen` it does not use stops no rebuild (QA: it did, and
    // `reindex` has no --listen to give another)
    let text = std::fs::read_to_string(&fleet_file).unwrap();
    let bad = fleet.path().join("bad-listen.toml");
    let listen = text
        .lines()
        .find(|l| l.starts_with("listen"))
        .unwrap_or_else(|| panic!("no listen line in {text}"));
    std::fs::write(&bad, text.replace(listen, "listen = \"nonsense\"")).unwrap();
    let (code, out, err) = cli(&["reindex", "--fleet", bad.to_str().unwrap()], "", "").await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("reindexed "), "{out}");
    // (check-config still refuses it)
    let (code, _, err) = cli(&["check-config", "--fleet", bad.to_str().unwrap()], "", "").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("host.listen"), "{err}");

    // --data works too, and a directory without a store is refused
    let (code, out, err) = cli(&["reindex", "--data", data.to_str().unwrap()], "", "").await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("reindexed "), "{out}");
    let empty = fleet.path().join("empty");
    let (code, _, err) = cli(&["reindex", "--data", empty.to_str().unwrap()], "", "").await;
    assert_eq!(code, 1);
    assert!(err.contains("no store at"), "{err}");

    // the host starts on the rebuilt index
    let host = restart(fleet).await;
    let (_, v) = host.get("/v1/search?q=walrus", TOKEN).await;
    assert_eq!(v["total"], 5, "{v}");
    host.shutdown().await;
}

#[tokio::test]
async fn hits_name_the_bots_that_wrote_them_also_other_users_bots() {
    let script = r#"
[[rule]]
match = "wombat"
steps = [ { tool = "SendMessage", args = { text = "{{bot}} saw the wombat" } } ]
"#;
    // b is alice's; t is bob's and may join other people's rooms
    let host = TestFleet::new()
        .script("s", script)
        .bot("b", "s", RECALL_TOOLS)
        .bot_of("t", "s", RECALL_TOOLS, "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "zoo", "members": ["b", "t"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let (status, posted) = host
        .post_raw(
            "/v1/groups/zoo/messages",
            Some(TOKEN),
            Some("k1"),
            json!({"text": "who saw the wombat?"}).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{posted}");
    let timeline = posted["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&timeline, posted["seq"].as_i64().unwrap())
        .await;
    flush(&host).await;

    let (status, v) = host.get("/v1/search?q=wombat&limit=10", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let named = names_in(&v, &timeline, "author");
    assert_eq!(
        named,
        vec![
            ("alice".to_owned(), Value::Null),
            ("b".to_owned(), json!("b-name")),
            ("t".to_owned(), json!("t-name")),
        ],
        "{v}"
    );
    host.shutdown().await;
}

/// Regression: a person's hit was given a bot's `author_name` when their
/// user id is also a bot's id (QA: user `zed` beside the bot `zed`; any
/// API client showed the person's message as the bot's). Only what a bot
/// wrote is named.
#[tokio::test]
async fn a_persons_hit_gets_no_bot_name_where_a_bot_has_their_id() {
    let script = r#"
[[rule]]
match = "wombat"
steps = [ { tool = "SendMessage", args = { text = "{{bot}} saw the wombat" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot_of("bob", "s", RECALL_TOOLS, "bob")
        .start()
        .await;
    let (session, _) = chat(&host, BOB_TOKEN, "bob", "who saw the wombat?").await;
    flush(&host).await;
    let (status, v) = host.get("/v1/search?q=wombat&limit=10", BOB_TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let named = names_in(&v, &session, "kind");
    assert_eq!(
        named,
        vec![
            ("delivery".to_owned(), json!("bob-name")),
            ("user_message".to_owned(), Value::Null),
        ],
        "{v}"
    );
    host.shutdown().await;
}

/// The search answer `v`'s hits in `session`, as (their `by` field,
/// their `author_name`), sorted and each once.
fn names_in(v: &Value, session: &str, by: &str) -> Vec<(String, Value)> {
    let mut named: Vec<(String, Value)> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["session"] == session)
        .map(|h| (h[by].as_str().unwrap().to_owned(), h["author_name"].clone()))
        .collect();
    named.sort_by(|x, y| x.0.cmp(&y.0));
    named.dedup();
    named
}
