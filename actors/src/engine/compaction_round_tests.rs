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

    // the first chunk fails: an error, nothing written
    let down = Flaky::new(0);
    let failed = compact(&fx.rt, bot, &down, &tail, &settings, None, None).await;
    assert!(
        matches!(failed, Err(CompactionError::Model(_))),
        "{failed:?}"
    );
    assert!(store.latest_summary(session).await.unwrap().is_none());

    // two chunks succeed, the third fails: the summary ends at the second
    let flaky = Flaky::new(2);
    let done = compact(&fx.rt, bot, &flaky, &tail, &settings, None, None)
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
    let caught_up = compact(&fx.rt, bot, &back, &tail, &settings, None, None)
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
