//! A room that becomes shared through fleet.toml is a new audience too
//! (round 22, F2): alice's room of her own a1 and a2, where a1 searched
//! her DM and she posted a message, is shared from the start whose config
//! gives a2 to bob. As when a change of members gives it to him
//! (`room_becomes_shared.rs`), bob and his bot read the room from that
//! start's notice on, and alice's a1 starts a new context epoch: nothing
//! of the private era is sent to the model for the shared room.

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::openai_server::OpenAiServer;
use crate::support::shared_room::cabin_model;
use crate::support::shared_room::cabin_searched_in_own_room;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::requests_of;

/// In alice's DM, found by a1's SearchTranscript in the private room.
const CABIN: &str = "BIRCHWOODLANE4417";
/// In alice's message to the room while it was hers alone.
const EARLY: &str = "FIGPRESHARE";
/// In bob's message after the restart.
const LATE: &str = "DATEPOSTSHARE";

/// Alice's room `own` of a1 and a2 (b1 is bob's, outside it), in which
/// a1 searched her DM and she posted [`EARLY`]; then a start whose
/// fleet.toml gives a2 to bob.
async fn private_then_given(server: &OpenAiServer) -> TestHost {
    let host = mixed_fleet(
        &server.base_url(),
        &["SendMessage", "SearchTranscript"],
        &["SendMessage"],
    )
    .bot("a2", "main", &["SendMessage"])
    .start()
    .await;
    cabin_searched_in_own_room(&host, server, CABIN, EARLY).await;
    let fleet =
        host.shutdown()
            .await
            .without_bot("a2")
            .bot_of("a2", "main", &["SendMessage"], "bob");
    fleet.write();
    restart(fleet).await
}

/// Bob reads the room from the start's notice on (its page and a2's
/// first input), alice still reads all of it, and a1's requests for
/// bob's message hold nothing of the private era, saying why. (Before,
/// the room only turned `shared`: bob's page began at the room's first
/// entry with alice's message, and a1's context still held its search of
/// her DM.)
#[tokio::test]
async fn a_room_shared_by_an_owner_change_in_the_config_starts_a_new_audience() {
    let server = OpenAiServer::builder().responder(cabin_model).start().await;
    let host = private_then_given(&server).await;

    let (status, room) = host.get("/v1/groups/own", BOB_TOKEN).await;
    assert_eq!(
        (status, room["shared"].clone()),
        (200, json!(true)),
        "{room}"
    );
    let (status, page) = host.get("/v1/groups/own/entries", BOB_TOKEN).await;
    assert_eq!(status, 200, "{page}");
    let from = page["visible_from"].as_i64().unwrap_or(0);
    assert!(
        from > 1,
        "bob reads the room from the start's change: {page}"
    );
    let first = &page["entries"][0];
    assert_eq!(first["seq"], json!(from), "{page}");
    assert_eq!(first["code"], json!("members_changed"), "{page}");
    assert!(
        first["text"].as_str().unwrap_or("").contains("bob"),
        "the notice says who reads the room now: {page}"
    );
    assert!(!page.to_string().contains(EARLY), "{page}");
    let (_, hers) = host.get("/v1/groups/own/entries", TOKEN).await;
    assert_eq!(hers["visible_from"], json!(1), "{hers}");
    assert!(hers.to_string().contains(EARLY), "{hers}");

    let before = server.request_count();
    host.discuss(
        BOB_TOKEN,
        "own",
        &format!("@everyone hi from bob, what do you know about alice? {LATE}"),
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
    let a2 = requests_of(&server, before, "a2");
    assert!(!a2.is_empty(), "a2 spoke");
    let first = a2[0].to_string();
    assert!(
        first.contains(LATE) && !first.contains(EARLY),
        "a2, now bob's, reads the room from the change on: {first}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
