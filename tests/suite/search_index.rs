//! The search index as derived data, through the binary: a damaged index
//! is set aside and rebuilt when the host starts, and `botfleet reindex`
//! rebuilds one it cannot read. And `GET /v1/search`'s answers: snippets
//! that end as the text does, `snippet_parts` that keep the text's own
//! `«»` apart from the marks (also on the web page: the browser test is
//! skipped, saying why, without chromium), and clear 400s for bad
//! parameters.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use serde_json::json;

use super::recall::CHAT;
use super::recall::RECALL_TOOLS;
use super::recall::chat;
use super::recall::flush;
use crate::support::browser::Browser;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::HostProcess;
use crate::support::process::cli;
use crate::support::process::free_port;
use crate::support::process::wait_found;

/// The names in `dir` that start with `prefix`.
fn names_starting(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// A host process with two messages about a wombat indexed, stopped
/// cleanly; returns the fleet (keep it: it owns the temp dir), its file,
/// the log and the port.
async fn indexed_then_stopped() -> (TestFleet, PathBuf, PathBuf, u16) {
    let fleet = TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    for (i, text) in ["the wombat manifest is late", "ship the wombat crate"]
        .iter()
        .enumerate()
    {
        let (status, body) = client
            .send_message("r", text, &format!("k-{i}"))
            .await
            .unwrap();
        assert_eq!(status.as_u16(), 202, "{body}");
    }
    wait_found(&client, "wombat", 2).await;
    host.stop(&log).await;
    (fleet, path, log, port)
}

/// Deletes one `.term` file of the index in `index`.
fn delete_a_term_file(index: &Path) {
    let term = names_starting(index, "")
        .into_iter()
        .find(|n| n.ends_with(".term"))
        .expect("the index has a segment");
    std::fs::remove_file(index.join(term)).unwrap();
}

#[tokio::test]
async fn a_damaged_index_is_set_aside_and_rebuilt_when_the_host_starts() {
    let (fleet, path, log, port) = indexed_then_stopped().await;
    let data = fleet.path().join("data");
    std::fs::write(data.join("index/meta.json"), "garbage\n").unwrap();

    // the host starts (it used to exit: "cannot open the search index")
    let mut host = HostProcess::start(&path, port, &log).await;
    host.wait_log("the search index is damaged: moved it aside")
        .await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    wait_found(&client, "wombat", 2).await;
    // the operator is told when the rebuilt index holds everything
    host.wait_log("search index caught up with the store").await;
    // the damaged index is kept beside the new one, as it was
    let aside = names_starting(&data, "index.damaged-");
    assert_eq!(aside.len(), 1, "{aside:?}");
    let meta = std::fs::read_to_string(data.join(&aside[0]).join("meta.json")).unwrap();
    assert_eq!(meta, "garbage\n");
    host.stop(&log).await;
    // said once, with what to do (two WARN lines said it, QA)
    let logged = std::fs::read_to_string(&log).unwrap();
    let said = logged
        .lines()
        .filter(|l| l.contains("damaged") && l.contains("moved"))
        .count();
    assert_eq!(said, 1, "{logged}");
    assert!(logged.contains("Delete the moved copy"), "{logged}");

    // a missing segment file too
    delete_a_term_file(&data.join("index"));
    let mut host = HostProcess::start(&path, port, &log).await;
    host.wait_log("the search index is damaged: moved it aside")
        .await;
    wait_found(&client, "wombat", 2).await;
    assert_eq!(names_starting(&data, "index.damaged-").len(), 2);
    host.stop(&log).await;
}

#[tokio::test]
async fn reindex_rebuilds_an_index_it_cannot_read() {
    let (fleet, path, log, port) = indexed_then_stopped().await;
    let data = fleet.path().join("data");
    let data_arg = data.to_str().unwrap();
    for damage in ["meta", "term"] {
        match damage {
            "meta" => std::fs::write(data.join("index/meta.json"), "garbage\n").unwrap(),
            _ => delete_a_term_file(&data.join("index")),
        }
        let (code, out, err) = cli(&["reindex", "--data", data_arg], "", "").await;
        assert_eq!(code, 0, "{damage}: {out}{err}");
        assert!(out.starts_with("reindexed "), "{damage}: {out}");
    }
    // reindex wipes: nothing is set aside, and the host starts on the
    // rebuilt index without a warning
    assert_eq!(names_starting(&data, "index.damaged-").len(), 0);
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    wait_found(&client, "wombat", 2).await;
    host.stop(&log).await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("is damaged"), "{logged}");
}

