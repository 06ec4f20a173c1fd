#![allow(clippy::unwrap_used)]

use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Store;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;

use super::tests::admit;
use super::tests::users;
use super::*;
use crate::tools::test_support::ToolFixture;

/// One entry of turn `turn`, written to the store; its seq.
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

/// A run of `turn` that answered with `reply` and was interrupted: its
/// step, the call's result, its reply and its end over `inputs`.
async fn interrupted_run(
    store: &Store,
    session: SessionId,
    turn: TurnId,
    reply: &str,
    inputs: Vec<i64>,
) {
    ended_run(
        store,
        session,
        turn,
        (reply, TurnStatus::Interrupted),
        inputs,
    )
    .await;
}

/// A run of `turn` that answered with `reply` and ended with `status`:
/// its step, the call's result, its reply and its end over `inputs`.
async fn ended_run(
    store: &Store,
    session: SessionId,
    turn: TurnId,
    (reply, status): (&str, TurnStatus),
    inputs: Vec<i64>,
) {
    let call = read_step(store, session, turn, reply).await;
    run_end(store, session, turn, call, (reply, status), inputs).await;
}

/// The step of `turn` that calls Read as `call-{name}`: the call.
async fn read_step(
    store: &Store,
    session: SessionId,
    turn: TurnId,
    name: &str,
) -> botfleet_memory::ToolCallBody {
    let call = botfleet_memory::ToolCallBody {
        id: format!("call-{name}"),
        name: "Read".into(),
        arguments: "{}".into(),
    };
    let step = EntryKind::Assistant {
        reasoning: None,
        text: String::new(),
        tool_calls: vec![call.clone()],
    };
    append(store, session, turn, step).await;
    call
}

/// The rest of a run of `turn` after its step with `call`: the call's
/// result, the reply `reply` and the end with `status` over `inputs`.
async fn run_end(
    store: &Store,
    session: SessionId,
    turn: TurnId,
    call: botfleet_memory::ToolCallBody,
    (reply, status): (&str, TurnStatus),
    inputs: Vec<i64>,
) {
    let result = EntryKind::ToolResult {
        call_id: call.id,
        name: call.name,
        content: "ok".into(),
        is_error: false,
    };
    append(store, session, turn, result).await;
    let reply = EntryKind::Reminder { text: reply.into() };
    append(store, session, turn, reply).await;
    // answered: a reminder nothing answered goes when its turn ends
    append(store, session, turn, answer()).await;
    let end = EntryKind::TurnEnd {
        status,
        inputs,
        deliveries: 1,
        usage: None,
    };
    append(store, session, turn, end).await;
}

/// A step of the model that says something and calls nothing.
fn answer() -> EntryKind {
    EntryKind::Assistant {
        reasoning: None,
        text: "noted".into(),
        tool_calls: Vec::new(),
    }
}

/// The user-side messages of the context a turn over `inputs` loads.
async fn loaded(
    store: &Store,
    session: SessionId,
    inputs: &[i64],
    own: Option<TurnId>,
) -> Vec<String> {
    let bound = ContextBound::of_inputs(inputs.iter().copied(), own);
    users(&load_bounded(store, session, bound).await)
}

/// The tail of `session` loaded within `bound` (a window of 50).
async fn load_bounded(
    store: &Store,
    session: SessionId,
    bound: Option<ContextBound>,
) -> SessionTail {
    let mut tail = SessionTail::new(session);
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
    tail
}

/// Regression (round 18, F8 finding 1): an input that arrived before an
/// interrupted run's steps but was not among its inputs (webhook B while
/// run A worked; a person's message held back until A's first step) was
/// left before those steps when the next turn over both was rebuilt from
/// the store after a restart: the request ended with A's reply, read as if
/// B were answered, and B never was. Rebuilt, the context is what the tail
/// kept in memory holds: each input after the runs that did not have it.
#[tokio::test]
async fn an_input_a_run_did_not_have_comes_after_its_steps() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (one, two) = (TurnId::new_v7(), TurnId::new_v7());
    let (session, first) = admit(store, bot, "first").await;
    let (_, second) = admit(store, bot, "second").await;
    interrupted_run(store, session, one, "reply one", vec![first]).await;
    let inputs = [first, second];
    for own in [None, Some(TurnId::new_v7())] {
        let got = loaded(store, session, &inputs, own).await;
        assert_eq!(got, ["first", "reply one", "second"], "{own:?}");
    }

    // a second interrupted run over both, while a third message came
    let (_, third) = admit(store, bot, "third").await;
    interrupted_run(store, session, two, "reply two", vec![first, second]).await;
    let inputs = [first, second, third];
    for own in [None, Some(TurnId::new_v7())] {
        let got = loaded(store, session, &inputs, own).await;
        let want = ["first", "reply one", "second", "reply two", "third"];
        assert_eq!(got, want, "{own:?}");
    }
    store.close().await;
}

