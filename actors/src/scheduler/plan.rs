//! What to do with a due slot (a pure decision), and the admission a fire
//! makes.

use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::CatchUp;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::RoutineRecord;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::UserId;
use chrono::TimeZone;
use chrono_tz::Tz;

use super::spec::Schedule;
use crate::prompts::PromptError;
use crate::prompts::prompts;

/// A slot fired more than this long after its time was missed (the host
/// was down or stalled): `catch_up` decides whether it still runs.
pub const LATE_AFTER_MS: i64 = 60_000;

/// What to do with a slot that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotPlan {
    /// Run it; `late` when it runs past [`LATE_AFTER_MS`] (a catch-up).
    Fire {
        /// Whether it is a catch-up of a missed slot.
        late: bool,
    },
    /// Missed and `catch_up = "skip"`: let it pass.
    Skip,
    /// The slot is from before the store was restored from a snapshot: the
    /// restored ledger cannot tell whether it already ran, so it is not run
    /// again (the same rule as the ledger's `unknown`).
    Unknown,
}

/// Decides about the slot `slot_ms` (due: `slot_ms <= now_ms`).
/// `restored_at_ms` is when the store was found restored from a snapshot.
pub fn plan_slot(
    slot_ms: i64,
    now_ms: i64,
    catch_up: CatchUp,
    restored_at_ms: Option<i64>,
) -> SlotPlan {
    if restored_at_ms.is_some_and(|r| slot_ms < r) {
        return SlotPlan::Unknown;
    }
    let late = now_ms - slot_ms > LATE_AFTER_MS;
    match (late, catch_up) {
        (false, CatchUp::Once | CatchUp::Skip) => SlotPlan::Fire { late: false },
        (true, CatchUp::Once) => SlotPlan::Fire { late: true },
        (true, CatchUp::Skip) => SlotPlan::Skip,
    }
}

/// Where a routine waits once its missed slot was skipped at `now_ms`
/// (`catch_up = "skip"`): the newest slot that is due but not late yet (at
/// most [`LATE_AFTER_MS`] ago), which is then fired on time, once; else the
/// first slot after now. Only the late slots are dropped: the host back a
/// few seconds after a slot still runs it.
pub fn next_after_skip(schedule: &Schedule, now_ms: i64) -> Option<i64> {
    let mut newest = None;
    // slots are whole seconds: at most 61 of them in the grace window
    let mut cursor = now_ms - LATE_AFTER_MS - 1;
    while let Some(slot) = schedule.next_after(cursor) {
        if slot > now_ms || slot <= cursor {
            break;
        }
        newest = Some(slot);
        cursor = slot;
    }
    newest.or_else(|| schedule.next_after(now_ms))
}

/// The slot a routine that is due on time runs: the newest of its slots
/// from `slot_ms` (the one it waits for) up to `now_ms`. A tick (or a
/// host back from a short downtime) that comes after several slots none of
/// which is missed runs only the newest of them, once, on time; the older
/// ones are covered by it (docs/operations.md, "Downtime").
pub fn newest_due(schedule: &Schedule, slot_ms: i64, now_ms: i64) -> i64 {
    let mut newest = slot_ms;
    // only slots within the grace are looked at: slots are whole seconds,
    // so at most 61 of them
    let mut cursor = slot_ms.max(now_ms - LATE_AFTER_MS - 1);
    while let Some(slot) = schedule.next_after(cursor) {
        if slot > now_ms || slot <= cursor {
            break;
        }
        newest = newest.max(slot);
        cursor = slot;
    }
    newest
}

/// The ledger source of a bot's routine fires.
pub fn routine_source(bot: &BotId) -> String {
    format!("routine:{bot}")
}

/// The idempotency nonce of one slot of one routine: the same slot always
/// makes the same nonce, so it can be admitted only once.
pub fn routine_nonce(name: &str, slot_ms: i64) -> String {
    format!("{name}@{slot_ms}")
}

/// The text a fire hands to the bot: the prompt, then the routine's name,
/// its scheduled time in its time zone, and whether it must report.
pub fn routine_text(
    r: &RoutineRecord,
    tz: Tz,
    slot_ms: i64,
    late: bool,
) -> Result<String, PromptError> {
    let p = prompts();
    let scheduled = tz
        .timestamp_millis_opt(slot_ms)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S %Z (UTC%:z)").to_string())
        .unwrap_or_else(|| slot_ms.to_string());
    let late = if late {
        p.routine_late.render(&[])?
    } else {
        String::new()
    };
    let reporting = if r.silent_ok {
        p.routine_silent_ok.render(&[])?
    } else {
        p.routine_must_report.render(&[])?
    };
    p.routine_run.render(&[
        ("prompt", r.prompt.trim()),
        ("name", &r.name),
        ("scheduled", &format!("{scheduled} [{}]", tz.name())),
        ("late", &late),
        ("reporting", &reporting),
    ])
}

/// The admission of one fire: a trusted `routine:<name>` event in the
/// session `{bot, routine, <name>}`, background priority, with the nonce of
/// its slot.
pub fn routine_admission(
    r: &RoutineRecord,
    owner: &UserId,
    slot_ms: i64,
    text: String,
) -> AdmitRequest {
    let key = SessionKey {
        bot: r.bot.clone(),
        kind: SessionKind::Routine,
        peer: r.name.clone(),
    };
    let slot = slot_ms.to_le_bytes();
    AdmitRequest {
        source: routine_source(&r.bot),
        nonce: routine_nonce(&r.name, slot_ms),
        // The routines table, committed with the admission, says whether a
        // slot ran; the nonce's time is not used for the ledger's horizon
        // (a catch-up after a long downtime predates the ledger's
        // retention). Restores are handled by `SlotPlan::Unknown`.
        nonce_time_ms: None,
        digest: InputDigest::of_parts([
            b"routine".as_slice(),
            r.bot.as_str().as_bytes(),
            r.name.as_bytes(),
            slot.as_slice(),
            text.as_bytes(),
        ]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            // named by its origin, as a hook's event is (`hook:NAME`): it
            // read `system` in transcripts and search hits (QA)
            author: format!("routine:{}", r.name),
            turn: None,
            kind: EntryKind::Event {
                origin: format!("routine:{}", r.name),
                text,
                trusted: true,
                hop: None,
                chain: None,
                asked: None,
            },
        },
        session: key,
        owner: owner.clone(),
        priority: Priority::Background,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
