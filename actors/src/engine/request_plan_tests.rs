//! The plan of a step's request: made once for the compaction check and
//! the request, made again when the context changed, and the tokens a
//! request sent.

#![allow(clippy::unwrap_used)]

use std::cell::Cell;

use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::ToolCallBody;

use super::*;
use crate::model::ChatMessage;
use crate::runtime::StateBlock;

thread_local! {
    /// How many plans this thread's tails made (`SessionTail::plan`).
    pub(super) static PLANS: Cell<usize> = const { Cell::new(0) };
}

/// Plans made on this thread so far.
fn plans() -> usize {
    PLANS.with(Cell::get)
}

fn entry(session: SessionId, seq: i64, kind: EntryKind) -> Entry {
    Entry {
        id: EntryId::new_v7(),
        session,
        seq,
        gid: seq,
        author: "alice".into(),
        turn: None,
        created_at: 0,
        kind,
    }
}

/// A read of seq `seq` (its result at `seq + 1`) of `chars` characters.
fn read(session: SessionId, seq: i64, chars: usize) -> [Entry; 2] {
    let id = format!("r{seq}");
    [
        entry(
            session,
            seq,
            EntryKind::Assistant {
                reasoning: None,
                text: String::new(),
                tool_calls: vec![ToolCallBody {
                    id: id.clone(),
                    name: "Read".into(),
                    arguments: r#"{"path":"f.txt"}"#.into(),
                }],
            },
        ),
        entry(
            session,
            seq + 1,
            EntryKind::ToolResult {
                call_id: id,
                name: "Read".into(),
                content: "word ".repeat(chars / 5),
                is_error: false,
            },
        ),
    ]
}

/// A running turn (from seq 1) of a huge paste and six reads, shaped with
/// a turn budget of 4,000 tokens: clips, stubs and a watermark to move.
fn busy_tail(session: SessionId) -> SessionTail {
    let mut entries = vec![entry(
        session,
        1,
        EntryKind::UserMessage {
            text: "paste ".repeat(20_000),
        },
    )];
    for k in 0..6 {
        entries.extend(read(session, 2 + 2 * k, 6_000));
    }
    let mut tail = SessionTail::new(session);
    tail.fill(
        None,
        "sys",
        &StateBlock::default(),
        None,
        &entries,
        Encoding::default(),
    );
    tail.shape_requests(Some(1), 4_000, true);
    tail
}

/// A step's compaction check and its request share one plan (no behaviour
/// change: the request and the watermark are those a fresh plan gives);
/// a context that changed in between is planned again.
#[test]
fn the_compaction_checks_plan_serves_the_request() {
    let session = SessionId::new_v7();
    let mut fresh = busy_tail(session);
    let before = plans();
    let expected = fresh.take_request(None, &mut None);
    assert_eq!(plans() - before, 1);
    let expected_cut = fresh.turn_cut.clone();
    assert!(expected_cut.as_ref().is_some_and(|c| c.through > 0));

    let mut tail = busy_tail(session);
    let before = plans();
    let sent = tail.sent_tokens();
    assert_eq!(tail.turn_cut.as_ref().map(|c| c.through), Some(0));
    let request = tail.take_request(None, &mut None);
    assert_eq!(
        plans() - before,
        1,
        "one plan for the check and the request"
    );
    assert_eq!(request, expected);
    assert_eq!(tail.turn_cut, expected_cut);
    assert_eq!(tail.last_request_tokens(), sent);
    tail.restore_request(request, None);

    // a step later: the check's plan is not the last request's
    for e in read(session, 20, 6_000) {
        tail.push(&e);
    }
    let before = plans();
    let sent = tail.sent_tokens();
    // nothing changed: asked again, the same plan
    assert_eq!(tail.sent_tokens(), sent);
    assert_eq!(plans() - before, 1);
    // the context changed after the check: the request plans again
    tail.push(&entry(
        session,
        22,
        EntryKind::Reminder {
            text: "a reminder".into(),
        },
    ));
    let request = tail.take_request(None, &mut None);
    assert_eq!(plans() - before, 2);
    assert!(
        request
            .iter()
            .any(|m| matches!(m, ChatMessage::User { content } if content.contains("a reminder")))
    );
    tail.restore_request(request, None);
}

/// Regression: a call whose provider reported no usage counted the
/// context's whole count as its prompt, every clipped message whole. It
/// counts what the request sent: its messages as sent and the memory
/// update.
#[test]
fn a_request_counts_the_tokens_it_sent() {
    let session = SessionId::new_v7();
    let mut tail = busy_tail(session);
    let whole = tail.tokens();
    let update = "memory changed: ".repeat(50);
    let request = tail.take_request(Some(&update), &mut None);
    let e = Encoding::default();
    let counted: u64 = request
        .iter()
        .map(|m| u64::from(e.count_message(&m.token_text())))
        .sum();
    let last = tail.last_request_tokens();
    // the joins of user-side messages count a few tokens apart
    assert!(last.abs_diff(counted) < 40, "{last} counted as {counted}");
    assert!(last < whole / 2, "{last} of {whole}");
    tail.restore_request(request, None);
}
