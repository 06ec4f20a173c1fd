//! Room creation over bot records written straight to the store, as bots
//! created before a fleet-level check (or by different paths) may be.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::RoomId;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;

use super::NewRoom;
use super::create_room;
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
