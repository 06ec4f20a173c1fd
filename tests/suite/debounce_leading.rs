//! The debounce window's leading edge: a person's lone message to an
//! awake, idle bot starts its turn at once (before, it waited the whole
//! window, `runtime.debounce_ms`, for messages that did not come), while a
//! message that follows within the window still interrupts the turn or
//! waits for the window, folded with what comes after it.
//!
//! On tokio's paused clock held still: the fleet's store writes happen on
//! its writer thread, and while the runtime waits for one it would move
//! the clock on to its next timer (the window's end), so a task on the
//! blocking pool holds it ([`Still`]). Time moves only when a test says
//! (`tokio::time::advance`): a reply that comes while the clock stands
//! still came before the window could end.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use botfleet::actors::FleetHandle;
use botfleet::actors::Runtime;
use botfleet::actors::user_message;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotRecord;
use botfleet::memory::Change;
use botfleet::memory::EntryKind;
use botfleet::memory::SessionId;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::Script;
use botfleet::model::ScriptedModel;
use botfleet::tools::ToolRegistry;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;

/// `runtime.debounce_ms` of the fleet: long, so that a reply that waited
/// for the window cannot pass for one that did not.
const DEBOUNCE: Duration = Duration::from_secs(10);

/// A message starting with HOLD keeps its model call for an hour (of a
/// clock that stands still: until it is interrupted); any other is
/// answered with what it said.
const SCRIPT: &str = r#"
[[rule]]
match = "^HOLD"
steps = [ { delay_ms = 3600000, tool = "SendMessage", args = { text = "held" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "re: {{inputs}}" } } ]
"#;

/// Holds tokio's paused clock still while it lives: a task on the
/// blocking pool keeps the runtime from moving it on when it idles.
struct Still {
    _release: std::sync::mpsc::Sender<()>,
}

impl Still {
    fn hold() -> Self {
        let (release, released) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || {
            // ends when the sender is dropped
            let _ = released.recv();
        });
        Self { _release: release }
    }
}

/// `fut`, failing with `what` after 30 s of wall time: tokio's timers do
/// not run while the clock stands still, so this guard against a hang is
/// on the blocking pool.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let guard = tokio::task::spawn_blocking(move || finished.recv_timeout(Duration::from_secs(30)));
    tokio::select! {
        out = fut => {
            drop(done);
            out
        }
        _ = guard => panic!("{what} (within 30 s)"),
    }
}

/// An in-process fleet with alice's bot `b` on the scripted model.
struct Rig {
    _dir: tempfile::TempDir,
    fleet: FleetHandle,
    bot: BotRecord,
    alice: UserId,
    changes: broadcast::Receiver<Change>,
    still: Option<Still>,
}

impl Rig {
    async fn start() -> Self {
        let ClockedParts {
            dir,
            store,
            ws,
            mut settings,
            ..
        } = clocked_parts("2026-12-02T09:00:00Z");
        settings.debounce = DEBOUNCE;
        settings.debounce_max = DEBOUNCE * 3;
        settings.extract_memory = false;
        let model: Arc<dyn Model> =
            Arc::new(ScriptedModel::new(Script::parse(SCRIPT, "s").unwrap()));
        let rt = Runtime::new(
            store,
            HashMap::from([("p".to_owned(), model)]),
            ToolRegistry::builtin(),
            settings,
            ws,
        );
        let bot = bot_record("b", "p", &["SendMessage"]);
        let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
        let changes = fleet.store().subscribe();
        Self {
            _dir: dir,
            fleet,
            bot,
            alice: UserId::new("alice").unwrap(),
            changes,
            still: Some(Still::hold()),
        }
    }

    /// Alice says `text` to the bot; returns her DM with it.
    async fn say(&self, text: &str) -> SessionId {
        let req = user_message(&self.alice, &self.bot, text, None);
        let session = req.entry.session;
        let outcome = self.fleet.admit(req).await.unwrap();
        assert!(matches!(outcome, AdmitOutcome::Accepted(_)), "{outcome:?}");
        session
    }

    /// The bot's deliveries in `session`.
    async fn replies(&self, session: SessionId) -> Vec<String> {
        let entries = self
            .fleet
            .store()
            .entries_after(session, 0, 1000)
            .await
            .unwrap();
        entries
            .into_iter()
            .filter_map(|e| match e.kind {
                EntryKind::Delivery { text, .. } => Some(text),
                _ => None,
            })
            .collect()
    }

    /// Waits for the bot's reply `text` in `session`, failing with `what`.
    async fn reply(&mut self, session: SessionId, text: &str, what: &str) {
        let fleet = self.fleet.clone();
        let changes = &mut self.changes;
        within(what, async {
            loop {
                let entries = fleet.store().entries_after(session, 0, 1000).await.unwrap();
                let replied = entries
                    .iter()
                    .any(|e| matches!(&e.kind, EntryKind::Delivery { text: t, .. } if t == text));
                if replied {
                    return;
                }
                changes.recv().await.unwrap();
            }
        })
        .await;
    }

