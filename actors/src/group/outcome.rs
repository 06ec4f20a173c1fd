//! How a run's members did, read back from its stored checkpoint for
//! clients: the API adds it to the run's `turn_end` entry, so
//! `botfleet group send` decides its exit status from what each member
//! did rather than from the notices (a `room_run_failed_round` notice
//! also ends a round in which one member failed and another passed).

use botfleet_memory::BotId;
use botfleet_memory::RoomId;
use botfleet_memory::Store;

use super::actor::RunState;
use super::error::GroupError;
use super::run::MemberOutcome;

/// Each member the run of the message at `trigger_seq` in `room`
/// addressed, in speaking order, with how its part went
/// ([`MemberOutcome`]). `None` when the room has no such run or it has
/// not started (nor when its checkpoint cannot be read: the run was
/// ended without members then).
pub async fn member_outcomes(
    store: &Store,
    room: &RoomId,
    trigger_seq: i64,
) -> Result<Option<Vec<(BotId, MemberOutcome)>>, GroupError> {
    let Some(record) = store.get_room_run(room, trigger_seq).await? else {
        return Ok(None);
    };
    let Ok(state) = serde_json::from_value::<RunState>(record.state) else {
        return Ok(None);
    };
    let Some(progress) = state.progress else {
        return Ok(None);
    };
    // the machine's indices point into the members the run started with
    // (`Progress::members`); older checkpoints have none: the room's list
    let members = match progress.members {
        Some(members) => members,
        None => match store.get_room(room).await? {
            Some(r) => r.members,
            None => return Ok(None),
        },
    };
    let mut out: Vec<(BotId, MemberOutcome)> = progress
        .run
        .outcomes()
        .into_iter()
        .filter_map(|(i, outcome)| members.get(i).map(|id| (id.clone(), outcome)))
        .collect();
    // and those it addressed that were taken out of the room before it
    // began: no turn, each where the message addressed it, after the
    // member addressed before it (they came last, out of order: QA)
    for id in &progress.left {
        let addressed = state.selected.iter().position(|s| s == id);
        let before = addressed.map_or(&[][..], |at| &state.selected[..at]);
        let at = out
            .iter()
            .rposition(|(m, _)| before.contains(m))
            .map_or(0, |i| i + 1);
        out.insert(at, (id.clone(), MemberOutcome::NoTurn));
    }
    Ok(Some(out))
}
