//! Forget: the bot removes facts from its memory, by id or by text. Why
//! it writes during the call and how a re-run answers the same is told
//! in `memory_tools.rs`, with the helpers it shares with Remember.

use async_trait::async_trait;
use botfleet_memory::BotRecord;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::bot_scopes;
use icu_properties::CodePointMapData;
use icu_properties::props::Script;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::in_shared_room;
use super::quoted;
use super::reachable_item;
use super::refusals::refusal_error;
use super::store_error;
use super::unexpected;
use super::where_;
use crate::model::ToolSpec;
use crate::tools::Effect;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::parse_args;

/// Most items one Forget by text removes.
const MAX_FORGET_MATCHES: usize = 20;
/// Shortest text Forget matches on: shorter would match by accident.
const MIN_FORGET_CHARS: usize = 3;
/// Shortest text Forget matches on when it is all Chinese, Japanese or
/// Korean characters: one of them carries about a syllable or a word, so
/// two make a whole word (绿茶, 张伟).
const MIN_FORGET_CJK_CHARS: usize = 2;
/// Most owed fact extractions a Forget that found nothing looks through
/// (they live seconds; more are only owed after a long outage).
const MAX_OWED_READ: i64 = 100;

/// Removes facts from memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Forget;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetArgs {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    matching: Option<String>,
}

/// Memory tools are withheld from rooms shared with other users: the
/// owner's memory is not theirs to change.
/// Forget is not available in a room shared with other people's bots: an
/// id does not say which scope it deletes from.
fn check_forget_runner(ctx: &ToolContext<'_>) -> Result<(), ToolError> {
    if in_shared_room(ctx) {
        return Err(ToolError::new(
            "Forget is not available in a room shared with other people's bots",
            "answer without changing memory; your owner can ask you in a direct message",
        ));
    }
    Ok(())
}

#[async_trait]
impl Tool for Forget {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Forget".into(),
            description: "Remove facts from your memory for good, by id or by text (every layer and scope you reach). Use it when a person asks you to forget something.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Id of one item (m-…), as shown in your Memory."},
                    "matching": {"type": "string", "description": "Instead of id: forget every item whose text contains this (ignoring case, spacing and full-width or composed forms; at least 3 characters, or 2 Chinese, Japanese or Korean ones)."}
                },
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        // forgetting twice answers "already forgotten"
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        check_forget_runner(ctx)?;
        let args: ForgetArgs = parse_args("Forget", args)?;
        match (args.id, args.matching) {
            (Some(id), None) => forget_id(ctx, &id).await,
            (None, Some(text)) => forget_matching(ctx, &text).await,
            (Some(_), Some(_)) | (None, None) => Err(ToolError::bad_args(
                "Forget",
                "give exactly one of `id` or `matching`",
            )),
        }
    }
}

async fn forget_id(ctx: &ToolContext<'_>, raw: &str) -> Result<ToolOutput, ToolError> {
    let item = match reachable_item(ctx, raw, "Forget").await? {
        Ok(item) => item,
        Err(id) => {
            return Ok(ToolOutput::text(format!(
                "{id} was already forgotten. Nothing changed."
            )));
        }
    };
    let result = ctx
        .rt
        .memory
        .apply(MemoryOp::Remove {
            id: item.id.clone(),
            scope: item.scope.clone(),
        })
        .await
        .map_err(store_error)?;
    match result {
        MemoryOpResult::Removed(item) => Ok(ToolOutput::text(format!(
            "Forgot {} from {}: {}. It is gone from your Memory from the next turn on.",
            item.id,
            where_(&item),
            quoted(&item.text)
        ))),
        MemoryOpResult::AlreadyForgotten(id) => Ok(ToolOutput::text(format!(
            "{id} was already forgotten. Nothing changed."
        ))),
        MemoryOpResult::Refused(r) => Err(refusal_error(&r)),
        other @ (MemoryOpResult::Added(_)
        | MemoryOpResult::Unchanged(_)
        | MemoryOpResult::Replaced { .. }
        | MemoryOpResult::Purged(_)) => Err(unexpected(&other)),
    }
}

