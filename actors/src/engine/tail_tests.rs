#![allow(clippy::unwrap_used)]

use botfleet_memory::AdmitOutcome;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Store;
use botfleet_memory::TurnId;

use super::*;
use crate::model::ChatMessage;
use crate::tools::test_support::ToolFixture;

pub(super) fn users(tail: &SessionTail) -> Vec<String> {
    tail.context
        .messages()
        .iter()
        .filter(|m| !crate::engine::context::is_time_note(m))
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

pub(super) async fn admit(store: &Store, bot: &BotRecord, text: &str) -> (SessionId, i64) {
    let req = crate::protocol::user_message(&bot.owner, bot, text, None);
    let mut out = store
        .write(vec![Mutation::Admit(Box::new(req))])
        .await
        .unwrap();
    match out.pop() {
        Some(MutationResult::Admitted(AdmitOutcome::Accepted(a))) => (a.session, a.seq),
        other => panic!("{other:?}"),
    }
}

/// Regression: a turn loading its context while a second message was being
/// admitted answered that message too without claiming it, and the next
/// turn answered it again.
#[tokio::test]
async fn a_new_turn_loads_the_session_only_up_to_its_last_input() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, first) = admit(store, bot, "long job").await;
    let (_, second) = admit(store, bot, "stop, do this instead").await;
    let state = StateBlock::default();

    let mut tail = SessionTail::new(session);
    let encoding = Encoding::default();
    let bound = ContextBound::of_inputs([first].into_iter(), None).unwrap();
    tail.load(store, "id", &state, 50, encoding, Some(bound))
        .await
        .unwrap();
    assert_eq!(users(&tail), ["long job"]);
    // the next turn's input joins the context when that turn begins
    let later = store
        .entries_between(session, second, second)
        .await
        .unwrap();
    tail.push(&later[0]);
    assert_eq!(users(&tail), ["long job", "stop, do this instead"]);

    let mut all = SessionTail::new(session);
    all.load(store, "id", &state, 50, encoding, None)
        .await
        .unwrap();
    assert_eq!(users(&all), ["long job", "stop, do this instead"]);
    store.close().await;
}

/// A resumed turn, or one reloaded after a compaction in its middle, keeps
/// its own entries past its inputs but not a message admitted meanwhile.
#[tokio::test]
async fn a_running_turn_reloads_its_inputs_and_own_entries_only() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let turn = TurnId::new_v7();
    let own = |text: &str| {
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: crate::protocol::user_message(&bot.owner, bot, "", None)
                .entry
                .session,
            author: "b".into(),
            turn: Some(turn),
            kind: EntryKind::Reminder { text: text.into() },
        }))
    };
    let (session, first) = admit(store, bot, "first").await;
    store.write(vec![own("own step one")]).await.unwrap();
    let (_, later) = admit(store, bot, "admitted meanwhile").await;
    store.write(vec![own("own step two")]).await.unwrap();

    let mut tail = SessionTail::new(session);
    let bound = ContextBound::of_inputs([first].into_iter(), Some(turn)).unwrap();
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        50,
        Encoding::default(),
        Some(bound),
    )
    .await
    .unwrap();
    assert_eq!(users(&tail), ["first", "own step one", "own step two"]);
    // the next turn claims the message: it joins the context then, once
    let entry = store.entries_between(session, later, later).await.unwrap();
    tail.push(&entry[0]);
    tail.push(&entry[0]);
    assert_eq!(
        users(&tail),
        [
            "first",
            "own step one",
            "own step two",
            "admitted meanwhile"
        ]
    );
    store.close().await;
}

/// A turn that wrote more entries than the window, reloaded (resumed after
/// a crash, or after a compaction in its middle), still sees its input and
/// every entry of its own. (It saw only the newest `window` entries: a
/// resumed turn of 12 calls under a window of 10 got a context without
/// the person's message, and answered nonsense.)
#[tokio::test]
async fn a_turn_longer_than_the_window_keeps_its_input_when_reloaded() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let turn = TurnId::new_v7();
    let (_, older) = admit(store, bot, "an older message").await;
    let (session, first) = admit(store, bot, "the long job").await;
    assert!(older < first);
    let own: Vec<Mutation> = (0..10)
        .map(|i| {
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session,
                author: "b".into(),
                turn: Some(turn),
                kind: EntryKind::Reminder {
                    text: format!("own step {i}"),
                },
            }))
        })
        .collect();
    store.write(own).await.unwrap();
    let bound = ContextBound::of_inputs([first].into_iter(), Some(turn));
    let mut tail = SessionTail::new(session);
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        4,
        Encoding::default(),
        bound,
    )
    .await
    .unwrap();
    let mut want = vec!["the long job".to_owned()];
    want.extend((0..10).map(|i| format!("own step {i}")));
    assert_eq!(users(&tail), want);
    store.close().await;
}

