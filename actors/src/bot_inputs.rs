//! What an input does to an active bot ([`BotState::on_input`]): it is
//! queued, and a person's direct message interrupts the running turn or
//! opens the debounce window ([`BotState::on_user_dm`]); and, when no
//! input comes, the idle check that asks the router to passivate the bot.
//! `impl BotState`, split from `bot.rs`.

#[allow(clippy::wildcard_imports)]
use super::*;

/// When the next turn may start after a person's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// Now, if nothing runs.
    Now,
    /// When the debounce window ends.
    Later,
}

/// After this many turn runs in a row were interrupted before their first
/// model step, the next run does not yield to a person's message until it
/// has committed one. Under a steady stream of messages (a paste split in
/// hundreds, 50 a second) each message ended the running turn before it
/// reached the model and each restart read the whole backlog again: the
/// bot went 30–40 s without a model call. A message that comes meanwhile
/// interrupts the run once its first step is committed (`FirstStep`).
const HOLD_AFTER_UNSTEPPED: u32 = 2;

/// After this many turn runs in a row were interrupted by a person's
/// message (before or after a step), the next run does not yield to a
/// person's message at all: it goes on to its end, and what came meanwhile
/// is the next turn's. A turn of a tool step and a SendMessage step, under
/// messages that came faster than it took, was interrupted after its tool
/// step every time and never reached its SendMessage: the bot worked on
/// and replied to nothing (QA: 2 replies to 59 messages, one every 0.5 s,
/// in 30 s). `POST /v1/bots/{bot}/cancel` still stops such a run.
const HOLD_AFTER_INTERRUPTED: u32 = 3;

impl BotState {
    pub(super) fn on_input(&mut self, myself: &ActorRef<BotMsg>, input: QueuedInput) {
        self.inputs_seen += 1;
        let priority = input.item.priority;
        let gid = input.item.gid;
        match self.queue.push(input) {
            Pushed::Added => {}
            Pushed::Copy => return,
            // the router's copy of an input a run holds already (the
            // activation read it from the inbox and its turn took it before
            // the routed copy came): nothing to ask the store. Asked, the
            // store still lists it as pending, which had the run's end read
            // the inbox again too, and that read queued an input committed
            // since and not yet routed ahead of one routed before it
            Pushed::OutOfOrder if self.holds(gid) => return,
            Pushed::OutOfOrder => {
                // routed after a later input: the store says whether it is
                // still pending (a refresh queues it) or a turn took it
                let _ = myself.cast(BotMsg::Refresh);
                return;
            }
        }
        self.idle_since = None;
        if priority == Priority::UserDm && self.on_user_dm(myself) == Start::Later {
            return;
        }
        self.schedule(myself);
    }

    /// A person's direct message was queued: it interrupts the running
    /// turn (unless the run holds interrupts until its first step:
    /// [`HOLD_AFTER_UNSTEPPED`]). With a debounce window set, a message
    /// that finds the bot quiet ([`BotState::quiet`]) starts its turn at
    /// once, as the message that wakes a bot does (the window's leading
    /// edge); any other opens or extends the window, and the next turn
    /// starts when it ends ([`Start::Later`], on a `DebounceDue`).
    pub(super) fn on_user_dm(&mut self, myself: &ActorRef<BotMsg>) -> Start {
        let now = Instant::now();
        let quiet = self.quiet(now);
        self.last_user_dm = Some(now);
        if let Some(run) = &self.running
            && !run.soft.is_cancelled()
        {
            let holds_to_step = self.unstepped_interrupts >= HOLD_AFTER_UNSTEPPED
                && run.plan == RunPlan::Turn
                && run.first_step.hold();
            let holds_to_end =
                self.interrupted_runs >= HOLD_AFTER_INTERRUPTED && run.plan == RunPlan::Turn;
            if holds_to_end {
                tracing::debug!(bot = %self.record.id, turn = %run.turn, "user message waits: the running turn ends first (the runs before it were interrupted)");
            } else if holds_to_step {
                tracing::debug!(bot = %self.record.id, turn = %run.turn, "user message waits: the running turn interrupts after its first model step");
            } else {
                tracing::debug!(bot = %self.record.id, turn = %run.turn, "user message interrupts the running turn");
                run.soft.cancel();
            }
        }
        let settings = &self.rt.settings;
        if settings.debounce.is_zero() || quiet {
            return Start::Now;
        }
        self.generation += 1;
        let generation = self.generation;
        let window = self.window.get_or_insert(Window {
            first: now,
            generation,
        });
        window.generation = generation;
        if now.duration_since(window.first) >= settings.debounce_max {
            self.window = None;
            return Start::Now;
        }
        let wait = settings.debounce.min(
            settings
                .debounce_max
                .saturating_sub(now.duration_since(window.first)),
        );
        myself.send_after(wait, move || BotMsg::DebounceDue { generation });
        Start::Later
    }

    /// Whether a person's message arriving `now` finds the bot quiet, and
    /// so starts its turn at once: no turn runs (a background compaction
    /// may: the turn starts when it ends, with no window), no debounce
    /// window is open, and no person's message (in any session) reached
    /// the bot within the last `debounce`. A message that follows a lone
    /// one within the window interrupts the turn it started, or, when that
    /// turn already ended, waits for the window with whatever comes after
    /// it.
    fn quiet(&self, now: Instant) -> bool {
        self.running
            .as_ref()
            .is_none_or(|r| r.plan == RunPlan::Compact)
            && self.window.is_none()
            && self
                .last_user_dm
                .is_none_or(|at| now.duration_since(at) >= self.rt.settings.debounce)
    }

    pub(super) fn become_idle(&mut self, myself: &ActorRef<BotMsg>) {
        if self.idle_since.is_none() {
            self.idle_since = Some(Instant::now());
        }
        if !self.idle_armed {
            self.idle_armed = true;
            myself.send_after(self.rt.settings.idle_timeout, || BotMsg::IdleCheck);
        }
    }

    pub(super) fn on_idle_check(&mut self, myself: &ActorRef<BotMsg>) {
        self.idle_armed = false;
        let busy = self.running.is_some()
            || !self.queue.is_empty()
            || !self.pending.is_empty()
            || self.window.is_some();
        let Some(since) = self.idle_since.filter(|_| !busy) else {
            return;
        };
        let timeout = self.rt.settings.idle_timeout;
        let idle_for = since.elapsed();
        if idle_for >= timeout {
            let _ = self.router.cast(RouterMsg::Idle {
                bot: self.record.id.clone(),
                seen: self.inputs_seen,
            });
        } else {
            self.idle_armed = true;
            myself.send_after(timeout - idle_for, || BotMsg::IdleCheck);
        }
    }
}
