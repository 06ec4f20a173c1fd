//! What the CLI prints about what people typed and what the host did:
//! the query of `botfleet search` as typed (Hindi, Thai, NFD text whole;
//! only controls and bidi characters escaped), `botfleet reindex` leaving
//! the index alone when it cannot open the store, and `botfleet approve`
//! saying what the host did rather than that the bot was told.

use botfleet_memory::ApprovalId;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use botfleet_memory::SearchQuery;
use botfleet_memory::TranscriptIndex;
use serde_json::json;

use super::recall::CHAT;
use super::recall::flush;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::cli;

/// Sends `text` to bot `r` and waits for the turn that answers it; returns
/// the session's id.
pub(super) async fn talk(host: &TestHost, text: &str) -> String {
    let (status, v) = host.send("r", text, None).await;
    assert_eq!(status, 202, "{v}");
    let session = v["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, v["seq"].as_i64().unwrap())
        .await;
    session
}

/// `botfleet search` with no hit echoes the query as typed: `{:?}` wrote
/// the vowel signs of "किताबें" as `\u{947}\u{902}`, and Thai and NFD
/// accents the same way, though only controls and bidi characters are to
/// be escaped (docs/operations.md); those still are.
#[tokio::test]
async fn search_without_matches_echoes_the_query_as_typed() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    talk(&host, "hello").await;
    flush(&host).await;
    for (query, shown) in [
        ("किताबें", "किताबें"),
        ("ภาษาไทยที่นี่", "ภาษาไทยที่นี่"),
        (
            "cafe\u{301} re\u{301}sume\u{301}",
            "cafe\u{301} re\u{301}sume\u{301}",
        ),
        ("zebra\u{202e}fish", "zebra\\u{202e}fish"),
    ] {
        let (code, out, err) = cli(&["search", query], &host.url, TOKEN).await;
        assert_eq!((code, out.as_str()), (0, ""), "{query}: {err}");
        assert_eq!(err.trim(), format!("no matches for \"{shown}\""), "{query}");
    }
    host.shutdown().await;
}

