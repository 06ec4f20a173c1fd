//! Memory through the Store and hub API.

use std::collections::BTreeSet;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::test_fixture::bot;
use super::test_fixture::fixture;
use super::*;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::store::Mutation;
use crate::store::MutationResult;

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn user(u: &str) -> MemoryScope {
    MemoryScope::User(UserId::new(u).unwrap())
}

fn agent(b: &str) -> MemoryScope {
    MemoryScope::Agent(BotId::new(b).unwrap())
}

fn new(seed: &str, scope: &MemoryScope, layer: Layer, text: &str) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: scope.clone(),
        layer,
        text: text.into(),
        importance: Importance::NORMAL,
        expires_at: None,
        source: "test".into(),
    }
}

fn texts(items: &[MemoryItem]) -> Vec<&str> {
    items.iter().map(|i| i.text.as_str()).collect()
}

/// The same fact written again as more important is kept as the more
/// important one; written again as less important, it stays as it was
/// (QA: the higher importance was dropped, and the fact ranked and was
/// suggested for replacing as the less important one).
#[tokio::test]
async fn a_fact_written_again_keeps_the_higher_importance() {
    let f = fixture();
    let scope = user("alice");
    let with = |seed: &str, text: &str, importance: u8| NewMemory {
        importance: Importance::new(importance).unwrap(),
        ..new(seed, &scope, Layer::Profile, text)
    };
    let r = f.add(with("jazz", "Likes jazz", 2)).await;
    assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    let r = f.add(with("jazz-again", "likes  JAZZ", 5)).await;
    let MemoryOpResult::Unchanged(item) = &r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (item.text.as_str(), item.importance.get()),
        ("Likes jazz", 5)
    );
    let r = f.add(with("jazz-low", "Likes jazz", 1)).await;
    let MemoryOpResult::Unchanged(item) = &r else {
        panic!("{r:?}")
    };
    assert_eq!(item.importance.get(), 5);
    let snap = f.snapshot(&bot("a1", "alice", &[]), "").await;
    let shown: Vec<(&str, u8)> = snap
        .profile
        .iter()
        .map(|i| (i.text.as_str(), i.importance.get()))
        .collect();
    assert_eq!(shown, [("Likes jazz", 5)]);
}

#[tokio::test]
async fn a_profile_fact_is_shared_by_the_users_bots_only() {
    let f = fixture();
    let a1 = bot("a1", "alice", &[]);
    let a2 = bot("a2", "alice", &[]);
    let b1 = bot("b1", "bob", &[]);
    let r = f
        .add(new(
            "t1",
            &user("alice"),
            Layer::Profile,
            "Prefers tea,\n  not coffee.",
        ))
        .await;
    let MemoryOpResult::Added(item) = r else {
        panic!("{r:?}")
    };
    assert_eq!(item.text, "Prefers tea, not coffee.");
    f.add(new(
        "t2",
        &agent("a1"),
        Layer::Profile,
        "Writes the weekly report",
    ))
    .await;
    f.clock.advance_ms(5 * DAY);
    assert_eq!(
        texts(&f.snapshot(&a1, "").await.profile),
        vec!["Writes the weekly report", "Prefers tea, not coffee."],
        "agent scope first, then user"
    );
    assert_eq!(
        texts(&f.snapshot(&a2, "").await.profile),
        vec!["Prefers tea, not coffee."]
    );
    assert!(f.snapshot(&b1, "").await.is_empty());
}

#[tokio::test]
async fn project_scope_reaches_the_bots_that_joined() {
    let f = fixture();
    let p = MemoryScope::Project(crate::ids::ProjectId::new("apollo").unwrap());
    f.add(new("p1", &p, Layer::Profile, "Launch is on May 3"))
        .await;
    let member = bot("m", "alice", &["apollo", "zeus"]);
    let outsider = bot("o", "alice", &["zeus"]);
    assert_eq!(
        bot_scopes(&member),
        vec![
            agent("m"),
            user("alice"),
            p.clone(),
            "project:zeus".parse().unwrap()
        ]
    );
    assert_eq!(
        texts(&f.snapshot(&member, "").await.profile),
        vec!["Launch is on May 3"]
    );
    assert!(f.snapshot(&outsider, "").await.profile.is_empty());
}

