//! What Remember tells about the limits of a scope: the refusal of a
//! write (with the items to replace or forget to make room) and the
//! profile's usage after a write.
//!
//! In a room shared with other people's bots, both would tell the room
//! what the bot holds in private: a "full" refusal quoted the scope's
//! oldest, least important items (facts its owner told it in a DM among
//! them), and the counts ("11/100 facts, 3550/4000 characters") say how
//! much it holds. The room's prompt shows only what was remembered there
//! (docs/memory.md), and the model posts what a tool answers to the
//! room's timeline. So there a full layer is answered without counts,
//! and the items offered for replacing are only those remembered in that
//! room (Forget is not offered there); with none, the owner is the one to
//! make room, in a direct message.

use botfleet_memory::Importance;
use botfleet_memory::Layer;
use botfleet_memory::MAX_PROFILE_CHARS;
use botfleet_memory::MAX_PROFILE_FACTS;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryRefusal;
use botfleet_memory::MemoryScope;

use super::ToolContext;
use super::ToolError;
use super::shared_room;
use crate::memory::tool_source;
use crate::prompts::prompts;

/// Most items a room's "full" answer offers for replacing (as many as the
/// store suggests elsewhere).
const ROOM_SUGGESTIONS: usize = 5;

/// Characters of an item's text quoted in a suggestion.
const SUGGESTION_CHARS: usize = 100;

/// The error of a refused write. In a shared room a full layer is
/// answered by [`room_full`]; `replacing` is the item a refused
/// replacement would have changed (not offered to replace instead).
pub(super) async fn refused(
    ctx: &ToolContext<'_>,
    r: &MemoryRefusal,
    replacing: Option<&MemoryId>,
) -> ToolError {
    let Some(room) = shared_room(ctx) else {
        return refusal_error(r);
    };
    match r {
        MemoryRefusal::ProfileFull {
            scope,
            chars,
            max_chars,
            needed,
            ..
        } => {
            let short = (chars + needed).saturating_sub(*max_chars);
            let full = Full {
                scope,
                layer: Layer::Profile,
                short,
            };
            room_full(ctx, &full, room, replacing).await
        }
        MemoryRefusal::LogFull { scope, .. } => {
            let full = Full {
                scope,
                layer: Layer::Log,
                short: 0,
            };
            room_full(ctx, &full, room, replacing).await
        }
        MemoryRefusal::NotesFull { scope, .. } => {
            let full = Full {
                scope,
                layer: Layer::Notes,
                short: 0,
            };
            room_full(ctx, &full, room, replacing).await
        }
        // Forget is not offered in a shared room
        MemoryRefusal::Twin { twin, .. } => ToolError::new(
            r.to_string(),
            format!("{twin} already says it: there is nothing more to remember"),
        ),
        // these name only what the call itself gave
        MemoryRefusal::Empty
        | MemoryRefusal::TooLong { .. }
        | MemoryRefusal::BadExpiry(_)
        | MemoryRefusal::UnknownId(_)
        | MemoryRefusal::WrongScope { .. }
        | MemoryRefusal::IdTaken(_) => refusal_error(r),
    }
}

/// The error of a refused write where the whole scope may be told: the
/// store's refusal with its counts and suggestions.
pub(super) fn refusal_error(r: &MemoryRefusal) -> ToolError {
    let hint = match r {
        MemoryRefusal::ProfileFull {
            chars,
            max_chars,
            needed,
            suggestion,
            ..
        } => profile_hint((chars + needed).saturating_sub(*max_chars), suggestion),
        MemoryRefusal::LogFull { suggestion, .. } | MemoryRefusal::NotesFull { suggestion, .. } => {
            format!(
                "Forget one of these ids first: {}",
                listed(suggestion.iter().map(|(id, text)| (id, text.as_str())))
            )
        }
        MemoryRefusal::Empty => "call Remember with the fact in `text`".into(),
        MemoryRefusal::TooLong { max, .. } => {
            format!("shorten the text to at most {max} characters, or split it")
        }
        MemoryRefusal::BadExpiry(_) => {
            "for a note give expires_in_hours (more than 0, at most 720); other layers take none"
                .into()
        }
        MemoryRefusal::UnknownId(_) | MemoryRefusal::WrongScope { .. } => {
            "use an id shown beside a fact in the Memory section of your prompt (m- and 12 characters)"
                .into()
        }
        MemoryRefusal::IdTaken(_) => "call Remember again".into(),
        MemoryRefusal::Twin { twin, replaced, .. } => format!(
            "{twin} already says it; if {replaced} is outdated now, Forget {replaced} instead of replacing it"
        ),
    };
    ToolError::new(r.to_string(), hint)
}

