//! Remember and Forget: the bot's explicit writes to its memory.
//! (Forget itself is in `memory_forget.rs`.)
//!
//! Effect: **external and idempotent**, not internal. A memory write must
//! know its answer (added, or "the profile is full: replace one of these")
//! before the call's outcome is written, and that answer depends on what
//! other writers (the bot's siblings, the fact extraction, the API) did to
//! the same scope a moment before; the scope actor and the store writer
//! decide it at commit time. Committed with the outcome as an internal
//! effect, a write that lost the race for the last slot would either fail
//! the whole step or silently not happen. So the tool writes through the
//! scope actor during the call, and the engine records the call as
//! started first. A crash between the write and the outcome is harmless:
//! Remember's id is derived from (turn, call), Forget and a replacement
//! repeat as no-ops, so the engine simply runs the call again. Forget by
//! text removes all its items in one store write and records the call
//! with them, so its re-run answers the same list instead of "nothing
//! matches" (`forget_matching`).

use async_trait::async_trait;
use botfleet_memory::Importance;
use botfleet_memory::Layer;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryLookup;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::NewMemory;
use botfleet_memory::bot_scopes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::Effect;
use super::Runner;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::parse_args;
use crate::memory::importance_of;
use crate::memory::note_expiry;
use crate::memory::tool_source;
use crate::memory::writable_scope;
use crate::model::ToolSpec;

#[path = "memory_refusals.rs"]
mod refusals;
use refusals::profile_usage;
use refusals::refused;

#[path = "memory_forget.rs"]
mod forget;
pub use forget::Forget;

/// Writes a fact to memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Remember;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    text: String,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    /// Any JSON number: read as a `u8`, 300 was told "an integer from 0
    /// to 255", where the tool takes 1 to 5 ([`importance_of`]).
    #[serde(default)]
    importance: Option<serde_json::Number>,
    #[serde(default)]
    expires_in_hours: Option<f64>,
    #[serde(default)]
    replaces: Option<String>,
}

/// The room of a turn in a room shared with other people's bots (a
/// member's session is keyed by its room), else `None`.
fn shared_room<'c>(ctx: &'c ToolContext<'_>) -> Option<&'c str> {
    in_shared_room(ctx).then_some(ctx.scope.session.key.peer.as_str())
}

fn in_shared_room(ctx: &ToolContext<'_>) -> bool {
    match ctx.scope.runner {
        Runner::GroupMember { shared } => shared,
        Runner::Main | Runner::Subagent | Runner::Routine | Runner::Hook => false,
    }
}

/// In a room shared with other people's bots, Remember writes only to the
/// bot's own memory (scope `agent`, docs/security.md): what others say
/// there may be remembered for the bot itself, never written into its
/// owner's profile or a project. Checked on the scope the write really
/// goes to (also the scope of an item it replaces).
fn check_shared_scope(ctx: &ToolContext<'_>, scope: &MemoryScope) -> Result<(), ToolError> {
    match scope {
        MemoryScope::Agent(bot) if *bot == ctx.bot.id => Ok(()),
        MemoryScope::Agent(_) | MemoryScope::User(_) | MemoryScope::Project(_)
            if !in_shared_room(ctx) =>
        {
            Ok(())
        }
        MemoryScope::Agent(_) | MemoryScope::User(_) | MemoryScope::Project(_) => {
            Err(ToolError::new(
                format!(
                    "in a room shared with other people's bots memory may only be written to \
                     your own (scope \"agent\"), not {scope}"
                ),
                "Remember with scope \"agent\" (profile facts too), or leave it for a private \
                 conversation",
            ))
        }
    }
}

fn store_error(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        format!("memory could not be written: {e}"),
        "try again in a moment; if it keeps failing, tell the person memory is unavailable",
    )
}