/// A database restored to roll back an upgrade is older than the binary:
/// `reindex` refuses it without changing a byte (it used to migrate it,
/// and the older botfleet then refused the database as too new), and the
/// host's start is what upgrades it.
#[tokio::test]
async fn reindex_refuses_an_older_database_and_changes_nothing() {
    let (fleet, path, log, port) = indexed_then_stopped().await;
    let data = fleet.path().join("data");
    let db = data.join("fleet.db");
    // the database as migration 16 left it: migrations 17 to 33 add
    // indexes, columns and two tables, taken back here (23's, 24's, 32's
    // and 33's columns only where this build has them)
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let stop: i64 = conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('subagents') WHERE name = 'stop'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if stop > 0 {
            conn.execute_batch("ALTER TABLE subagents DROP COLUMN stop;")
                .unwrap();
        }
        // 24's column and index, where this build has them
        let name_key: i64 = conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('bots') WHERE name = 'name_key'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if name_key > 0 {
            conn.execute_batch("DROP INDEX bots_name_key; ALTER TABLE bots DROP COLUMN name_key;")
                .unwrap();
        }
        // 32's index and columns, and 33's, where this build has them
        conn.execute_batch("DROP INDEX IF EXISTS subagents_withheld;")
            .unwrap();
        for column in [
            "withheld_description",
            "withheld_result",
            "given_by",
            "given_seq",
        ] {
            let n: i64 = conn
                .query_row(
                    "SELECT count(*) FROM pragma_table_info('subagents') WHERE name = ?1",
                    [column],
                    |r| r.get(0),
                )
                .unwrap();
            if n > 0 {
                conn.execute_batch(&format!("ALTER TABLE subagents DROP COLUMN {column};"))
                    .unwrap();
            }
        }
        conn.execute_batch(
            "DROP INDEX bots_id_folded; ALTER TABLE inbox DROP COLUMN starts; \
             DROP TABLE room_audience; DROP TABLE hook_signatures; \
             DROP INDEX sessions_owner; DROP INDEX IF EXISTS subagents_running; \
             DROP INDEX IF EXISTS bots_owner_main; DROP INDEX IF EXISTS rooms_shared; \
             DROP TABLE IF EXISTS session_floors; DROP INDEX IF EXISTS approvals_owner_pending; \
             ALTER TABLE memory_forgotten DROP COLUMN expired_at; \
             PRAGMA user_version = 16;",
        )
        .unwrap();
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .unwrap();
    }
    let version = || -> i64 {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = std::fs::read(&db).unwrap();
    let (code, out, err) = cli(&["reindex", "--data", data.to_str().unwrap()], "", "").await;
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("is at schema version 16")
            && err.contains("reindex does not upgrade a database")
            && err.contains("start the host with this version once"),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database changed");
    assert_eq!(version(), 16);
    // the way the message gives: the host's start migrates and searches
    let host = HostProcess::start(&path, port, &log).await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    wait_found(&client, "wombat", 2).await;
    host.stop(&log).await;
    assert!(version() > 16);
}

/// A host (in-process) with alice's bot `r` on [`CHAT`], with the recall
/// tools.
async fn recall_host() -> TestHost {
    TestFleet::new()
        .script("s", CHAT)
        .bot("r", "s", RECALL_TOOLS)
        .start()
        .await
}

