#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::IndexOptions;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::RoomId;
use botfleet_memory::RoomRecord;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use botfleet_memory::TranscriptIndex;
use botfleet_memory::UserId;
use botfleet_memory::reindex;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::*;
use crate::tools::Tool;
use crate::tools::ToolRegistry;
use crate::tools::test_support::ToolFixture;

/// ReadTranscript: neighbours, offsets, clipping.
#[path = "recall_read_tests.rs"]
mod read;

/// A damaged index and a cancelled turn.
#[path = "recall_fault_tests.rs"]
mod faults;

fn bot(id: &str) -> BotId {
    BotId::new(id).unwrap()
}

fn session(bot_id: &str, kind: SessionKind, peer: &str, owner: &str) -> SessionRecord {
    let key = SessionKey {
        bot: bot(bot_id),
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

/// A fixture (bot `b` of user `u`, in its DM with `u`) with a transcript
/// index the tools search.
struct World {
    fx: ToolFixture,
    index: TranscriptIndex,
}

impl World {
    async fn new() -> Self {
        let fx = ToolFixture::new();
        let index = TranscriptIndex::open(fx._dir.path().join("index")).unwrap();
        fx.rt.set_transcript_index(index.clone());
        fx.rt
            .store
            .write(vec![Mutation::EnsureSession(fx.scope.session.clone())])
            .await
            .unwrap();
        Self { fx, index }
    }

    /// Appends a user message (or, with `text` starting "bot:", a
    /// delivery) to `s`, creating the session; returns its seq.
    async fn say(&self, s: &SessionRecord, author: &str, text: &str) -> i64 {
        let kind = match text.strip_prefix("bot:") {
            Some(t) => EntryKind::Delivery {
                text: t.trim().into(),
                card: None,
                call_id: "c".into(),
            },
            None => EntryKind::UserMessage { text: text.into() },
        };
        let mut out = self
            .fx
            .rt
            .store
            .write(vec![
                Mutation::EnsureSession(s.clone()),
                Mutation::Append(Box::new(NewEntry {
                    id: EntryId::new_v7(),
                    session: s.id,
                    author: author.into(),
                    turn: None,
                    kind,
                })),
            ])
            .await
            .unwrap();
        match out.pop() {
            Some(MutationResult::Appended { seq, .. }) => seq,
            other => panic!("{other:?}"),
        }
    }

    /// Makes everything written so far searchable.
    async fn index_all(&self) {
        reindex(
            &self.index,
            &self.fx.rt.store,
            IndexOptions::default(),
            |_, _| {},
        )
        .await
        .unwrap();
    }

    fn my_dm(&self) -> SessionRecord {
        self.fx.scope.session.clone()
    }

    async fn search(&self, args: Value) -> Result<String, ToolError> {
        SearchTranscript
            .call(&self.fx.ctx("c1"), args)
            .await
            .map(|o| o.content)
    }

    async fn read(&self, args: Value) -> Result<String, ToolError> {
        ReadTranscript
            .call(&self.fx.ctx("c1"), args)
            .await
            .map(|o| o.content)
    }

    /// Runs the tools as another bot.
    fn as_bot(&mut self, id: &str, owner: &str) {
        self.fx.bot.id = bot(id);
        self.fx.bot.owner = UserId::new(owner).unwrap();
        self.fx.scope.session = session(id, SessionKind::Dm, owner, owner);
    }
}

/// `(session, seq)` of every hit in a SearchTranscript output, in order.
fn hits(out: &str) -> Vec<(String, i64)> {
    out.lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let start = l.find('{').unwrap();
            let end = l.find('}').unwrap();
            let v: Value = serde_json::from_str(&l[start..=end]).unwrap();
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn finds_own_entries_with_session_seq_and_highlighted_snippet() {
    let w = World::new().await;
    let dm = w.my_dm();
    w.say(&dm, "u", "good morning, how was the weekend").await;
    let seq = w
        .say(
            &dm,
            "u",
            "第二家供应商被排除了, and the supplier audit is due on Friday",
        )
        .await;
    w.say(&dm, "b", "bot: noted, I will track it").await;
    w.index_all().await;

    let out = w.search(json!({"query": "供应商"})).await.unwrap();
    assert_eq!(hits(&out), vec![(dm.id.to_string(), seq)], "{out}");
    assert!(out.contains("第二家«供应商»被排除了"), "{out}");
    assert!(out.contains("this conversation"), "{out}");
    assert!(out.starts_with("1 of 1 matching entries"), "{out}");

    let out = w
        .search(json!({"query": "\"supplier audit\"", "limit": 3}))
        .await
        .unwrap();
    assert_eq!(hits(&out), vec![(dm.id.to_string(), seq)], "{out}");
    assert!(out.contains("«supplier» «audit»"), "{out}");

    let out = w.search(json!({"query": "kangaroo"})).await.unwrap();
    assert!(out.starts_with("No entries match \"kangaroo\""), "{out}");
}

/// A word said more often than one search shows: the output says how
/// many match and how to get the next ones, and `offset` pages on until
/// every mention was seen once (the best 30 were all a bot could reach).
#[tokio::test]
async fn pages_past_the_most_hits_one_search_shows() {
    let w = World::new().await;
    let dm = w.my_dm();
    let mut said = Vec::new();
    for i in 0..40 {
        said.push(
            w.say(
                &dm,
                "u",
                &format!("pelican sighting number {i} at the pier"),
            )
            .await,
        );
    }
    w.index_all().await;

    let first = w
        .search(json!({"query": "pelican", "limit": 30}))
        .await
        .unwrap();
    assert!(first.starts_with("30 of 40 matching entries"), "{first}");
    assert!(
        first.contains("\"offset\": 30 for the next ones"),
        "{first}"
    );
    let next = w
        .search(json!({"query": "pelican", "limit": 30, "offset": 30}))
        .await
        .unwrap();
    assert!(
        next.starts_with("Entries 31 to 40 of 40 matching, best first."),
        "{next}"
    );
    assert!(!next.contains("More match"), "{next}");
    assert!(next.contains("\n[31] {"), "{next}");
    let mut seen: Vec<i64> = hits(&first)
        .into_iter()
        .chain(hits(&next))
        .map(|(_, seq)| seq)
        .collect();
    seen.sort();
    assert_eq!(seen, said, "every mention once, over two pages");

    let past = w
        .search(json!({"query": "pelican", "offset": 40}))
        .await
        .unwrap();
    assert!(
        past.starts_with("No more entries: 40 match \"pelican\", all of them before offset 40."),
        "{past}"
    );
    let err = w
        .search(json!({"query": "pelican", "offset": -1}))
        .await
        .unwrap_err();
    assert!(err.message.contains("offset -1 is out of range"), "{err}");
    let err = w
        .search(json!({"query": "pelican", "offset": 10_001}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("offset 10001 is out of range"),
        "{err}"
    );
}

#[tokio::test]
async fn never_finds_another_bots_private_dm() {
    let mut w = World::new().await;
    // b's own DM, a DM of b2 (same owner u) and a DM of c (user v)
    let mine = w.my_dm();
    let sibling = session("b2", SessionKind::Dm, "u", "u");
    let stranger = session("c", SessionKind::Dm, "v", "v");
    w.say(&mine, "u", "the zebra plan is ready").await;
    let s_seq = w.say(&sibling, "u", "my zebra password is hunter2").await;
    w.say(&stranger, "v", "zebra secrets of another user").await;
    w.index_all().await;

    let out = w.search(json!({"query": "zebra"})).await.unwrap();
    assert_eq!(hits(&out), vec![(mine.id.to_string(), 1)], "{out}");
    assert!(!out.contains("hunter2"), "{out}");

    // naming the sibling's session is refused, not answered
    let err = w
        .search(json!({"query": "zebra", "session": sibling.id.to_string()}))
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains(&format!("session {} is not one you may read", sibling.id)),
        "{err}"
    );
    let err = w
        .read(json!({"session": sibling.id.to_string(), "seq": s_seq}))
        .await
        .unwrap_err();
    assert!(err.message.contains("is not one you may read"), "{err}");
    // an unknown session gets the same answer (existence does not leak)
    let unknown = SessionId::derive(&bot("nobody"), "dm", "x");
    let err = w
        .read(json!({"session": unknown.to_string(), "seq": 1}))
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains(&format!("session {unknown} is not one you may read")),
        "{err}"
    );

    // the sibling itself finds its own DM, and not b's
    w.as_bot("b2", "u");
    let out = w.search(json!({"query": "zebra"})).await.unwrap();
    assert_eq!(hits(&out), vec![(sibling.id.to_string(), s_seq)], "{out}");
    // a bot of another user finds only its own
    w.as_bot("c", "v");
    let out = w.search(json!({"query": "zebra"})).await.unwrap();
    assert_eq!(hits(&out), vec![(stranger.id.to_string(), 1)], "{out}");
}

#[tokio::test]
async fn room_timelines_are_visible_to_members_only() {
    let mut w = World::new().await;
    let room = RoomRecord {
        id: RoomId::new("standup").unwrap(),
        name: "Standup".into(),
        owner: UserId::new("u").unwrap(),
        members: vec![bot("b"), bot("b2")],
        shared: false,
        created_at: 0,
        updated_at: 0,
        closed_at: None,
    };
    w.fx.rt
        .store
        .write(vec![Mutation::CreateRoom(Box::new(room.clone()))])
        .await
        .unwrap();
    let timeline = SessionRecord {
        id: room.timeline().id(),
        key: room.timeline(),
        owner: room.owner.clone(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    };
    let seq = w
        .say(&timeline, "u", "the deploy window moves to Thursday")
        .await;
    w.index_all().await;

    let out = w.search(json!({"query": "deploy window"})).await.unwrap();
    assert_eq!(hits(&out), vec![(timeline.id.to_string(), seq)], "{out}");
    assert!(out.contains("room standup (public timeline)"), "{out}");
    let out = w
        .read(json!({"session": timeline.id.to_string(), "seq": seq}))
        .await
        .unwrap();
    assert!(out.contains("→ #1"), "{out}");

    // a bot of the same user that is not a member sees nothing
    w.as_bot("b3", "u");
    let out = w.search(json!({"query": "deploy window"})).await.unwrap();
    assert!(out.starts_with("No entries match"), "{out}");
}

#[tokio::test]
async fn a_subagent_sees_its_own_sessions_and_the_delegating_one_only() {
    let mut w = World::new().await;
    let parent_dm = w.my_dm();
    let parent_other = session("b", SessionKind::Dm, "w", "u");
    let child = "b.sub-abc";
    let child_session = session(child, SessionKind::Subagent, "b", "u");
    w.say(&parent_dm, "u", "compare the falcon vendors").await;
    w.say(&parent_other, "w", "falcon gossip from another person")
        .await;
    let c_seq = w
        .say(&child_session, "b", "research the falcon vendors")
        .await;
    w.fx.rt
        .store
        .write(vec![Mutation::CreateSubagent(SubagentRecord {
            id: bot(child),
            parent: bot("b"),
            parent_session: parent_dm.id,
            description: "falcon research".into(),
            status: SubagentStatus::Running,
            result: None,
            created_at: 0,
            updated_at: 0,
        })])
        .await
        .unwrap();
    w.index_all().await;

    // the parent sees its own sessions and its subagent's
    let out = w
        .search(json!({"query": "falcon", "limit": 10}))
        .await
        .unwrap();
    let mut found = hits(&out);
    found.sort();
    let mut want = vec![
        (parent_dm.id.to_string(), 1),
        (parent_other.id.to_string(), 1),
        (child_session.id.to_string(), c_seq),
    ];
    want.sort();
    assert_eq!(found, want, "{out}");

    // the subagent sees its own session and the one that delegated to it
    w.as_bot(child, "u");
    w.fx.scope.session = child_session.clone();
    let out = w.search(json!({"query": "falcon"})).await.unwrap();
    let mut found = hits(&out);
    found.sort();
    let mut want = vec![
        (parent_dm.id.to_string(), 1),
        (child_session.id.to_string(), c_seq),
    ];
    want.sort();
    assert_eq!(found, want, "{out}");
    assert!(!out.contains("gossip"), "{out}");
}

#[tokio::test]
async fn bad_input_gets_errors_that_say_what_to_do() {
    let w = World::new().await;
    let dm = w.my_dm();
    w.say(&dm, "u", "hello there").await;
    w.index_all().await;
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"query": ""}),
            "the search query is empty",
            "call SearchTranscript with the words to find",
        ),
        (
            json!({"query": "x".repeat(600)}),
            "the search query is 600 characters long; the limit is 512",
            "a few distinctive words",
        ),
        (
            json!({"query": "say \"hello"}),
            "unbalanced quote: the \" at character 5 opens a phrase that is never closed",
            "quote closed",
        ),
        (
            json!({"query": "hello", "limit": 0}),
            "limit 0 is out of range; ask for 1 to 30 hits",
            "arguments that match its schema",
        ),
        (
            json!({"query": "hello", "limit": 31}),
            "limit 31 is out of range",
            "arguments that match its schema",
        ),
        (
            json!({"query": "hello", "session": "not-a-session"}),
            "\"not-a-session\" is not a session id",
            "arguments that match its schema",
        ),
        (
            json!({"text": "hello"}),
            "invalid arguments for SearchTranscript",
            "arguments that match its schema",
        ),
    ];
    for (args, message, hint) in cases {
        let err = w.search(args.clone()).await.unwrap_err();
        assert!(err.message.contains(message), "{args}: {err}");
        assert!(err.hint.contains(hint), "{args}: {err}");
    }
    let id = dm.id.to_string();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"session": id, "seq": 5}),
            "seq 5 is out of range: session",
        ),
        (json!({"session": id, "seq": 0}), "seq 0 is out of range"),
        (
            json!({"session": id, "seq": 1, "before": 21}),
            "before 21 is out of range; give 0 to 20 entries",
        ),
        (
            json!({"session": id, "seq": 1, "after": -1}),
            "after -1 is out of range",
        ),
        (json!({"session": id}), "missing field `seq`"),
    ];
    for (args, message) in cases {
        let err = w.read(args.clone()).await.unwrap_err();
        assert!(err.message.contains(message), "{args}: {err}");
    }
}

