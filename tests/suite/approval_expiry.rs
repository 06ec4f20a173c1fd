//! An approval's expiry, one truth for every reader: the API's listings
//! (whole, by status, one), the CLI's `approvals`, the gate's view of a
//! bot's open approvals, and the cards in the sessions. On an injected
//! store clock, with the HTTP API served in-process over that store (the
//! host reads the wall clock).

use std::collections::HashMap;
use std::sync::Arc;

use botfleet::actors::FleetHandle;
use botfleet::actors::Runtime;
use botfleet::actors::user_message;
use botfleet::api;
use botfleet::memory::ApprovalId;
use botfleet::memory::ApprovalRecord;
use botfleet::memory::ApprovalRequestOutcome;
use botfleet::memory::ApprovalStatus;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::EntryKind;
use botfleet::memory::ManualClock;
use botfleet::memory::Mutation;
use botfleet::memory::MutationResult;
use botfleet::memory::NewApproval;
use botfleet::memory::SessionId;
use botfleet::memory::SessionKey;
use botfleet::memory::SessionKind;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::Script;
use botfleet::model::ScriptedModel;
use botfleet::tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;
use crate::support::fleet::TOKEN;
use crate::support::process::cli;

const MINUTE: i64 = 60_000;

/// A fleet of bots `r` and `q` (alice's) on a manual store clock, and the
/// API over it on a loopback port.
struct Clocked {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    fleet: FleetHandle,
    url: String,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<()>,
}

