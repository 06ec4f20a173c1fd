//! Memory in the turn: which scopes a bot may write, how memory is
//! rendered into the prompt (as information, never as instructions), and
//! the fact extraction that runs after a turn.
//!
//! The memory crate owns the data (scopes, layers, limits, the scope
//! actors, snapshots); this module owns everything the model sees of it,
//! because prompts live in `prompts/` and are compiled into this crate.
//!
//! Where the engine calls in (see `docs/memory.md`):
//! - context assembly: [`MemoryState`] is the runtime's state provider
//!   (`Runtime::set_state_provider`): `Store::bot_memory_snapshot(bot,
//!   input, now)` rendered by [`render_memory`] into the long-lived state
//!   block (after identity, before the session). Within an epoch a finer
//!   update than the whole block is [`render_memory_update`] of
//!   `MemoryDelta::between(frozen, fresh, missing)`; when
//!   `delta.requires_refresh()` (something shown was forgotten or expired) the block
//!   must be re-rendered at once;
//! - after the turn: [`spawn_extract_after_turn`] with the ids the turn
//!   showed (`MemorySnapshot::shown_ids`).

mod extract;
mod extract_answer;
mod extract_bounds;
mod extract_owed;
mod render;
mod state;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Layer;
use botfleet_memory::MemoryScope;
use botfleet_memory::ProjectId;
use botfleet_memory::ScopeKind;
use botfleet_memory::bot_projects;
use botfleet_memory::bot_scopes;

pub use extract::ExtractError;
pub use extract::ExtractReport;
pub use extract::RejectedOp;
pub use extract::extract_after_turn;
pub(crate) use extract::extracts_from;
pub(crate) use extract::importance_of;
pub(crate) use extract::note_expiry;
pub use extract_owed::Extractions;
pub(crate) use extract_owed::SHUTDOWN_WAIT as EXTRACTION_SHUTDOWN_WAIT;
pub use extract_owed::resume_owed_extractions;
pub use extract_owed::spawn_extract_after_turn;
pub use render::render_memory;
pub(crate) use render::render_memory_changes;
pub use render::render_memory_update;
pub use state::MemoryState;

/// The scope a bot names for a write (`agent`, `user`, `project`,
/// `project:<name>`, or the full `agent:<bot>` / `user:<user>`), checked
/// against what the bot may write: its own scope, its owner's, and the
/// projects it joined. `None` takes the layer's default (profile → user,
/// log and notes → agent). The error says what the bot may use instead.
pub fn writable_scope(
    bot: &BotRecord,
    named: Option<&str>,
    layer: Layer,
) -> Result<MemoryScope, String> {
    let projects = bot_projects(bot);
    let allowed = || allowed_names(bot, &projects);
    let named = named.map(str::trim).filter(|s| !s.is_empty());
    let Some(named) = named else {
        return Ok(match layer.default_scope_kind() {
            ScopeKind::User => MemoryScope::User(bot.owner.clone()),
            ScopeKind::Agent | ScopeKind::Project => MemoryScope::Agent(bot.id.clone()),
        });
    };
    let scope = match named {
        "agent" => MemoryScope::Agent(bot.id.clone()),
        "user" => MemoryScope::User(bot.owner.clone()),
        "project" => match projects.as_slice() {
            [only] => MemoryScope::Project(only.clone()),
            [] => return Err(format!("you are in no project; use {}", allowed())),
            _ => return Err(format!("name the project; use {}", allowed())),
        },
        other => match other.parse::<MemoryScope>() {
            Ok(s) => s,
            Err(_) => {
                return Err(format!(
                    "{other:?} is not a memory scope; use {}",
                    allowed()
                ));
            }
        },
    };
    if bot_scopes(bot).contains(&scope) {
        Ok(scope)
    } else {
        Err(format!(
            "you may not write the memory of {scope}; use {}",
            allowed()
        ))
    }
}

/// The `source` of what the Remember tool writes: `tool:<bot>`, and in a
/// room shared with other people's bots `tool:<bot>@room:<room>`. A turn
/// in such a room shows only what was written there
/// ([`MemoryState`]): the people of one room do not see what the bot
/// learned in another, or from its owner in private. (Room and bot ids
/// hold no `@`.)
pub fn tool_source(bot: &BotId, shared_room: Option<&str>) -> String {
    match shared_room {
        Some(room) => format!("tool:{bot}@room:{room}"),
        None => format!("tool:{bot}"),
    }
}

fn allowed_names(bot: &BotRecord, projects: &[ProjectId]) -> String {
    let mut names = vec![
        format!("\"agent\" (your own, {})", bot.id),
        format!("\"user\" ({}'s, shared by all their bots)", bot.owner),
    ];
    names.extend(projects.iter().map(|p| format!("\"project:{p}\"")));
    names.join(", ")
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