/// One entry of a scripted conversation, written to the store.
async fn append(store: &Store, session: SessionId, turn: TurnId, kind: EntryKind) -> i64 {
    let mut out = store
        .write(vec![Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session,
            author: "b".into(),
            turn: Some(turn),
            kind,
        }))])
        .await
        .unwrap();
    match out.pop() {
        Some(MutationResult::Appended { seq, .. }) => seq,
        other => panic!("{other:?}"),
    }
}

fn call(id: &str) -> botfleet_memory::ToolCallBody {
    botfleet_memory::ToolCallBody {
        id: id.into(),
        name: "Read".into(),
        arguments: "{}".into(),
    }
}

fn result(id: &str) -> EntryKind {
    EntryKind::ToolResult {
        call_id: id.into(),
        name: "Read".into(),
        content: format!("result of {id}"),
        is_error: false,
    }
}

/// Regression: a context rebuilt from the store (a turn resumed after a
/// crash, a new turn after a restart) left out what the turn before it
/// wrote after its input arrived: that turn's call got a made-up "no
/// result recorded" and its reply was gone. The prior turn is all there,
/// the input after it (as a tail kept in memory holds it); a later input
/// whose turn failed (a retry may answer it again), and what that turn
/// did, are not (`tail_order_tests.rs` has a later turn that completed).
#[tokio::test]
async fn a_reloaded_turn_sees_all_the_prior_turn_did() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (prior, later, own) = (TurnId::new_v7(), TurnId::new_v7(), TurnId::new_v7());
    let (session, first) = admit(store, bot, "first").await;
    let assistant = |id: &str| EntryKind::Assistant {
        reasoning: None,
        text: String::new(),
        tool_calls: vec![call(id)],
    };
    let end = |inputs: Vec<i64>, status| EntryKind::TurnEnd {
        status,
        inputs,
        deliveries: 1,
        usage: None,
    };
    append(store, session, prior, assistant("a")).await;
    let (_, second) = admit(store, bot, "second").await;
    append(store, session, prior, result("a")).await;
    let reply = EntryKind::Reminder {
        text: "the prior turn's reply".into(),
    };
    append(store, session, prior, reply).await;
    // answered: a reminder nothing answered goes when its turn ends
    let answer = EntryKind::Assistant {
        reasoning: None,
        text: "noted".into(),
        tool_calls: Vec::new(),
    };
    append(store, session, prior, answer).await;
    let completed = botfleet_memory::TurnStatus::Completed;
    append(store, session, prior, end(vec![first], completed)).await;
    let (_, third) = admit(store, bot, "third").await;
    let step = EntryKind::Reminder {
        text: "a later turn's step".into(),
    };
    append(store, session, later, step).await;
    let failed = botfleet_memory::TurnStatus::Failed;
    append(store, session, later, end(vec![third], failed)).await;

    for mine in [None, Some(own)] {
        let mut tail = SessionTail::new(session);
        let bound = ContextBound::of_inputs([second].into_iter(), mine);
        tail.load(
            store,
            "id",
            &StateBlock::default(),
            50,
            Encoding::default(),
            bound,
        )
        .await
        .unwrap();
        assert_eq!(
            users(&tail),
            ["first", "the prior turn's reply", "second"],
            "{mine:?}"
        );
        let results: Vec<&str> = tail
            .context
            .messages()
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(results, ["result of a"], "{mine:?}");
    }
    store.close().await;
}

