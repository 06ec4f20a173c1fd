//! Fact extraction that survives a restart. An extraction runs in the
//! background after its turn; a row of the store's `extractions_owed`
//! (migration 12) says it has not finished:
//! - written by the engine in the batch that ends the turn, when an
//!   extraction will run for it (`Runner::owed_extraction`,
//!   `engine/memory_hooks.rs`): one more row in that transaction, no write
//!   of its own, and no moment after the end at which a crash loses it;
//!   the engine then starts [`spawn_extract_after_turn`], which only runs
//!   it;
//! - deleted with the extraction's token usage when its outcome is
//!   applied or it failed (a model error, a timeout, an answer that is not
//!   the JSON asked for: running it again would not do better);
//! - still there when a crash or a stop cut the extraction off: the next
//!   start runs it again ([`resume_owed_extractions`]), in the
//!   background, one at a time, at most [`RESUME_LIMIT`] per start and
//!   [`MAX_RERUNS`] times per turn, and only while the bot's owner is
//!   the one the row records (the person whose messages it holds, the
//!   same rule as a live turn's, [`extracts_from`]): after an owner
//!   change it is dropped, or the former owner's words would land in the
//!   new owner's memory.
//!
//! Running an extraction twice adds nothing twice: the ids of its adds
//! derive from the turn (`turn_seed`), and an add whose text is already in
//! the layer answers `Unchanged`.
//!
//! A clean shutdown waits at most [`SHUTDOWN_WAIT`] for running
//! extractions ([`Extractions::wait`]); the ones still running are cut off
//! and stay owed.
//!
//! Each running extraction reserves the tokens it may spend until its
//! usage is stored (`extract_reserved.rs`), from before it is spawned: the
//! bot's budget check before a model request counts them
//! (`engine/budget.rs`).

use std::sync::Arc;
use std::time::Duration;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::MemoryId;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::OwedExtraction;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use self::reserved::Reservation;
use self::reserved::Reserved;
pub(crate) use self::reserved::ReservedWatch;
use super::extract::ExtractReport;
use super::extract::extract_reserved;
use super::extract::extracts_from;
use super::extract::reservation_bound;
use crate::model::Purpose;
use crate::runtime::Runtime;

/// What the extractions in flight may still spend.
#[path = "extract_reserved.rs"]
mod reserved;

/// Most owed extractions one start runs again (the oldest first); the
/// rest wait for the next start.
pub const RESUME_LIMIT: i64 = 100;
/// Most re-runs of one turn's extraction after restarts: one cut off this
/// many times is given up (logged).
pub const MAX_RERUNS: i64 = 3;
/// Longest a clean shutdown waits for running extractions.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The extractions running in the background, so that a clean shutdown
/// can wait for them, then cut off the rest.
#[derive(Debug)]
pub struct Extractions {
    /// How many are running.
    running: watch::Sender<usize>,
    /// Cancelled when the shutdown stops waiting.
    stop: CancellationToken,
    /// The tokens each bot's extractions in flight may still spend.
    reserved: watch::Sender<Reserved>,
}

impl Default for Extractions {
    fn default() -> Self {
        Self {
            running: watch::Sender::new(0),
            stop: CancellationToken::new(),
            reserved: watch::Sender::new(Reserved::default()),
        }
    }
}

/// One running extraction, counted until it is dropped.
struct Running<'a>(&'a Extractions);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Extractions {
    /// Counts one more running extraction until the guard is dropped.
    fn enter(&self) -> Running<'_> {
        self.running.send_modify(|n| *n += 1);
        Running(self)
    }

    /// Reserves `tokens` for an extraction of `bot` until the reservation
    /// is dropped (after its usage is stored).
    pub(crate) fn reserve(&self, bot: &BotId, tokens: u64) -> Reservation {
        Reservation::new(&self.reserved, bot, tokens)
    }

    /// The tokens each bot's extractions in flight may still spend, and
    /// their changes.
    pub(crate) fn reserved_watch(&self) -> ReservedWatch {
        ReservedWatch::new(&self.reserved)
    }

    /// Waits until no extraction runs (for a test that knows one entered:
    /// its model was asked). Unlike [`Extractions::wait`], cuts nothing off.
    #[cfg(test)]
    pub(crate) async fn idle(&self) {
        let mut rx = self.running.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Waits until no extraction runs, at most `limit`, then cuts off the
    /// ones still running (they stay owed and run again at the next
    /// start) and refuses new ones. Answers how many were cut off.
    pub async fn wait(&self, limit: Duration) -> usize {
        let mut rx = self.running.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|n| *n == 0)).await;
        let left = *self.running.borrow();
        self.stop.cancel();
        if left > 0 {
            tracing::info!(
                running = left,
                "fact extractions cut off by the shutdown; they run again at the next start"
            );
        }
        left
    }
}