#[tokio::test]
async fn writes_are_idempotent_by_id_and_by_text() {
    let f = fixture();
    let n = new("same", &user("alice"), Layer::Profile, "Lives in Lyon");
    assert!(matches!(f.add(n.clone()).await, MemoryOpResult::Added(_)));
    assert!(matches!(
        f.add(n.clone()).await,
        MemoryOpResult::Unchanged(_)
    ));
    let twin = new("other", &user("alice"), Layer::Profile, "  lives in LYON ");
    let MemoryOpResult::Unchanged(existing) = f.add(twin).await else {
        panic!("the same text is one fact")
    };
    assert_eq!(existing.id, MemoryId::derive("same"));
    // invisible characters do not make another fact (QA, 2026-12-05:
    // `lives in\u{200b} Lyon` was a second item, which Forget by text
    // left), and one of them alone is no fact
    for (seed, text) in [
        ("zwsp", "Lives in\u{200b} Lyon"),
        ("shy", "Lives in Ly\u{ad}on"),
    ] {
        let MemoryOpResult::Unchanged(existing) =
            f.add(new(seed, &user("alice"), Layer::Profile, text)).await
        else {
            panic!("{text:?} is the same fact")
        };
        assert_eq!(existing.id, MemoryId::derive("same"));
    }
    assert_eq!(
        f.add(new(
            "blank",
            &user("alice"),
            Layer::Profile,
            "\u{200b}\u{feff} \u{200b}"
        ))
        .await,
        MemoryOpResult::Refused(MemoryRefusal::Empty)
    );
    let clash = new("same", &user("alice"), Layer::Profile, "Something else");
    assert_eq!(
        f.add(clash).await,
        MemoryOpResult::Refused(MemoryRefusal::IdTaken(MemoryId::derive("same")))
    );
}

#[tokio::test]
async fn the_101st_fact_is_refused_with_what_to_replace() {
    let f = fixture();
    let scope = user("alice");
    let batch: Vec<Mutation> = (0..100)
        .map(|i| {
            let mut n = new(
                &format!("f{i}"),
                &scope,
                Layer::Profile,
                &format!("fact {i}"),
            );
            n.importance = Importance::new(if i == 42 { 1 } else { 3 }).unwrap();
            Mutation::Memory(Box::new(MemoryOp::Add(n)))
        })
        .collect();
    let results = f.store.write(batch).await.unwrap();
    assert!(results.iter().all(
        |r| matches!(r, MutationResult::Memory(m) if matches!(**m, MemoryOpResult::Added(_)))
    ));
    let r = f
        .add(new("f100", &scope, Layer::Profile, "one too many"))
        .await;
    let MemoryOpResult::Refused(refusal) = r else {
        panic!("{r:?}")
    };
    let MemoryRefusal::ProfileFull {
        count,
        max_facts,
        needed,
        suggestion,
        ..
    } = &refusal
    else {
        panic!("{refusal:?}")
    };
    assert_eq!((*count, *max_facts, *needed), (100, 100, 12));
    assert_eq!(suggestion.len(), 5);
    assert_eq!(
        suggestion[0],
        (MemoryId::derive("f42"), "fact 42".to_string()),
        "the least important fact is suggested first"
    );
    assert!(refusal.to_string().contains("100/100 facts"), "{refusal}");
    // replacing one makes room for the new text
    let replaced = f
        .hub
        .apply(MemoryOp::Replace {
            id: MemoryId::derive("f42"),
            scope: scope.clone(),
            text: "one too many".into(),
            importance: None,
            source: "test".into(),
        })
        .await
        .unwrap();
    assert!(
        matches!(replaced, MemoryOpResult::Replaced { .. }),
        "{replaced:?}"
    );
    let snap = f.snapshot(&bot("a", "alice", &[]), "").await;
    assert_eq!(snap.profile.len(), 100);
    assert!(snap.profile.iter().any(|i| i.text == "one too many"));
}

