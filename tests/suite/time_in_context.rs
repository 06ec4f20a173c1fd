//! What a bot is told of time, as an OpenAI-compatible server on loopback
//! receives it (on a manual store clock): a message's request carries the
//! time it arrived in the owner's time zone (`[[users]] timezone`, UTC when
//! unset), the system prompt names that zone, a turn resumed after a stop
//! sends the same time as its first attempt (the stored time, not the
//! clock at resume), and a time zone that is not an IANA name stops the
//! host at start naming the file and the key. (Before, no request said
//! what time it was: "what did I say yesterday?" could not be answered.)

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use botfleet::actors::FleetHandle;
use botfleet::actors::FleetSettings;
use botfleet::actors::Runtime;
use botfleet::actors::user_message;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotRecord;
use botfleet::memory::EntryKind;
use botfleet::memory::ManualClock;
use botfleet::memory::Store;
use botfleet::memory::StoreOptions;
use botfleet::memory::TurnStatus;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::tools::ToolRegistry;
use botfleet::tools::Workspace;
use serde_json::Value;
use serde_json::json;

use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::BIN;

/// 2026-12-02 15:08:30 UTC: a Wednesday, 23:08 in Shanghai.
const START: &str = "2026-12-02T15:08:30Z";

/// alice's line for a message sent at [`START`].
const SHANGHAI_LINE: &str = "[time: Wednesday 2026-12-02 23:08 (Asia/Shanghai, UTC+8)]";

/// A model that answers a person with SendMessage and stops after the
/// result.
fn model(body: &Value) -> Reply {
    match last_message(body).and_then(|m| m["role"].as_str()) {
        Some("tool") => Reply::text(""),
        _ => Reply::tool_call("send-1", "SendMessage", json!({ "text": "ok" }).to_string()),
    }
}

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// The text of the request's user-side messages, one after the other.
fn user_side(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The `[time: …]` lines of a request, in order.
fn time_lines(body: &Value) -> Vec<String> {
    user_side(body)
        .lines()
        .filter(|l| l.starts_with("[time: "))
        .map(str::to_owned)
        .collect()
}

/// alice's bot `ax` and bob's bot `bx` on the loopback server, alice in
/// Asia/Shanghai and bob with no time zone set, on a store whose clock
/// the test holds.
struct Fleet {
    dir: tempfile::TempDir,
    clock: ManualClock,
    settings: FleetSettings,
    fleet: FleetHandle,
    bots: Vec<BotRecord>,
}

fn bots() -> Vec<BotRecord> {
    vec![
        BotRecord {
            role: "Test bot ax.".into(),
            ..bot_record("ax", "main", &["SendMessage"])
        },
        BotRecord {
            role: "Test bot bx.".into(),
            owner: UserId::new("bob").unwrap(),
            ..bot_record("bx", "main", &["SendMessage"])
        },
    ]
}

fn runtime(server: &OpenAiServer, store: Store, settings: FleetSettings, ws: Workspace) -> Runtime {
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 0,
        ..OpenAiOptions::new(server.base_url(), "test-model")
    })
    .unwrap();
    let models = HashMap::from([("main".to_owned(), Arc::new(model) as Arc<dyn Model>)]);
    Runtime::new(store, models, ToolRegistry::builtin(), settings, ws)
}

impl Fleet {
    async fn start(server: &OpenAiServer) -> Self {
        let ClockedParts {
            dir,
            clock,
            store,
            ws,
            mut settings,
        } = clocked_parts(START);
        settings.extract_memory = false;
        settings.user_timezones.insert(
            UserId::new("alice").unwrap(),
            FleetSettings::parse_timezone("Asia/Shanghai").unwrap(),
        );
        let rt = runtime(server, store, settings.clone(), ws);
        let bots = bots();
        let fleet = FleetHandle::start(rt, bots.clone()).await.unwrap();
        Self {
            dir,
            clock,
            settings,
            fleet,
            bots,
        }
    }

    /// Stops the fleet (a running turn is cancelled, to resume at the next
    /// start) and starts it again on the same store and clock.
    async fn restart(&mut self, server: &OpenAiServer) {
        self.fleet.shutdown().await;
        let store = Store::open(StoreOptions {
            clock: Arc::new(self.clock.clone()),
            ..StoreOptions::new(self.dir.path().join("fleet.db"))
        })
        .unwrap();
        let ws = Workspace::open(&self.dir.path().join("ws")).unwrap();
        let rt = runtime(server, store, self.settings.clone(), ws);
        self.fleet = FleetHandle::start(rt, self.bots.clone()).await.unwrap();
    }

    /// Sends `text` from the owner of bot `n` (0: alice's ax, 1: bob's bx)
    /// and returns the input's session and seq.
    async fn send(&self, n: usize, text: &str) -> (botfleet::memory::SessionId, i64) {
        let bot = &self.bots[n];
        let sent = self
            .fleet
            .admit(user_message(&bot.owner, bot, text, None))
            .await
            .unwrap();
        let AdmitOutcome::Accepted(input) = sent else {
            panic!("not admitted: {sent:?}");
        };
        (input.session, input.seq)
    }