    /// Waits until the bot is awake and runs nothing, with `queued`
    /// inputs waiting, failing with `what`. A turn the bot starts meanwhile
    /// (its record, written with its first step, makes it one more than
    /// `turns`) fails it at once.
    async fn waits_with(&self, queued: usize, turns: usize, what: &str) {
        let mut published = self.fleet.status_changes();
        within(what, async {
            loop {
                let status = self.fleet.status(&self.bot.id).await.unwrap();
                if let Some(s) = &status
                    && !s.starting
                    && s.turn.is_none()
                    && s.queued == queued
                {
                    return;
                }
                let started = self.turns().await;
                assert!(started <= turns, "{what}: a turn started: {status:?}");
                published.changed().await.unwrap();
            }
        })
        .await;
    }

    /// Waits until the bot runs a turn, failing with `what`.
    async fn runs(&self, what: &str) {
        let mut published = self.fleet.status_changes();
        within(what, async {
            loop {
                let status = self.fleet.status(&self.bot.id).await.unwrap();
                if status.is_some_and(|s| s.turn.is_some()) {
                    return;
                }
                published.changed().await.unwrap();
            }
        })
        .await;
    }

    /// Turns the store has a record of.
    async fn turns(&self) -> usize {
        let turns = self.fleet.store().turns_of_bot(&self.bot.id, 100).await;
        turns.unwrap().len()
    }

    /// Lets the clock move again, and stops the fleet.
    async fn shutdown(mut self) {
        self.still = None;
        self.fleet.shutdown().await;
    }
}

/// A lone message to an awake, idle bot reaches the model with the clock
/// standing still: it does not wait for the debounce window (before, the
/// reply came only once the clock had moved on by the window). A message
/// that follows within the window interrupts the turn the lone one
/// started, and the next turn, over both, starts when the window ends.
#[tokio::test(start_paused = true)]
async fn a_lone_message_to_an_awake_bot_starts_its_turn_at_once() {
    let mut rig = Rig::start().await;
    // the message that wakes the bot starts its turn at once (it did before)
    let dm = rig.say("hello").await;
    rig.reply(dm, "re: hello", "no reply to the message that woke the bot")
        .await;
    rig.waits_with(0, 1, "the bot did not settle after its first turn")
        .await;

    // a window after the last message, the bot is awake and quiet
    tokio::time::advance(DEBOUNCE).await;
    let sent = Instant::now();
    rig.say("a lone question").await;
    rig.reply(
        dm,
        "re: a lone question",
        "no reply to a lone message to the awake bot while the clock stood still: it waited for the debounce window",
    )
    .await;
    assert_eq!(Instant::now(), sent, "the clock moved");
    rig.waits_with(0, 2, "the bot did not settle after the lone message's turn")
        .await;

    // quiet again: a lone message starts at once, and one right after it
    // interrupts its turn and waits for the window
    tokio::time::advance(DEBOUNCE).await;
    rig.say("HOLD this").await;
    rig.runs("the lone message's turn did not start while the clock stood still")
        .await;
    let follow = Instant::now();
    rig.say("and this").await;
    // the held run was cut before its first step (it leaves no record):
    // both messages wait for the window
    rig.waits_with(2, 2, "the follow-up did not interrupt the running turn")
        .await;
    assert_eq!(rig.replies(dm).await.len(), 2, "a reply came early");
    tokio::time::advance(DEBOUNCE).await;
    rig.reply(
        dm,
        "re: HOLD this\nand this",
        "no reply over both messages once the window ended",
    )
    .await;
    assert!(Instant::now() >= follow + DEBOUNCE);
    assert_eq!(
        rig.replies(dm).await,
        [
            "re: hello",
            "re: a lone question",
            "re: HOLD this\nand this"
        ]
    );
    rig.shutdown().await;
}

/// Quiet means no person's message within the last window, not only no
/// turn running: a message right after one whose turn already ended (the
/// one that woke the bot, or a lone one to the awake bot) waits for the
/// window, and is answered when it ends.
#[tokio::test(start_paused = true)]
async fn a_message_soon_after_the_last_one_waits_for_the_window() {
    let mut rig = Rig::start().await;
    let dm = rig.say("hello").await;
    rig.reply(dm, "re: hello", "no reply to the message that woke the bot")
        .await;
    rig.waits_with(0, 1, "the bot did not settle after its first turn")
        .await;
    let soon = Instant::now();
    rig.say("soon after").await;
    rig.waits_with(1, 1, "the message soon after waking did not wait")
        .await;
    tokio::time::advance(DEBOUNCE).await;
    rig.reply(dm, "re: soon after", "no reply once the window ended")
        .await;
    assert!(Instant::now() >= soon + DEBOUNCE);
    rig.waits_with(0, 2, "the bot did not settle").await;

    // the same after a lone message to the awake bot, answered at once
    tokio::time::advance(DEBOUNCE).await;
    rig.say("lone").await;
    rig.reply(dm, "re: lone", "no reply to the lone message at once")
        .await;
    rig.waits_with(0, 3, "the bot did not settle").await;
    rig.say("right after").await;
    rig.waits_with(1, 3, "the message right after the lone one did not wait")
        .await;
    tokio::time::advance(DEBOUNCE).await;
    rig.reply(dm, "re: right after", "no reply once the window ended")
        .await;
    rig.shutdown().await;
}