#[tokio::test]
async fn the_character_budget_is_enforced_for_adds_and_replaces() {
    let f = fixture();
    let scope = user("alice");
    for i in 0..8 {
        let text = format!("{i}{}", "x".repeat(499));
        assert!(matches!(
            f.add(new(&format!("c{i}"), &scope, Layer::Profile, &text))
                .await,
            MemoryOpResult::Added(_)
        ));
    }
    let r = f.add(new("c8", &scope, Layer::Profile, "y")).await;
    assert!(
        matches!(
            &r,
            MemoryOpResult::Refused(MemoryRefusal::ProfileFull {
                count: 8,
                chars: 4000,
                needed: 1,
                ..
            })
        ),
        "{r:?}"
    );
    let long = f
        .add(new("big", &scope, Layer::Profile, &"z".repeat(501)))
        .await;
    assert_eq!(
        long,
        MemoryOpResult::Refused(MemoryRefusal::TooLong {
            layer: Layer::Profile,
            chars: 501,
            max: MAX_FACT_CHARS
        })
    );
    // a decomposed text counts the characters a person sees, and is kept
    // composed (QA: 300 `e\u{301}` were refused as 600 characters)
    let decomposed = "e\u{301}".repeat(300);
    f.hub
        .apply(MemoryOp::Remove {
            id: MemoryId::derive("c6"),
            scope: scope.clone(),
        })
        .await
        .unwrap();
    let r = f
        .add(new("accents", &scope, Layer::Profile, &decomposed))
        .await;
    assert!(matches!(r, MemoryOpResult::Added(_)), "{r:?}");
    let snap = f.snapshot(&bot("a", "alice", &[]), "").await;
    assert!(
        snap.profile.iter().any(|i| i.text == "\u{e9}".repeat(300)),
        "{:?}",
        snap.profile
    );
    f.hub
        .apply(MemoryOp::Remove {
            id: MemoryId::derive("accents"),
            scope: scope.clone(),
        })
        .await
        .unwrap();
    let c6 = format!("6{}", "x".repeat(499));
    f.add(new("c6", &scope, Layer::Profile, &c6)).await;
    // a replace that grows the profile past 4000 characters is refused too
    f.hub
        .apply(MemoryOp::Remove {
            id: MemoryId::derive("c7"),
            scope: scope.clone(),
        })
        .await
        .unwrap();
    f.add(new("small", &scope, Layer::Profile, "short")).await;
    f.add(new("fill", &scope, Layer::Profile, &"f".repeat(495)))
        .await;
    let grow = f
        .hub
        .apply(MemoryOp::Replace {
            id: MemoryId::derive("small"),
            scope: scope.clone(),
            text: "shorter".into(),
            importance: None,
            source: "test".into(),
        })
        .await
        .unwrap();
    assert!(
        matches!(
            &grow,
            MemoryOpResult::Refused(MemoryRefusal::ProfileFull {
                chars: 4000,
                needed: 2,
                ..
            })
        ),
        "{grow:?}"
    );
    assert_eq!(
        f.add(new("empty", &scope, Layer::Profile, " \n ")).await,
        MemoryOpResult::Refused(MemoryRefusal::Empty)
    );
}

#[tokio::test]
async fn the_last_slot_goes_to_exactly_one_of_many_racing_writers() {
    let f = fixture();
    let scope = user("alice");
    for i in 0..95 {
        f.add(new(
            &format!("r{i}"),
            &scope,
            Layer::Profile,
            &format!("fact {i}"),
        ))
        .await;
    }
    let mut tasks = Vec::new();
    for i in 0..20 {
        let hub = f.hub.clone();
        let store = f.store.clone();
        let n = new(
            &format!("race{i}"),
            &scope,
            Layer::Profile,
            &format!("racer {i}"),
        );
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                hub.apply(MemoryOp::Add(n)).await.unwrap()
            } else {
                // bypassing the actor: the writer still holds the limit
                match store
                    .write(vec![Mutation::Memory(Box::new(MemoryOp::Add(n)))])
                    .await
                    .unwrap()
                    .pop()
                {
                    Some(MutationResult::Memory(r)) => *r,
                    other => panic!("{other:?}"),
                }
            }
        }));
    }
    let mut added = 0;
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            MemoryOpResult::Added(_) => added += 1,
            MemoryOpResult::Refused(MemoryRefusal::ProfileFull { .. }) => refused += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((added, refused), (5, 15));
    let items = f.store.memory_items(vec![scope], f.now()).await.unwrap();
    assert_eq!(items.len(), MAX_PROFILE_FACTS);
}

