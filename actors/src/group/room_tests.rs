//! Room creation over bot records written straight to the store, as bots
//! created before a fleet-level check (or by different paths) may be; and
//! posts decided before a member change that commit after it.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotRecord;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::RoomId;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;

use super::NewRoom;
use super::commit_post;
use super::create_room;
use super::plan_post;
use crate::group::GroupError;
use crate::tools::test_support::ToolFixture;
use crate::tools::test_support::bot_record;

/// A bot of `owner` with id `id` and display name `name`.
fn bot(id: &str, name: &str, owner: &UserId) -> BotRecord {
    bot_record(id, name, owner, &["SendMessage"])
}

/// Two members that answer to the same mention are refused, naming both
/// and the mention: fleet.toml refuses such a pair now, but one can still
/// be in the store (bots from before that check, or a CreateAgent bot and
/// a later fleet.toml bot). The room is not created.
#[tokio::test]
async fn a_room_of_two_bots_that_answer_to_the_same_name_is_refused() {
    let f = ToolFixture::new();
    let owner = f.bot.owner.clone();
    // "a-name" is a's display name; "Ann Lee" answers to @AnnLee, which is
    // annlee's id up to case
    for (first, second, token) in [
        (
            bot("a", "a-name", &owner),
            bot("a-name", "Other", &owner),
            "a-name",
        ),
        (
            bot("ann", "Ann Lee", &owner),
            bot("annlee", "C", &owner),
            "AnnLee",
        ),
    ] {
        f.rt.store
            .write(vec![
                Mutation::UpsertBot(first.clone()),
                Mutation::UpsertBot(second.clone()),
            ])
            .await
            .unwrap();
        let new = NewRoom {
            id: Some("clash".into()),
            name: "clash".into(),
            members: vec![first.id.to_string(), second.id.to_string()],
        };
        match create_room(&f.rt, &owner, new).await {
            Err(GroupError::Invalid(message)) => assert_eq!(
                message,
                format!(
                    "members {} and {} both answer to @{token}, so a mention of one would wake \
                     both; rename one of them (`name` in fleet.toml) or leave one out",
                    first.id, second.id
                )
            ),
            other => panic!("{} and {}: {other:?}", first.id, second.id),
        }
        let room =
            f.rt.store
                .get_room(&RoomId::new("clash").unwrap())
                .await
                .unwrap();
        assert!(room.is_none(), "the room was created: {room:?}");
    }
}

/// A member that answers to `@everyone` (from a store older than the
/// fleet.toml and CreateAgent checks) could never be mentioned alone: the
/// room is refused, naming it.
#[tokio::test]
async fn a_room_with_a_bot_that_answers_to_everyone_is_refused() {
    let f = ToolFixture::new();
    let owner = f.bot.owner.clone();
    for (first, second) in [
        (bot("everyone", "All", &owner), bot("b", "B", &owner)),
        (bot("a", "A", &owner), bot("e", "Every One", &owner)),
    ] {
        f.rt.store
            .write(vec![
                Mutation::UpsertBot(first.clone()),
                Mutation::UpsertBot(second.clone()),
            ])
            .await
            .unwrap();
        let new = NewRoom {
            id: Some("all".into()),
            name: "all".into(),
            members: vec![first.id.to_string(), second.id.to_string()],
        };
        match create_room(&f.rt, &owner, new).await {
            Err(GroupError::Invalid(message)) => assert!(
                message.contains("answers to @everyone") && message.contains("rename it"),
                "{message}"
            ),
            other => panic!("{} and {}: {other:?}", first.id, second.id),
        }
        let room = f.rt.store.get_room(&RoomId::new("all").unwrap()).await;
        assert!(room.unwrap().is_none());
    }
}