/// Spawns the extraction of a completed turn off the critical path and
/// runs it ([`super::extract_after_turn`]), which clears the turn's owed record
/// with its outcome. The record is not written here: the engine wrote it
/// with the turn's end, so a crash before this runs loses nothing (a
/// turn with no record, as in tests, clears nothing). Its tokens are
/// reserved before it is spawned, so the bot's next turn, which may start
/// before the task runs, counts them. The outcome is
/// logged; the handle answers the report (`None` on failure, or when a
/// shutdown cut it off).
pub fn spawn_extract_after_turn(
    rt: Arc<Runtime>,
    bot: BotRecord,
    session: SessionId,
    turn: TurnId,
    shown: Vec<MemoryId>,
    user_texts: Vec<String>,
    final_reply: String,
) -> tokio::task::JoinHandle<Option<ExtractReport>> {
    let reserved = rt
        .extractions
        .reserve(&bot.id, reservation_bound(&rt, &bot));
    tokio::spawn(async move {
        let _running = rt.extractions.enter();
        let owed = OwedExtraction {
            turn,
            bot: bot.id.clone(),
            session,
            owner: bot.owner.clone(),
            shown: shown.iter().map(ToString::to_string).collect(),
            user_texts,
            final_reply,
            attempts: 0,
            created_at: 0,
        };
        run(&rt, &bot, &owed, shown, reserved).await
    })
}

/// Runs an owed extraction unless a shutdown cuts it off, and logs its
/// outcome; `reserved` is released once its usage is stored (or it ends
/// without any).
async fn run(
    rt: &Runtime,
    bot: &BotRecord,
    owed: &OwedExtraction,
    shown: Vec<MemoryId>,
    reserved: Reservation,
) -> Option<ExtractReport> {
    // from the host's stop on no model request starts (an extraction not
    // run stays owed and runs at the next start)
    if rt.extractions.stop.is_cancelled() || rt.is_stopping() {
        return None;
    }
    let outcome = tokio::select! {
        outcome = extract_reserved(
            rt,
            bot,
            (owed.session, owed.turn),
            (&shown, &owed.user_texts, &owed.final_reply),
            Some(&reserved),
        ) => outcome,
        () = rt.extractions.stop.cancelled() => return None,
    };
    match outcome {
        Ok(report) => {
            tracing::debug!(
                bot = %bot.id,
                turn = %owed.turn,
                added = report.added.len(),
                replaced = report.replaced.len(),
                removed = report.removed.len(),
                rejected = report.rejected.len(),
                "fact extraction done"
            );
            // nobody else hears of a refused op (a full profile): the log
            // is where an operator finds why a bot did not remember
            for r in &report.rejected {
                tracing::warn!(bot = %bot.id, turn = %owed.turn, op = %r.op, reason = %r.reason, "fact extraction: an op was refused; memory unchanged by it");
            }
            Some(report)
        }
        Err(e) => {
            tracing::warn!(bot = %bot.id, turn = %owed.turn, error = %e, "fact extraction failed; memory unchanged");
            None
        }
    }
}

/// Runs again, in the background, the extractions a crash or a stop cut
/// off (at most [`RESUME_LIMIT`], one at a time, oldest first), when
/// `runtime.extract_memory` is on; with it off they stay owed. The handle
/// answers how many ran (given up and skipped ones not counted).
pub fn resume_owed_extractions(rt: Arc<Runtime>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let _running = rt.extractions.enter();
        if !rt.settings.extract_memory {
            return 0;
        }
        let owed = match rt.store.owed_extractions(RESUME_LIMIT).await {
            Ok(owed) => owed,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the fact extractions owed from before the restart; they wait for the next start");
                return 0;
            }
        };
        if !owed.is_empty() {
            tracing::info!(
                count = owed.len(),
                "running again the fact extractions the last stop cut off"
            );
        }
        let mut ran = 0;
        for o in owed {
            if rt.extractions.stop.is_cancelled() || rt.is_stopping() {
                break;
            }
            if put_off_by_budget(&rt, &o).await {
                continue;
            }
            if let Some(bot) = rerunnable(&rt, &o).await {
                let shown = o
                    .shown
                    .iter()
                    .filter_map(|id| MemoryId::parse(id).ok())
                    .collect();
                let reserved = rt
                    .extractions
                    .reserve(&bot.id, reservation_bound(&rt, &bot));
                run(&rt, &bot, &o, shown, reserved).await;
                ran += 1;
            }
        }
        ran
    })
}

