#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::IndexOptions;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TranscriptIndex;
use botfleet_memory::UserId;
use botfleet_memory::reindex;
use serde_json::json;

use crate::tools::ReadTranscript;
use crate::tools::SearchTranscript;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;

fn session(bot: &str, kind: SessionKind, peer: &str, owner: &str) -> SessionRecord {
    let key = SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind,
        peer: peer.into(),
    };
    SessionRecord {
        id: key.id(),
        key,
        owner: UserId::new(owner).unwrap(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    }
}

/// Bot `b` of `u` delegated to `b.sub-x` from its DM with `u`, where `u`
/// said a secret. Runs as the subagent, owned by `owner`, in its task
/// session.
async fn subagent_of(owner: &str) -> ToolFixture {
    let mut fx = ToolFixture::new();
    let index = TranscriptIndex::open(fx._dir.path().join("index")).unwrap();
    fx.rt.set_transcript_index(index.clone());
    let dm = session("b", SessionKind::Dm, "u", "u");
    let task = session("b.sub-x", SessionKind::Subagent, "b", owner);
    let mut writes = Vec::new();
    for (s, author, text) in [
        (&dm, "u", "my passport number is X1234567"),
        (&task, "b", "look up the passport office hours"),
    ] {
        writes.push(Mutation::EnsureSession(s.clone()));
        writes.push(Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: s.id,
            author: author.into(),
            turn: None,
            kind: EntryKind::UserMessage { text: text.into() },
        })));
    }
    writes.push(Mutation::CreateSubagent(SubagentRecord {
        id: BotId::new("b.sub-x").unwrap(),
        parent: BotId::new("b").unwrap(),
        parent_session: dm.id,
        description: "t".into(),
        status: SubagentStatus::Done,
        result: None,
        created_at: 0,
        updated_at: 0,
    }));
    fx.rt.store.write(writes).await.unwrap();
    reindex(&index, &fx.rt.store, IndexOptions::default(), |_, _| {})
        .await
        .unwrap();
    fx.bot.id = BotId::new("b.sub-x").unwrap();
    fx.bot.owner = UserId::new(owner).unwrap();
    fx.scope.session = task;
    fx
}

/// A subagent searches and reads the DM it was started from while that DM
/// is its owner's; once its parent (and so it) went to someone else, its
/// tools no longer reach the DM, which stays the former owner's. (Before,
/// the new owner's subagent read the former owner's DM.)
#[tokio::test]
async fn a_subagent_reaches_its_parent_dm_only_while_its_owner_owns_it() {
    let dm = session("b", SessionKind::Dm, "u", "u").id.to_string();
    let read = json!({"session": dm, "seq": 1});
    let search = json!({"query": "passport"});

    let fx = subagent_of("u").await;
    let out = SearchTranscript
        .call(&fx.ctx("c1"), search.clone())
        .await
        .unwrap()
        .content;
    assert!(out.contains("X1234567"), "{out}");
    let out = ReadTranscript
        .call(&fx.ctx("c2"), read.clone())
        .await
        .unwrap()
        .content;
    assert!(out.contains("X1234567"), "{out}");

    let fx = subagent_of("v").await;
    let out = SearchTranscript
        .call(&fx.ctx("c1"), search)
        .await
        .unwrap()
        .content;
    assert!(!out.contains("X1234567"), "{out}");
    assert!(out.contains("office hours"), "its own task stays: {out}");
    let err = ReadTranscript.call(&fx.ctx("c2"), read).await.unwrap_err();
    assert!(!err.to_string().contains("X1234567"), "{err}");
}

/// A parent sees the sessions of each of its subagents that its owner
/// owns, read in one query for all of them (one read per subagent made a
/// search by a bot with 1,500 subagents take 86–180 ms); not those of
/// another bot's subagents, nor a subagent session another owner holds.
#[tokio::test]
async fn a_parent_sees_its_subagents_sessions_its_owner_owns() {
    use super::VisibleSessions;

    let fx = ToolFixture::new();
    let mut writes = Vec::new();
    let mut mine = Vec::new();
    let mut others = Vec::new();
    for (sub, parent, owner) in [
        ("b.sub-1", "b", "u"),
        ("b.sub-2", "b", "u"),
        ("b.sub-3", "b", "v"),
        ("c.sub-1", "c", "u"),
    ] {
        let task = session(sub, SessionKind::Subagent, parent, owner);
        writes.push(Mutation::EnsureSession(task.clone()));
        writes.push(Mutation::CreateSubagent(SubagentRecord {
            id: BotId::new(sub).unwrap(),
            parent: BotId::new(parent).unwrap(),
            parent_session: session(parent, SessionKind::Dm, "u", "u").id,
            description: "t".into(),
            status: SubagentStatus::Done,
            result: None,
            created_at: 0,
            updated_at: 0,
        }));
        if parent == "b" && owner == "u" {
            mine.push(task.id);
        } else {
            others.push(task.id);
        }
    }
    fx.rt.store.write(writes).await.unwrap();
    let mut parent = fx.bot.clone();
    parent.id = BotId::new("b").unwrap();
    parent.owner = UserId::new("u").unwrap();
    let visible = VisibleSessions::of_bot(&fx.rt.store, &parent)
        .await
        .unwrap();
    for id in &mine {
        assert!(visible.contains(*id), "{id} is its subagent's");
    }
    for id in &others {
        assert!(!visible.contains(*id), "{id} is not");
    }
}

/// The copies of messages between bots a search leaves out: a bot's
/// deliveries in its conversation with another bot only when a session
/// of that other bot is searched too (for a bot talking to itself,
/// another of its sessions), and a subagent's reports when its task
/// session is searched.
#[test]
fn bot_copies_need_the_other_side_searched() {
    use botfleet_memory::BotCopies;
    let records = [
        session("a", SessionKind::Agent, "r", "u"),
        session("r", SessionKind::Dm, "u", "u"),
        session("x", SessionKind::Agent, "x", "u"),
        session("x", SessionKind::Dm, "u", "u"),
        session("r.sub-1", SessionKind::Subagent, "r", "u"),
    ];
    let [a_with_r, r_dm, x_self, x_dm, task] = records.clone().map(|r| r.id);
    let visible = super::VisibleSessions {
        by_id: records.into_iter().map(|r| (r.id, r)).collect(),
    };
    assert_eq!(visible.bot_copies(&[a_with_r]), vec![]);
    assert_eq!(visible.bot_copies(&[a_with_r, x_dm]), vec![]);
    assert_eq!(
        visible.bot_copies(&[a_with_r, r_dm]),
        vec![BotCopies::Sent { session: a_with_r }]
    );
    assert_eq!(visible.bot_copies(&[x_self]), vec![]);
    assert_eq!(
        visible.bot_copies(&[x_self, x_dm]),
        vec![BotCopies::Sent { session: x_self }]
    );
    assert_eq!(
        visible.bot_copies(&[r_dm, task]),
        vec![BotCopies::Reported {
            subagent: "r.sub-1".into()
        }]
    );
}