#[tokio::test]
async fn without_an_index_the_tools_say_so() {
    let fx = ToolFixture::new();
    let err = SearchTranscript
        .call(&fx.ctx("c1"), json!({"query": "x"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "SearchTranscript is not available: this host runs without a transcript index"
    );
}

#[test]
fn recall_tools_are_read_only_internal_and_registered() {
    let r = ToolRegistry::builtin();
    for name in ["SearchTranscript", "ReadTranscript"] {
        let t = r.get(name).unwrap();
        assert_eq!(t.effect(), Effect::Internal, "{name}");
        assert!(t.idempotent(), "{name}");
        assert!(!t.mutates(), "{name}");
    }
}

/// The index leaves out the results of the tools it names by name
/// (botfleet-memory cannot see the registry): each must be a built-in
/// tool, so a renamed tool fails here instead of being indexed again.
#[test]
fn the_tools_the_index_leaves_out_are_built_in() {
    let tools = ToolRegistry::builtin();
    for name in TranscriptIndex::QUOTING_TOOLS {
        assert!(tools.contains(name), "{name} is not a built-in tool");
    }
    for tool in [SearchTranscript.spec().name, ReadTranscript.spec().name] {
        assert!(
            TranscriptIndex::QUOTING_TOOLS.contains(&tool.as_str()),
            "{tool}"
        );
    }
}
