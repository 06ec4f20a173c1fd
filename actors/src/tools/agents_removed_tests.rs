//! UpdateAgent and a bot its owner removed (`DELETE /v1/bots/{bot}`):
//! refused as the call reads the bot, and by the writer when the removal
//! lands between the call's read and its write's commit. Before, the
//! write put back the record as read, without `removed_at`: the removed
//! bot came back, taking messages and running turns again.
#![allow(clippy::unwrap_used)]

use botfleet_memory::EntryKind;
use botfleet_memory::MutationResult;
use pretty_assertions::assert_eq;

use super::tests::speaker;
use super::*;

/// `f`'s caller, stored with its DM, and `scout`, made by it with
/// CreateAgent; `scout` as stored.
async fn with_scout(f: &crate::tools::test_support::ToolFixture) -> BotRecord {
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::EnsureSession(f.scope.session.clone()),
        ])
        .await
        .unwrap();
    let scout = json!({"name": "Scout", "role": "Finds things.", "id": "scout"});
    CreateAgent.call(&f.ctx("c0"), scout).await.unwrap();
    let made = f.rt.store.get_bot(&BotId::new("scout").unwrap()).await;
    let made = made.unwrap().unwrap();
    assert_eq!(made.origin, "agent:b");
    made
}

/// What `DELETE /v1/bots/scout` writes for it (`bot_remove.rs`).
async fn remove(f: &crate::tools::test_support::ToolFixture, scout: BotRecord) {
    let now = f.rt.store.clock().now_ms();
    f.rt.store
        .write(vec![Mutation::UpsertBot(scout.mark_removed(now))])
        .await
        .unwrap();
}

#[tokio::test]
async fn an_update_committed_after_the_bots_removal_does_not_bring_it_back() {
    let f = speaker();
    let scout = with_scout(&f).await;
    let args = json!({"agent": "scout", "role": "Finds things fast."});
    let out = UpdateAgent.call(&f.ctx("c1"), args).await.unwrap();

    // its owner removes it before the call's write commits
    remove(&f, scout).await;
    let results = f.rt.store.write(out.effects).await.unwrap();

    let stored = f.rt.store.get_bot(&BotId::new("scout").unwrap()).await;
    let stored = stored.unwrap().unwrap();
    assert!(
        stored.removed_at().is_some(),
        "the removed bot came back: {stored:?}"
    );
    assert_eq!(stored.role, "Finds things.", "nothing was changed");
    assert!(
        matches!(
            &results[..],
            [MutationResult::Limited {
                refused: Some(0),
                ..
            }]
        ),
        "{results:?}"
    );
    // the call's result is the refusal, naming why
    let entries = f.rt.store.tail_entries(f.scope.session.id, 10).await;
    let said: Vec<String> = entries
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            if let EntryKind::ToolResult {
                content, is_error, ..
            } = e.kind
            {
                is_error.then_some(content)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        said,
        vec![
            "error: scout was removed by its owner: it runs no turns and does not come back, \
             so UpdateAgent does not change it; nothing was changed. Next step: update another \
             of your agents, or make a new one with CreateAgent if you have it"
                .to_owned()
        ]
    );
}

#[tokio::test]
async fn an_update_of_a_removed_bot_is_refused_and_one_of_a_kept_bot_commits() {
    let f = speaker();
    let scout = with_scout(&f).await;

    // not removed: the write commits as before
    let args = json!({"agent": "scout", "role": "Finds things fast."});
    let out = UpdateAgent.call(&f.ctx("c1"), args).await.unwrap();
    f.rt.store.write(out.effects).await.unwrap();
    let stored = f.rt.store.get_bot(&scout.id).await.unwrap().unwrap();
    assert_eq!(stored.role, "Finds things fast.");
    assert!(stored.removed_at().is_none());

    remove(&f, stored).await;
    let args = json!({"agent": "scout", "name": "Seeker"});
    let err = UpdateAgent.call(&f.ctx("c2"), args).await.unwrap_err();
    assert!(
        err.message.starts_with("scout was removed by its owner")
            && err.message.ends_with("nothing was changed"),
        "{err}"
    );
    let stored = f.rt.store.get_bot(&scout.id).await.unwrap().unwrap();
    assert_eq!(stored.name, "Scout");
    assert!(stored.removed_at().is_some());
}

/// A speaker with Write, and its scout with Write and CreateAgent (its
/// record as it will be written: not stored yet).
async fn writing_scout() -> (crate::tools::test_support::ToolFixture, BotRecord) {
    let mut f = speaker();
    f.bot.tools.push("Write".into());
    let scout = with_scout(&f).await;
    let scout = BotRecord {
        tools: vec!["SendMessage".into(), "Write".into(), "CreateAgent".into()],
        ..scout
    };
    (f, scout)
}