/// A tail grown past its window is trimmed in memory to exactly what a
/// reload from the store would build, token counts included, so turns do
/// not re-read the newest entries of their session. Covers cuts inside a
/// call's answers and a message admitted while calls were open.
#[tokio::test]
async fn a_trimmed_tail_is_what_a_reload_would_build() {
    for window in [4usize, 5, 7, 11] {
        let fx = ToolFixture::new();
        let (store, bot) = (&fx.rt.store, &fx.bot);
        let state = StateBlock::default();
        let encoding = Encoding::default();
        let (session, _) = admit(store, bot, "first").await;
        let mut tail = SessionTail::new(session);
        tail.load(store, "id", &state, window, encoding, None)
            .await
            .unwrap();
        let mut trims = 0;
        for round in 0..8 {
            let turn = TurnId::new_v7();
            let (a, b, c) = (
                format!("a{round}"),
                format!("b{round}"),
                format!("c{round}"),
            );
            let steps: Vec<Option<EntryKind>> = vec![
                None, // the user's message, admitted
                Some(EntryKind::Assistant {
                    reasoning: None,
                    text: String::new(),
                    tool_calls: vec![call(&a), call(&b)],
                }),
                None, // admitted while the calls are open: held back
                Some(result(&a)),
                Some(result(&b)),
                Some(EntryKind::Assistant {
                    reasoning: None,
                    text: String::new(),
                    tool_calls: vec![call(&c)],
                }),
                Some(result(&c)),
                Some(EntryKind::Delivery {
                    text: format!("reply {round}"),
                    card: None,
                    call_id: c.clone(),
                }),
                Some(EntryKind::TurnEnd {
                    status: botfleet_memory::TurnStatus::Completed,
                    inputs: Vec::new(),
                    deliveries: 1,
                    usage: None,
                }),
            ];
            for (i, step) in steps.into_iter().enumerate() {
                let seq = match step {
                    None => admit(store, bot, &format!("message {round}.{i}")).await.1,
                    Some(kind) => append(store, session, turn, kind).await,
                };
                let entry = store.entries_between(session, seq, seq).await.unwrap();
                tail.push(&entry[0]);
                let _ = tail.tokens();
                if !tail.can_trim(window) {
                    continue;
                }
                assert!(tail.trim(window, None, "id", &state), "window {window}");
                trims += 1;
                let mut fresh = SessionTail::new(session);
                fresh
                    .load(store, "id", &state, window, encoding, None)
                    .await
                    .unwrap();
                // both know the window left out entries no summary covers
                assert!(tail.drops_unsummarised() && fresh.drops_unsummarised());
                assert!(tail.dropped_through >= fresh.dropped_through);
                assert_eq!(
                    tail.context.messages(),
                    fresh.context.messages(),
                    "window {window}, after seq {seq}"
                );
                assert_eq!(tail.tokens(), fresh.tokens(), "window {window}");
                assert!(!tail.needs_load(window));
            }
        }
        assert!(trims >= 3, "window {window}: {trims} trims");
        store.close().await;
    }
}

/// A tail that skipped an entry (the input of a later turn) cannot know
/// what a reload reads: it reloads from the store instead of trimming.
#[tokio::test]
async fn a_tail_with_a_skipped_entry_reloads_instead_of_trimming() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, first) = admit(store, bot, "first").await;
    let (_, _later) = admit(store, bot, "for the next turn").await;
    let mut tail = SessionTail::new(session);
    let bound = ContextBound::of_inputs([first].into_iter(), None).unwrap();
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        1,
        Encoding::default(),
        Some(bound),
    )
    .await
    .unwrap();
    let turn = TurnId::new_v7();
    for text in ["one", "two", "three"] {
        let seq = append(
            store,
            session,
            turn,
            EntryKind::Reminder { text: text.into() },
        )
        .await;
        let entry = store.entries_between(session, seq, seq).await.unwrap();
        tail.push(&entry[0]);
    }
    assert!(tail.needs_load(1));
    assert!(!tail.can_trim(1));
    assert!(!tail.trim(1, None, "id", &StateBlock::default()));
    store.close().await;
}

/// The entry count asks for a compaction once more than half the window
/// is unsummarised, and after a compaction that failed or found nothing
/// only after another quarter window of entries: a summariser that is
/// down is not called after every turn.
#[tokio::test]
async fn the_entry_count_asks_for_a_compaction_and_then_holds() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, _) = admit(store, bot, "m0").await;
    for i in 1..=8 {
        admit(store, bot, &format!("m{i}")).await;
    }
    let mut tail = SessionTail::new(session);
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        16,
        Encoding::default(),
        None,
    )
    .await
    .unwrap();
    // 9 entries of a window of 16: past half
    assert!(tail.unsummarised_past(16));
    assert!(!tail.unsummarised_past(18));
    tail.hold_compaction(16);
    assert!(!tail.unsummarised_past(16));
    // three more entries are not yet a quarter window (4) ...
    let mut seqs = Vec::new();
    for i in 9..=12 {
        let (_, seq) = admit(store, bot, &format!("m{i}")).await;
        seqs.push(seq);
    }
    for &seq in &seqs[..3] {
        let e = store.entries_between(session, seq, seq).await.unwrap();
        tail.push(&e[0]);
    }
    assert!(!tail.unsummarised_past(16));
    // ... the fourth is
    let e = store
        .entries_between(session, seqs[3], seqs[3])
        .await
        .unwrap();
    tail.push(&e[0]);
    assert!(tail.unsummarised_past(16));
    store.close().await;
}

/// Writes a summary covering through `cut`, as a compaction does.
pub(super) async fn summarise(store: &Store, session: SessionId, cut: i64, epoch: i64) {
    store
        .write(vec![
            Mutation::Append(Box::new(NewEntry {
                id: EntryId::new_v7(),
                session,
                author: "system".into(),
                turn: None,
                kind: EntryKind::Summary {
                    text: format!("up to {cut}"),
                    covers_to_seq: cut,
                    epoch,
                },
            })),
            Mutation::SetEpoch { session, epoch },
        ])
        .await
        .unwrap();
}