/// Regression (QA, 2026-12-05): a message that came while a turn ran
/// (a subagent's report during its parent's turn) and was answered by the
/// next turn was, rebuilt from the store after a restart, shown where its
/// seq is, among the steps of the turn it came during: the model read it
/// before steps it had taken without it, and its answer to it followed
/// nothing. Rebuilt, it comes after that turn's steps, as the tail kept
/// in memory had it.
#[tokio::test]
async fn a_message_that_came_during_an_earlier_turn_comes_after_its_steps() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (one, two) = (TurnId::new_v7(), TurnId::new_v7());
    let (session, order) = admit(store, bot, "order").await;
    // turn one's step, then the report, then the rest of turn one
    let call = read_step(store, session, one, "one").await;
    let (_, report) = admit(store, bot, "report").await;
    let completed = ("reply one", TurnStatus::Completed);
    run_end(store, session, one, call, completed, vec![order]).await;
    let completed = ("reply two", TurnStatus::Completed);
    ended_run(store, session, two, completed, vec![report]).await;
    let (_, third) = admit(store, bot, "third").await;
    let want = ["order", "reply one", "report", "reply two", "third"];
    for own in [None, Some(TurnId::new_v7())] {
        let got = loaded(store, session, &[third], own).await;
        assert_eq!(got, want, "{own:?}");
    }
    // a run without inputs of its own (a compaction) reads it so too
    let got = users(&load_bounded(store, session, Some(ContextBound::claimed_only())).await);
    assert_eq!(got, want);
    store.close().await;
}

/// Regression (round 22, H1 "seen once" A): two messages of one session
/// committed back to back reached their bot in the other order (each
/// sender routes what it admitted after its own commit returns), so the
/// later one had a turn first, and the turn over the earlier one, bounded
/// at its own input, was sent the session only up to that input: the
/// model answered without the later message and its own reply to it. Now
/// a turn that ended for good over later inputs is in the context with
/// them, and the input after its steps; a later turn that failed (a retry
/// may answer its input again) and a later message no turn ended over are
/// not.
#[tokio::test]
async fn a_turn_over_an_earlier_input_sees_the_later_turn_that_ran_first() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (first_turn, failed_turn) = (TurnId::new_v7(), TurnId::new_v7());
    let (session, from_c) = admit(store, bot, "from c").await;
    let (_, from_r2) = admit(store, bot, "from r2").await;
    let completed = ("reply to r2", TurnStatus::Completed);
    ended_run(store, session, first_turn, completed, vec![from_r2]).await;
    let (_, from_b) = admit(store, bot, "from b").await;
    let failed = ("reply to b", TurnStatus::Failed);
    ended_run(store, session, failed_turn, failed, vec![from_b]).await;
    admit(store, bot, "not claimed yet").await;
    for own in [None, Some(TurnId::new_v7())] {
        let got = loaded(store, session, &[from_c], own).await;
        assert_eq!(got, ["from r2", "reply to r2", "from c"], "{own:?}");
    }
    store.close().await;
}

/// Round 22's f8 report ("left undone"): a turn over a later message that
/// reads the session from the store, while an earlier message waits in
/// the inbox (routed after it, or put back by an interrupted run), held
/// that message, and the earlier run's steps, up to its last input: the
/// model could answer it there and again in its own turn. Without the
/// waiting input, it holds neither; its own inputs never count as waiting.
#[tokio::test]
async fn a_waiting_input_and_a_run_over_it_stay_out() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let run = TurnId::new_v7();
    let (session, first) = admit(store, bot, "first").await;
    let (_, second) = admit(store, bot, "second").await;
    interrupted_run(store, session, run, "reply one", vec![first]).await;
    let (_, third) = admit(store, bot, "third").await;
    let bound = |inputs: &[i64]| {
        ContextBound::of_inputs(inputs.iter().copied(), None)
            .map(|b| b.without_pending([first, third].into_iter()))
    };
    let mut tail = SessionTail::new(session);
    let state = StateBlock::default();
    let encoding = Encoding::default();
    tail.load(store, "id", &state, 50, encoding, bound(&[second]))
        .await
        .unwrap();
    assert_eq!(users(&tail), ["second"]);
    // the turn that claims the first sees it, and the run over it
    tail.load(store, "id", &state, 50, encoding, bound(&[first]))
        .await
        .unwrap();
    assert_eq!(users(&tail), ["first", "reply one"]);
    store.close().await;
}