/// What to do about a full profile whose write needs `short` more
/// characters than are free (0: only the count of facts is at its limit)
/// with the facts the store suggests. When characters are short, replacing
/// one suggested fact makes room only if that fact is at least as long as
/// what is missing, and forgetting one short fact does not: the advice to
/// "replace one of these, or Forget one first" sent the bot to replace a
/// 15-character fact with a 100-character one (refused again) or to
/// forget it and still have no room. So the answer then says how many
/// characters to free and each suggested fact's length.
fn profile_hint(short: usize, suggestion: &[(MemoryId, String)]) -> String {
    if short == 0 {
        return format!(
            "replace one of these ids with Remember {{\"replaces\": id, \"text\": ...}}, or Forget one first: {}",
            listed(suggestion.iter().map(|(id, text)| (id, text.as_str())))
        );
    }
    let facts = suggestion
        .iter()
        .map(|(id, text)| {
            let len = text.chars().count();
            let short_text: String = text.chars().take(SUGGESTION_CHARS).collect();
            let quoted = serde_json::to_string(&short_text).unwrap_or_default();
            format!("{id} {quoted} ({len} characters)")
        })
        .collect::<Vec<_>>()
        .join("; ");
    // replacing a fact at least as long as what is missing makes room
    // (QA: the advice only said to Forget, when one replace would do)
    let replace = if suggestion
        .iter()
        .any(|(_, text)| text.chars().count() >= short)
    {
        format!(
            ", or replace one of them that is at least {short} characters long with Remember {{\"replaces\": id, \"text\": ...}}"
        )
    } else {
        String::new()
    };
    format!(
        "free at least {short} characters: Forget facts that add up to at least {short} characters, then call Remember again (replacing a fact frees only its own length){replace}. The least important and least recently changed: {facts}"
    )
}

/// `id "start of the text"; …` of the items offered.
fn listed<'a>(items: impl Iterator<Item = (&'a MemoryId, &'a str)>) -> String {
    items
        .map(|(id, text)| {
            let short: String = text.chars().take(SUGGESTION_CHARS).collect();
            format!("{id} {}", serde_json::to_string(&short).unwrap_or_default())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A full layer: whose, which, and how many characters the write lacks
/// (a profile's; 0 when only the count of items is at its limit).
struct Full<'a> {
    scope: &'a MemoryScope,
    layer: Layer,
    short: usize,
}

/// A full layer of the bot's own scope (nothing else is written in a
/// shared room) answered in `room`: no counts, and only the items
/// remembered in that room offered for replacing, those whose length
/// makes room for the write (replacing one frees its own length only:
/// the room was offered two short facts neither of which could, and each
/// replace was refused again; QA, 2026-12-05).
async fn room_full(
    ctx: &ToolContext<'_>,
    full: &Full<'_>,
    room: &str,
    replacing: Option<&MemoryId>,
) -> ToolError {
    let p = prompts();
    let layer_name = full.layer.to_string();
    let message = p
        .memory_full_room
        .render(&[("layer", &layer_name)])
        .unwrap_or_default();
    let mut items = room_items(ctx, full.scope, full.layer, room, replacing).await;
    items.retain(|i| i.text.chars().count() >= full.short);
    let hint = if items.is_empty() {
        p.memory_full_room_none.render(&[("layer", &layer_name)])
    } else {
        let list = listed(items.iter().map(|i| (&i.id, i.text.as_str())));
        p.memory_full_room_replace.render(&[("items", &list)])
    };
    ToolError::new(message, hint.unwrap_or_default())
}

/// The items of `layer` in `scope` remembered in `room`, but `replacing`,
/// in the order the store suggests them elsewhere (least important first,
/// then the oldest change; for notes, the first to expire). A store that
/// cannot be read offers none: the answer still tells who can make room.
async fn room_items(
    ctx: &ToolContext<'_>,
    scope: &MemoryScope,
    layer: Layer,
    room: &str,
    replacing: Option<&MemoryId>,
) -> Vec<MemoryItem> {
    let source = tool_source(&ctx.bot.id, Some(room));
    let now = ctx.store().clock().now_ms();
    let Ok(items) = ctx.store().memory_items(vec![scope.clone()], now).await else {
        return Vec::new();
    };
    let mut mine: Vec<MemoryItem> = items
        .into_iter()
        .filter(|i| i.layer == layer && i.source == source && Some(&i.id) != replacing)
        .collect();
    mine.sort_by(|a, b| {
        let key = |i: &MemoryItem| match layer {
            Layer::Profile => (i.importance, i.updated_at),
            Layer::Log => (i.importance, i.created_at),
            // the first to expire first, whatever they matter
            Layer::Notes => (Importance::NORMAL, i.expires_at.unwrap_or(0)),
        };
        key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
    });
    mine.truncate(ROOM_SUGGESTIONS);
    mine
}

/// What a profile write adds to its answer: how full the profile of
/// `scope` now is. Nothing in a shared room: the counts take in what the
/// bot holds in private.
pub(super) async fn profile_usage(ctx: &ToolContext<'_>, scope: &MemoryScope) -> String {
    if shared_room(ctx).is_some() {
        return String::new();
    }
    let now = ctx.store().clock().now_ms();
    match ctx.store().memory_items(vec![scope.clone()], now).await {
        Ok(items) => {
            let facts: Vec<&MemoryItem> =
                items.iter().filter(|i| i.layer == Layer::Profile).collect();
            let chars: usize = facts.iter().map(|i| i.chars()).sum();
            format!(
                " The profile of {scope} now holds {}/{MAX_PROFILE_FACTS} facts, {chars}/{MAX_PROFILE_CHARS} characters.",
                facts.len()
            )
        }
        Err(_) => String::new(),
    }
}
