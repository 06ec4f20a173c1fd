use std::collections::HashMap;
use std::sync::atomic::Ordering;

use botfleet_memory::Layer;
use botfleet_memory::MAX_LIVE_NOTES;
use botfleet_memory::MAX_LOG_ENTRIES;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::NewMemory;
use botfleet_memory::UserId;
use serde_json::json;

use super::*;
use crate::tools::ToolRegistry;
use crate::tools::test_support::ToolFixture;

async fn remember(f: &ToolFixture, call: &str, args: Value) -> Result<ToolOutput, ToolError> {
    Remember.call(&f.ctx(call), args).await
}

/// Forget, run by a turn whose prompt shows every item the bot reaches.
async fn forget(f: &ToolFixture, call: &str, args: Value) -> Result<ToolOutput, ToolError> {
    let shown: Vec<String> = items(f)
        .await
        .into_iter()
        .map(|i| i.id.to_string())
        .collect();
    let ctx = ToolContext {
        memory_shown: crate::tools::ShownMemory {
            frozen: &shown,
            update: &[],
        },
        ..f.ctx(call)
    };
    Forget.call(&ctx, args).await
}

async fn items(f: &ToolFixture) -> Vec<MemoryItem> {
    let now = f.rt.store.clock().now_ms();
    f.rt.store
        .memory_items(bot_scopes(&f.bot), now)
        .await
        .unwrap()
}

async fn seed(f: &ToolFixture, seed: &str, scope: MemoryScope, text: &str) -> MemoryId {
    let id = MemoryId::derive(seed);
    let r =
        f.rt.memory
            .apply(MemoryOp::Add(NewMemory {
                id: id.clone(),
                scope,
                layer: Layer::Profile,
                text: text.into(),
                importance: Importance::NORMAL,
                expires_at: None,
                source: "test".into(),
            }))
            .await
            .unwrap();
    assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    id
}

fn user(u: &str) -> MemoryScope {
    MemoryScope::User(UserId::new(u).unwrap())
}

#[test]
fn the_registry_offers_remember_and_forget() {
    let r = ToolRegistry::builtin();
    assert!(r.contains("Remember") && r.contains("Forget"));
    assert_eq!(Remember.effect(), Effect::External);
    assert!(Remember.idempotent() && Forget.idempotent());
}

#[tokio::test]
async fn remember_writes_the_owners_profile_by_default_and_is_idempotent() {
    let f = ToolFixture::new();
    let out = remember(&f, "c1", json!({"text": "Prefers tea over coffee"}))
        .await
        .unwrap();
    assert!(out.content.contains("in user:u profile"), "{}", out.content);
    assert!(
        out.content.contains("1/100 facts, 23/4000 characters"),
        "{}",
        out.content
    );
    assert!(out.effects.is_empty());
    let stored = items(&f).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].scope, user("u"));
    assert_eq!(stored[0].source, "tool:b");
    assert!(out.content.contains(stored[0].id.as_str()));
    // the engine re-runs a call cut off by a crash: nothing doubles
    let again = remember(&f, "c1", json!({"text": "Prefers tea over coffee"}))
        .await
        .unwrap();
    assert!(
        again.content.starts_with("Already remembered")
            && again.content.ends_with("Nothing changed."),
        "{}",
        again.content
    );
    assert_eq!(items(&f).await.len(), 1);
    // the same fact stressed: kept once, at the higher importance
    let stressed = remember(
        &f,
        "c2",
        json!({"text": "prefers tea over COFFEE", "importance": 5}),
    )
    .await
    .unwrap();
    assert!(
        stressed.content.starts_with("Already remembered")
            && stressed.content.ends_with("It is kept at importance 5."),
        "{}",
        stressed.content
    );
    let stored = items(&f).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].importance.get(), 5);
}