#[tokio::test]
async fn notes_fade_out_after_their_expiry() {
    let f = fixture();
    let a = bot("a", "alice", &[]);
    let mut note = new(
        "n1",
        &agent("a"),
        Layer::Notes,
        "Waiting for the invoice from ACME",
    );
    let expiry = f.now() + 2 * HOUR;
    note.expires_at = Some(expiry);
    assert!(matches!(f.add(note).await, MemoryOpResult::Added(_)));
    let before = f.snapshot(&a, "").await;
    assert_eq!(
        texts(&before.notes),
        vec!["Waiting for the invoice from ACME"]
    );
    f.clock.advance_ms(2 * HOUR);
    let after = f.snapshot(&a, "").await;
    assert!(after.notes.is_empty());
    let delta = MemoryDelta::between(&before, &after, &BTreeSet::new());
    assert_eq!(
        texts(&delta.expired),
        vec!["Waiting for the invoice from ACME"]
    );
    // an expired note leaves the prompt at its expiry, like a forgotten item
    assert!(delta.requires_refresh());
    // the next write to the scope deletes it from the store too, keeping
    // its id, scope and expiry (not its text), so that the id answers
    // "expired" rather than "no such item"
    let mut past = new("n2", &agent("a"), Layer::Notes, "stale");
    past.expires_at = Some(f.now() - 1);
    assert!(matches!(
        f.add(past).await,
        MemoryOpResult::Refused(MemoryRefusal::BadExpiry(_))
    ));
    assert_eq!(
        f.store
            .memory_lookup(&MemoryId::derive("n1"))
            .await
            .unwrap(),
        MemoryLookup::Expired {
            scope: agent("a"),
            at: expiry
        }
    );
    let mut no_expiry = new("n3", &agent("a"), Layer::Notes, "x");
    no_expiry.expires_at = None;
    assert!(matches!(
        f.add(no_expiry).await,
        MemoryOpResult::Refused(MemoryRefusal::BadExpiry(_))
    ));
    let mut profile_expiry = new("n4", &agent("a"), Layer::Profile, "x");
    profile_expiry.expires_at = Some(f.now() + HOUR);
    assert!(matches!(
        f.add(profile_expiry).await,
        MemoryOpResult::Refused(MemoryRefusal::BadExpiry(_))
    ));
}

#[tokio::test]
async fn forgetting_removes_the_fact_from_store_prompt_and_disk() {
    let f = fixture();
    let a = bot("a", "alice", &[]);
    let secret = "my locker code is 4711 zyxwvut";
    f.add(new("s", &user("alice"), Layer::Profile, secret))
        .await;
    f.add(new("k", &user("alice"), Layer::Profile, "Keeps this one"))
        .await;
    let shown = f.snapshot(&a, "").await;
    assert_eq!(shown.profile.len(), 2);
    let found = f
        .store
        .find_memory(bot_scopes(&a), "LOCKER code", f.now())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let id = MemoryId::derive("s");
    assert!(matches!(
        f.hub.forget(&id).await.unwrap(),
        MemoryOpResult::Removed(_)
    ));
    assert_eq!(
        f.hub.forget(&id).await.unwrap(),
        MemoryOpResult::AlreadyForgotten(id.clone())
    );
    let unknown = MemoryId::derive("never");
    assert_eq!(
        f.hub.forget(&unknown).await.unwrap(),
        MemoryOpResult::Refused(MemoryRefusal::UnknownId(unknown))
    );
    let now = f.snapshot(&a, "").await;
    assert_eq!(texts(&now.profile), vec!["Keeps this one"]);
    assert_ne!(now.hash, shown.hash);
    let missing = f.store.missing_memory_ids(shown.shown_ids()).await.unwrap();
    let delta = MemoryDelta::between(&shown, &now, &missing);
    assert_eq!(texts(&delta.removed), vec![secret]);
    assert!(delta.requires_refresh());
    // the text is gone from the database file, not just unlinked
    f.store.close().await;
    let bytes = std::fs::read(f.store.path()).unwrap();
    let needle = b"4711 zyxwvut";
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "the forgotten text is still in the database file"
    );
}