/// An item of a scope the bot reaches that is no more.
enum Gone {
    /// It was forgotten.
    Forgotten(MemoryId),
    /// A note past its expiry (ms), purged or not yet.
    Expired { id: MemoryId, at: i64 },
}

impl Gone {
    fn id(&self) -> &MemoryId {
        match self {
            Gone::Forgotten(id) | Gone::Expired { id, .. } => id,
        }
    }
}

/// An item the bot may change: it exists, has not expired, and lies in a
/// scope the bot reaches; or what became of one that was there. Anything
/// else is "unknown", so ids of other users' memory do not leak.
async fn reachable_item(
    ctx: &ToolContext<'_>,
    raw: &str,
    tool: &str,
) -> Result<Result<MemoryItem, Gone>, ToolError> {
    let id = MemoryId::parse(raw).map_err(|e| ToolError::bad_args(tool, e))?;
    let reach = bot_scopes(ctx.bot);
    match ctx.store().memory_lookup(&id).await.map_err(store_error)? {
        MemoryLookup::Found(item) if reach.contains(&item.scope) => Ok(Ok(item)),
        MemoryLookup::Forgotten(scope) if reach.contains(&scope) => Ok(Err(Gone::Forgotten(id))),
        MemoryLookup::Expired { scope, at } if reach.contains(&scope) => {
            Ok(Err(Gone::Expired { id, at }))
        }
        MemoryLookup::Found(_)
        | MemoryLookup::Forgotten(_)
        | MemoryLookup::Expired { .. }
        | MemoryLookup::Unknown => Err(out_of_reach(ctx, &id)),
    }
}

/// "expired at 2026-12-06 15:05 UTC", for an expiry in ms.
fn expired_at(at: i64) -> String {
    format!("expired at {}", utc_minute(at))
}

/// A time in ms as "2026-12-06 15:05 UTC", as the memory tools say times.
fn utc_minute(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// The answer to an id the bot may not change: the same for an id that
/// does not exist, so that it tells nothing of what does.
fn out_of_reach(ctx: &ToolContext<'_>, id: &MemoryId) -> ToolError {
    let shown = "use an id shown beside a fact in the Memory section of your prompt";
    ToolError::new(
        format!("no memory item {id} that you can reach"),
        if shared_room(ctx).is_some() {
            // Forget is not available there
            format!("{shown}, or Remember without `replaces`")
        } else {
            format!("{shown}, or Forget with `matching` to find by text")
        },
    )
}

fn where_(item: &MemoryItem) -> String {
    format!("{} {}", item.scope, item.layer)
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn parse_layer(raw: Option<&str>) -> Result<Layer, ToolError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(Layer::Profile),
        Some(l) => Layer::parse(l).ok_or_else(|| {
            ToolError::bad_args(
                "Remember",
                format!("unknown layer {l:?}; use \"profile\", \"log\" or \"notes\""),
            )
        }),
    }
}