/// `botfleet search buy milk` (words unquoted, as the help's "words are
/// all required" invites) was a usage error, "unexpected argument 'milk'";
/// it is the query `buy milk` now, the same as quoted. An unquoted
/// `-word` reads as an option: the error says to quote the query (clap's
/// tip, `-- -c`, would search for `-c`).
#[tokio::test]
async fn search_words_may_be_given_unquoted() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    talk(&host, "buy milk and bread").await;
    talk(&host, "buy cheese").await;
    flush(&host).await;
    let (code, quoted, err) = cli(&["search", "buy milk"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    // (the hit's words are marked «…»)
    assert!(
        quoted.contains("1 match(es)") && quoted.contains("«milk» and bread"),
        "{quoted}"
    );
    let (code, words, err) = cli(&["search", "buy", "milk", "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let (_, quoted_json, _) = cli(&["search", "buy milk", "--json"], &host.url, TOKEN).await;
    assert_eq!(words, quoted_json);
    let (code, out, err) = cli(&["search", "buy", "-cheese"], &host.url, TOKEN).await;
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("`-cheese` reads as an option")
            && err.contains("botfleet search 'buy -cheese'"),
        "{err}"
    );
    // with the usage of `search` (it showed the top level's)
    assert!(err.contains("Usage: botfleet search "), "{err}");
    // the words after it and the options stay in the suggestion (they
    // were left out: the suggested command searched for less)
    let (code, _, err) = cli(
        &[
            "search", "buy", "-cheese", "--limit", "2", "-butter", "it's", "--json",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 2);
    assert!(
        err.contains(r#"botfleet search 'buy -cheese -butter it'\''s' --limit 2 --json"#),
        "{err}"
    );
    // a word of `-h…` too: clap read it as `-h` and printed the help,
    // exiting 0 with no search run (QA, 2026-12-06)
    let (code, out, err) = cli(&["search", "buy", "-honey"], &host.url, TOKEN).await;
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("`-honey` reads as an option") && err.contains("botfleet search 'buy -honey'"),
        "{err}"
    );
    // `-h` itself is the help
    let (code, out, _) = cli(&["search", "buy", "-h"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(out.contains("Usage: botfleet search"), "{out}");
    let (code, out, err) = cli(&["search", "buy -cheese"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 match(es)") && out.contains("«buy» milk and bread"),
        "{out}"
    );
    host.shutdown().await;
}

/// `botfleet reindex` on a data directory whose store it cannot open (a
/// schema version newer than the binary's) exits 1 with the store's
/// reason and leaves the index as it was. (It emptied the index first,
/// then found it could not open the store.)
#[tokio::test]
async fn reindex_that_cannot_open_the_store_leaves_the_index_as_it_was() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    talk(&host, "the narwhal ledger is overdue").await;
    flush(&host).await;
    let fleet = host.shutdown().await;
    let data = fleet.path().join("data");
    let found = |index_dir: &std::path::Path| {
        let index = TranscriptIndex::open(index_dir).unwrap();
        index
            .search_blocking(&SearchQuery::new("narwhal").with_limit(10))
            .unwrap()
            .total
    };
    assert_eq!(found(&data.join("index")), 1);
    // what a newer botfleet would leave
    let conn = rusqlite::Connection::open(data.join("fleet.db")).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    conn.pragma_update(None, "user_version", version + 1)
        .unwrap();
    drop(conn);

    let (code, out, err) = cli(&["reindex", "--data", data.to_str().unwrap()], "", "").await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("newer than this binary supports")
            && err.contains("the search index was left as it was"),
        "{err}"
    );
    assert_eq!(
        found(&data.join("index")),
        1,
        "the index still finds what it held"
    );
}

/// An approval of bot `r` in `session` to run `ls`, pending, as the gate
/// asks it.
async fn ask(host: &TestHost, session: &str) -> ApprovalId {
    ask_to_run(host, session, "ls").await
}

/// An approval of bot `r` in `session` to run `command`, pending.
pub(super) async fn ask_to_run(host: &TestHost, session: &str, command: &str) -> ApprovalId {
    let rt = host.host.as_ref().unwrap().fleet.runtime();
    let id = ApprovalId::new_v7();
    let new = NewApproval {
        id,
        bot: "r".parse().unwrap(),
        session: session.parse().unwrap(),
        turn: None,
        call_id: "call_1".into(),
        tool: "Shell".into(),
        fingerprint: format!("fp-{command}"),
        summary: format!("run `{command}`"),
        reason: "lists the workspace".into(),
        action: json!({"tool": "Shell", "args": {"command": command, "env": [command]}}),
        ttl_ms: 600_000,
        max_pending: 4,
    };
    rt.store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .unwrap();
    id
}

/// `botfleet approve` of an approval whose bot was taken out of the fleet
/// says what the host did (a note queued in the bot's conversation) and
/// what must still happen, not "(r was told)": nothing is told until the
/// bot is listed again, which it says.
#[tokio::test]
async fn approve_says_what_the_host_did_not_that_the_bot_was_told() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let session = talk(&host, "hello").await;
    let approval = ask(&host, &session).await;
    let fleet = host.shutdown().await.without_bot("r");
    fleet.write();
    let host = restart(fleet).await;

    let (code, out, err) = cli(&["approve", &approval.to_string()], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("approved {approval}: run `ls`\n")),
        "{out}"
    );
    assert!(
        !out.contains("was told") && !out.contains("may run"),
        "approve claims what the host does not know: {out}"
    );
    // and that r is removed, so nothing reads the note until it is listed
    // again (round 19: it said "read when r next runs")
    assert!(
        out.contains(
            "a note of it is queued in r's conversation; but bot r is no longer in the fleet's config: it runs no turns"
        ) && out
            .trim_end()
            .ends_with("list r in fleet.toml again and restart the host before the approval expires if the action is still needed"),
        "{out}"
    );
    host.shutdown().await;
}

/// QA (2026-12-04): `botfleet approvals` printed zero-width and other
/// invisible format characters (U+200B, U+200F, U+FEFF, U+00AD) as they
/// are, so an action could read as another; the web page's cards escape
/// every Unicode Cf character, and the docs say they show them "as the
/// CLI shows them".
#[tokio::test]
async fn approvals_show_invisible_format_characters_escaped() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .start()
        .await;
    let session = talk(&host, "hello").await;
    let command = "rm -rf ./cache\u{200b}/ \u{200f}x\u{feff}\u{ad}y\u{2028}z\u{2029}";
    let id = ask_to_run(&host, &session, command).await;
    let escaped = |out: &str| {
        for c in [
            '\u{200b}', '\u{200f}', '\u{feff}', '\u{ad}', '\u{2028}', '\u{2029}',
        ] {
            assert!(!out.contains(c), "{:?} shown raw: {out}", c);
            assert!(
                out.contains(&format!("\\u{{{:x}}}", u32::from(c))),
                "{:?} not escaped: {out}",
                c
            );
        }
    };
    let (code, out, err) = cli(&["approvals"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    escaped(&out);
    // in the JSON of a value that is not a string, too
    assert!(out.contains("\\u200b"), "{out}");
    // and in what `deny` says it decided (QA: its first line showed them
    // raw), and in the transcript's note of the decision
    let (code, out, err) = cli(&["deny", &id.to_string()], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    escaped(&out);
    let (code, out, err) = cli(&["transcript", "r", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("denied"), "{out}");
    escaped(&out);
    host.shutdown().await;
}

/// A notice found by `botfleet search` names the CLI's command, as
/// `botfleet transcript` prints it, not the API route beside it (QA,
/// 2026-12-05: ``retry it with `botfleet retry ID` or `POST
/// /v1/turns/ID/retry` ``); a quoted query with no match is echoed in
/// quotes it does not hold (it read `""buy milk""`).
#[tokio::test]
async fn search_prints_a_notices_command_without_its_route() {
    let host = TestFleet::new()
        .script("s", crate::support::ui_page::SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    talk(&host, "please fail").await;
    flush(&host).await;
    let (_, raw) = host.get("/v1/search?q=retry", TOKEN).await;
    assert!(raw.to_string().contains("POST /v1/turns/"), "{raw}");
    let (code, out, err) = cli(&["search", "retry"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("botfleet retry") && !out.contains("/v1/turns/"),
        "{out}"
    );
    // matched only in the route: the route stays, so the hit shows why
    // it was found (QA, 2026-12-05: `search OR` printed no match at all)
    let (code, out, err) = cli(&["search", "turns"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("/v1/turns/"), "{out}");
    let (code, out, err) = cli(&["search", "\"buy milk\""], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert_eq!(err.trim(), "no matches for '\"buy milk\"'");
    host.shutdown().await;
}

/// An approval's card is appended at each status change, so a decided
/// approval is found twice with the same text: each hit says which status
/// it is, in the API (`approval_status`) and the CLI (QA: two alike hits,
/// neither saying whether it was asked or decided).
#[tokio::test]
async fn an_approvals_search_hits_say_their_status() {
    let host = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", &["SendMessage", "Shell"])
        .start()
        .await;
    let session = talk(&host, "hello").await;
    let id = ask_to_run(&host, &session, "wombatcleanup").await;
    let (code, _, err) = cli(&["deny", &id.to_string()], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    flush(&host).await;
    let (status, v) = host.get("/v1/search?q=wombatcleanup", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    let mut statuses: Vec<&str> = v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["kind"] == "approval")
        .map(|h| h["approval_status"].as_str().unwrap_or("none"))
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["denied", "pending"], "{v}");
    // no other kind carries it
    assert!(
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["kind"] != "approval")
            .all(|h| h.get("approval_status").is_none()),
        "{v}"
    );
    let (code, out, err) = cli(&["search", "wombatcleanup"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(approval, pending)") && out.contains("(approval, denied)"),
        "{out}"
    );
    host.shutdown().await;
}
