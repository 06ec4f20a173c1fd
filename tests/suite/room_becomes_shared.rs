//! A room that becomes shared is a new audience (tester H4, F6/F7):
//! alice's room of her own bots gets bob's bot. From the change on, bob
//! and his bot read the room from the change's notice (its timeline page,
//! search, the new member's first input), and alice's members start a new
//! context epoch: nothing of the private era (a DM search result, the
//! room's earlier messages) is sent to the model for the shared room.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::openai_server::OpenAiServer;
use crate::support::process::cli;
use crate::support::process::poll;
use crate::support::shared_room::cabin_model;
use crate::support::shared_room::cabin_searched_in_own_room;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::requests_of;
use crate::support::shared_room::share_with_bob;

/// In alice's DM, found by a1's SearchTranscript in the private room.
const CABIN: &str = "BIRCHWOODLANE7731";
/// In alice's message to the room while it was hers alone.
const EARLY: &str = "KIWIPRESHARE";
/// In bob's message after the change.
const LATE: &str = "PLUMPOSTSHARE";

async fn start(server: &OpenAiServer) -> TestHost {
    let a1 = &["SendMessage", "SearchTranscript"];
    mixed_fleet(&server.base_url(), a1, &["SendMessage"])
        .bot("a2", "main", &["SendMessage"])
        .start()
        .await
}

/// Alice's private room `own` (a1, a2), in which a1 searched her DM and
/// she posted [`EARLY`]; then b1 (bob's) joins. Returns the change's
/// answer.
async fn private_then_shared(host: &TestHost, server: &OpenAiServer) -> Value {
    cabin_searched_in_own_room(host, server, CABIN, EARLY).await;
    share_with_bob(host).await
}

