//! An approved call whose effect is a store write (SendToAgent) uses its
//! approval up in the commit of its outcome and effects: both or neither.
//! It used it up one commit before, as it started: a crash between the
//! two (here a panic in the call, after the real tool ran and before the
//! engine recorded its outcome; the bot resumes the turn at once, as a
//! restarted host does) left the approval used for a message never sent,
//! and the resumed turn asked the person again. The reverse race: the
//! approval used by another call while this one ran leaves nothing of
//! this one written, and its result is the refusal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use botfleet_memory::ApprovalDecision;
use botfleet_memory::ApprovalId;
use botfleet_memory::ApprovalRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::Store;
use botfleet_memory::UserId;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fleet::FleetHandle;
use crate::model::ChatMessage;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::model::ToolSpec;
use crate::tools::Effect;
use crate::tools::SendToAgent;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::bot_record;
use crate::tools::test_support::done;
use crate::tools::test_support::fleet_runtime;
use crate::tools::test_support::next_change;
use crate::tools::test_support::tool_step;

/// What the bot tells y: review wants a person to approve it (a key).
const ASK: &str = "the deploy key is AKIAABCDEFGHIJKLMNOP";

/// What the wrapped SendToAgent does on its first run, after the real
/// tool returned (its effects not written yet).
#[derive(Clone, Copy)]
enum FirstRun {
    /// The host dies.
    Dies,
    /// Another call uses the approval up first.
    LosesTheApproval,
    /// The call fails (nothing is sent).
    Fails,
}

/// The real SendToAgent, with [`FirstRun`] on its first run.
struct Wrapped {
    first: FirstRun,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Wrapped {
    fn spec(&self) -> ToolSpec {
        SendToAgent.spec()
    }

    fn effect(&self) -> Effect {
        SendToAgent.effect()
    }

    fn idempotent(&self) -> bool {
        SendToAgent.idempotent()
    }

    fn mutates(&self) -> bool {
        SendToAgent.mutates()
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let out = SendToAgent.call(ctx, args).await;
        if self.runs.fetch_add(1, Ordering::SeqCst) > 0 {
            return out;
        }
        match self.first {
            FirstRun::Fails => Err(ToolError::new("y could not be reached", "try again later")),
            FirstRun::Dies => panic!("the host dies after the call ran, before its outcome"),
            FirstRun::LosesTheApproval => {
                let open = ctx.store().open_approvals(&ctx.bot.id).await.unwrap();
                if let Some(usable) = open.iter().find(|a| a.is_usable()) {
                    ctx.store()
                        .write(vec![Mutation::ConsumeApproval { id: usable.id }])
                        .await
                        .unwrap();
                }
                out
            }
        }
    }
}

/// Bot b asks y [`ASK`] at each input, then tells its person the result
/// and stops; y only ends its turns (b is told it will not answer, and
/// wakes once more).
struct AskModel {
    calls: Mutex<usize>,
}

#[async_trait]
impl Model for AskModel {
    fn describe(&self) -> String {
        "ask".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if request.bot != "b" {
            return Ok(done());
        }
        let n = crate::tools::test_support::next_call(&self.calls);
        let id = format!("call-{n}");
        let last_call = request.messages.iter().rev().find_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.first().map(|c| c.name.clone()),
            _ => None,
        });
        Ok(match request.messages.last() {
            Some(ChatMessage::Tool { content, .. })
                if last_call.as_deref() == Some("SendToAgent") =>
            {
                tool_step(
                    &id,
                    "SendMessage",
                    json!({ "text": format!("told: {content}") }),
                )
            }
            Some(ChatMessage::Tool { .. }) => done(),
            _ => tool_step(&id, "SendToAgent", json!({ "agent": "y", "text": ASK })),
        })
    }
}

/// The entries of `session` once `n` turns have ended there, to the end
/// of the `n`th: a later turn (y's silence, told to b, wakes it once more)
/// is not this run's.
async fn turns_ended(store: &Store, session: SessionId, n: usize) -> Vec<Entry> {
    let mut changes = store.subscribe();
    loop {
        let mut entries = store.entries_after(session, 0, 1000).await.unwrap();
        let ends: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.kind, EntryKind::TurnEnd { .. }))
            .map(|(i, _)| i)
            .collect();
        if let Some(&nth) = n.checked_sub(1).and_then(|i| ends.get(i)) {
            entries.truncate(nth + 1);
            return entries;
        }
        next_change(&mut changes, "the turns did not end within 30 s").await;
    }
}

/// The results of the SendToAgent calls among `entries`.
fn send_results(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::ToolResult { name, content, .. } if name == "SendToAgent" => {
                Some(content.clone())
            }
            _ => None,
        })
        .collect()
}

