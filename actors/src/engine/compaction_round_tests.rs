//! A compaction round over a session in the store: chunk after chunk,
//! each summary stored as it succeeds, a failed chunk ending the round.

#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use async_trait::async_trait;
use botfleet_memory::AdmitOutcome;
use botfleet_memory::MutationResult;
use botfleet_memory::SessionId;
use botfleet_memory::Store;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::model::ModelResponse;
use crate::model::StreamSink;
use crate::runtime::StateBlock;
use crate::tools::test_support::ToolFixture;

/// A summariser that answers its first `ok` calls ("summary N") and
/// fails the others (HTTP 500); it records every request.
struct Flaky {
    ok: usize,
    seen: Mutex<Vec<ModelRequest>>,
}

impl Flaky {
    fn new(ok: usize) -> Self {
        Self {
            ok,
            seen: Mutex::new(Vec::new()),
        }
    }

    fn seen(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl Model for Flaky {
    fn describe(&self) -> String {
        "flaky".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(request.clone());
        if seen.len() > self.ok {
            return Err(ModelError::Http {
                status: 500,
                attempts: 1,
                body: "the summariser is down".into(),
            });
        }
        Ok(ModelResponse {
            text: format!("summary {}", seen.len()),
            ..ModelResponse::default()
        })
    }
}

async fn admit(store: &Store, bot: &BotRecord, text: &str) -> SessionId {
    let req = crate::protocol::user_message(&bot.owner, bot, text, None);
    let mut out = store
        .write(vec![Mutation::Admit(Box::new(req))])
        .await
        .unwrap();
    match out.pop() {
        Some(MutationResult::Admitted(AdmitOutcome::Accepted(a))) => a.session,
        other => panic!("{other:?}"),
    }
}

/// A turn's compaction that used nothing yet.
fn in_turn(stop: &CancellationToken) -> ChunkBudget<'_> {
    ChunkBudget {
        turn: None,
        pending: 0,
        stores_usage: false,
        stop,
        interrupt: stop,
    }
}

fn transcript(request: &ModelRequest) -> &str {
    request.last_user_text().unwrap()
}

/// Regression: a backlog went into one request, and a failure lost the
/// whole round. Now it goes in chunks, each summary folding the one
/// before and stored at once: when a chunk fails, what the chunks before
/// it summarised stays, and the next round goes on from there.
#[tokio::test]
async fn a_failed_chunk_keeps_what_the_chunks_before_it_summarised() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let filler = "lorem ipsum dolor sit amet ".repeat(30);
    let mut session = None;
    for i in 0..40 {
        session = Some(admit(store, bot, &format!("note {i}: {filler}")).await);
    }
    let session = session.unwrap();
    let settings = ContextSettings {
        compact_at_tokens: 1000,
        ..ContextSettings::default()
    };
    let mut tail = SessionTail::new(session);
    let state = StateBlock::default();
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let account = in_turn(&stop);

    // the first chunk fails: an error, nothing written
    let down = Flaky::new(0);
    let failed = compact(&fx.rt, bot, &down, &tail, &settings, None, &account).await;
    assert!(
        matches!(failed, Err(CompactionError::Model(_))),
        "{failed:?}"
    );
    assert!(store.latest_summary(session).await.unwrap().is_none());

    // two chunks succeed, the third fails: the summary ends at the second
    let flaky = Flaky::new(2);
    let done = compact(&fx.rt, bot, &flaky, &tail, &settings, None, &account)
        .await
        .unwrap()
        .unwrap();
    let seen = flaky.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!((done.epoch, done.usage.calls), (2, 2));
    let latest = store.latest_summary(session).await.unwrap().unwrap();
    let EntryKind::Summary {
        text,
        covers_to_seq,
        epoch,
    } = &latest.kind
    else {
        panic!("{latest:?}");
    };
    assert_eq!(
        (text.as_str(), *covers_to_seq, *epoch),
        ("summary 2", done.covers_to_seq, 2)
    );
    // each request within the bounds, the second folding the first summary
    for r in &seen {
        assert_eq!(r.max_tokens, Some(200));
        assert!(u64::from(Encoding::default().count(transcript(r))) <= 500 + 200 + 20);
    }
    assert!(!transcript(&seen[0]).contains("[earlier summary"));
    assert!(
        transcript(&seen[1]).starts_with("[earlier summary, up to seq "),
        "{}",
        transcript(&seen[1])
    );
    assert!(transcript(&seen[1]).contains("]\n    summary 1\n"));