#[async_trait]
impl Tool for Remember {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Remember".into(),
            description: "Write to your long-term memory: a stable fact (profile), a dated log entry, or a short-lived note. It appears in your Memory from the next turn on.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "One fact, short and self-contained (profile ≤500 characters, log and notes ≤1000)."},
                    "layer": {"type": "string", "enum": ["profile", "log", "notes"], "description": "profile (default): durable facts, always shown, ≤100 facts and ≤4000 characters per scope; log: dated entries, the most relevant are shown; notes: working facts that expire."},
                    "scope": {"type": "string", "description": "Whose memory: \"user\" (your owner's, shared by all their bots; default for profile), \"agent\" (yours alone; default for log and notes), or \"project:<name>\" for a project you joined: every user with a bot in that project reads its facts (and may forget them), so put there only what all of them may know."},
                    "importance": {"type": "integer", "minimum": 1, "maximum": 5, "description": "1 trivia … 5 critical (default 3); important log entries are recalled more."},
                    "expires_in_hours": {"type": "number", "description": "Notes only: lifetime in hours (default 24, at most 720)."},
                    "replaces": {"type": "string", "description": "Id of a fact (m-…) this text replaces, e.g. when a fact changed or the profile is full."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        // the id derives from (turn, call): a re-run finds its own write
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: RememberArgs = parse_args("Remember", args)?;
        let importance = args
            .importance
            .as_ref()
            .map(importance_of)
            .transpose()
            .map_err(|e| ToolError::bad_args("Remember", e))?;
        let source = tool_source(&ctx.bot.id, shared_room(ctx));
        if let Some(raw) = &args.replaces {
            return replace(ctx, raw, &args, importance, source).await;
        }
        let layer = parse_layer(args.layer.as_deref())?;
        // in a shared room, an unnamed scope is the bot's own, whatever
        // the layer's default elsewhere
        let named = match args.scope.as_deref() {
            None if in_shared_room(ctx) => Some("agent"),
            named => named,
        };
        let scope = writable_scope(ctx.bot, named, layer)
            .map_err(|m| ToolError::new(m, "call Remember again with an allowed scope"))?;
        check_shared_scope(ctx, &scope)?;
        let now = ctx.store().clock().now_ms();
        let expires_at = note_expiry(layer, args.expires_in_hours, now)
            .map_err(|m| ToolError::bad_args("Remember", m))?;
        let new = NewMemory {
            id: MemoryId::derive(&format!("tool\u{0}{}\u{0}{}", ctx.turn, ctx.call_id)),
            scope: scope.clone(),
            layer,
            text: args.text,
            importance: importance.unwrap_or_default(),
            expires_at,
            source,
        };
        let result = ctx
            .rt
            .memory
            .apply(MemoryOp::Add(new))
            .await
            .map_err(store_error)?;
        let usage = if layer == Layer::Profile {
            profile_usage(ctx, &scope).await
        } else {
            String::new()
        };
        match result {
            // the text quoted, as Replace and Forget quote theirs: the
            // result is what search finds of the write (docs/search.md;
            // QA: a remembered text was found by no search)
            MemoryOpResult::Added(item) => Ok(ToolOutput::text(format!(
                "Remembered as {} in {}{}: {}.{usage} It is in your Memory from the next turn on.",
                item.id,
                where_(&item),
                expiry_note(&item),
                quoted(&item.text)
            ))),
            // a note written again lives to the later of its expiries
            MemoryOpResult::Unchanged(item)
                if item.expires_at.is_some_and(|t| Some(t) == expires_at) =>
            {
                Ok(ToolOutput::text(format!(
                    "Already remembered as {} in {}: {}. It now lasts{}.",
                    item.id,
                    where_(&item),
                    quoted(&item.text),
                    expiry_note(&item)
                )))
            }
            // the same fact with an importance: it keeps the higher of
            // the two, which is then the one asked for
            MemoryOpResult::Unchanged(item) if importance == Some(item.importance) => {
                Ok(ToolOutput::text(format!(
                    "Already remembered as {} in {}{}: {}. It is kept at importance {}.",
                    item.id,
                    where_(&item),
                    expiry_note(&item),
                    quoted(&item.text),
                    item.importance.get()
                )))
            }
            MemoryOpResult::Unchanged(item) => Ok(ToolOutput::text(format!(
                "Already remembered as {} in {}{}: {}. Nothing changed.",
                item.id,
                where_(&item),
                expiry_note(&item),
                quoted(&item.text)
            ))),
            MemoryOpResult::Refused(r) => Err(refused(ctx, &r, None).await),
            other @ (MemoryOpResult::Replaced { .. }
            | MemoryOpResult::Removed(_)
            | MemoryOpResult::AlreadyForgotten(_)
            | MemoryOpResult::Purged(_)) => Err(unexpected(&other)),
        }
    }
}

fn unexpected(result: &MemoryOpResult) -> ToolError {
    ToolError::new(
        format!("memory answered unexpectedly: {result:?}"),
        "check your Memory next turn before writing again",
    )
}