/// Alice's `a1`, `a2` and bob's shareable `b1`, and alice's room `r` of
/// `a1` and `b1` (shared). Answers bob.
async fn alice_shares_a_room_with_bob(f: &ToolFixture) -> UserId {
    let alice = f.bot.owner.clone();
    let bob = UserId::new("bob").unwrap();
    let mut b1 = bot("b1", "B One", &bob);
    b1.settings = serde_json::json!({ "shareable": true });
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(bot("a1", "A One", &alice)),
            Mutation::UpsertBot(bot("a2", "A Two", &alice)),
            Mutation::UpsertBot(b1),
        ])
        .await
        .unwrap();
    let new = NewRoom {
        id: Some("r".into()),
        name: "r".into(),
        members: vec!["a1".into(), "b1".into()],
    };
    let room = create_room(&f.rt, &alice, new).await.unwrap();
    assert!(room.shared, "{room:?}");
    bob
}

/// The room's timeline: (author, kind) of each entry, in seq order.
async fn timeline(f: &ToolFixture) -> Vec<(String, String)> {
    let room =
        f.rt.store
            .get_room(&RoomId::new("r").unwrap())
            .await
            .unwrap()
            .unwrap();
    f.rt.store
        .entries_after(room.timeline().id(), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| {
            let kind = match &e.kind {
                EntryKind::Notice { code, .. } => format!("notice {code}"),
                other => format!("{other:?}").chars().take(12).collect(),
            };
            (e.author, kind)
        })
        .collect()
}

/// Alice changes room `r`'s members to `a1` and `a2` (bob's bot leaves).
async fn alice_makes_it_private(f: &ToolFixture) {
    let alice = f.bot.owner.clone();
    crate::group::set_members(&f.rt, &alice, "r", &["a1".into(), "a2".into()])
        .await
        .unwrap();
}

/// The tester's first case, interleaved deterministically: bob's message
/// is decided while his `b1` is a member, alice's change removing `b1`
/// commits, then bob's message is written. It is refused as a room bob
/// may not use (as every later request of his is), and nothing of bob's
/// follows the change in the timeline. (Before, it was accepted after
/// the `members_changed` notice.)
#[tokio::test]
async fn a_post_that_crosses_its_posters_removal_is_refused() {
    let f = ToolFixture::new();
    let bob = alice_shares_a_room_with_bob(&f).await;
    let planned = plan_post(&f.rt, &bob, "r", "@b1 @a1 what did alice say?", None)
        .await
        .unwrap();
    alice_makes_it_private(&f).await;
    match commit_post(&f.rt, &bob, planned).await {
        Err(GroupError::NotFound(m)) => assert!(m.starts_with("no room \"r\" for you"), "{m}"),
        other => panic!("{other:?}"),
    }
    let timeline = timeline(&f).await;
    assert!(
        timeline.iter().all(|(author, _)| author != "bob"),
        "{timeline:?}"
    );
    assert!(
        f.rt.store
            .open_room_runs(&RoomId::new("r").unwrap())
            .await
            .unwrap()
            .is_empty()
    );
}

/// The tester's second case: alice's message is decided (addressing
/// `a1` and `b1`), her change to `a1`, `a2` commits, then the message is
/// written: refused with a conflict that says to post again, and posted
/// again it addresses the members it comes after. (Before, it was
/// accepted after the change, addressed to `a1` and `b1`.)
#[tokio::test]
async fn a_post_that_crosses_a_member_change_is_refused_and_posted_again_addresses_the_new_members()
{
    let f = ToolFixture::new();
    alice_shares_a_room_with_bob(&f).await;
    let alice = f.bot.owner.clone();
    let planned = plan_post(&f.rt, &alice, "r", "status, everyone?", None)
        .await
        .unwrap();
    alice_makes_it_private(&f).await;
    match commit_post(&f.rt, &alice, planned).await {
        Err(GroupError::Conflict(m)) => assert_eq!(
            m,
            "the members of room r changed while this message was posted, so it was not \
             posted; read the room again (GET /v1/groups/r) and post it again"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        timeline(&f).await.last().map(|(_, kind)| kind.as_str()),
        Some("notice members_changed")
    );
    let posted = super::post_message(&f.rt, &alice, "r", "status, everyone?", None)
        .await
        .unwrap();
    let ids: Vec<&str> = posted.addressed.iter().map(|b| b.as_str()).collect();
    assert_eq!(ids, ["a1", "a2"]);
}