/// Soak (round 32, "a message among the previous turn's entries"): a
/// message admitted while a turn ran, and routed to its bot only after
/// that turn had ended, was loaded by the background compaction that ran
/// meanwhile at its place among the ended turn's entries; the turn that
/// then claimed it found it there (a push of an entry the tail holds
/// changes nothing), followed by the other turn's reply, and its model
/// read it as answered. A run without inputs of its own loads no input
/// that no turn claimed: the turn that claims it pushes it at the end.
#[tokio::test]
async fn a_run_without_inputs_loads_no_unclaimed_input() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, first) = admit(store, bot, "first").await;
    let run = TurnId::new_v7();
    let call = read_step(store, session, run, "one").await;
    // the second message comes while the run works
    let (_, second) = admit(store, bot, "second").await;
    let completed = ("reply one", TurnStatus::Completed);
    run_end(store, session, run, call, completed, vec![first]).await;
    // loaded by a run without inputs while the second waits in the inbox
    let bound = ContextBound::claimed_only().without_pending([second].into_iter());
    let mut tail = load_bounded(store, session, Some(bound)).await;
    assert_eq!(users(&tail), ["first", "reply one"]);
    // the turn that claims it pushes it: after the reply
    let entry = store
        .entries_after(session, second - 1, 1)
        .await
        .unwrap()
        .remove(0);
    tail.push(&entry);
    assert_eq!(users(&tail), ["first", "reply one", "second"]);
    store.close().await;
}

/// `text` admitted to `bot`'s routine session `tick` (no routine of the
/// file's: its runs are the owner's of the moment); its session and seq.
async fn admit_run(
    store: &Store,
    bot: &botfleet_memory::BotRecord,
    text: &str,
) -> (SessionId, i64) {
    let mut req = crate::protocol::user_message(&bot.owner, bot, text, None);
    let key = botfleet_memory::SessionKey {
        bot: bot.id.clone(),
        kind: botfleet_memory::SessionKind::Routine,
        peer: "tick".into(),
    };
    req.entry.session = key.id();
    req.session = key;
    let mut out = store
        .write(vec![Mutation::Admit(Box::new(req))])
        .await
        .unwrap();
    match out.pop() {
        Some(MutationResult::Admitted(botfleet_memory::AdmitOutcome::Accepted(a))) => {
            (a.session, a.seq)
        }
        other => panic!("{other:?}"),
    }
}

/// Regression (QA): a run admitted before its bot's owner changed and
/// run after it (a restart cut it off) loaded the former owner's run
/// before it, with its reply and "delivered to" them, as a turn over the
/// same inputs. Before the session's floor only the turn's own inputs and
/// steps load.
#[tokio::test]
async fn a_turn_resumed_across_an_owner_change_loads_nothing_of_the_run_before() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let (session, first) = admit_run(store, bot, "first run").await;
    let (_, second) = admit_run(store, bot, "second run").await;
    // the former owner's run over the first, interrupted
    let one = TurnId::new_v7();
    interrupted_run(store, session, one, "reply one", vec![first]).await;
    let inputs = [first, second];
    let two = TurnId::new_v7();
    assert_eq!(
        loaded(store, session, &inputs, Some(two)).await,
        ["first run", "reply one", "second run"]
    );
    // the owner change, then the turn over both resumes
    let mut given = bot.clone();
    given.owner = botfleet_memory::UserId::new("bob").unwrap();
    store.write(vec![Mutation::UpsertBot(given)]).await.unwrap();
    assert_eq!(
        loaded(store, session, &inputs, Some(two)).await,
        ["first run", "second run"]
    );
    store.close().await;
}
