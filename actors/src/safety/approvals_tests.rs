//! Decisions: who may decide, what may be decided, and the event that
//! wakes the bot in the approval's session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::ApprovalRequestOutcome;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::NewApproval;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::Script;
use crate::model::ScriptedModel;
use crate::settings::FleetSettings;
use crate::tools::ToolRegistry;
use crate::tools::Workspace;

/// Answers the approval events with a delivery that quotes their first line.
const SCRIPT: &str = r#"
[[rule]]
match = "approval"
steps = [ { tool = "SendMessage", args = { text = "got it" } } ]
"#;

struct Fx {
    _dir: tempfile::TempDir,
    fleet: FleetHandle,
    bot: BotRecord,
}

impl Fx {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
        let mut settings = FleetSettings::new(ws.root().to_path_buf());
        settings.debounce = Duration::ZERO;
        let model: Arc<dyn Model> =
            Arc::new(ScriptedModel::new(Script::parse(SCRIPT, "s.toml").unwrap()));
        let models = HashMap::from([("p".to_owned(), model)]);
        let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
        let bot = BotRecord {
            id: BotId::new("b").unwrap(),
            name: "B".into(),
            owner: UserId::new("alice").unwrap(),
            role: String::new(),
            provider: "p".into(),
            // Shell: the tool of the approvals below, so the approved
            // action can run (`decide` says so otherwise)
            tools: vec!["SendMessage".into(), "Shell".into()],
            settings: json!({}),
            origin: "test".into(),
            created_at: 0,
            updated_at: 0,
        };
        let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
        Self {
            _dir: dir,
            fleet,
            bot,
        }
    }

    fn rt(&self) -> &Runtime {
        self.fleet.runtime()
    }

    /// A pending approval in the bot's DM (created through the store, as
    /// the gate does).
    async fn pending(&self, fingerprint: &str) -> ApprovalRecord {
        let key = botfleet_memory::SessionKey {
            bot: self.bot.id.clone(),
            kind: botfleet_memory::SessionKind::Dm,
            peer: "alice".into(),
        };
        self.rt()
            .store
            .write(vec![Mutation::EnsureSession(
                botfleet_memory::SessionRecord {
                    id: key.id(),
                    key: key.clone(),
                    owner: self.bot.owner.clone(),
                    epoch: 0,
                    last_seq: 0,
                    created_at: 0,
                },
            )])
            .await
            .unwrap();
        let new = NewApproval {
            id: ApprovalId::new_v7(),
            bot: self.bot.id.clone(),
            session: key.id(),
            turn: None,
            call_id: "c1".into(),
            tool: "Shell".into(),
            fingerprint: fingerprint.into(),
            summary: "run `./deploy.sh`".into(),
            reason: "sends data to transfer.sh".into(),
            action: json!({}),
            ttl_ms: 600_000,
            max_pending: 4,
        };
        match self
            .rt()
            .store
            .write(vec![Mutation::RequestApproval(Box::new(new))])
            .await
            .unwrap()
            .pop()
        {
            Some(MutationResult::ApprovalRequested(o)) => match *o {
                ApprovalRequestOutcome::Created(r) => r,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    /// Waits (bounded) until the session has an entry `pick` accepts.
    async fn wait_entry(&self, rec: &ApprovalRecord, pick: impl Fn(&Entry) -> bool) -> Entry {
        // every new entry signals a change: look again on each one
        let mut changes = self.rt().store.subscribe();
        loop {
            let entries = self
                .rt()
                .store
                .entries_after(rec.session, 0, 1000)
                .await
                .unwrap();
            if let Some(e) = entries.into_iter().find(|e| pick(e)) {
                return e;
            }
            let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
                .await
                .expect("no such entry within 30 s");
            if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
                panic!("the store closed");
            }
        }
    }
}

#[tokio::test]
async fn a_denial_is_final_and_wakes_the_bot_with_the_denial_text() {
    let fx = Fx::new().await;
    let rec = fx.pending("f1").await;
    let alice = UserId::new("alice").unwrap();
    let bob = UserId::new("bob").unwrap();
    let err = decide(fx.rt(), &bob, rec.id, ApprovalDecision::Deny)
        .await
        .unwrap_err();
    assert!(matches!(err, ApprovalError::NotFound(_)), "{err}");

    let denied = decide(fx.rt(), &alice, rec.id, ApprovalDecision::Deny)
        .await
        .unwrap();
    assert_eq!(denied.status, ApprovalStatus::Denied);
    assert_eq!(denied.decided_by, Some(alice.clone()));
    let event = fx
        .wait_entry(
            &rec,
            |e| matches!(&e.kind, EntryKind::Event { origin, .. } if origin == APPROVAL_ORIGIN),
        )
        .await;
    let EntryKind::Event { text, trusted, .. } = &event.kind else {
        unreachable!()
    };
    assert!(*trusted);
    assert!(
        text.starts_with(&format!(
            "alice denied approval {}: run `./deploy.sh`",
            rec.id
        )),
        "{text}"
    );
    assert!(
        text.contains("Do not retry this action, and do not reach the same result another way"),
        "{text}"
    );
    assert_eq!(event.author, "alice");
    // the bot woke up and answered in a new turn
    fx.wait_entry(
        &rec,
        |e| matches!(&e.kind, EntryKind::Delivery { text, .. } if text == "got it"),
    )
    .await;
    let again = decide(fx.rt(), &alice, rec.id, ApprovalDecision::Approve)
        .await
        .unwrap_err();
    assert_eq!(
        again.to_string(),
        format!("approval {} is already denied; a decision is final", rec.id)
    );
    fx.fleet.shutdown().await;
}

#[tokio::test]
async fn an_approval_tells_the_bot_to_repeat_the_exact_call() {
    let fx = Fx::new().await;
    let rec = fx.pending("f2").await;
    let alice = UserId::new("alice").unwrap();
    let approved = decide(fx.rt(), &alice, rec.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    let event = fx
        .wait_entry(&rec, |e| matches!(&e.kind, EntryKind::Event { .. }))
        .await;
    assert!(
        event
            .kind
            .text()
            .contains("make exactly the same Shell call again (same arguments) within 10 minutes"),
        "{}",
        event.kind.text()
    );
    // cards: pending, then approved
    let entries = fx
        .rt()
        .store
        .entries_after(rec.session, 0, 1000)
        .await
        .unwrap();
    let cards: Vec<ApprovalStatus> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Approval { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(
        cards,
        vec![ApprovalStatus::Pending, ApprovalStatus::Approved]
    );
    fx.fleet.shutdown().await;
}

#[test]
fn minutes_round_up() {
    assert_eq!(minutes(600_000), "10");
    assert_eq!(minutes(540_001), "10");
    assert_eq!(minutes(1), "1");
    assert_eq!(minutes(0), "1");
}

/// An approval of `bot`'s Shell call, `status`, as of now.
fn record_of(bot: &str, status: ApprovalStatus) -> ApprovalRecord {
    ApprovalRecord {
        id: ApprovalId::new_v7(),
        bot: BotId::new(bot).unwrap(),
        session: botfleet_memory::SessionId::new_v7(),
        owner: UserId::new("alice").unwrap(),
        turn: None,
        call_id: "c1".into(),
        tool: "Shell".into(),
        fingerprint: "fp".into(),
        summary: "run `./deploy.sh`".into(),
        reason: "deploys".into(),
        action: json!({}),
        epoch: 0,
        status,
        expired_by: None,
        created_at: 0,
        expires_at: 1,
        decided_at: None,
        decided_by: None,
        consumed_at: None,
    }
}

/// Bot `id` of `origin` with `tools` (Shell cut).
fn bot_of(id: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec!["SendMessage".into()],
        settings: json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// Regression (round 20, H4 finding 13): an approval whose action ran
/// (`consumed_at`) still said it could not run once the tool was cut, and
/// a subagent's was told to give the tool back in fleet.toml, which never
/// gives a subagent a tool again (its tools are only cut).
#[test]
fn an_approval_that_ran_has_no_obstacle_and_a_subagent_is_not_told_to_restore_a_tool() {
    let mut used = record_of("b.sub-abc", ApprovalStatus::Approved);
    used.consumed_at = Some(1);
    let sub = bot_of("b.sub-abc", "subagent:b");
    assert_eq!(obstacle(&used, &sub), None);

    let unused = record_of("b.sub-abc", ApprovalStatus::Approved);
    assert_eq!(
        obstacle(&unused, &sub).as_deref(),
        Some(
            "Shell is no longer among subagent b.sub-abc's tools (a subagent's tools are only \
             ever cut, never given back), so this action can no longer run; ask b for a new \
             task if it is still needed"
        )
    );
    // a bot of the config is told how to give it back
    let own = bot_of("b", "config");
    let text = obstacle(&record_of("b", ApprovalStatus::Pending), &own).unwrap();
    assert!(
        text.contains("add Shell to the `tools` of b in fleet.toml again"),
        "{text}"
    );
}

/// Regression (round 21, H3): a bot made by CreateAgent that its owner
/// removed was told to be listed in fleet.toml again, which never listed
/// it; a bot taken out of fleet.toml still is.
#[test]
fn a_bot_removed_by_its_owner_is_not_told_to_be_listed_in_fleet_toml() {
    let made = bot_of("helper", "agent:b").mark_removed(1);
    let text = obstacle(&record_of("helper", ApprovalStatus::Pending), &made).unwrap();
    assert!(
        text.contains("bot helper was removed by its owner") && !text.contains("fleet.toml"),
        "{text}"
    );
    let listed = bot_of("b", "config").mark_removed(1);
    let text = obstacle(&record_of("b", ApprovalStatus::Pending), &listed).unwrap();
    assert!(text.contains("list b in fleet.toml again"), "{text}");
}