#[tokio::test]
async fn the_snapshot_is_deterministic_and_hashes_what_it_shows() {
    let f = fixture();
    let a = bot("a", "alice", &[]);
    for i in 0..40 {
        let mut n = new(
            &format!("l{i}"),
            &agent("a"),
            Layer::Log,
            &format!("log entry {i}"),
        );
        if i == 3 {
            n.text = "Chose ACME as the supplier".into();
        }
        f.add(n).await;
        f.clock.advance_ms(HOUR);
    }
    f.add(new(
        "p",
        &user("alice"),
        Layer::Profile,
        "Likes short answers",
    ))
    .await;
    let one = f.snapshot(&a, "which supplier?").await;
    let two = f.snapshot(&a, "which supplier?").await;
    assert_eq!(one, two);
    assert_eq!(one.hash.len(), 64);
    assert_eq!(one.log.len(), LOG_PROMPT_CAP);
    assert_eq!(one.ranking[0].item.text, "Chose ACME as the supplier");
    let dates: Vec<i64> = one.log.iter().map(|i| i.created_at).collect();
    let mut sorted = dates.clone();
    sorted.sort();
    assert_eq!(dates, sorted, "log entries are shown oldest first");
    // another input picks other log entries: another hash
    let other = f.snapshot(&a, "").await;
    assert_ne!(other.hash, one.hash);
    // a change inside the epoch is a delta, not a refresh
    f.add(new(
        "p2",
        &user("alice"),
        Layer::Profile,
        "Works from Berlin",
    ))
    .await;
    let three = f.snapshot(&a, "which supplier?").await;
    let delta = MemoryDelta::between(&one, &three, &BTreeSet::new());
    assert_eq!(texts(&delta.added), vec!["Works from Berlin"]);
    assert!(delta.changed.is_empty() && delta.removed.is_empty());
    assert!(!delta.requires_refresh());
    assert!(MemoryDelta::between(&one, &two, &BTreeSet::new()).is_empty());
}

#[tokio::test]
async fn an_idle_scope_actor_passivates_and_comes_back() {
    let f = fixture();
    let hub = MemoryHub::with_idle(f.store.clone(), Duration::from_millis(50));
    hub.apply(MemoryOp::Add(new(
        "i1",
        &user("alice"),
        Layer::Profile,
        "one",
    )))
    .await
    .unwrap();
    assert_eq!(hub.active_scopes(), vec![user("alice")]);
    let mut waited = 0;
    while !hub.active_scopes().is_empty() {
        assert!(waited < 200, "the actor never passivated");
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    let r = hub
        .apply(MemoryOp::Add(new(
            "i2",
            &user("alice"),
            Layer::Profile,
            "two",
        )))
        .await
        .unwrap();
    assert!(matches!(r, MemoryOpResult::Added(_)));
    hub.shutdown().await;
}

#[tokio::test]
async fn a_wrong_scope_and_an_unknown_id_are_refused_clearly() {
    let f = fixture();
    f.add(new("w", &user("alice"), Layer::Profile, "x")).await;
    let r = f
        .hub
        .apply(MemoryOp::Remove {
            id: MemoryId::derive("w"),
            scope: user("bob"),
        })
        .await
        .unwrap();
    assert_eq!(
        r,
        MemoryOpResult::Refused(MemoryRefusal::WrongScope {
            id: MemoryId::derive("w"),
            actual: user("alice")
        })
    );
    assert!(MemoryId::parse("m-abc").is_err());
    assert_eq!(
        MemoryId::parse(" [m-abcdefgh2345] ").unwrap().as_str(),
        "m-abcdefgh2345"
    );
    assert!("team:x".parse::<MemoryScope>().is_err());
    assert_eq!(
        "project:apollo".parse::<MemoryScope>().unwrap().to_string(),
        "project:apollo"
    );
}

#[tokio::test]
async fn a_full_log_is_refused_with_entries_to_forget() {
    let f = fixture();
    let scope = agent("a");
    let batch: Vec<Mutation> = (0..MAX_LOG_ENTRIES)
        .map(|i| {
            Mutation::Memory(Box::new(MemoryOp::Add(new(
                &format!("log{i}"),
                &scope,
                Layer::Log,
                &format!("did thing {i}"),
            ))))
        })
        .collect();
    f.store.write(batch).await.unwrap();
    let r = f.add(new("over", &scope, Layer::Log, "one more")).await;
    assert!(
        matches!(&r, MemoryOpResult::Refused(MemoryRefusal::LogFull { count: 1000, suggestion, .. }) if suggestion.len() == 5),
        "{r:?}"
    );
}