/// A follower of the bot UpdateAgent takes a tool from (a bot it made,
/// cut to its tools in the same write) that its owner removes before the
/// write commits: the call is refused and nothing is written, neither the
/// bot's change nor the follower's record as read, which would bring it
/// back.
#[tokio::test]
async fn a_follower_removed_before_the_cut_commits_stays_removed() {
    let (f, scout) = writing_scout().await;
    let minion = BotRecord {
        origin: "agent:scout".into(),
        ..crate::tools::test_support::bot_record(
            "minion",
            "Minion",
            &f.bot.owner,
            &["SendMessage", "Write"],
        )
    };
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(scout.clone()),
            Mutation::UpsertBot(minion.clone()),
        ])
        .await
        .unwrap();
    let args = json!({"agent": "scout", "tools": ["SendMessage", "CreateAgent"]});
    let out = UpdateAgent.call(&f.ctx("c1"), args).await.unwrap();
    assert!(
        out.content.ends_with(
            "; the bots it made and its subagents keep only its tools: minion (now SendMessage)"
        ),
        "{}",
        out.content
    );

    // minion's owner removes it before the call's write commits
    remove(&f, minion).await;
    let results = f.rt.store.write(out.effects).await.unwrap();
    assert!(
        matches!(
            &results[..],
            [MutationResult::Limited {
                refused: Some(1),
                ..
            }]
        ),
        "{results:?}"
    );
    let stored = |id: &str| {
        let store = f.rt.store.clone();
        let id = BotId::new(id).unwrap();
        async move { store.get_bot(&id).await.unwrap().unwrap() }
    };
    let minion = stored("minion").await;
    assert!(minion.removed_at().is_some(), "came back: {minion:?}");
    assert_eq!(minion.tools, ["SendMessage", "Write"]);
    assert_eq!(
        stored("scout").await.tools,
        scout.tools,
        "nothing was changed"
    );
}

/// Regression (QA): the name of a made bot its owner removed was refused
/// for a new bot, as held by a bot no model sees; fleet.toml took it. The
/// removed bot's id stays its own.
#[tokio::test]
async fn a_removed_made_bots_name_is_free_again_but_not_its_id() {
    let f = speaker();
    with_scout(&f).await;
    let finder = json!({"name": "Field Finder", "role": "Finds fields.", "id": "ff"});
    let out = CreateAgent.call(&f.ctx("c1"), finder).await.unwrap();
    f.rt.store.write(out.effects).await.unwrap();
    let made = f.rt.store.get_bot(&BotId::new("ff").unwrap()).await;
    remove(&f, made.unwrap().unwrap()).await;

    let again = json!({"name": "Field Finder", "role": "Finds fields again.", "id": "ff-two"});
    let out = CreateAgent.call(&f.ctx("c2"), again).await.unwrap();
    f.rt.store.write(out.effects).await.unwrap();
    let made = f.rt.store.get_bot(&BotId::new("ff-two").unwrap()).await;
    assert_eq!(made.unwrap().unwrap().name, "Field Finder");
    // a message by that name goes to the bot that has it now
    let out = SendToAgent
        .call(
            &f.ctx("c4"),
            json!({"agent": "Field Finder", "text": "hello"}),
        )
        .await
        .unwrap();
    assert!(
        out.content.starts_with("delivered to ff-two"),
        "{}",
        out.content
    );
    // a name that reads as the removed bot's id still clashes with it
    let by_id = json!({"name": "FF", "role": "x", "id": "ff-three"});
    let err = CreateAgent.call(&f.ctx("c3"), by_id).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("reads as the id of ff, a bot its owner removed")
            && !err.to_string().contains("wake both")
            && err.to_string().contains("choose another name"),
        "{err}"
    );
}

/// The result of a cut of many followers names the first 20 and counts
/// the rest (QA, 2026-12-06: a bot's 27 subagents, finished ones too,
/// were all named, 1.8 KB of the model's context).
#[tokio::test]
async fn a_cut_of_many_followers_names_twenty() {
    let (f, scout) = writing_scout().await;
    let mut writes = vec![Mutation::UpsertBot(scout.clone())];
    for n in 0..23 {
        let made = BotRecord {
            origin: "agent:scout".into(),
            ..crate::tools::test_support::bot_record(
                &format!("minion{n:02}"),
                &format!("Minion {n}"),
                &f.bot.owner,
                &["SendMessage", "Write"],
            )
        };
        writes.push(Mutation::UpsertBot(made));
    }
    f.rt.store.write(writes).await.unwrap();
    let args = json!({"agent": "scout", "tools": ["SendMessage", "CreateAgent"]});
    let out = UpdateAgent.call(&f.ctx("c1"), args).await.unwrap();
    assert_eq!(
        out.content.matches("(now SendMessage)").count(),
        20,
        "{}",
        out.content
    );
    assert!(out.content.ends_with("; and 3 more"), "{}", out.content);
}