/// What a run over [`FirstRun`] left.
struct Ran {
    /// Bot b's session with alice, to its second turn's end.
    entries: Vec<Entry>,
    /// Every approval of alice.
    approvals: Vec<ApprovalRecord>,
    /// The one alice approved.
    approved: ApprovalId,
    /// What reached y from b.
    reached_y: Vec<Entry>,
    /// Runs of the tool.
    runs: usize,
}

/// Alice asks b; b's SendToAgent waits for her approval; she approves,
/// and the turn the decision wakes runs it, with `first` on its first run.
async fn approved_send(first: FirstRun) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(AskModel {
        calls: Mutex::new(0),
    });
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::builtin();
    tools.register(Arc::new(Wrapped {
        first,
        runs: runs.clone(),
    }));
    let rt = fleet_runtime(dir.path(), model, tools);
    let alice = UserId::new("alice").unwrap();
    let bot = alices_bot(&["SendMessage", "SendToAgent"]);
    let y = bot_record("y", "Y", &alice, &["SendMessage"]);
    let fleet = FleetHandle::start(rt, vec![bot.clone(), y]).await.unwrap();
    let store = fleet.store().clone();
    let req = crate::protocol::user_message(&alice, &bot, "ask y for the key", None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();
    let asked = turns_ended(&store, session, 1).await;
    let pending: Vec<ApprovalId> = store
        .open_approvals(&bot.id)
        .await
        .unwrap()
        .iter()
        .filter(|a| a.is_pending())
        .map(|a| a.id)
        .collect();
    assert_eq!(pending.len(), 1, "{asked:#?}");
    let approved = pending[0];
    crate::safety::approvals::decide(fleet.runtime(), &alice, approved, ApprovalDecision::Approve)
        .await
        .unwrap();
    let entries = turns_ended(&store, session, 2).await;
    let approvals = store.approvals_of_owner(&alice, 50).await.unwrap();
    let y_session = SessionKey {
        bot: botfleet_memory::BotId::new("y").unwrap(),
        kind: SessionKind::Agent,
        peer: "b".into(),
    }
    .id();
    let reached_y = store
        .entries_after(y_session, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.author == "b")
        .collect();
    fleet.shutdown().await;
    Ran {
        entries,
        approvals,
        approved,
        reached_y,
        runs: runs.load(Ordering::SeqCst),
    }
}

/// The crash between the start and the outcome of the approved call: the
/// resumed turn runs it again with the approval, once, and asks nothing.
/// (The approval was used in the commit before: the resumed run found it
/// used and asked alice a second time for a message never sent.)
#[tokio::test]
async fn an_approved_send_cut_off_by_a_crash_runs_when_resumed_without_a_second_approval() {
    let ran = approved_send(FirstRun::Dies).await;
    assert_eq!(ran.runs, 2, "run again as the turn resumed");
    let results = send_results(&ran.entries);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[1].starts_with("delivered to y"),
        "the resumed run sent it: {results:#?}"
    );
    let listed: Vec<(ApprovalId, bool)> = ran
        .approvals
        .iter()
        .map(|a| (a.id, a.consumed_at.is_some()))
        .collect();
    assert_eq!(
        listed,
        [(ran.approved, true)],
        "one approval, used by the run that sent the message"
    );
    let texts: Vec<&EntryKind> = ran.reached_y.iter().map(|e| &e.kind).collect();
    assert_eq!(texts.len(), 1, "y got it once: {texts:#?}");
}

/// Two calls racing for one approval: the one whose outcome commits
/// second finds it used, and nothing it did is written; its result says
/// why. (Another call used it here while this one ran.)
#[tokio::test]
async fn an_approved_send_whose_approval_was_used_meanwhile_writes_nothing() {
    let ran = approved_send(FirstRun::LosesTheApproval).await;
    assert_eq!(ran.runs, 1);
    let results = send_results(&ran.entries);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[1].contains("not run") && results[1].contains("already used"),
        "{results:#?}"
    );
    // calling again would be refused as already run: the hint says to use
    // the other call's result, not to ask for a new approval
    assert!(
        results[1].contains("use that call's result")
            && !results[1].contains("ask for a new approval"),
        "{results:#?}"
    );
    assert!(ran.reached_y.is_empty(), "{:#?}", ran.reached_y);
    assert_eq!(ran.approvals.len(), 1, "{:#?}", ran.approvals);
}

/// A call that fails did nothing: the approval it ran with stays usable,
/// for the same call made again. (It was used up as the call started.)
#[tokio::test]
async fn an_approved_send_that_fails_leaves_its_approval_usable() {
    let ran = approved_send(FirstRun::Fails).await;
    assert_eq!(ran.runs, 1);
    let results = send_results(&ran.entries);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results[1].contains("y could not be reached"),
        "{results:#?}"
    );
    assert!(ran.reached_y.is_empty(), "{:#?}", ran.reached_y);
    let listed: Vec<(ApprovalId, bool)> = ran
        .approvals
        .iter()
        .map(|a| (a.id, a.is_usable()))
        .collect();
    assert_eq!(listed, [(ran.approved, true)]);
}