    /// Waits (on the store's change signals, 30 s at most) until the turn
    /// answering input `seq` of `session` completed.
    async fn wait_completed(&self, session: botfleet::memory::SessionId, seq: i64) {
        let store = self.fleet.store();
        let mut changes = store.subscribe();
        loop {
            let entries = store.entries_after(session, 0, 1000).await.unwrap();
            let end = entries.iter().find_map(|e| match &e.kind {
                EntryKind::TurnEnd { status, inputs, .. } if inputs.contains(&seq) => Some(*status),
                _ => None,
            });
            if let Some(status) = end {
                assert_eq!(status, TurnStatus::Completed, "{entries:#?}");
                return;
            }
            tokio::time::timeout(Duration::from_secs(30), changes.recv())
                .await
                .expect("the turn ended within 30 s")
                .ok();
        }
    }
}

/// The request bodies of bot `bot` (by its role in the system prompt).
fn requests_of(server: &OpenAiServer, bot: &str) -> Vec<Value> {
    let role = format!("Test bot {bot}.");
    server
        .requests()
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| system(b).contains(&role))
        .collect()
}

#[tokio::test]
async fn a_message_carries_the_time_it_arrived_in_the_owners_time_zone() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fx = Fleet::start(&server).await;

    let (session, seq) = fx.send(0, "what day is it?").await;
    fx.wait_completed(session, seq).await;
    let r = requests_of(&server, "ax");
    assert!(!r.is_empty());
    // the time is the message's, in alice's zone, right before it
    assert!(
        user_side(&r[0]).contains(&format!("{SHANGHAI_LINE}\n\nwhat day is it?")),
        "{}",
        user_side(&r[0])
    );
    // the stable prefix names the zone, and no time
    assert!(
        system(&r[0]).contains("(Asia/Shanghai)"),
        "{}",
        system(&r[0])
    );
    assert!(!system(&r[0]).contains("2026-12-02"), "{}", system(&r[0]));

    // two days on, the next message carries its own time; the first one's
    // stays where it was (the context does not change from turn to turn)
    fx.clock.advance_ms(2 * 24 * 3600 * 1000);
    let (session, seq) = fx.send(0, "and now?").await;
    fx.wait_completed(session, seq).await;
    let r = requests_of(&server, "ax");
    let last = r.last().unwrap();
    assert_eq!(
        time_lines(last),
        [
            SHANGHAI_LINE.to_owned(),
            "[time: Friday 2026-12-04 23:08 (Asia/Shanghai, UTC+8)]".to_owned(),
        ],
        "{}",
        user_side(last)
    );
    fx.fleet.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_user_without_a_time_zone_reads_utc() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let fx = Fleet::start(&server).await;
    let (session, seq) = fx.send(1, "hello").await;
    fx.wait_completed(session, seq).await;
    let r = requests_of(&server, "bx");
    assert!(!r.is_empty());
    assert!(
        user_side(&r[0]).contains("[time: Wednesday 2026-12-02 15:08 (UTC)]\n\nhello"),
        "{}",
        user_side(&r[0])
    );
    assert!(system(&r[0]).contains("(UTC)"), "{}", system(&r[0]));
    fx.fleet.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_resumed_turn_sends_the_time_of_its_first_attempt() {
    // the first request is held (the host stops during it), the others
    // are answered
    let (open, gate) = tokio::sync::watch::channel(false);
    let held = std::sync::atomic::AtomicBool::new(false);
    let server = OpenAiServer::builder()
        .responder(move |b| {
            if !held.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Reply::text("").hold_until(gate.clone());
            }
            model(b)
        })
        .start()
        .await;
    let mut fx = Fleet::start(&server).await;
    let (session, seq) = fx.send(0, "remind me in 2 days").await;
    server.wait_for_requests(1).await;
    let first = server.requests()[0].body.clone();
    assert_eq!(time_lines(&first), [SHANGHAI_LINE], "{}", user_side(&first));

    // three hours pass before the host is back: the resumed turn still
    // says when the message arrived
    fx.clock.advance_ms(3 * 3600 * 1000);
    fx.restart(&server).await;
    fx.wait_completed(session, seq).await;
    let resumed = requests_of(&server, "ax");
    assert!(resumed.len() >= 2, "the turn resumed: {resumed:?}");
    for body in &resumed[1..] {
        assert_eq!(time_lines(body), [SHANGHAI_LINE], "{}", user_side(body));
    }
    open.send_replace(true);
    fx.fleet.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_time_zone_that_is_no_iana_name_stops_the_host_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(
        &path,
        format!(
            "[host]\ndata_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n\n\
             [[users]]\nid = \"alice\"\ntoken = \"alice-secret-token\"\ntimezone = \"asia/shanghai\"\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = tokio::process::Command::new(BIN)
        .args(["run", "--listen", "127.0.0.1:0", "--fleet"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the host refused to start within 60 s")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for part in [
        path.display().to_string().as_str(),
        "users[0].timezone",
        "\"asia/shanghai\" is not an IANA time zone name",
        "did you mean \"Asia/Shanghai\"?",
    ] {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
}
