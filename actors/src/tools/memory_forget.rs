//! Forget: the bot removes facts from its memory, by id or by text. Why
//! it writes during the call and how a re-run answers the same is told
//! in `memory_tools.rs`, with the helpers it shares with Remember.

use std::collections::HashMap;

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryOpResult;
use botfleet_memory::MemoryScope;
use botfleet_memory::UserId;
use botfleet_memory::bot_scopes;
use icu_properties::CodePointMapData;
use icu_properties::props::Script;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::Gone;
use super::expired_at;
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
/// Most characters of an item's text a Forget by text quotes back.
const MAX_QUOTED_CHARS: usize = 100;
/// Most kept items of one kind (not shown, other people's project facts,
/// replaced meanwhile) a Forget by text lists; the rest are counted.
const MAX_LEFT_OUT_LISTED: usize = 10;

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
            description: "Remove facts from your memory for good, by id or by text. Use it when a person asks you to forget something, and tell them what went: the answer lists it. By text it removes only facts your Memory section shows, and lists the other matching facts it kept (forget one by id only when the person means it). Facts of a project (scope \"project:<name>\") are shared with every user who has a bot in that project: forgetting one removes it for all of them, so a text match leaves out the ones other people's bots wrote (forget such a fact by id, only when the person means that very fact).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Id of one item (m-…), as shown in your Memory."},
                    "matching": {"type": "string", "description": "Instead of id: forget every item your Memory section shows whose text contains this (ignoring case, accents, spacing and full-width or composed forms; at least 3 characters, or 2 Chinese, Japanese or Korean ones); matching items it did not show, and project facts other people's bots wrote, are kept and listed."}
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
        Err(Gone::Forgotten(id)) => {
            return Ok(ToolOutput::text(format!(
                "{id} was already forgotten. Nothing changed."
            )));
        }
        Err(Gone::Expired { id, at }) => {
            return Ok(ToolOutput::text(format!(
                "{id} was a note that {}: it is gone already. Nothing changed.",
                expired_at(at)
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

/// Forgets the items whose text contains `text` and that this turn's
/// prompt shows (`ToolContext::memory_shown`), in one store write (all of
/// them or none), and answers with what went: each item's id, scope,
/// layer and text (clipped), so the model can tell the person and
/// remember again what was not meant. It keeps, and lists with how to
/// forget one by id:
/// - the matching items the prompt did not show (log entries not chosen
///   for the conversation, items left out by the block's bound): the bot
///   cannot have meant a fact it was not shown (a broad text took "Lives
///   in Berlin (moved from Paris)", the current fact, with "forget
///   Paris");
/// - the items of a project scope that another user's bot wrote
///   (`leave_out_others_project_items`): a project is shared, any of its
///   users may forget its facts (docs/api.md), but by id, one the person
///   means, not as the casualties of a broad text;
/// - an item another writer replaced between this call's read and its
///   write (the store compares the text read at commit,
///   `MemoryOp::RemoveByCall`): its new text is not what was matched.
///
/// The items are forgotten with the call's identity, so the same call
/// run again (the engine re-runs a call cut off by a crash before its
/// result was recorded) answers from what it forgot and changes nothing,
/// even if an item matching the text was written in between. A forgotten
/// text is not kept, so that answer lists ids and scopes and says the
/// texts are not kept. The same write leaves a mark in every reachable
/// scope (`MemoryOp::ForgetMatching`): a fact extraction of an earlier
/// turn that lands later does not add back what matches, so when nothing
/// matched yet but such an extraction is still owed, the answer says so
/// instead of "nothing you remember contains" (docs/memory.md
/// "Forgetting").
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
        return Ok(forgot_again(&needle, done));
    }
    let found = matching_items(ctx.bot, ctx, &needle).await?;
    let (found, left_out) = leave_out_others_project_items(ctx, found).await;
    let (shown, unshown): (Vec<MemoryItem>, Vec<MemoryItem>) = found
        .into_iter()
        .partition(|i| ctx.memory_shown.contains(i.id.as_str()));
    if shown.len() > MAX_FORGET_MATCHES {
        // counted as what is matched: the items the Memory section shows
        // (QA: "30 items contain…" of 100 such items, 30 shown)
        let more = match unshown.len() {
            0 => String::new(),
            n => format!(" ({n} more that it does not show are never forgotten by text)"),
        };
        return Err(ToolError::new(
            format!(
                "{} of the items your Memory section shows contain {}, more than \
                 {MAX_FORGET_MATCHES} at once{more}",
                shown.len(),
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
    let ops = shown
        .into_iter()
        .map(|item| MemoryOp::RemoveByCall {
            id: item.id,
            scope: item.scope,
            call: call.clone(),
            text: item.text,
        })
        .chain(marks)
        .collect();
    let results = ctx.rt.memory.apply_all(ops).await.map_err(store_error)?;
    // an item another writer forgot, moved or replaced in between is not
    // this call's
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    for result in results {
        match result {
            MemoryOpResult::Removed(item) => removed.push(item),
            MemoryOpResult::Unchanged(item) => changed.push(item),
            MemoryOpResult::Added(_)
            | MemoryOpResult::Replaced { .. }
            | MemoryOpResult::AlreadyForgotten(_)
            | MemoryOpResult::Purged(_)
            | MemoryOpResult::Refused(_) => {}
        }
    }
    let kept = Kept {
        unshown,
        changed,
        left_out,
    };
    if removed.is_empty() && !kept.is_empty() {
        return Err(ToolError::new(
            format!("nothing was forgotten: {}", kept.text(&needle)),
            "forget one of them by id only if the person means that very fact (tell them what it \
             says first); otherwise use a more specific text",
        ));
    }
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
    Ok(forgot_matching(&needle, removed, &kept))
}

/// Whether `needle` is long enough to forget by: [`MIN_FORGET_CHARS`]
/// characters, or [`MIN_FORGET_CJK_CHARS`] when every one is Han, Kana or
/// Hangul (docs/memory.md "Forgetting").
fn long_enough(needle: &str) -> bool {
    // counted without invisible characters, which matching ignores (QA:
    // `ea` and a zero-width space forgot everything holding "ea")
    let visible = botfleet_memory::without_invisible(needle);
    let chars = visible.chars().count();
    chars >= MIN_FORGET_CHARS || (chars >= MIN_FORGET_CJK_CHARS && visible.chars().all(is_cjk))
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

/// The answer of a Forget by text that removed `items` just now: each
/// with its id, scope, layer and text (clipped), then what it kept.
fn forgot_matching(needle: &str, mut items: Vec<MemoryItem>, kept: &Kept) -> ToolOutput {
    items.sort_by(|a, b| a.scope.cmp(&b.scope).then_with(|| a.id.cmp(&b.id)));
    let lines: Vec<String> = items
        .iter()
        .map(|i| format!("- {} ({}) {}", i.id, where_(i), clipped(&i.text)))
        .collect();
    let mut text = format!(
        "Forgot {} item(s) containing {} that your Memory section showed; they are gone from \
         your Memory from the next turn on:\n{}\nTell the person what was forgotten, and \
         Remember again anything they did not mean to lose.",
        lines.len(),
        quoted(needle),
        lines.join("\n")
    );
    if !kept.is_empty() {
        text.push('\n');
        text.push_str(&kept.text(needle));
        text.push_str(
            "\nTo forget one of them, Forget it by id, only if the person means that very fact.",
        );
    }
    ToolOutput::text(text)
}

/// The answer of a Forget by text run again (its first run's result was
/// not recorded): what the call forgot, by id and scope; the texts are
/// not kept.
fn forgot_again(needle: &str, mut items: Vec<(MemoryId, MemoryScope)>) -> ToolOutput {
    items.sort_by(|(a_id, a_scope), (b_id, b_scope)| {
        a_scope.cmp(b_scope).then_with(|| a_id.cmp(b_id))
    });
    let lines: Vec<String> = items
        .iter()
        .map(|(id, scope)| format!("- {id} ({scope})"))
        .collect();
    ToolOutput::text(format!(
        "Forgot {} item(s) containing {}; they are gone from your Memory from the next turn on \
         (this call ran before its answer was recorded, and forgotten texts are not kept, so only \
         their ids are listed):\n{}",
        lines.len(),
        quoted(needle),
        lines.join("\n")
    ))
}

/// The matching items a Forget by text kept, by why.
#[derive(Debug, Default)]
struct Kept {
    /// Items this turn's prompt did not show.
    unshown: Vec<MemoryItem>,
    /// Items another writer replaced between the read and the write, as
    /// they are now.
    changed: Vec<MemoryItem>,
    /// Items of a shared project other people's bots wrote, with who.
    left_out: Vec<(MemoryItem, String)>,
}

impl Kept {
    fn is_empty(&self) -> bool {
        self.unshown.is_empty() && self.changed.is_empty() && self.left_out.is_empty()
    }

    /// What was kept and why, a paragraph per reason (each lists at most
    /// [`MAX_LEFT_OUT_LISTED`] items, the rest counted).
    fn text(&self, needle: &str) -> String {
        let needle = quoted(needle);
        let mut parts = Vec::new();
        if !self.unshown.is_empty() {
            let mut items = self.unshown.iter().collect::<Vec<_>>();
            items.sort_by(|a, b| a.scope.cmp(&b.scope).then_with(|| a.id.cmp(&b.id)));
            parts.push(format!(
                "{} more item(s) containing {needle} were kept: your Memory section did not show \
                 them, so the person cannot have meant them by what you were shown:\n{}",
                items.len(),
                listed(items.into_iter().map(|i| (i, None)))
            ));
        }
        if !self.changed.is_empty() {
            parts.push(format!(
                "{} item(s) containing {needle} were kept: their text was replaced while this \
                 Forget ran, and the new text is not what was matched (now):\n{}",
                self.changed.len(),
                listed(self.changed.iter().map(|i| (i, None)))
            ));
        }
        if !self.left_out.is_empty() {
            parts.push(format!(
                "{} item(s) containing {needle} were left out, kept: other people's bots wrote \
                 them in a project, which every user with a bot in it shares (forgetting one \
                 removes it for all of them):\n{}",
                self.left_out.len(),
                listed(self.left_out.iter().map(|(i, w)| (i, Some(w.as_str()))))
            ));
        }
        parts.join("\n")
    }
}

/// Lines `- <id> (<where>[, written by <writer>]) "<text>"`, at most
/// [`MAX_LEFT_OUT_LISTED`], then how many more.
fn listed<'a>(items: impl ExactSizeIterator<Item = (&'a MemoryItem, Option<&'a str>)>) -> String {
    let total = items.len();
    let mut lines: Vec<String> = items
        .take(MAX_LEFT_OUT_LISTED)
        .map(|(i, writer)| match writer {
            Some(w) => format!(
                "- {} ({}, written by {w}) {}",
                i.id,
                where_(i),
                clipped(&i.text)
            ),
            None => format!("- {} ({}) {}", i.id, where_(i), clipped(&i.text)),
        })
        .collect();
    if total > MAX_LEFT_OUT_LISTED {
        lines.push(format!("- and {} more", total - MAX_LEFT_OUT_LISTED));
    }
    lines.join("\n")
}

/// `text` JSON-quoted, at most [`MAX_QUOTED_CHARS`] characters of it.
fn clipped(text: &str) -> String {
    if text.chars().count() <= MAX_QUOTED_CHARS {
        return quoted(text);
    }
    let head: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    format!("{}…", quoted(&head))
}

/// `found` split into what a Forget by text forgets and what it leaves
/// out: an item of a project scope whose writer (its `source`) is not a
/// bot of this bot's owner nor the owner, with how to name the writer. A
/// writer that cannot be told (a bot no longer in the fleet, a source of
/// another form) counts as another's: the item stays, and can be
/// forgotten by id.
async fn leave_out_others_project_items(
    ctx: &ToolContext<'_>,
    found: Vec<MemoryItem>,
) -> (Vec<MemoryItem>, Vec<(MemoryItem, String)>) {
    let mut writers: HashMap<String, (Option<UserId>, String)> = HashMap::new();
    let mut mine = Vec::new();
    let mut others = Vec::new();
    for item in found {
        match &item.scope {
            MemoryScope::Project(_) => {}
            MemoryScope::Agent(_) | MemoryScope::User(_) => {
                mine.push(item);
                continue;
            }
        }
        let (user, named) = match writers.get(&item.source) {
            Some(known) => known.clone(),
            None => {
                let writer = writer_of(ctx, &item.source).await;
                writers.insert(item.source.clone(), writer.clone());
                writer
            }
        };
        if user.as_ref() == Some(&ctx.bot.owner) {
            mine.push(item);
        } else {
            others.push((item, named));
        }
    }
    others.sort_by(|(a, _), (b, _)| a.scope.cmp(&b.scope).then_with(|| a.id.cmp(&b.id)));
    (mine, others)
}

/// The user who wrote an item of this `source` (`MemoryItem::source`:
/// `tool:<bot>`, `tool:<bot>@room:<room>`, `extract:<bot>`,
/// `api:<user>`), and how to name the writer to the model; no user when
/// it cannot be told.
async fn writer_of(ctx: &ToolContext<'_>, source: &str) -> (Option<UserId>, String) {
    let unknown = || (None, "an unknown writer".to_owned());
    let Some((kind, rest)) = source.split_once(':') else {
        return unknown();
    };
    let who = rest.split_once("@room:").map_or(rest, |(who, _)| who);
    match kind {
        "tool" | "extract" => {
            let Ok(bot) = BotId::new(who) else {
                return unknown();
            };
            match ctx.store().get_bot(&bot).await {
                Ok(Some(record)) => (
                    Some(record.owner.clone()),
                    format!("{}'s bot {}", record.owner, record.id),
                ),
                Ok(None) => (None, format!("bot {who}, no longer in the fleet")),
                Err(_) => unknown(),
            }
        }
        "api" => match UserId::new(who) {
            Ok(user) => {
                let named = user.to_string();
                (Some(user), named)
            }
            Err(_) => unknown(),
        },
        _ => unknown(),
    }
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