/// Forgets every reachable item whose text contains `text`, in one store
/// write (all of them or none). The items are forgotten with the call's
/// identity, so the same call run again (the engine re-runs a call cut off
/// by a crash before its result was recorded) answers from what it forgot
/// and changes nothing: the same answer as the first run, even if an item
/// matching the text was written in between. The answer lists ids and
/// scopes, not texts: a forgotten text is not kept, so a re-run could not
/// repeat it. The same write leaves a mark in every reachable scope
/// (`MemoryOp::ForgetMatching`): a fact extraction of an earlier turn that
/// lands later does not add back what matches, so when nothing matched
/// yet but such an extraction is still owed, the answer says so instead
/// of "nothing you remember contains" (docs/memory.md "Forgetting").
async fn forget_matching(ctx: &ToolContext<'_>, text: &str) -> Result<ToolOutput, ToolError> {
    let needle = botfleet_memory::normalize_text(text);
    if !long_enough(&needle) {
        return Err(ToolError::bad_args(
            "Forget",
            format!(
                "`matching` needs at least {MIN_FORGET_CHARS} characters \
                 ({MIN_FORGET_CJK_CHARS} when all are Chinese, Japanese or Korean)"
            ),
        ));
    }
    let call = format!("{}/{}", ctx.turn, ctx.call_id);
    let done = ctx
        .store()
        .memory_forgotten_by(&call)
        .await
        .map_err(store_error)?;
    if !done.is_empty() {
        return Ok(forgot_matching(&needle, done));
    }
    let found = matching_items(ctx.bot, ctx, &needle).await?;
    if found.len() > MAX_FORGET_MATCHES {
        return Err(ToolError::new(
            format!(
                "{} items contain {}, more than {MAX_FORGET_MATCHES} at once",
                found.len(),
                quoted(&needle)
            ),
            "use a longer, more specific text, or forget by id",
        ));
    }
    let reach = bot_scopes(ctx.bot);
    // with the removals, a mark per scope: a fact extraction of an
    // earlier turn that lands later cannot add back what this forgot
    // (`MemoryOp::AddExtracted`)
    let marks = reach.iter().map(|scope| MemoryOp::ForgetMatching {
        scope: scope.clone(),
        needle: needle.clone(),
    });
    let ops = found
        .into_iter()
        .map(|item| MemoryOp::RemoveByCall {
            id: item.id,
            scope: item.scope,
            call: call.clone(),
        })
        .chain(marks)
        .collect();
    let results = ctx.rt.memory.apply_all(ops).await.map_err(store_error)?;
    // an item another writer forgot or moved in between is not this call's
    let removed: Vec<(MemoryId, MemoryScope)> = results
        .into_iter()
        .filter_map(|r| match r {
            MemoryOpResult::Removed(item) => Some((item.id, item.scope)),
            MemoryOpResult::Added(_)
            | MemoryOpResult::Unchanged(_)
            | MemoryOpResult::Replaced { .. }
            | MemoryOpResult::AlreadyForgotten(_)
            | MemoryOpResult::Purged(_)
            | MemoryOpResult::Refused(_) => None,
        })
        .collect();
    if removed.is_empty() && extraction_pending(ctx, &reach).await {
        return Ok(ToolOutput::text(format!(
            "Nothing you remember contains {} yet. A fact extraction of an earlier turn is still \
             running; nothing it finds containing {} will be remembered.",
            quoted(&needle),
            quoted(&needle)
        )));
    }
    if removed.is_empty() {
        return Err(ToolError::new(
            format!("nothing you remember contains {}", quoted(&needle)),
            "check the wording against your Memory section, or forget by id",
        ));
    }
    Ok(forgot_matching(&needle, removed))
}

/// Whether `needle` is long enough to forget by: [`MIN_FORGET_CHARS`]
/// characters, or [`MIN_FORGET_CJK_CHARS`] when every one is Han, Kana or
/// Hangul (docs/memory.md "Forgetting").
fn long_enough(needle: &str) -> bool {
    let chars = needle.chars().count();
    chars >= MIN_FORGET_CHARS || (chars >= MIN_FORGET_CJK_CHARS && needle.chars().all(is_cjk))
}

/// Whether `c` is of a script written without spaces whose one character
/// is about a syllable or a word: Han, Hiragana, Katakana, Hangul.
fn is_cjk(c: char) -> bool {
    let script = CodePointMapData::<Script>::new().get(c);
    script == Script::Han
        || script == Script::Hiragana
        || script == Script::Katakana
        || script == Script::Hangul
}

/// Whether a fact extraction that may write to one of `reach` is still
/// owed (running, or cut off and waiting for the next start): a Forget
/// that found nothing is not final then, the extraction may be about to
/// add what it forgot (and its add will be dropped). A failed read
/// answers no: the plain "nothing matches" is then said.
async fn extraction_pending(ctx: &ToolContext<'_>, reach: &[MemoryScope]) -> bool {
    let Ok(owed) = ctx.store().owed_extractions(MAX_OWED_READ).await else {
        return false;
    };
    for o in owed {
        let bot = if o.bot == ctx.bot.id {
            Some(ctx.bot.clone())
        } else {
            ctx.store().get_bot(&o.bot).await.ok().flatten()
        };
        if bot.is_some_and(|b| bot_scopes(&b).iter().any(|s| reach.contains(s))) {
            return true;
        }
    }
    false
}

/// The answer of a Forget by text: the same whether the call removed the
/// items just now or on an earlier run.
fn forgot_matching(needle: &str, mut items: Vec<(MemoryId, MemoryScope)>) -> ToolOutput {
    items.sort_by(|(a_id, a_scope), (b_id, b_scope)| {
        a_scope.cmp(b_scope).then_with(|| a_id.cmp(b_id))
    });
    let lines: Vec<String> = items
        .iter()
        .map(|(id, scope)| format!("- {id} ({scope})"))
        .collect();
    ToolOutput::text(format!(
        "Forgot {} item(s) containing {}; they are gone from your Memory from the next turn on:\n{}",
        lines.len(),
        quoted(needle),
        lines.join("\n")
    ))
}

async fn matching_items(
    bot: &BotRecord,
    ctx: &ToolContext<'_>,
    needle: &str,
) -> Result<Vec<MemoryItem>, ToolError> {
    let now = ctx.store().clock().now_ms();
    ctx.store()
        .find_memory(bot_scopes(bot), needle, now)
        .await
        .map_err(store_error)
}
