#![allow(clippy::unwrap_used)]

use botfleet_memory::UserId;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::super::Task;
use super::*;
use crate::tools::Tool;
use crate::tools::ToolOutput;
use crate::tools::test_support::ToolFixture;

fn task() -> Value {
    json!({"description": "survey", "prompt": "Look around and report."})
}

/// The child a Task call's effects create (its only bot write).
fn created(out: &ToolOutput) -> BotId {
    let bots: Vec<&BotRecord> = out
        .effects
        .iter()
        // within the writer's limits (`Mutation::Limited`)
        .flat_map(Mutation::within_limits)
        .filter_map(|m| match m {
            Mutation::CreateBot(b) | Mutation::UpsertBot(b) => Some(b),
            _ => None,
        })
        .collect();
    assert_eq!(bots.len(), 1, "{:#?}", out.effects);
    bots[0].id.clone()
}

/// A bot of another person, holding `id`.
fn mallorys(id: &BotId) -> BotRecord {
    BotRecord {
        id: id.clone(),
        name: "Mallory's".into(),
        owner: UserId::new("mallory").unwrap(),
        role: "Mine.".into(),
        provider: "p".into(),
        tools: vec![],
        settings: json!({}),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    }
}

#[test]
fn ids_come_from_the_call_and_fit_any_parent() {
    let parent = BotId::new("p").unwrap();
    let turn = TurnId::new_v7();
    let first = candidate(&parent, turn, "c1", 0).unwrap();
    assert_eq!(first, candidate(&parent, turn, "c1", 0).unwrap());
    let hash = first.as_str().strip_prefix("p.sub-").unwrap();
    assert_eq!(hash.len(), 12, "{first}");
    assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    let all: std::collections::HashSet<BotId> = (0..MAX_CANDIDATES)
        .map(|n| candidate(&parent, turn, "c1", n).unwrap())
        .chain([candidate(&parent, turn, "c2", 0).unwrap()])
        .collect();
    assert_eq!(all.len(), MAX_CANDIDATES as usize + 1);
    // the longest parent, itself a subagent of a long one
    let long = BotId::new(format!("{}.sub-0123456789ab", "a".repeat(47))).unwrap();
    assert_eq!(long.as_str().len(), 64);
    let child = candidate(&long, turn, "c1", 0).unwrap();
    assert_eq!(child.as_str().len(), 64);
    assert!(child.as_str().starts_with(&"a".repeat(47)), "{child}");
}

/// A Task call whose id is held by another bot (any owner's: ids are
/// global) leaves that bot alone and starts its child under its next id;
/// run again after its child was committed (the engine re-runs a call cut
/// off by a crash), it gives that child back and makes no second one.
/// Before, the held bot was upserted over: its owner, role and origin
/// became the subagent's.
#[tokio::test]
async fn a_held_id_is_skipped_and_a_call_run_again_finds_its_own_child() {
    let f = ToolFixture::new();
    let first = Task.call(&f.ctx("c1"), task()).await.unwrap();
    let wanted = created(&first);
    // nothing was committed; another bot takes the id meanwhile
    f.rt.store
        .write(vec![Mutation::UpsertBot(mallorys(&wanted))])
        .await
        .unwrap();
    let out = Task.call(&f.ctx("c1"), task()).await.unwrap();
    let child = created(&out);
    assert_ne!(child, wanted);
    assert!(out.content.contains(child.as_str()), "{}", out.content);
    f.rt.store.write(out.effects.clone()).await.unwrap();
    let held = f.rt.store.get_bot(&wanted).await.unwrap().unwrap();
    assert_eq!(held.owner, UserId::new("mallory").unwrap());
    assert_eq!(held.role, "Mine.");
    assert_eq!(held.origin, "config");
    // the same call again: its own child, nothing more to write
    let again = Task.call(&f.ctx("c1"), task()).await.unwrap();
    assert_eq!(again.content, out.content);
    assert!(again.effects.is_empty(), "{:#?}", again.effects);
    let subs =
        f.rt.store
            .subagents_listed(&f.bot.id, usize::MAX)
            .await
            .unwrap()
            .0;
    assert_eq!(
        subs.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        vec![child.clone()]
    );
    // another call: another child
    let other = Task.call(&f.ctx("c2"), task()).await.unwrap();
    let second = created(&other);
    assert_ne!(second, child);
    assert_ne!(second, wanted);
}

/// An id an earlier call of the same step creates (not committed yet) is
/// held too.
#[tokio::test]
async fn an_id_a_call_of_the_same_step_creates_is_held() {
    let f = ToolFixture::new();
    let wanted = candidate(&f.bot.id, f.turn, "c1", 0).unwrap();
    let earlier = [Mutation::CreateBot(mallorys(&wanted))];
    let ctx = ToolContext {
        step_effects: &earlier,
        delivered_before: 0,
        turn_tokens: 0,
        ..f.ctx("c1")
    };
    let out = Task.call(&ctx, task()).await.unwrap();
    let child = created(&out);
    assert_eq!(child, candidate(&f.bot.id, f.turn, "c1", 1).unwrap());
}