    // the next round starts where that one stopped and catches up
    tail.invalidate();
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    assert_eq!(tail.covers_to_seq, done.covers_to_seq);
    let back = Flaky::new(usize::MAX);
    let caught_up = compact(&fx.rt, bot, &back, &tail, &settings, None, &account)
        .await
        .unwrap()
        .unwrap();
    let first = back.seen();
    assert!(
        transcript(&first[0]).starts_with(&format!(
            "[earlier summary, up to seq {}]\n    summary 2\n",
            done.covers_to_seq
        )),
        "{}",
        transcript(&first[0])
    );
    assert!(caught_up.covers_to_seq > done.covers_to_seq);
    assert_eq!(caught_up.epoch, 2 + first.len() as i64);
    // all but the newest message are summarised now
    let newest = store
        .entries_after(session, 0, i64::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::UserMessage { .. }))
        .map(|e| e.seq)
        .max()
        .unwrap();
    assert_eq!(caught_up.covers_to_seq, newest - 1);
}

/// A summariser whose every answer reports `tokens` (prompt) + 10
/// (completion); it records every request.
struct Costly {
    tokens: u64,
    seen: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Model for Costly {
    fn describe(&self) -> String {
        "costly".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(request.clone());
        Ok(ModelResponse {
            text: format!("summary {}", seen.len()),
            usage: Some(crate::model::Usage {
                prompt_tokens: self.tokens,
                completion_tokens: 10,
                cached_prompt_tokens: 0,
            }),
            ..ModelResponse::default()
        })
    }
}

/// Regression: a compaction of several chunks was checked against the
/// daily budget once, before it began, and asked for every chunk however
/// far past the budget the first ones took it. Now each chunk's request
/// is checked, counting the turn's pending tokens and the chunks before
/// (stored with their summaries in the background): the round stops
/// between chunks with what it summarised stored, and one whose budget
/// is spent before its first chunk asks nothing.
#[tokio::test]
async fn a_spent_budget_stops_a_compaction_between_its_chunks() {
    let fx = ToolFixture::new();
    let store = &fx.rt.store;
    let mut bot = fx.bot.clone();
    bot.settings = serde_json::json!({ "daily_token_budget": 500 });
    let filler = "lorem ipsum dolor sit amet ".repeat(30);
    let mut session = None;
    for i in 0..40 {
        session = Some(admit(store, &bot, &format!("note {i}: {filler}")).await);
    }
    let session = session.unwrap();
    let settings = ContextSettings {
        compact_at_tokens: 1000,
        ..ContextSettings::default()
    };
    let state = StateBlock::default();
    let mut tail = SessionTail::new(session);
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let costly = |tokens| Costly {
        tokens,
        seen: Mutex::new(Vec::new()),
    };

    // a turn that used 100 tokens: its first chunk (450 + 10) leaves the
    // budget spent with them, and no second chunk is asked
    let model = costly(450);
    let account = ChunkBudget {
        pending: 100,
        ..in_turn(&stop)
    };
    let done = compact(&fx.rt, &bot, &model, &tail, &settings, None, &account)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(model.seen.lock().unwrap().len(), 1);
    assert_eq!(
        (done.epoch, done.usage.calls, done.usage.total()),
        (1, 1, 460)
    );
    // the one summary is whole and stored; the entries after it stay
    // unsummarised, each readable, for a later round
    let latest = store.latest_summary(session).await.unwrap().unwrap();
    let EntryKind::Summary {
        text,
        covers_to_seq,
        ..
    } = &latest.kind
    else {
        panic!("{latest:?}");
    };
    assert_eq!(
        (text.as_str(), *covers_to_seq),
        ("summary 1", done.covers_to_seq)
    );
    let notes = store
        .entries_after(session, 0, i64::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::UserMessage { .. }))
        .count();
    assert_eq!(notes, 40);
    // a turn's compaction stores no usage itself: the turn's end does
    let day = store.clock().now().format("%Y-%m-%d").to_string();
    let (_, today, _) = store.bot_usage(&bot.id, &day).await.unwrap();
    assert_eq!(today.calls, 0);