#[tokio::test]
async fn search_answers_end_snippets_as_the_text_and_mark_matches_unambiguously() {
    let host = recall_host().await;
    chat(&host, TOKEN, "r", "(urgent) did you ship the wombat?").await;
    chat(&host, TOKEN, "r", "C++ error: timeout (again)").await;
    chat(&host, TOKEN, "r", "fake «numbat» marks").await;
    flush(&host).await;

    let (status, v) = host.get("/v1/search?q=wombat", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["hits"][0]["snippet"],
        "(urgent) did you ship the «wombat»?"
    );
    assert_eq!(
        v["hits"][0]["snippet_parts"],
        json!(["(urgent) did you ship the ", "wombat", "?"])
    );
    let (_, v) = host.get("/v1/search?q=again", TOKEN).await;
    assert_eq!(v["hits"][0]["snippet"], "C++ error: timeout («again»)");

    // the text's own «» look like marks in `snippet`, not in the parts
    let (_, v) = host.get("/v1/search?q=marks", TOKEN).await;
    assert_eq!(v["hits"][0]["snippet"], "fake «numbat» «marks»");
    assert_eq!(
        v["hits"][0]["snippet_parts"],
        json!(["fake «numbat» ", "marks", ""])
    );
    host.shutdown().await;
}

#[tokio::test]
async fn search_refuses_bad_parameters_saying_what_is_wrong() {
    let host = recall_host().await;
    let cases = [
        ("q=%FF%FE", "the query parameter \"q\" is not UTF-8 text"),
        (
            "q=wombat&limit=%C3",
            "the query parameter \"limit\" is not UTF-8",
        ),
        ("q=wombat&limit=abc", "limit \"abc\" is not a number"),
        ("q=wombat&limit=1.5", "limit \"1.5\" is not a number"),
        ("q=wombat&limit=500", "limit \"500\" is out of range"),
        ("q=wombat&limit=0", "limit \"0\" is out of range"),
        ("q=wombat&limit=-3", "limit \"-3\" is out of range"),
    ];
    for (query, expected) in cases {
        let (status, v) = host.get(&format!("/v1/search?{query}"), TOKEN).await;
        assert_eq!(status, 400, "{query}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{query}: {v}");
    }
    // escapes that decode to UTF-8 are fine, and a lone % stays text
    let (status, v) = host.get("/v1/search?q=caf%C3%A9+100%", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["query"], "café 100%");
    host.shutdown().await;
}

/// The web page marks only real matches: a person's own `«…»` stays text.
#[tokio::test]
async fn the_web_page_does_not_mark_the_texts_own_guillemets() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = recall_host().await;
    chat(&host, TOKEN, "r", "a real wombat and a fake «highlight»").await;
    flush(&host).await;
    browser.go(&format!("{}/", host.url)).await;
    browser.sign_in(&host.url, TOKEN).await;
    browser.go(&format!("{}/#/search?q=wombat", host.url)).await;
    browser.wait_text(".hits mark", "wombat").await;
    let marks = browser
        .js(
            "return [...document.querySelectorAll('.hits mark')].map((m) => m.textContent)",
            json!([]),
        )
        .await;
    assert_eq!(marks, json!(["wombat"]));
    let snippet = browser
        .js(
            "return document.querySelector('.hits .snippet').textContent",
            json!([]),
        )
        .await;
    assert_eq!(snippet, json!("a real wombat and a fake «highlight»"));
    host.shutdown().await;
}

