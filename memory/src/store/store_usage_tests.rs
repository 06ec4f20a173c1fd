//! `Store::family_usage`: the usage a bot's daily token budget counts,
//! its own and its subagents', of one day.
#![allow(clippy::unwrap_used)]

use serde_json::json;

use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::record::TokenUsage;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;

fn id(s: &str) -> BotId {
    BotId::new(s).unwrap()
}

fn bot(s: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: id(s),
        name: s.into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// `sub`, a subagent of `parent` with `status`.
fn subagent(sub: &str, parent: &str, status: SubagentStatus) -> Vec<Mutation> {
    let session = SessionKey {
        bot: id(sub),
        kind: SessionKind::Subagent,
        peer: parent.into(),
    };
    vec![
        Mutation::UpsertBot(bot(sub, &format!("subagent:{parent}"))),
        Mutation::CreateSubagent(SubagentRecord {
            id: id(sub),
            parent: id(parent),
            parent_session: session.id(),
            description: "a task".into(),
            status,
            result: None,
            created_at: 0,
            updated_at: 0,
        }),
    ]
}

fn usage(bot: &str, day: &str, prompt: u64) -> Mutation {
    Mutation::AddUsage {
        bot: id(bot),
        day: day.into(),
        turns: 1,
        usage: TokenUsage {
            calls: 1,
            prompt_tokens: prompt,
            completion_tokens: 1,
            ..TokenUsage::default()
        },
    }
}

/// A parent's family is itself and its subagents, running or finished:
/// their usage of the day asked for, each once, by bot; not another
/// parent's subagents, nor another day's, nor a bot it made otherwise.
#[tokio::test]
async fn a_family_is_the_bot_and_its_subagents_of_that_day() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let mut batch = vec![
        Mutation::UpsertBot(bot("p", "config")),
        Mutation::UpsertBot(bot("q", "config")),
        Mutation::UpsertBot(bot("made", "agent:p")),
    ];
    batch.extend(subagent("p.sub-1", "p", SubagentStatus::Running));
    batch.extend(subagent("p.sub-2", "p", SubagentStatus::Failed));
    batch.extend(subagent("q.sub-1", "q", SubagentStatus::Running));
    batch.extend([
        usage("p", "2026-03-01", 100),
        usage("p", "2026-03-01", 5),
        usage("p", "2026-02-28", 7_000),
        usage("p.sub-1", "2026-03-01", 200),
        usage("p.sub-2", "2026-03-01", 300),
        usage("p.sub-2", "2026-03-02", 9_000),
        usage("q", "2026-03-01", 8_000),
        usage("q.sub-1", "2026-03-01", 8_000),
        usage("made", "2026-03-01", 8_000),
    ]);
    store.write(batch).await.unwrap();

    let family = store.family_usage(&id("p"), "2026-03-01").await.unwrap();
    let tokens: Vec<(&str, u64, u32)> = family
        .iter()
        .map(|(b, u)| (b.as_str(), u.total(), u.calls))
        .collect();
    assert_eq!(
        tokens,
        vec![("p", 107, 2), ("p.sub-1", 201, 1), ("p.sub-2", 301, 1)]
    );
    // a subagent's own family: itself (it delegates to none)
    let one = store
        .family_usage(&id("p.sub-1"), "2026-03-01")
        .await
        .unwrap();
    assert_eq!(one.len(), 1, "{one:?}");
    // a day without usage: nothing
    let none = store.family_usage(&id("p"), "2026-03-03").await.unwrap();
    assert!(none.is_empty(), "{none:?}");
}