    // in the background each chunk's usage is stored with its summary,
    // and counted before the next: 300 + 10, then 620 ≥ 500 stops it
    tail.invalidate();
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    let model = costly(300);
    let background = ChunkBudget {
        turn: Some(TurnId::new_v7()),
        stores_usage: true,
        ..in_turn(&stop)
    };
    let second = compact(&fx.rt, &bot, &model, &tail, &settings, None, &background)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(model.seen.lock().unwrap().len(), 2);
    assert_eq!((second.epoch, second.usage.calls), (3, 2));
    let (_, today, _) = store.bot_usage(&bot.id, &day).await.unwrap();
    assert_eq!((today.calls, today.total()), (2, 620));

    // spent before its first chunk: nothing asked, nothing written
    tail.invalidate();
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    let model = costly(1);
    let refused = compact(&fx.rt, &bot, &model, &tail, &settings, None, &background).await;
    assert!(
        matches!(&refused, Err(CompactionError::BudgetSpent(why)) if why.contains("620 of 500")),
        "{refused:?}"
    );
    assert!(model.seen.lock().unwrap().is_empty());
    let latest = store.latest_summary(session).await.unwrap().unwrap();
    assert!(
        matches!(latest.kind, EntryKind::Summary { epoch: 3, .. }),
        "{latest:?}"
    );
}

/// A summariser that thinks aloud first, as a thinking model served
/// without a reasoning parser does.
struct Thinking;

#[async_trait]
impl Model for Thinking {
    fn describe(&self) -> String {
        "thinking".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            text: "<think>\nThe person keeps writing notes; private musings.\n</think>\n\nNotes 0 to 11 were written."
                .into(),
            ..ModelResponse::default()
        })
    }
}

/// Regression (round 21, H2): a summary kept the summariser's
/// `<think>…</think>` block, which then went into every later request of
/// the session.
#[tokio::test]
async fn a_summariser_s_reasoning_block_is_not_kept_in_the_summary() {
    let fx = ToolFixture::new();
    let (store, bot) = (&fx.rt.store, &fx.bot);
    let filler = "lorem ipsum dolor sit amet ".repeat(30);
    let mut session = None;
    for i in 0..12 {
        session = Some(admit(store, bot, &format!("note {i}: {filler}")).await);
    }
    let session = session.unwrap();
    let settings = ContextSettings {
        compact_at_tokens: 1000,
        ..ContextSettings::default()
    };
    let mut tail = SessionTail::new(session);
    let state = StateBlock::default();
    tail.load(store, "id", &state, 200, settings.encoding, None)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    compact(
        &fx.rt,
        bot,
        &Thinking,
        &tail,
        &settings,
        None,
        &in_turn(&stop),
    )
    .await
    .unwrap()
    .unwrap();
    let summary = store.latest_summary(session).await.unwrap().unwrap();
    let text = summary.kind.text();
    assert!(text.contains("Notes 0 to 11 were written."), "{text}");
    assert!(
        !text.contains("think") && !text.contains("musings"),
        "{text}"
    );
}