/// Whether `o`'s bot has spent its daily token budget: the extraction, a
/// model request that counts toward it, stays owed (not counted as a run)
/// for a start after the budget resets, as the bot's turns wait for it.
async fn put_off_by_budget(rt: &Runtime, o: &OwedExtraction) -> bool {
    let bot = match rt.store.get_bot(&o.bot).await {
        Ok(Some(bot)) => bot,
        // a bot that is gone is given up by `rerunnable`
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(bot = %o.bot, error = %e, "cannot read the bot of an owed fact extraction; it waits for the next start");
            return true;
        }
    };
    match crate::engine::stored_budget_pause(&rt.store, &bot).await {
        Ok(None) => false,
        Ok(Some(_)) => {
            tracing::info!(bot = %o.bot, turn = %o.turn, "fact extraction put off: the bot's daily token budget is spent; it runs at a start after the budget resets");
            true
        }
        Err(e) => {
            tracing::warn!(bot = %o.bot, error = %e, "cannot read the bot's token usage for an owed fact extraction; it waits for the next start");
            true
        }
    }
}

/// Counts one more run of `o` and answers its bot, or gives it up (clears
/// it, logged) when it ran [`MAX_RERUNS`] times already, its bot is gone,
/// its bot has another owner than the turn's or its bot's model does not
/// extract.
async fn rerunnable(rt: &Runtime, o: &OwedExtraction) -> Option<BotRecord> {
    let bumped = rt
        .store
        .write(vec![Mutation::BumpExtraction { turn: o.turn }])
        .await;
    let attempts = match bumped.as_deref() {
        Ok([MutationResult::Attempts(n)]) => *n,
        Ok(other) => {
            tracing::warn!(turn = %o.turn, answer = ?other, "unexpected answer to counting a fact extraction's re-run; skipped");
            return None;
        }
        Err(e) => {
            tracing::warn!(turn = %o.turn, error = %e, "cannot count a fact extraction's re-run; it waits for the next start");
            return None;
        }
    };
    let bot = match rt.store.get_bot(&o.bot).await {
        Ok(bot) => bot.filter(|b| b.removed_at().is_none()),
        Err(e) => {
            tracing::warn!(bot = %o.bot, error = %e, "cannot read the bot of an owed fact extraction; it waits for the next start");
            return None;
        }
    };
    let why = match (&bot, attempts) {
        // cleared since it was read: it ended
        (_, 0) => return None,
        (_, n) if n > MAX_RERUNS => "it was cut off too many times",
        (None, _) => "its bot is gone",
        // the bot changed hands since the turn (fleet.toml, at a start):
        // what the turn's owner wrote must not reach the new owner's
        // memory, as a live turn reads no message of the former owner
        (Some(b), _) if !extracts_from(b, o.owner.as_str()) => {
            tracing::info!(
                bot = %o.bot,
                turn = %o.turn,
                turn_owner = %o.owner,
                owner = %b.owner,
                "fact extraction dropped: the bot has another owner than when the turn ran; memory unchanged"
            );
            clear(rt, o).await;
            return None;
        }
        // owed from before its provider lost its extract rule (a script
        // without one answers nothing): nothing to warn about, as a turn
        // of such a bot owes no extraction (`engine/memory_hooks.rs`)
        (Some(b), _) if !can_extract(rt, b) => {
            tracing::debug!(bot = %o.bot, turn = %o.turn, "fact extraction dropped: the bot's model does not extract");
            clear(rt, o).await;
            return None;
        }
        (Some(_), _) => return bot,
    };
    tracing::warn!(bot = %o.bot, turn = %o.turn, attempts, reason = why, "fact extraction given up; memory unchanged");
    clear(rt, o).await;
    None
}

/// Whether `bot`'s model answers extraction requests (a missing provider
/// is reported by the extraction itself).
fn can_extract(rt: &Runtime, bot: &BotRecord) -> bool {
    rt.models
        .get(&bot.provider)
        .is_none_or(|m| m.answers(Purpose::Extract))
}

/// Ends the owed record of `o` without running it.
async fn clear(rt: &Runtime, o: &OwedExtraction) {
    if let Err(e) = rt
        .store
        .write(vec![Mutation::ClearExtraction { turn: o.turn }])
        .await
    {
        tracing::warn!(turn = %o.turn, error = %e, "cannot clear a given-up fact extraction");
    }
}

#[cfg(test)]
#[path = "extract_owed_tests.rs"]
mod tests;