/// Bob's b1 joins alice's room: its first input starts at the change
/// (not alice's earlier message), and bob's timeline page and search
/// start there too, while alice still reads everything. (Before, b1's
/// first input was the whole earlier timeline, and bob read and found
/// it.)
#[tokio::test]
async fn a_member_of_another_user_reads_the_room_from_its_joining() {
    let server = OpenAiServer::builder().responder(cabin_model).start().await;
    let host = start(&server).await;
    let change = private_then_shared(&host, &server).await;
    let from = change["visible_from"]["bob"].as_i64().unwrap_or(0);
    assert!(from > 1, "the answer says where bob reads from: {change}");

    let before = server.request_count();
    host.discuss(BOB_TOKEN, "own", &format!("@b1 hello from bob {LATE}"))
        .await;
    let b1 = requests_of(&server, before, "b1");
    assert!(!b1.is_empty(), "b1 spoke");
    let first = b1[0].to_string();
    assert!(first.contains(LATE), "{first}");
    assert!(
        !first.contains(EARLY) && !first.contains("look up the cabin"),
        "b1's first room input holds only what came after it joined: {first}"
    );

    // bob's page of the timeline starts at the change's notice
    let (status, page) = host.get("/v1/groups/own/entries", BOB_TOKEN).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["visible_from"], json!(from), "{page}");
    let entries = page["entries"].as_array().unwrap();
    assert_eq!(entries[0]["seq"], json!(from), "{page}");
    assert_eq!(entries[0]["code"], json!("members_changed"), "{page}");
    assert!(!page.to_string().contains(EARLY), "{page}");
    assert!(page.to_string().contains(LATE), "{page}");
    // asked for from the start: the same
    let (_, again) = host
        .get("/v1/groups/own/entries?after=0&limit=5", BOB_TOKEN)
        .await;
    assert_eq!(again["entries"][0]["seq"], json!(from), "{again}");
    // alice reads the whole timeline
    let (_, hers) = host.get("/v1/groups/own/entries", TOKEN).await;
    assert_eq!(hers["visible_from"], json!(1), "{hers}");
    assert!(hers.to_string().contains(EARLY), "{hers}");

    // the CLI says so: the owner's line names where bob reads from, bob's
    // transcript starts there and says why
    let (code, out, err) = cli(&["group", "members", "own", "a1,a2,b1"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("bob reads it from #{from} on")),
        "{out}"
    );
    let (code, out, err) = cli(&["group", "transcript", "own"], &host.url, BOB_TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("(the room's entries before #{from} are not shown")),
        "{out}"
    );
    assert!(!out.contains(EARLY) && out.contains(LATE), "{out}");

    // search: once bob's later message is indexed (the index follows the
    // store's order), the earlier one is not found for bob, and is for alice
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let timeline = page["session"].as_str().unwrap();
    poll(20, async || {
        let v = bob.get_query("/v1/search", &[("q", LATE)]).await.unwrap();
        let hits = v["hits"].as_array().cloned().unwrap_or_default();
        if hits.iter().any(|h| h["session"] == json!(timeline)) {
            Ok(())
        } else {
            Err(format!("bob's message was never indexed: {v}"))
        }
    })
    .await;
    let found = bob.get_query("/v1/search", &[("q", EARLY)]).await.unwrap();
    assert_eq!(found["total"], json!(0), "{found}");
    let found = bob
        .get_query("/v1/search", &[("q", EARLY), ("session", timeline)])
        .await
        .unwrap();
    assert_eq!(found["total"], json!(0), "{found}");
    let found = host
        .client()
        .get_query("/v1/search", &[("q", EARLY)])
        .await
        .unwrap();
    assert!(
        found["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["session"] == json!(timeline)),
        "{found}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// Alice's a2, not addressed while the room was hers alone, speaks first
/// after bob's bot joined: its input starts at the change too, not at its
/// last turn (QA, 2026-12-04: it was handed alice's private discussion
/// as "new public messages", and repeated it where bob reads).
#[tokio::test]
async fn an_owners_member_silent_in_the_private_era_is_not_handed_it() {
    let server = OpenAiServer::builder().responder(cabin_model).start().await;
    let host = start(&server).await;
    private_then_shared(&host, &server).await;

    let before = server.request_count();
    host.discuss(BOB_TOKEN, "own", &format!("@a2 hello from bob {LATE}"))
        .await;
    let a2 = requests_of(&server, before, "a2");
    assert!(!a2.is_empty(), "a2 spoke");
    let first = a2[0].to_string();
    assert!(first.contains(LATE), "{first}");
    for body in &a2 {
        let text = body.to_string();
        assert!(
            !text.contains(EARLY) && !text.contains(CABIN),
            "nothing said before the change reaches a2's shared-room turn: {text}"
        );
    }
    host.shutdown().await;
    server.shutdown().await;
}

/// a1's own session of the room starts a new epoch at the change: after
/// it (here read back by a restarted host) no request of a1 holds the DM
/// search result of its private turn or alice's earlier message, and it
/// is told why. (Before, the whole private-era session — tool result
/// with the cabin address included — was sent with bob's message, and a
/// later compaction summarised it into the shared room for good.)
#[tokio::test]
async fn a_members_private_era_is_not_sent_once_the_room_is_shared() {
    private_era_not_sent(true).await;
}

/// The same while a1's bot stays active, its context of the private turn
/// in memory: the engine reads the session again when its epoch moved
/// past the tail's (`engine/runner.rs`).
#[tokio::test]
async fn a_members_private_era_is_not_sent_once_the_room_is_shared_live() {
    private_era_not_sent(false).await;
}

async fn private_era_not_sent(restarted: bool) {
    let server = OpenAiServer::builder().responder(cabin_model).start().await;
    let host = start(&server).await;
    private_then_shared(&host, &server).await;
    let host = if restarted {
        restart(host.shutdown().await).await
    } else {
        host
    };

    let before = server.request_count();
    host.discuss(
        BOB_TOKEN,
        "own",
        "@a1 hi from bob, what do you know about alice?",
    )
    .await;
    let a1 = requests_of(&server, before, "a1");
    assert!(!a1.is_empty(), "a1 spoke");
    for body in &a1 {
        let text = body.to_string();
        assert!(
            !text.contains(CABIN) && !text.contains(EARLY),
            "nothing of the private era reaches the shared room: {text}"
        );
    }
    assert!(
        a1[0].to_string().contains("is not carried over"),
        "a1 is told the room's earlier conversation is not carried over: {}",
        a1[0]
    );
    host.shutdown().await;
    server.shutdown().await;
}
