//! The fleet file's bots as the store records them, and their check
//! against the bots the store holds that bots made: a start runs it in
//! `FleetHandle::start`, `botfleet check-config` here from the store read
//! as it is ([`check_store_bots`]), with the same function
//! (`botfleet_actors::check_fleet_file_bots`): a file the check accepts
//! starts.

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::UserId;

use super::notes::STORE_FILE;
use super::notes::data_and_workspace;
use crate::config::FleetFile;
use crate::config::LoadedFleet;

/// The fleet file's bots as the store records them (origin `config`),
/// stamped `now` (ms).
pub(super) fn config_bots(
    f: &FleetFile,
    now: i64,
) -> Result<Vec<BotRecord>, botfleet_memory::IdError> {
    f.bots
        .iter()
        .map(|b| {
            Ok(BotRecord {
                id: BotId::new(b.id.clone())?,
                name: b.name.clone(),
                owner: UserId::new(b.owner.clone())?,
                role: b.role.clone(),
                provider: b.provider.clone(),
                tools: b.tools.clone(),
                // `shareable`: other users may add it to their rooms (actors/src/group/room.rs);
                // `projects`: the project memory scopes it reaches (botfleet_memory::bot_scopes)
                settings: {
                    let mut s = serde_json::Map::new();
                    if b.shareable {
                        s.insert("shareable".into(), true.into());
                    }
                    if !b.projects.is_empty() {
                        s.insert("projects".into(), serde_json::json!(b.projects));
                    }
                    // `secrets`: names its tools may use (actors/src/vault.rs)
                    if !b.secrets.is_empty() {
                        s.insert("secrets".into(), serde_json::json!(b.secrets));
                    }
                    // `daily_token_budget`: the engine pauses the bot when spent
                    if let Some(n) = b.daily_token_budget {
                        s.insert("daily_token_budget".into(), n.into());
                    }
                    serde_json::Value::Object(s)
                },
                origin: "config".into(),
                created_at: now,
                updated_at: now,
            })
        })
        .collect()
}

/// `botfleet check-config`: the fleet file's bots against the bots its
/// data directory's store holds (read without a lock or a migration: a
/// host may be running on it), as a start checks them. A store that
/// cannot be read is left to the notes (`check_notes` warns of it); one
/// lost where the directory has history is refused, as the start refuses
/// it. Answers what a start would log of them as warnings: a made bot
/// the file now takes over, a bot with a room's id.
pub fn check_store_bots(loaded: &LoadedFleet) -> anyhow::Result<Vec<String>> {
    let (data_dir, _) = data_and_workspace(&loaded.file.host);
    // a store lost where the directory has history, one a newer botfleet
    // migrated, another program's database: the start refuses it, and so
    // does the check (it said "new data directory: starting with no
    // history", or "ok" of a newer schema, exit 0: QA, audit)
    if let Err(
        e @ (botfleet_memory::StoreError::HistoryGone { .. }
        | botfleet_memory::StoreError::SchemaTooNew { .. }
        | botfleet_memory::StoreError::Foreign { .. }),
    ) = botfleet_memory::peek_store(&data_dir.join(STORE_FILE))
    {
        anyhow::bail!("cannot open the store in {}: {e}", data_dir.display());
    }
    let db = data_dir.join(STORE_FILE);
    let Ok(stored) = botfleet_memory::peek_store_bots(&db) else {
        return Ok(Vec::new());
    };
    let bots = config_bots(&loaded.file, 0)?;
    let mut notes = botfleet_actors::check_fleet_file_bots(&stored, &bots)
        .map_err(|e| anyhow::anyhow!("{}: {e}", loaded.source))?;
    let ids: Vec<String> = bots.iter().map(|b| b.id.to_string()).collect();
    // a store too old or damaged to read rooms from: nothing to say of them
    if let Ok(held) = botfleet_memory::peek_store_rooms_holding(&db, &ids) {
        notes.extend(botfleet_actors::room_id_clashes(&held));
    }
    if let Ok(rooms) = botfleet_memory::peek_store_open_rooms(&db) {
        notes.extend(
            botfleet_actors::room_member_clashes(&rooms, &stored, &bots)
                .map_err(|e| anyhow::anyhow!("{}: {e}", loaded.source))?,
        );
    }
    Ok(notes
        .into_iter()
        .map(|note| format!("WARNING: {}: {note}", loaded.source))
        .collect())
}