/// The `session`, `seq` of each hit of a search answer.
fn hit_keys(v: &Value) -> Vec<(String, i64)> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["session"].as_str().unwrap().to_owned(),
                h["seq"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn search_pages_past_the_first_100_hits_with_offset() {
    let host = recall_host().await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    // every entry scores the same: the order of ties decides the pages
    for i in 0..150 {
        let (status, body) = client
            .send_message("r", &format!("pagingword item {i}"), &format!("p-{i}"))
            .await
            .unwrap();
        assert_eq!(status.as_u16(), 202, "{body}");
    }
    wait_found(&client, "pagingword", 150).await;

    let page = |offset: Option<u32>| {
        let mut path = "/v1/search?q=pagingword&limit=100".to_owned();
        if let Some(o) = offset {
            path.push_str(&format!("&offset={o}"));
        }
        let host = &host;
        async move {
            let (status, v) = host.get(&path, TOKEN).await;
            assert_eq!(status, 200, "{path}: {v}");
            v
        }
    };
    let first = page(None).await;
    assert_eq!(first["total"], 150, "{first}");
    assert_eq!(first["offset"], 0);
    assert_eq!(first["more"], true);
    assert_eq!(first["next_offset"], 100);
    let second = page(Some(100)).await;
    assert_eq!(second["total"], 150);
    assert_eq!(second["offset"], 100);
    assert_eq!(second["more"], false);
    assert_eq!(second["next_offset"], Value::Null);
    let mut keys = hit_keys(&first);
    keys.extend(hit_keys(&second));
    assert_eq!(keys.len(), 150);
    let unique: std::collections::HashSet<_> = keys.iter().collect();
    assert_eq!(unique.len(), 150, "a hit appears twice across the pages");
    // the same pages again, in the same order
    assert_eq!(hit_keys(&page(Some(0)).await), hit_keys(&first));
    assert_eq!(hit_keys(&page(Some(100)).await), hit_keys(&second));
    // past the end: no hits, the total still says how many match
    let beyond = page(Some(150)).await;
    assert_eq!(beyond["hits"], json!([]));
    assert_eq!(beyond["total"], 150);
    assert_eq!(beyond["more"], false);

    // the CLI pages the same way
    let (code, out, err) = cli(
        &[
            "search",
            "pagingword",
            "--limit",
            "100",
            "--offset",
            "100",
            "--json",
        ],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hit_keys(&v), hit_keys(&second));
    let (code, out, err) = cli(
        &["search", "pagingword", "--limit", "100"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    // the hint on stderr, the hits alone on stdout
    assert!(err.contains("more: add --offset 100"), "{err}");
    assert!(!out.contains("more:"), "{out}");

    for (offset, expected) in [
        ("abc", "offset \"abc\" is not a number"),
        ("-1", "offset \"-1\" is out of range"),
        ("10001", "offset \"10001\" is out of range"),
        ("99999999999999999999", "is out of range"),
    ] {
        let (status, v) = host
            .get(&format!("/v1/search?q=pagingword&offset={offset}"), TOKEN)
            .await;
        assert_eq!(status, 400, "{offset}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{offset}: {v}");
        assert!(message.contains("from 0 to 10000"), "{offset}: {v}");
    }
    host.shutdown().await;
}

/// The web page shows 50 hits, then the next page under them on "More
/// results", each hit once.
#[tokio::test]
async fn the_web_page_shows_more_results_on_request() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let host = recall_host().await;
    let client = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    for i in 0..60 {
        let (status, body) = client
            .send_message("r", &format!("moreword item {i}"), &format!("m-{i}"))
            .await
            .unwrap();
        assert_eq!(status.as_u16(), 202, "{body}");
    }
    wait_found(&client, "moreword", 60).await;
    browser.go(&format!("{}/", host.url)).await;
    browser.sign_in(&host.url, TOKEN).await;
    browser
        .go(&format!("{}/#/search?q=moreword", host.url))
        .await;
    browser
        .wait_text(".hint", "60 matches, best 50 shown")
        .await;
    assert_eq!(browser.count(".hits li").await, 50);
    browser.click("button.more").await;
    browser.wait_text(".hint", "60 matches").await;
    browser
        .wait_js(
            "60 hits and no more button",
            "return document.querySelectorAll('.hits li').length === 60 && document.querySelector('button.more').hidden",
            json!([]),
        )
        .await;
    let snippets = browser
        .js(
            "return [...document.querySelectorAll('.hits .snippet')].map((s) => s.textContent)",
            json!([]),
        )
        .await;
    let unique: std::collections::HashSet<&str> = snippets
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(unique.len(), 60, "{snippets}");
    host.shutdown().await;
}