/// Regression: entries left the window before a summary covered them
/// (turns of many tool calls under a small window). A tail knows when its
/// window left out entries no summary covers, and a compaction for it
/// (`compaction::cut_at`, keeping the turn's input) covers up to where the
/// reloaded window starts — for any window and turn shape, even with no
/// background compaction at all, at most once a turn and once per
/// quarter window of entries.
#[tokio::test]
async fn a_compaction_for_the_window_covers_up_to_where_it_starts() {
    for window in [4usize, 6, 12, 40] {
        for calls in [0usize, 3, 8] {
            let fx = ToolFixture::new();
            let (store, bot) = (&fx.rt.store, &fx.bot);
            let state = StateBlock::default();
            let encoding = Encoding::default();
            let mut tail: Option<SessionTail> = None;
            let (mut compactions, mut last) = (0, 0);
            for round in 0..12 {
                let (session, input) = admit(store, bot, &format!("message {round}")).await;
                let tail = tail.get_or_insert_with(|| SessionTail::new(session));
                let bound = || ContextBound::of_inputs([input].into_iter(), None);
                tail.load(store, "id", &state, window, encoding, bound())
                    .await
                    .unwrap();
                let what = format!("window {window}, {calls} calls, round {round}");
                let from = tail.covers_to_seq;
                let gap = store.entries_after(session, from, i64::MAX).await.unwrap();
                let left_out = gap.iter().any(|e| {
                    e.seq <= tail.dropped_through && matches!(e.kind, EntryKind::UserMessage { .. })
                });
                // an input the window left out unsummarised is seen
                assert!(!left_out || tail.drops_unsummarised(), "{what}");
                if tail.drops_unsummarised() {
                    let cut = crate::engine::compaction::cut_at(
                        &gap,
                        tail.covers_to_seq,
                        4,
                        window,
                        Some(input),
                    )
                    .unwrap_or_else(|| panic!("{what}: nothing to cover"));
                    compactions += 1;
                    summarise(store, session, cut, compactions).await;
                    tail.load(store, "id", &state, window, encoding, bound())
                        .await
                        .unwrap();
                    assert!(!tail.drops_unsummarised(), "{what}: cut {cut}");
                    assert_eq!(tail.covers_to_seq, cut);
                }
                assert!(users(tail).contains(&format!("message {round}")), "{what}");
                let turn = TurnId::new_v7();
                let ids: Vec<String> = (0..calls).map(|i| format!("c{round}_{i}")).collect();
                let tool_calls = ids.iter().map(|id| call(id)).collect();
                append(
                    store,
                    session,
                    turn,
                    EntryKind::Assistant {
                        reasoning: None,
                        text: String::new(),
                        tool_calls,
                    },
                )
                .await;
                for id in &ids {
                    append(store, session, turn, result(id)).await;
                }
                last = append(
                    store,
                    session,
                    turn,
                    EntryKind::TurnEnd {
                        status: botfleet_memory::TurnStatus::Completed,
                        inputs: vec![input],
                        deliveries: 0,
                        usage: None,
                    },
                )
                .await;
            }
            let quarter = i64::try_from(window / 4).unwrap().max(1);
            assert!(
                compactions > 0 || last <= window as i64,
                "window {window}, {calls} calls"
            );
            assert!(compactions <= 12, "window {window}, {calls} calls");
            assert!(
                compactions * quarter <= last,
                "window {window}, {calls} calls: {compactions} compactions over {last} entries"
            );
            store.close().await;
        }
    }
}

/// After a compaction that failed or found nothing, the window's check
/// waits a quarter window of entries (a summariser that is down is not
/// called at every step); one that wrote a summary lifts the hold.
#[tokio::test]
async fn the_window_check_holds_after_a_failed_compaction() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, _) = admit(store, bot, "m0").await;
    for i in 1..=9 {
        admit(store, bot, &format!("m{i}")).await;
    }
    let mut tail = SessionTail::new(session);
    tail.load(
        store,
        "id",
        &StateBlock::default(),
        8,
        Encoding::default(),
        None,
    )
    .await
    .unwrap();
    // 10 entries, a window of 8: the first two are in neither
    assert!(tail.drops_unsummarised());
    tail.hold_compaction(8);
    assert!(!tail.drops_unsummarised());
    let (_, a) = admit(store, bot, "m10").await;
    let e = store.entries_between(session, a, a).await.unwrap();
    tail.push(&e[0]);
    assert!(!tail.drops_unsummarised());
    let (_, b) = admit(store, bot, "m11").await;
    let e = store.entries_between(session, b, b).await.unwrap();
    tail.push(&e[0]);
    assert!(tail.drops_unsummarised());
    tail.hold_compaction(8);
    tail.release_compaction();
    assert!(tail.drops_unsummarised());
    store.close().await;
}