fn expiry_note(item: &MemoryItem) -> String {
    match item.expires_at {
        Some(t) => format!(" until {}", utc_minute(t)),
        None => String::new(),
    }
}

async fn replace(
    ctx: &ToolContext<'_>,
    raw: &str,
    args: &RememberArgs,
    importance: Option<Importance>,
    source: String,
) -> Result<ToolOutput, ToolError> {
    let found = reachable_item(ctx, raw, "Remember").await?;
    let own = MemoryScope::Agent(ctx.bot.id.clone());
    if shared_room(ctx).is_some() {
        // the room's prompt shows only what was remembered in this room:
        // any other id (the owner's private memory, the bot's own from
        // elsewhere, one forgotten) is answered as one that does not
        // exist, so the room learns nothing of what does (a scope named
        // in a refusal, or "forgotten", told it)
        match &found {
            Ok(item) if item.scope == own && item.source == source => {}
            Ok(MemoryItem { id, .. }) => return Err(out_of_reach(ctx, id)),
            Err(gone) => return Err(out_of_reach(ctx, gone.id())),
        }
    }
    let item = match found {
        Ok(item) => item,
        Err(Gone::Forgotten(id)) => {
            return Err(ToolError::new(
                format!("{id} was forgotten and cannot be replaced"),
                "call Remember without `replaces` to write the new fact",
            ));
        }
        Err(Gone::Expired { id, at }) => {
            return Err(ToolError::new(
                format!(
                    "{id} was a note that {} and cannot be replaced",
                    expired_at(at)
                ),
                "call Remember without `replaces` to write the new fact",
            ));
        }
    };
    if let Some(l) = args.layer.as_deref() {
        let layer = parse_layer(Some(l))?;
        if layer != item.layer {
            return Err(ToolError::new(
                format!("{} is a {} item, not {layer}", item.id, item.layer),
                "leave out `layer` when replacing, or Forget it and Remember the new fact",
            ));
        }
    }
    if let Some(s) = args.scope.as_deref() {
        let scope = writable_scope(ctx.bot, Some(s), item.layer)
            .map_err(|m| ToolError::new(m, "leave out `scope` when replacing"))?;
        if scope != item.scope {
            return Err(ToolError::new(
                format!("{} belongs to {}, not {scope}", item.id, item.scope),
                "leave out `scope` when replacing, or Forget it and Remember the new fact",
            ));
        }
    }
    check_shared_scope(ctx, &item.scope)?;
    if args.expires_in_hours.is_some() {
        return Err(ToolError::bad_args(
            "Remember",
            "expires_in_hours cannot change with `replaces`; Forget the note and Remember a new one",
        ));
    }
    let result = ctx
        .rt
        .memory
        .apply(MemoryOp::Replace {
            id: item.id.clone(),
            scope: item.scope.clone(),
            text: args.text.clone(),
            importance,
            source,
        })
        .await
        .map_err(store_error)?;
    match result {
        MemoryOpResult::Replaced { before, after } => Ok(ToolOutput::text(format!(
            "Replaced {} in {}: was {}, now {}.",
            after.id,
            where_(&after),
            quoted(&before.text),
            quoted(&after.text)
        ))),
        MemoryOpResult::Unchanged(item) => Ok(ToolOutput::text(format!(
            "{} in {} already says {}. Nothing changed.",
            item.id,
            where_(&item),
            quoted(&item.text)
        ))),
        MemoryOpResult::Refused(r) => Err(refused(ctx, &r, Some(&item.id)).await),
        other @ (MemoryOpResult::Added(_)
        | MemoryOpResult::Removed(_)
        | MemoryOpResult::AlreadyForgotten(_)
        | MemoryOpResult::Purged(_)) => Err(unexpected(&other)),
    }
}

#[cfg(test)]
#[path = "memory_tools_tests.rs"]
mod tests;