/// Regression (memory QA): an importance of 300, 3.5 or -1 was told
/// "must be an integer from 0 to 255" (the field was a `u8`), which
/// invites 0 or 200 next; and an `expires_in_hours` of 1e308 was echoed
/// as a 309-digit number. Each now names the range the tool takes.
#[tokio::test]
async fn a_bad_importance_or_expiry_names_the_range_the_tool_takes() {
    let f = ToolFixture::new();
    for (given, shown) in [
        (json!(300), "\"300\""),
        (json!(3.5), "\"3.5\""),
        (json!(-1), "\"-1\""),
        (json!(0), "\"0\""),
        (json!(6), "\"6\""),
    ] {
        let e = remember(&f, "c1", json!({"text": "tea", "importance": given}))
            .await
            .unwrap_err();
        assert!(
            e.message
                .contains("use an integer from 1 (trivia) to 5 (critical)")
                && e.message.contains(shown)
                && !e.message.contains("255"),
            "{given}: {}",
            e.message
        );
    }
    let e = remember(&f, "c1", json!({"text": "tea", "importance": "4"}))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("write the number without quotes: 4") && !e.message.contains("255"),
        "{}",
        e.message
    );
    let e = remember(
        &f,
        "c1",
        json!({"text": "tea", "layer": "notes", "expires_in_hours": 1e308}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("expires_in_hours 1e308 is out of range"),
        "{}",
        e.message
    );
    // positive but under a second: the range, not "not in the future"
    let e = remember(
        &f,
        "c1",
        json!({"text": "tea", "layer": "notes", "expires_in_hours": 1e-9}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message
            .contains("expires_in_hours 1e-9 is out of range; give at least"),
        "{}",
        e.message
    );
    assert!(items(&f).await.is_empty());
    let ok = remember(&f, "c1", json!({"text": "tea", "importance": 5}))
        .await
        .unwrap();
    assert!(ok.content.contains("Remembered"), "{}", ok.content);
    // a whole number written as a float, as models write it (QA)
    let ok = remember(&f, "c2", json!({"text": "coffee", "importance": 4.0}))
        .await
        .unwrap();
    assert!(ok.content.contains("Remembered"), "{}", ok.content);
}

#[tokio::test]
async fn remember_refuses_scopes_the_bot_may_not_write() {
    let mut f = ToolFixture::new();
    let e = remember(&f, "c", json!({"text": "x", "scope": "user:bob"}))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("may not write the memory of user:bob"),
        "{e}"
    );
    assert!(
        e.message.contains("\"agent\""),
        "names what is allowed: {e}"
    );
    let e = remember(&f, "c", json!({"text": "x", "scope": "project:apollo"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("project:apollo"), "{e}");
    let e = remember(&f, "c", json!({"text": "x", "scope": "team"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("not a memory scope"), "{e}");
    f.bot.settings = json!({"projects": ["apollo"]});
    let ok = remember(
        &f,
        "c2",
        json!({"text": "Launch on May 3", "scope": "project"}),
    )
    .await
    .unwrap();
    assert!(
        ok.content.contains("project:apollo profile"),
        "{}",
        ok.content
    );
}

#[tokio::test]
async fn a_full_profile_names_the_ids_to_replace_and_replaces_works() {
    let f = ToolFixture::new();
    for i in 0..100 {
        seed(&f, &format!("f{i}"), user("u"), &format!("fact number {i}")).await;
    }
    let e = remember(&f, "c", json!({"text": "one more fact"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("100/100 facts"), "{e}");
    assert!(e.hint.contains("replace one of these ids"), "{e}");
    // the first suggestion, whichever it is: the seeds' order among
    // themselves depends on whether they were written in the same ms
    let (_, after) = e
        .hint
        .split_once("Forget one first: ")
        .expect("suggestions");
    let (first, rest) = after.split_once(' ').expect("an id and its text");
    let seeded: HashMap<String, usize> = (0..100)
        .map(|i| (MemoryId::derive(&format!("f{i}")).as_str().to_owned(), i))
        .collect();
    let n = seeded[first];
    assert!(rest.starts_with(&format!("\"fact number {n}\"")), "{e}");
    let out = remember(&f, "c", json!({"text": "one more fact", "replaces": first}))
        .await
        .unwrap();
    assert!(out.content.starts_with("Replaced"), "{}", out.content);
    assert!(
        out.content.contains(&format!("was \"fact number {n}\"")),
        "{}",
        out.content
    );
    let e = remember(&f, "c3", json!({"text": "y", "replaces": "m-aaaaaaaaaaaa"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("no memory item m-aaaaaaaaaaaa"), "{e}");
    let e = remember(
        &f,
        "c4",
        json!({"text": "y", "replaces": first, "layer": "log"}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("is a profile item"), "{e}");
}

/// A profile full by its characters: the advice names the replace when a
/// suggested fact is long enough to make room (QA: it only said Forget),
/// and that replace works.
#[tokio::test]
async fn a_profile_full_by_characters_offers_a_replace_that_makes_room() {
    let f = ToolFixture::new();
    for i in 0..8 {
        let text = format!("long fact {i} {}", "x".repeat(480));
        seed(&f, &format!("l{i}"), user("u"), &text).await;
    }
    let e = remember(&f, "c", json!({"text": "y".repeat(400)}))
        .await
        .unwrap_err();
    assert!(e.hint.contains("free at least"), "{e}");
    assert!(e.hint.contains("or replace one of them"), "{e}");
    let first = MemoryId::derive("l0");
    let out = remember(
        &f,
        "c2",
        json!({"text": "y".repeat(400), "replaces": first.as_str()}),
    )
    .await
    .unwrap();
    assert!(out.content.starts_with("Replaced"), "{}", out.content);
}

/// A replacement with the text another item holds is refused naming it,
/// and tells the bot to forget the outdated item instead (QA round 32:
/// it made two items of one text).
#[tokio::test]
async fn replacing_with_another_items_text_names_that_item() {
    let f = ToolFixture::new();
    let cafe = seed(&f, "cafe", user("u"), "Café in Zürich").await;
    let budget = seed(&f, "budget", user("u"), "Budget 12k").await;
    let e = remember(
        &f,
        "t1",
        json!({"text": "cafe in zurich", "replaces": budget.as_str()}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message
            .contains(&format!("{cafe} already holds this text")),
        "{e}"
    );
    assert!(e.hint.contains(&format!("Forget {budget}")), "{e}");
    let texts: Vec<String> = items(&f).await.into_iter().map(|i| i.text).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts.contains(&"Budget 12k".to_owned()), "{texts:?}");
}

/// In a shared room, where Forget is not offered, the twin's answer does
/// not send the bot to it.
#[tokio::test]
async fn a_twin_in_a_shared_room_is_answered_without_forget() {
    let mut f = ToolFixture::new();
    f.scope.runner = Runner::GroupMember { shared: true };
    f.scope.session.key.peer = "r1".into();
    let first = remember(&f, "t1", json!({"text": "ROOM standup at nine"}))
        .await
        .unwrap();
    let second = remember(&f, "t2", json!({"text": "ROOM demo on friday"}))
        .await
        .unwrap();
    let (first, second) = (remembered_id(&first), remembered_id(&second));
    let e = remember(
        &f,
        "t3",
        json!({"text": "room standup at nine", "replaces": second}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message
            .contains(&format!("{first} already holds this text")),
        "{e}"
    );
    assert!(!e.hint.contains("Forget"), "{e}");
}

#[tokio::test]
async fn notes_take_a_lifetime_and_other_layers_refuse_one() {
    let f = ToolFixture::new();
    let out = remember(
        &f,
        "n",
        json!({"text": "Waiting for ACME's invoice", "layer": "notes", "expires_in_hours": 6}),
    )
    .await
    .unwrap();
    assert!(
        out.content.contains("in agent:b notes until"),
        "{}",
        out.content
    );
    let e = remember(
        &f,
        "l",
        json!({"text": "x", "layer": "log", "expires_in_hours": 6}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("only for notes"), "{e}");
    let e = remember(
        &f,
        "l2",
        json!({"text": "x", "layer": "notes", "expires_in_hours": 0}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("out of range"), "{e}");
    let e = remember(&f, "l3", json!({"text": "x", "layer": "diary"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("unknown layer"), "{e}");
    let e = remember(&f, "l4", json!({"text": "   "}))
        .await
        .unwrap_err();
    assert!(e.message.contains("empty"), "{e}");
}

#[tokio::test]
async fn forget_by_id_really_forgets_and_says_so_twice() {
    let f = ToolFixture::new();
    let id = seed(&f, "tea", user("u"), "Prefers tea").await;
    let out = forget(&f, "f1", json!({"id": id.as_str()})).await.unwrap();
    assert!(
        out.content.starts_with(&format!("Forgot {id}")),
        "{}",
        out.content
    );
    assert!(items(&f).await.is_empty());
    let snap =
        f.rt.store
            .bot_memory_snapshot(&f.bot, "", f.rt.store.clock().now_ms())
            .await
            .unwrap();
    assert!(snap.is_empty(), "gone from the next prompt");
    let again = forget(&f, "f2", json!({"id": id.as_str()})).await.unwrap();
    assert!(
        again.content.contains("already forgotten"),
        "{}",
        again.content
    );
}

#[tokio::test]
async fn forgetting_an_unknown_or_foreign_id_is_a_clear_error() {
    let f = ToolFixture::new();
    let e = forget(&f, "e1", json!({"id": "m-zzzzzzzzzzzz"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("no memory item m-zzzzzzzzzzzz"), "{e}");
    assert!(e.hint.contains("Memory section"), "{e}");
    let bobs = seed(&f, "bob", user("bob"), "Bob's secret").await;
    let e = forget(&f, "e2", json!({"id": bobs.as_str()}))
        .await
        .unwrap_err();
    assert!(e.message.contains("that you can reach"), "{e}");
    let e = forget(&f, "e3", json!({"id": "42"})).await.unwrap_err();
    assert!(e.message.contains("invalid arguments for Forget"), "{e}");
    let e = forget(&f, "e4", json!({})).await.unwrap_err();
    assert!(e.message.contains("exactly one of"), "{e}");
}

#[tokio::test]
async fn forget_matching_removes_the_text_from_every_reachable_scope() {
    let f = ToolFixture::new();
    seed(&f, "u1", user("u"), "Lives at 12 Rue Cler").await;
    seed(
        &f,
        "a1",
        MemoryScope::Agent(f.bot.id.clone()),
        "Ship to 12 rue cler, Paris",
    )
    .await;
    seed(&f, "keep", user("u"), "Likes jazz").await;
    seed(&f, "bob", user("bob"), "Also 12 Rue Cler").await;
    let out = forget(&f, "m1", json!({"matching": "12 rue  CLER"}))
        .await
        .unwrap();
    assert!(
        out.content.starts_with("Forgot 2 item(s)"),
        "{}",
        out.content
    );
    let left: Vec<String> = items(&f).await.into_iter().map(|i| i.text).collect();
    assert_eq!(left, vec!["Likes jazz".to_string()]);
    let bob = f.rt.store.memory_items(vec![user("bob")], 0).await.unwrap();
    assert_eq!(bob.len(), 1, "another user's memory is untouched");
    let e = forget(&f, "m2", json!({"matching": "no such thing"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("nothing you remember contains"), "{e}");
    let e = forget(&f, "m3", json!({"matching": "ab"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("at least 3"), "{e}");
}

/// Regression: Forget by text refused every text under 3 characters, so
/// a two-character Chinese word (绿茶, a whole word) could not be
/// forgotten; and it matched the raw text, so full-width digits or a
/// decomposed accent in the memory did not match the plain text.
#[tokio::test]
async fn forget_matching_takes_two_cjk_characters_and_normalized_forms() {
    let f = ToolFixture::new();
    seed(&f, "tea", user("u"), "喜欢喝绿茶").await;
    seed(&f, "port", user("u"), "服务器端口是８０８０").await;
    seed(&f, "cafe", user("u"), "Meets at Cafe\u{301} Bleu").await;
    seed(&f, "keep", user("u"), "Likes jazz").await;
    let out = forget(&f, "c1", json!({"matching": "绿茶"})).await.unwrap();
    assert!(
        out.content.starts_with("Forgot 1 item(s)"),
        "{}",
        out.content
    );
    let out = forget(&f, "c2", json!({"matching": "8080"})).await.unwrap();
    assert!(
        out.content.starts_with("Forgot 1 item(s)"),
        "{}",
        out.content
    );
    let out = forget(&f, "c3", json!({"matching": "caf\u{e9}"}))
        .await
        .unwrap();
    assert!(
        out.content.starts_with("Forgot 1 item(s)"),
        "{}",
        out.content
    );
    let left: Vec<String> = items(&f).await.into_iter().map(|i| i.text).collect();
    assert_eq!(left, vec!["Likes jazz".to_string()]);
    // one CJK character, or two characters not all CJK, is still too short,
    // invisible characters not counted (QA, 2026-12-05: `ea` and a
    // zero-width space forgot everything holding "ea")
    for short in [
        "茶",
        "a茶",
        "ab",
        "ea\u{200b}",
        "e\u{ad}\u{ad}",
        "茶\u{200b}",
        // two characters once composed (QA: a decomposed `ée`, as a
        // macOS keyboard types it, forgot "green tea")
        "e\u{301}e",
    ] {
        let e = forget(&f, "c4", json!({"matching": short}))
            .await
            .unwrap_err();
        assert!(
            e.message
                .contains("at least 3 characters (2 when all are Chinese"),
            "{short}: {e}"
        );
    }
}

/// Regression: Forget by text removed its items one store write at a
/// time. Cut off by a crash (kill -9) and run again by the engine, the
/// call answered "Forgot 13 item(s)" (what was left), or, when all were
/// gone but the result not yet recorded, "nothing you remember contains".
#[tokio::test]
async fn forget_matching_run_again_answers_the_same() {
    let f = ToolFixture::new();
    let agent = MemoryScope::Agent(f.bot.id.clone());
    let mut ids = Vec::new();
    for i in 0..20 {
        let scope = if i % 2 == 0 { user("u") } else { agent.clone() };
        ids.push(
            seed(
                &f,
                &format!("crash{i}"),
                scope,
                &format!("crashme fact {i}"),
            )
            .await,
        );
    }
    seed(&f, "keep", user("u"), "Likes jazz").await;
    let args = json!({"matching": "crashme"});
    let writes = || f.rt.store.stats().batches.load(Ordering::Relaxed);

    let before = writes();
    let first = forget(&f, "c1", args.clone()).await.unwrap();
    // all the items go in one store write, so a crash leaves all or none
    // (one by one they were 20). The writer counts a batch just after
    // answering it, so either end of the count may be off by one.
    let forget_writes = writes() - before;
    assert!(
        forget_writes <= 2,
        "{forget_writes} store writes for one Forget"
    );
    assert!(
        first
            .content
            .starts_with("Forgot 20 item(s) containing \"crashme\""),
        "{}",
        first.content
    );
    for id in &ids {
        assert!(
            first.content.contains(id.as_str()),
            "{id}: {}",
            first.content
        );
    }
    let left: Vec<String> = items(&f).await.into_iter().map(|i| i.text).collect();
    assert_eq!(left, vec!["Likes jazz".to_owned()]);

    // the first run quotes what went
    assert!(
        first.content.contains("\"crashme fact 7\""),
        "{}",
        first.content
    );

    // the engine runs the call again: its result was not recorded; the
    // same items, by id (their texts are not kept)
    let again = forget(&f, "c1", args.clone()).await.unwrap();
    assert!(
        again
            .content
            .starts_with("Forgot 20 item(s) containing \"crashme\""),
        "{}",
        again.content
    );
    assert!(
        again.content.contains("texts are not kept"),
        "{}",
        again.content
    );
    for id in &ids {
        assert!(
            again.content.contains(id.as_str()),
            "{id}: {}",
            again.content
        );
    }
    assert!(!again.content.contains("crashme fact"), "{}", again.content);

    // a matching fact written in between is not that call's to forget
    seed(&f, "later", user("u"), "crashme again").await;
    let third = forget(&f, "c1", args.clone()).await.unwrap();
    assert_eq!(third.content, again.content);
    assert_eq!(items(&f).await.len(), 2);
    // another call is
    let other = forget(&f, "c2", args).await.unwrap();
    assert!(
        other.content.starts_with("Forgot 1 item(s)"),
        "{}",
        other.content
    );
}

#[tokio::test]
async fn shared_rooms_write_only_the_bots_own_memory() {
    let mut f = ToolFixture::new();
    // a fact of the owner's profile, written in private
    let mine = remember(
        &f,
        "p",
        json!({"text": "owner likes tea", "layer": "profile"}),
    )
    .await
    .unwrap();
    let owners = mine.content.split_whitespace().nth(2).unwrap().to_owned();
    f.scope.runner = Runner::GroupMember { shared: true };
    // the bot's own memory: unnamed (here, profile facts too) or named
    let out = remember(&f, "a", json!({"text": "the room meets on Mondays"}))
        .await
        .unwrap();
    assert!(
        out.content.contains(&format!("agent:{}", f.bot.id)),
        "{}",
        out.content
    );
    remember(
        &f,
        "b",
        json!({"text": "I prefer short answers", "layer": "profile", "scope": "agent"}),
    )
    .await
    .unwrap();
    // not the owner's profile, named or by default
    for (call, args) in [
        ("c", json!({"text": "x", "scope": "user"})),
        (
            "d",
            json!({"text": "x", "layer": "profile", "scope": "user"}),
        ),
    ] {
        let e = remember(&f, call, args.clone()).await.unwrap_err();
        assert!(
            e.message.contains("only be written to your own") && e.hint.contains("scope \"agent\""),
            "{args}: {e}"
        );
    }
    // nor a replacement in it, answered as for an id that does not exist
    // (naming its scope told the room it exists, and whose it is)
    let e = remember(&f, "e", json!({"text": "x", "replaces": owners}))
        .await
        .unwrap_err();
    let unknown = remember(&f, "f", json!({"text": "x", "replaces": "m-aaaaaaaaaaaa"}))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string().replace(&owners, "ID"),
        unknown.to_string().replace("m-aaaaaaaaaaaa", "ID")
    );
    let texts: Vec<String> = items(&f).await.into_iter().map(|i| i.text).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts.contains(&"owner likes tea".to_owned()), "{texts:?}");
    let e = forget(&f, "s1", json!({"id": "m-aaaaaaaaaaaa"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("not available"), "{e}");
}

/// Writes `n` items of `layer` to the bot's own memory as written in
/// private (`tool:<bot>`), each `PRIVATE <layer> <i>` padded to `chars`.
async fn seed_private(f: &ToolFixture, layer: Layer, n: usize, chars: usize) {
    let now = f.rt.store.clock().now_ms();
    let ops = (0..n)
        .map(|i| {
            let text = format!("PRIVATE {layer} {i} ");
            let pad = "x".repeat(chars.saturating_sub(text.chars().count()));
            MemoryOp::Add(NewMemory {
                id: MemoryId::derive(&format!("private {layer} {i}")),
                scope: MemoryScope::Agent(f.bot.id.clone()),
                layer,
                text: format!("{text}{pad}"),
                importance: Importance::NORMAL,
                expires_at: (layer == Layer::Notes).then_some(now + 3_600_000),
                source: tool_source(&f.bot.id, None),
            })
        })
        .collect();
    let results = f.rt.memory.apply_all(ops).await.unwrap();
    assert!(
        results
            .iter()
            .all(|r| matches!(r, MemoryOpResult::Added(_))),
        "{results:?}"
    );
}

/// The id Remember answered with ("Remembered as m-… in …").
fn remembered_id(out: &ToolOutput) -> String {
    out.content.split_whitespace().nth(2).unwrap().to_owned()
}

/// In a room shared with other people's bots, a full profile, log or
/// notes of the bot's own memory is answered without its private items
/// and without counts (they told the room how much it holds in private):
/// only what was remembered in that room is offered for replacing, and
/// with none, the owner is the one to make room. A write that fits shows
/// no counts there either. (Before, the refusal quoted the scope's
/// private items: a DM's facts posted to the room.)
#[tokio::test]
async fn a_full_layer_in_a_shared_room_quotes_nothing_private() {
    let mut f = ToolFixture::new();
    f.scope.runner = Runner::GroupMember { shared: true };
    f.scope.session.key.peer = "r1".into();
    let fact = remember(&f, "p1", json!({"text": "ROOM fact: standup at nine"}))
        .await
        .unwrap();
    assert!(!fact.content.contains("/100 facts"), "{}", fact.content);
    let room_fact = remembered_id(&fact);
    let note = remember(
        &f,
        "n1",
        json!({"text": "ROOM note: bring the slides", "layer": "notes"}),
    )
    .await
    .unwrap();
    let room_note = remembered_id(&note);
    seed_private(&f, Layer::Profile, 8, 470).await;
    seed_private(&f, Layer::Log, MAX_LOG_ENTRIES, 40).await;
    seed_private(&f, Layer::Notes, MAX_LIVE_NOTES - 1, 40).await;

    let long = "ROOM ".repeat(98);
    // 8 × 470 private characters and the room's 26 leave 214 free: 230
    // more lack 16, which replacing the room's fact frees; 490 more lack
    // 276, which it does not, so it is not offered (QA, 2026-12-05: it
    // was, and the replace was refused again)
    for (call, args, offered) in [
        ("p2", json!({"text": long}), None),
        ("p2b", json!({"text": "ROOM ".repeat(46)}), Some(&room_fact)),
        ("l1", json!({"text": "ROOM log", "layer": "log"}), None),
        (
            "n2",
            json!({"text": "ROOM note 2", "layer": "notes"}),
            Some(&room_note),
        ),
    ] {
        let e = remember(&f, call, args.clone()).await.unwrap_err();
        let shown = e.to_string();
        assert!(!shown.contains("PRIVATE"), "{args}: {shown}");
        assert!(
            !shown.contains('/') && !shown.contains(&MAX_LOG_ENTRIES.to_string()),
            "counts: {args}: {shown}"
        );
        assert!(e.message.contains("no room for this"), "{args}: {shown}");
        match offered {
            Some(id) => assert!(
                e.hint.contains(&format!("{id} \"ROOM")) && e.hint.contains("\"replaces\""),
                "{args}: {shown}"
            ),
            None => assert!(
                !e.hint.contains("m-") && e.hint.contains("direct message"),
                "{args}: {shown}"
            ),
        }
    }
    // a refused replacement does not offer the item it replaces
    let e = remember(&f, "p3", json!({"text": long, "replaces": room_fact}))
        .await
        .unwrap_err();
    assert!(
        !e.to_string().contains("PRIVATE") && !e.hint.contains("m-"),
        "{e}"
    );
    // in private, the whole scope is the bot's to see
    f.scope.runner = Runner::Main;
    let e = remember(&f, "p4", json!({"text": long, "scope": "agent"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("PRIVATE profile"), "{e}");
    assert!(e.message.contains("/4000 characters"), "{e}");
}