impl Clocked {
    async fn start() -> Self {
        let ClockedParts {
            dir,
            clock,
            store,
            ws,
            settings,
        } = clocked_parts("2026-11-30T09:00:00Z");
        let script = "[[rule]]\nsteps = [ { tool = \"SendMessage\", args = { text = \"ok\" } } ]\n";
        let model: Arc<dyn Model> =
            Arc::new(ScriptedModel::new(Script::parse(script, "s").unwrap()));
        let rt = Runtime::new(
            store,
            HashMap::from([("p".to_owned(), model)]),
            ToolRegistry::builtin(),
            settings,
            ws,
        );
        let bots: Vec<BotRecord> = ["r", "q"]
            .into_iter()
            .map(|id| BotRecord {
                name: id.to_uppercase(),
                ..bot_record(id, "p", &["SendMessage", "Shell"])
            })
            .collect();
        let fleet = FleetHandle::start(rt, bots.clone()).await.unwrap();
        for bot in &bots {
            // opens alice's DM with the bot, where its approvals are asked
            fleet
                .admit(user_message(&alice(), bot, "hello", None))
                .await
                .unwrap();
        }
        let scheduler = botfleet::actors::scheduler::SchedulerHandle::start(
            fleet.runtime().clone(),
            Arc::new(clock.clone()),
            Vec::new(),
        )
        .await
        .unwrap();
        let state = api::ApiState {
            fleet: fleet.clone(),
            tokens: api::Tokens::new([(alice(), TOKEN.to_owned())]),
            limits: api::ApiLimits {
                max_body_bytes: 1 << 20,
                max_text_chars: 10_000,
                streams: api::EventStreams::for_host(16, 512),
                messages: api::MessageRate::new(600),
                guesses: api::TokenGuesses::new(30),
                bodies: api::BodyBudget::new(8 << 20, 1 << 20),
            },
            scheduler,
            hooks: api::Hooks::new(Vec::new()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, api::router(state)).await.unwrap();
        });
        Self {
            _dir: dir,
            clock,
            fleet,
            url,
            http: reqwest::Client::new(),
            server,
        }
    }

    /// A pending approval of `bot` in alice's DM with it, as the gate asks.
    async fn ask(&self, bot: &str, what: &str, ttl_ms: i64) -> ApprovalId {
        let new = NewApproval {
            id: ApprovalId::new_v7(),
            bot: BotId::new(bot).unwrap(),
            session: dm(bot),
            turn: None,
            call_id: format!("call-{what}"),
            tool: "Shell".into(),
            fingerprint: format!("fp-{what}"),
            summary: format!("run `{what}`"),
            reason: "runs code nobody reviewed".into(),
            action: json!({"tool": "Shell", "args": {"command": what}}),
            ttl_ms,
            max_pending: 4,
        };
        let written = self
            .fleet
            .store()
            .write(vec![Mutation::RequestApproval(Box::new(new))])
            .await
            .unwrap();
        match written.into_iter().next() {
            Some(MutationResult::ApprovalRequested(o)) => match *o {
                ApprovalRequestOutcome::Created(a) => a.id,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Approves `id` through the API; returns the status and the body.
    async fn approve(&self, id: ApprovalId) -> (u16, Value) {
        let path = format!("/v1/approvals/{id}");
        self.call("POST", &path, Some(json!({"decision": "approve"})))
            .await
    }

    /// The open approvals of `bot` as the gate reads them.
    async fn gate(&self, bot: &str) -> Vec<ApprovalRecord> {
        self.fleet
            .store()
            .open_approvals(&BotId::new(bot).unwrap())
            .await
            .unwrap()
    }

    /// `(id, status)` of each approval a listing at `path` returns.
    async fn listed(&self, path: &str) -> Vec<(String, String)> {
        let (status, v) = self.call("GET", path, None).await;
        assert_eq!(status, 200, "{path}: {v}");
        v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["id"].as_str().unwrap().to_owned(),
                    a["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// The status the newest card of approval `id` in `bot`'s DM shows.
    async fn card(&self, bot: &str, id: ApprovalId) -> ApprovalStatus {
        let entries = self
            .fleet
            .store()
            .entries_after(dm(bot), 0, 1000)
            .await
            .unwrap();
        entries
            .into_iter()
            .rev()
            .find_map(|e| match e.kind {
                EntryKind::Approval {
                    approval, status, ..
                } if approval == id => Some(status),
                _ => None,
            })
            .unwrap()
    }
}

fn alice() -> UserId {
    UserId::new("alice").unwrap()
}

fn dm(bot: &str) -> SessionId {
    SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id()
}

/// Regression: an approval approved and never used expires with its
/// window, but its expiry was written only by `GET /v1/approvals`, and
/// only for bots that also had an expired undecided one: its card kept
/// saying "approved" while every listing said "expired". Every reader
/// computes the state from the stored times, and every approvals route
/// brings the cards up to date first: all agree, cards included.
#[tokio::test]
async fn every_reader_agrees_on_an_expired_approval() {
    let rig = Clocked::start().await;
    // r: approved, then left unused; q: nobody decides; r: a long one
    let used_late = rig.ask("r", "env", 10 * MINUTE).await;
    let undecided = rig.ask("q", "id", 10 * MINUTE).await;
    let waiting = rig.ask("r", "uptime", 60 * MINUTE).await;
    let (status, v) = rig.approve(used_late).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rig.card("r", used_late).await, ApprovalStatus::Approved);

    rig.clock.advance_ms(10 * MINUTE - 1);
    let gate = rig.gate("r").await;
    assert!(
        gate.iter().any(|a| a.id == used_late && a.is_usable()),
        "{gate:#?}"
    );
    rig.clock.advance_ms(1);

    // the gate: the approved action may no longer run
    let gate = rig.gate("r").await;
    let state: Vec<(ApprovalId, ApprovalStatus)> = gate.iter().map(|a| (a.id, a.status)).collect();
    assert_eq!(
        state,
        [
            (used_late, ApprovalStatus::Expired),
            (waiting, ApprovalStatus::Pending)
        ]
    );
    assert!(!gate.iter().any(|a| a.is_usable()));
    // one at a time
    for (id, expected) in [
        (used_late, "expired"),
        (undecided, "expired"),
        (waiting, "pending"),
    ] {
        let (status, v) = rig.call("GET", &format!("/v1/approvals/{id}"), None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["approval"]["status"], expected, "{v}");
    }
    // whole, and by status
    let s = |id: ApprovalId, status: &str| (id.to_string(), status.to_owned());
    assert_eq!(
        rig.listed("/v1/approvals").await,
        [
            s(waiting, "pending"),
            s(undecided, "expired"),
            s(used_late, "expired")
        ]
    );
    // a page that holds fewer than match says so (QA: `approvals --all`
    // showed 100 of 105, saying nothing)
    for (path, shown, more) in [
        ("/v1/approvals?limit=2", 2, true),
        ("/v1/approvals?limit=3", 3, false),
        ("/v1/approvals?status=expired&limit=1", 1, true),
        ("/v1/approvals?status=pending&limit=1", 1, false),
    ] {
        let (status, v) = rig.call("GET", path, None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            v["approvals"].as_array().map(Vec::len),
            Some(shown),
            "{path}: {v}"
        );
        assert_eq!(v["more"], more, "{path}: {v}");
    }
    for (status, expected) in [
        ("pending", vec![s(waiting, "pending")]),
        ("approved", vec![]),
        ("denied", vec![]),
        (
            "expired",
            vec![s(undecided, "expired"), s(used_late, "expired")],
        ),
    ] {
        let path = format!("/v1/approvals?status={status}");
        assert_eq!(rig.listed(&path).await, expected, "{path}");
    }
    // the CLI
    let (code, out, err) = cli(&["approvals"], &rig.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&waiting.to_string())
            && !out.contains(&used_late.to_string())
            && !out.contains(&undecided.to_string()),
        "{out}"
    );
    let (code, out, err) = cli(&["approvals", "--all"], &rig.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    for (id, why) in [
        (used_late, "expired: approved but not used in time"),
        (undecided, "expired: nobody decided in time"),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&id.to_string()))
            .unwrap_or_else(|| panic!("{id} not in {out}"));
        assert!(line.contains(" expired ") && line.contains(why), "{line}");
    }
    // the cards in the sessions say so too
    assert_eq!(rig.card("r", used_late).await, ApprovalStatus::Expired);
    assert_eq!(rig.card("q", undecided).await, ApprovalStatus::Expired);
    assert_eq!(rig.card("r", waiting).await, ApprovalStatus::Pending);
    // deciding it now is refused as expired
    let (status, v) = rig.approve(undecided).await;
    assert_eq!(status, 409, "{v}");
    rig.server.abort();
    rig.fleet.shutdown().await;
}
