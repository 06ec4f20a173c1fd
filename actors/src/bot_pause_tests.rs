//! The daily token budget's pause ends at the wall clock's midnight, also
//! when the pause's timer (on the monotonic clock) is late: a suspended
//! machine or a stepped clock. Through the fleet's messages, on a store
//! whose clock the test moves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;
use botfleet_memory::EntryKind;
use botfleet_memory::ManualClock;
use botfleet_memory::TurnStatus;
use botfleet_memory::UserId;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::BotStatus;
use crate::fleet::FleetHandle;
use crate::model::Model;
use crate::model::ModelError;
use crate::model::ModelRequest;
use crate::model::ModelResponse;
use crate::model::Purpose;
use crate::model::StreamSink;
use crate::model::Usage;
use crate::tools::ToolRegistry;
use crate::tools::test_support::alices_bot;
use crate::tools::test_support::deliveries;
use crate::tools::test_support::ends;
use crate::tools::test_support::fleet_runtime_on;
use crate::tools::test_support::next_call;
use crate::tools::test_support::tool_step;
use crate::tools::test_support::turns_ended;

/// Each call: a reply that spends 100 tokens, past the bot's budget of
/// 50, so the turn ends after it and the bot pauses.
struct SpendingModel {
    calls: Mutex<usize>,
}

#[async_trait]
impl Model for SpendingModel {
    fn describe(&self) -> String {
        "spending".into()
    }

    fn answers(&self, purpose: Purpose) -> bool {
        matches!(purpose, Purpose::Turn)
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _sink: &mut dyn StreamSink,
        _cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let n = next_call(&self.calls);
        let mut step = tool_step(
            &format!("call-{n}"),
            "SendMessage",
            json!({ "text": format!("reply {n}") }),
        );
        step.usage = Some(Usage {
            prompt_tokens: 90,
            completion_tokens: 10,
            cached_prompt_tokens: 0,
        });
        Ok(step)
    }
}

/// The bot's published status once `pick` holds for it (its turn's end
/// is written before the bot has taken it in), for at most 30 s.
async fn until_status(fleet: &FleetHandle, pick: impl Fn(&BotStatus) -> bool) -> BotStatus {
    let found = async {
        loop {
            let all = fleet.active().await.unwrap();
            if let Some(s) = all.into_iter().find(|s| pick(s)) {
                return s;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), found)
        .await
        .expect("the bot's status did not come within 30 s")
}

/// Regression (QA): the pause's one timer ran for the whole wait on the
/// monotonic clock; with the wall clock past midnight (moved, or a
/// machine that slept), the bot stayed paused: `paused_until` in the past
/// and the people's messages queued. A message that comes once the wall
/// clock passed the pause's end is answered at once.
#[tokio::test]
async fn a_message_after_the_pause_ends_by_the_wall_clock_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new("2026-06-01T23:58:00Z".parse().unwrap());
    let model: Arc<dyn Model> = Arc::new(SpendingModel {
        calls: Mutex::new(0),
    });
    let rt = fleet_runtime_on(
        dir.path(),
        model,
        ToolRegistry::builtin(),
        Arc::new(clock.clone()),
    );
    let mut bot = alices_bot(&["SendMessage"]);
    bot.settings = json!({ "daily_token_budget": 50 });
    let fleet = FleetHandle::start(rt, vec![bot.clone()]).await.unwrap();
    let alice = UserId::new("alice").unwrap();

    let req = crate::protocol::user_message(&alice, &bot, "spend it", None);
    let session = req.entry.session;
    fleet.admit(req).await.unwrap();
    assert_eq!(
        ends(&turns_ended(fleet.store(), session, 1).await),
        vec![TurnStatus::Completed]
    );
    let midnight = "2026-06-02T00:00:00Z"
        .parse::<chrono::DateTime<chrono::Utc>>()
        .unwrap()
        .timestamp_millis();
    let status = until_status(&fleet, |s| s.turn.is_none()).await;
    assert_eq!(status.paused_until, Some(midnight), "{status:?}");

    // the wall clock passes midnight long before the timer would fire
    clock.set("2026-06-02T00:00:05Z".parse().unwrap());
    let req = crate::protocol::user_message(&alice, &bot, "good morning", None);
    fleet.admit(req).await.unwrap();
    let entries = turns_ended(fleet.store(), session, 2).await;
    assert_eq!(
        ends(&entries),
        vec![TurnStatus::Completed, TurnStatus::Completed]
    );
    assert_eq!(
        deliveries(&entries),
        vec!["reply 0", "reply 1"],
        "{entries:#?}"
    );
    assert!(
        !entries.iter().any(
            |e| matches!(&e.kind, EntryKind::Notice { code, .. } if code == "budget_exhausted")
        ),
        "{entries:#?}"
    );
    // and that reply spent the new day's budget: paused to the next
    let status = until_status(&fleet, |s| s.turn.is_none()).await;
    assert_eq!(
        status.paused_until,
        Some(midnight + 86_400_000),
        "{status:?}"
    );
    fleet.shutdown().await;
}

/// The pause's timer looks at the clock at least every minute, and never
/// waits past the pause's end.
#[test]
fn the_pause_timer_waits_at_most_a_minute() {
    use super::pause_timer;
    use std::time::Duration;
    assert_eq!(pause_timer(5_000), Duration::from_secs(5));
    assert_eq!(pause_timer(3_600_000), Duration::from_secs(60));
    assert_eq!(pause_timer(-1), Duration::ZERO);
}
