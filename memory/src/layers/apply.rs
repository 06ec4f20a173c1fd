//! Memory writes, applied by the store writer inside its transaction.
//!
//! Limits are checked here, against the committed state plus whatever the
//! open transaction already wrote, so two writers can never both take the
//! last slot of a profile (the scope actors serialise writes per scope as
//! well, which keeps the order of one scope's writes; this check is what
//! makes the limit hold whatever the path). A refused write is an
//! `Ok(Refused(..))`, not an error, so it never rolls back the other
//! writes of its group.
//!
//! Deleting or replacing an item turns on SQLite's `secure_delete` for
//! that statement: the old text is overwritten in the database pages
//! instead of lingering in free space.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Row;
use rusqlite::params;

use super::forget_marks;
use super::recall::stored_terms;
use super::types::Importance;
use super::types::Layer;
use super::types::MAX_LIVE_NOTES;
use super::types::MAX_LOG_ENTRIES;
use super::types::MAX_PROFILE_CHARS;
use super::types::MAX_PROFILE_FACTS;
use super::types::MemoryId;
use super::types::MemoryItem;
use super::types::MemoryOp;
use super::types::MemoryOpResult;
use super::types::MemoryRefusal;
use super::types::MemoryScope;
use super::types::NewMemory;
use super::types::SUGGESTIONS;
use super::types::ScopeKind;
use super::types::comparison_key;
use super::types::normalize_text;
use super::types::visible_from;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::TurnId;

/// Columns read into a [`MemoryItem`] by [`item_from_row`].
pub(crate) const ITEM_COLUMNS: &str =
    "id, scope_kind, scope_id, layer, text, importance, source, created_at, updated_at, expires_at";

fn corrupt(detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: "memory",
        detail: detail.to_string(),
    }
}

/// Reads a row selected with [`ITEM_COLUMNS`].
pub(crate) fn item_from_row(row: &Row<'_>) -> Result<MemoryItem> {
    let id: String = row.get(0)?;
    let kind: String = row.get(1)?;
    let key: String = row.get(2)?;
    let layer: String = row.get(3)?;
    let importance: i64 = row.get(5)?;
    let kind = ScopeKind::parse(&kind).ok_or_else(|| corrupt(format!("scope kind {kind:?}")))?;
    Ok(MemoryItem {
        id: MemoryId::parse(&id).map_err(corrupt)?,
        scope: MemoryScope::from_parts(kind, &key).map_err(corrupt)?,
        layer: Layer::parse(&layer).ok_or_else(|| corrupt(format!("layer {layer:?}")))?,
        text: row.get(4)?,
        importance: u8::try_from(importance)
            .ok()
            .and_then(|v| Importance::new(v).ok())
            .ok_or_else(|| corrupt(format!("importance {importance}")))?,
        source: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        expires_at: row.get(9)?,
    })
}

/// An item by id.
pub(crate) fn get_item(conn: &Connection, id: &MemoryId) -> Result<Option<MemoryItem>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {ITEM_COLUMNS} FROM memory WHERE id = ?1"))?;
    let mut rows = stmt.query(params![id.as_str()])?;
    match rows.next()? {
        Some(row) => item_from_row(row).map(Some),
        None => Ok(None),
    }
}

/// Whether `id` was forgotten, in which scope, and when it expired if it
/// was a note purged past its expiry.
pub(crate) fn forgotten_scope(
    conn: &Connection,
    id: &MemoryId,
) -> Result<Option<(MemoryScope, Option<i64>)>> {
    let row: Option<(String, String, Option<i64>)> = conn
        .prepare_cached(
            "SELECT scope_kind, scope_id, expired_at FROM memory_forgotten WHERE id = ?1",
        )?
        .query_row(params![id.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    row.map(|(kind, key, expired)| Ok((scope_from_row(&kind, &key)?, expired)))
        .transpose()
}

/// The items `call` forgot ([`MemoryOp::RemoveByCall`]), as (id, scope),
/// by scope then id.
pub(crate) fn forgotten_by_call(
    conn: &Connection,
    call: &str,
) -> Result<Vec<(MemoryId, MemoryScope)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, scope_kind, scope_id FROM memory_forgotten WHERE forgotten_by = ?1
         ORDER BY scope_kind, scope_id, id",
    )?;
    let mut rows = stmt.query(params![call])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let kind: String = row.get(1)?;
        let key: String = row.get(2)?;
        out.push((
            MemoryId::parse(&id).map_err(corrupt)?,
            scope_from_row(&kind, &key)?,
        ));
    }
    Ok(out)
}

fn scope_from_row(kind: &str, key: &str) -> Result<MemoryScope> {
    let kind = ScopeKind::parse(kind).ok_or_else(|| corrupt(format!("scope kind {kind:?}")))?;
    MemoryScope::from_parts(kind, key).map_err(corrupt)
}

/// Items of one scope and layer, oldest first.
pub(crate) fn layer_items(
    conn: &Connection,
    scope: &MemoryScope,
    layer: Layer,
) -> Result<Vec<MemoryItem>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLUMNS} FROM memory WHERE scope_kind = ?1 AND scope_id = ?2 AND layer = ?3
         ORDER BY created_at, id"
    ))?;
    let mut rows = stmt.query(params![scope.kind().as_str(), scope.key(), layer.as_str()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(item_from_row(row)?);
    }
    Ok(out)
}

/// Applies one op at `now` (ms).
pub(crate) fn apply(conn: &Connection, op: &MemoryOp, now: i64) -> Result<MemoryOpResult> {
    purge_expired(conn, op.scope(), now)?;
    match op {
        MemoryOp::Add(new) => add(conn, new, (now, now), Full::Refuse),
        MemoryOp::AddExtracted { new, turn } => {
            if forget_marks::covers(conn, new, *turn, now)? {
                return Ok(MemoryOpResult::AlreadyForgotten(new.id.clone()));
            }
            let set_at = extracted_at(conn, *turn, now)?;
            add(conn, new, (now, set_at), Full::RollLog)
        }
        MemoryOp::ChangeExtracted {
            id,
            scope,
            text,
            importance,
            source,
            remove: removal,
            turn,
        } => {
            let ended = forget_marks::turn_end(conn, *turn)?;
            if let Some(newer) = forget_marks::changed_since(conn, id, scope, ended)? {
                return Ok(MemoryOpResult::Unchanged(newer));
            }
            if *removal {
                remove(conn, id, scope, None, now)
            } else {
                // not after the turn's end, by `changed_since` above
                let at = set_at(ended, now);
                match replace(conn, id, scope, text, *importance, source, at)? {
                    // the item's new text is another item's: what it said
                    // is outdated and the fact is kept already, as
                    // important as the replace made it (QA: it kept the
                    // other's lower importance)
                    MemoryOpResult::Refused(MemoryRefusal::Twin { twin, .. }) => {
                        let wanted = match importance {
                            Some(i) => Some(*i),
                            None => get_item(conn, id)?.map(|i| i.importance),
                        };
                        if let (Some(wanted), Some(kept)) = (wanted, get_item(conn, &twin)?) {
                            restated(conn, &kept, wanted, None)?;
                        }
                        remove(conn, id, scope, None, now)
                    }
                    other => Ok(other),
                }
            }
        }
        MemoryOp::ForgetMatching { scope, needle } => {
            forget_marks::record_needle(conn, scope, needle, now)?;
            Ok(MemoryOpResult::Purged(0))
        }
        MemoryOp::Replace {
            id,
            scope,
            text,
            importance,
            source,
        } => replace(conn, id, scope, text, *importance, source, now),
        MemoryOp::Remove { id, scope } => remove(conn, id, scope, None, now),
        MemoryOp::RemoveByCall {
            id,
            scope,
            call,
            text,
        } => match get_item(conn, id)? {
            // replaced since the caller read it: not what it meant
            Some(item) if &item.scope == scope && &item.text != text => {
                Ok(MemoryOpResult::Unchanged(item))
            }
            Some(_) | None => remove(conn, id, scope, Some(call), now),
        },
        MemoryOp::PurgeExpired { scope, before_ms } => {
            purge_expired(conn, scope, *before_ms).map(MemoryOpResult::Purged)
        }
    }
}

/// When what the extraction of `turn` writes was set: at the turn's end
/// (at most `now`), not when the extraction lands. Extractions run in the
/// background, side by side, and an earlier turn's may land after a later
/// turn's: stamped as it landed, a fact the person had corrected since
/// was listed as the newer of the two ("when two disagree, the later one
/// is more likely true"), and its replace, landing after the later turn
/// ended, refused that turn's correction as a newer change
/// (`forget_marks::changed_since`). `now` for a turn the store does not
/// know or that has not ended.
fn extracted_at(conn: &Connection, turn: TurnId, now: i64) -> Result<i64> {
    Ok(set_at(forget_marks::turn_end(conn, turn)?, now))
}

/// [`extracted_at`] of a turn whose end (`ended`) was already read.
fn set_at(ended: Option<i64>, now: i64) -> i64 {
    ended.map_or(now, |ended| ended.min(now))
}

/// `twin` written again (its text, scope and layer) with `importance`, to
/// expire at `expires_at`: unchanged, but a note lives to the later of its
/// two expiries, and the fact keeps the higher of its two importances.
/// "Still waiting for it, keep it two more days" wrote the same note again
/// for 48 hours and kept the first one's hour: the note went at the end of
/// it. A shorter lifetime does not cut a note short, nor a lower
/// importance lower it; a higher one (the person stressed the fact) was
/// dropped (QA), and the fact ranked and was suggested for replacing as
/// the less important one.
fn restated(
    conn: &Connection,
    twin: &MemoryItem,
    importance: Importance,
    expires_at: Option<i64>,
) -> Result<MemoryOpResult> {
    let expires_at = match (twin.expires_at, expires_at) {
        (Some(old), Some(later)) if later > old => Some(later),
        (kept, _) => kept,
    };
    let importance = twin.importance.max(importance);
    if (expires_at, importance) == (twin.expires_at, twin.importance) {
        return Ok(MemoryOpResult::Unchanged(twin.clone()));
    }
    conn.prepare_cached("UPDATE memory SET expires_at = ?2, importance = ?3 WHERE id = ?1")?
        .execute(params![
            twin.id.as_str(),
            expires_at,
            i64::from(importance.get())
        ])?;
    Ok(MemoryOpResult::Unchanged(MemoryItem {
        expires_at,
        importance,
        ..twin.clone()
    }))
}

/// Normalizes a text for `layer`, or refuses it.
fn checked_text(text: &str, layer: Layer) -> Result<String, MemoryRefusal> {
    let text = normalize_text(text);
    let chars = text.chars().count();
    // nothing visible is empty too: `\u{200b}\u{200b}` was remembered and
    // shown in every prompt as `""` (QA)
    if chars == 0 || super::types::shows_nothing(&text) {
        return Err(MemoryRefusal::Empty);
    }
    if chars > layer.max_item_chars() {
        return Err(MemoryRefusal::TooLong {
            layer,
            chars,
            max: layer.max_item_chars(),
        });
    }
    Ok(text)
}

/// What an add does when its layer is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// Refuses, naming what to replace (a bot's Remember: the model
    /// chooses).
    Refuse,
    /// A log entry takes the place of the log's least important, oldest
    /// entry when that one is not more important than it (fact
    /// extraction, which nobody answers: a full log refused every new
    /// entry for good, silently). The conversation it came from stays in
    /// the transcripts, which SearchTranscript reaches. Other layers
    /// refuse.
    RollLog,
}

/// Adds `new` at `now`, stamped as set at `set_at` (its writer's time:
/// [`extracted_at`] for an extraction's).
fn add(
    conn: &Connection,
    new: &NewMemory,
    (now, set_at): (i64, i64),
    full: Full,
) -> Result<MemoryOpResult> {
    let text = match checked_text(&new.text, new.layer) {
        Ok(t) => t,
        Err(r) => return Ok(MemoryOpResult::Refused(r)),
    };
    let key = comparison_key(&text);
    match (new.layer, new.expires_at) {
        (Layer::Notes, Some(t)) if t > now => {}
        (Layer::Notes, Some(_)) => {
            return Ok(refused(MemoryRefusal::BadExpiry(
                "the note's expiry is not in the future; give a positive lifetime in hours".into(),
            )));
        }
        (Layer::Notes, None) => {
            return Ok(refused(MemoryRefusal::BadExpiry(
                "a note needs an expiry; give its lifetime in hours".into(),
            )));
        }
        (Layer::Profile | Layer::Log, Some(_)) => {
            return Ok(refused(MemoryRefusal::BadExpiry(format!(
                "only notes expire; a {} item is kept until it is forgotten (write a note instead)",
                new.layer
            ))));
        }
        (Layer::Profile | Layer::Log, None) => {}
    }
    if let Some(existing) = get_item(conn, &new.id)? {
        let same = existing.scope == new.scope
            && existing.layer == new.layer
            && comparison_key(&existing.text) == key;
        return Ok(if same {
            MemoryOpResult::Unchanged(existing)
        } else {
            refused(MemoryRefusal::IdTaken(new.id.clone()))
        });
    }
    let items = layer_items(conn, &new.scope, new.layer)?;
    // Only a twin the new item's readers would see counts: a write in a
    // shared room is shown only in that room, so "already remembered"
    // about an item written elsewhere would tell that room's people what
    // the bot holds in private, and the room would never see the fact.
    if let Some(twin) = items
        .iter()
        .find(|i| comparison_key(&i.text) == key && visible_from(&i.source, &new.source))
    {
        return restated(conn, twin, new.importance, new.expires_at);
    }
    let chars = text.chars().count();
    if let Some(refusal) = room_for(&new.scope, new.layer, &items, chars, now) {
        let Some(oldest) = rolled_out(new, &items, full) else {
            return Ok(refused(refusal));
        };
        secure(conn, |conn| {
            conn.prepare_cached("DELETE FROM memory WHERE id = ?1")?
                .execute(params![oldest.id.as_str()])?;
            Ok(())
        })?;
        tracing::info!(scope = %new.scope, rolled_out = %oldest.id, added = %new.id, "memory log full: its least important, oldest entry made room for an extracted one");
    }
    let item = MemoryItem {
        id: new.id.clone(),
        scope: new.scope.clone(),
        layer: new.layer,
        text,
        importance: new.importance,
        source: new.source.clone(),
        created_at: set_at,
        updated_at: set_at,
        expires_at: new.expires_at,
    };
    conn.prepare_cached("DELETE FROM memory_forgotten WHERE id = ?1")?
        .execute(params![item.id.as_str()])?;
    conn.prepare_cached(
        "INSERT INTO memory (id, scope_kind, scope_id, layer, text, norm, chars, terms, importance,
                             source, created_at, updated_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)",
    )?
    .execute(params![
        item.id.as_str(),
        item.scope.kind().as_str(),
        item.scope.key(),
        item.layer.as_str(),
        item.text,
        key,
        chars as i64,
        stored_terms(&item.text),
        i64::from(item.importance.get()),
        item.source,
        set_at,
        item.expires_at
    ])?;
    Ok(MemoryOpResult::Added(item))
}

/// The log entry `new` takes the place of in a full log, if it may
/// (`Full::RollLog`): the least important, then oldest, when it is not
/// more important than `new`.
fn rolled_out<'a>(new: &NewMemory, items: &'a [MemoryItem], full: Full) -> Option<&'a MemoryItem> {
    match (full, new.layer) {
        (Full::RollLog, Layer::Log) => items
            .iter()
            .min_by(|a, b| {
                (a.importance, a.created_at, a.id.as_str()).cmp(&(
                    b.importance,
                    b.created_at,
                    b.id.as_str(),
                ))
            })
            .filter(|oldest| oldest.importance <= new.importance),
        (Full::Refuse, _) | (Full::RollLog, Layer::Profile | Layer::Notes) => None,
    }
}

fn refused(r: MemoryRefusal) -> MemoryOpResult {
    MemoryOpResult::Refused(r)
}

/// Whether one more item of `chars` characters fits in `items` (the live
/// items of one scope and layer); a refusal naming what to replace if not.
fn room_for(
    scope: &MemoryScope,
    layer: Layer,
    items: &[MemoryItem],
    chars: usize,
    now: i64,
) -> Option<MemoryRefusal> {
    match layer {
        Layer::Profile => {
            let used: usize = items.iter().map(MemoryItem::chars).sum();
            if items.len() < MAX_PROFILE_FACTS && used + chars <= MAX_PROFILE_CHARS {
                return None;
            }
            Some(MemoryRefusal::ProfileFull {
                scope: scope.clone(),
                count: items.len(),
                chars: used,
                max_facts: MAX_PROFILE_FACTS,
                max_chars: MAX_PROFILE_CHARS,
                needed: chars,
                suggestion: profile_suggestion(
                    items,
                    (used + chars).saturating_sub(MAX_PROFILE_CHARS),
                ),
            })
        }
        Layer::Log => {
            if items.len() < MAX_LOG_ENTRIES {
                return None;
            }
            Some(MemoryRefusal::LogFull {
                scope: scope.clone(),
                count: items.len(),
                max: MAX_LOG_ENTRIES,
                suggestion: suggest(items, |i| (i.importance, i.created_at)),
            })
        }
        Layer::Notes => {
            let live: Vec<MemoryItem> = items
                .iter()
                .filter(|i| !i.is_expired(now))
                .cloned()
                .collect();
            if live.len() < MAX_LIVE_NOTES {
                return None;
            }
            Some(MemoryRefusal::NotesFull {
                scope: scope.clone(),
                count: live.len(),
                max: MAX_LIVE_NOTES,
                suggestion: suggest(&live, |i| (Importance::NORMAL, i.expires_at.unwrap_or(0))),
            })
        }
    }
}

/// Most facts a full profile's refusal suggests, when the first
/// [`SUGGESTIONS`] are too short to free what is missing.
const MAX_PROFILE_SUGGESTIONS: usize = 20;

/// The profile facts a refusal suggests replacing or forgetting, lowest
/// importance then least recently changed: the first [`SUGGESTIONS`],
/// and more while together they are shorter than `short` (the characters
/// missing; 0 when only the count of facts is at its limit), at most
/// [`MAX_PROFILE_SUGGESTIONS`]. Five short facts offered for a write that
/// lacked more than they hold sent the bot to forget all five and be
/// refused again.
fn profile_suggestion(items: &[MemoryItem], short: usize) -> Vec<(MemoryId, String)> {
    let mut sorted: Vec<&MemoryItem> = items.iter().collect();
    sorted.sort_by(|a, b| {
        (a.importance, a.updated_at)
            .cmp(&(b.importance, b.updated_at))
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut freed = 0;
    sorted
        .into_iter()
        .enumerate()
        .take_while(|(n, i)| {
            let more = *n < SUGGESTIONS || freed < short;
            freed += i.chars();
            more
        })
        .take(MAX_PROFILE_SUGGESTIONS)
        .map(|(_, i)| (i.id.clone(), i.text.clone()))
        .collect()
}

/// The first [`SUGGESTIONS`] items by `key` (then id), as (id, text).
fn suggest<K: Ord>(
    items: &[MemoryItem],
    key: impl Fn(&MemoryItem) -> K,
) -> Vec<(MemoryId, String)> {
    let mut sorted: Vec<&MemoryItem> = items.iter().collect();
    sorted.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id)));
    sorted
        .into_iter()
        .take(SUGGESTIONS)
        .map(|i| (i.id.clone(), i.text.clone()))
        .collect()
}

/// Looks an item up for a change: the item, or the refusal/answer to give.
fn target(
    conn: &Connection,
    id: &MemoryId,
    scope: &MemoryScope,
) -> Result<Result<MemoryItem, MemoryOpResult>> {
    match get_item(conn, id)? {
        Some(item) if &item.scope == scope => Ok(Ok(item)),
        Some(item) => Ok(Err(refused(MemoryRefusal::WrongScope {
            id: id.clone(),
            actual: item.scope,
        }))),
        None => Ok(Err(match forgotten_scope(conn, id)? {
            Some((s, _)) if &s == scope => MemoryOpResult::AlreadyForgotten(id.clone()),
            Some(_) | None => refused(MemoryRefusal::UnknownId(id.clone())),
        })),
    }
}

#[allow(clippy::too_many_arguments)]
fn replace(
    conn: &Connection,
    id: &MemoryId,
    scope: &MemoryScope,
    text: &str,
    importance: Option<Importance>,
    source: &str,
    set_at: i64,
) -> Result<MemoryOpResult> {
    let before = match target(conn, id, scope)? {
        Ok(item) => item,
        Err(MemoryOpResult::AlreadyForgotten(id)) => {
            // a forgotten fact cannot be changed: it is gone
            return Ok(refused(MemoryRefusal::UnknownId(id)));
        }
        Err(answer) => return Ok(answer),
    };
    let text = match checked_text(text, before.layer) {
        Ok(t) => t,
        Err(r) => return Ok(refused(r)),
    };
    let importance = importance.unwrap_or(before.importance);
    if text == before.text && importance == before.importance {
        return Ok(MemoryOpResult::Unchanged(before));
    }
    if let Some(twin) = twin_of(conn, &before, &text, source)? {
        return Ok(refused(MemoryRefusal::Twin {
            twin,
            replaced: before.id,
            scope: before.scope,
            layer: before.layer,
        }));
    }
    let chars = text.chars().count();
    if before.layer == Layer::Profile {
        let items = layer_items(conn, scope, Layer::Profile)?;
        let used: usize = items.iter().map(MemoryItem::chars).sum();
        if used - before.chars() + chars > MAX_PROFILE_CHARS {
            let others: Vec<MemoryItem> = items.into_iter().filter(|i| &i.id != id).collect();
            return Ok(refused(MemoryRefusal::ProfileFull {
                scope: scope.clone(),
                count: others.len() + 1,
                chars: used,
                max_facts: MAX_PROFILE_FACTS,
                max_chars: MAX_PROFILE_CHARS,
                needed: chars - before.chars(),
                suggestion: profile_suggestion(
                    &others,
                    (used - before.chars() + chars).saturating_sub(MAX_PROFILE_CHARS),
                ),
            }));
        }
    }
    secure(conn, |conn| {
        conn.prepare_cached(
            "UPDATE memory SET text = ?2, norm = ?3, chars = ?4, terms = ?8, importance = ?5,
                               source = ?6, updated_at = ?7
             WHERE id = ?1",
        )?
        .execute(params![
            id.as_str(),
            text,
            comparison_key(&text),
            chars as i64,
            i64::from(importance.get()),
            source,
            set_at,
            stored_terms(&text)
        ])?;
        Ok(())
    })?;
    let after = MemoryItem {
        text,
        importance,
        source: source.to_owned(),
        updated_at: set_at,
        ..before.clone()
    };
    Ok(MemoryOpResult::Replaced { before, after })
}

/// Another item of `item`'s scope and layer that already holds `text`
/// (by comparison key) where a write from `source` is shown: replacing
/// `item`'s text with it would keep one fact twice, which an add never
/// does (it answers `Unchanged` with the twin).
fn twin_of(
    conn: &Connection,
    item: &MemoryItem,
    text: &str,
    source: &str,
) -> Result<Option<MemoryId>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, source FROM memory
         WHERE scope_kind = ?1 AND scope_id = ?2 AND layer = ?3 AND norm = ?4 AND id <> ?5",
    )?;
    let mut rows = stmt.query(params![
        item.scope.kind().as_str(),
        item.scope.key(),
        item.layer.as_str(),
        comparison_key(text),
        item.id.as_str()
    ])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let written_by: String = row.get(1)?;
        if visible_from(&written_by, source) {
            return Ok(Some(MemoryId::parse(&id).map_err(corrupt)?));
        }
    }
    Ok(None)
}

/// Deletes an item, keeping its id and scope (and the call that forgot
/// it, if one did) to answer a repeated forget.
fn remove(
    conn: &Connection,
    id: &MemoryId,
    scope: &MemoryScope,
    call: Option<&str>,
    now: i64,
) -> Result<MemoryOpResult> {
    let item = match target(conn, id, scope)? {
        Ok(item) => item,
        Err(answer) => return Ok(answer),
    };
    secure(conn, |conn| {
        conn.prepare_cached("DELETE FROM memory WHERE id = ?1")?
            .execute(params![id.as_str()])?;
        Ok(())
    })?;
    forget_marks::record_removed(conn, &item, now)?;
    conn.prepare_cached(
        "INSERT INTO memory_forgotten (id, scope_kind, scope_id, forgotten_at, forgotten_by)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET forgotten_at = excluded.forgotten_at,
                                        forgotten_by = excluded.forgotten_by",
    )?
    .execute(params![
        id.as_str(),
        scope.kind().as_str(),
        scope.key(),
        now,
        call
    ])?;
    Ok(MemoryOpResult::Removed(item))
}

/// Deletes the notes of `scope` that expired at or before `before_ms`,
/// keeping their ids, scope and expiry in `memory_forgotten` (not their
/// texts), so that an id shown while the note lived answers "expired"
/// rather than "no such item".
fn purge_expired(conn: &Connection, scope: &MemoryScope, before_ms: i64) -> Result<usize> {
    let key = params![scope.kind().as_str(), scope.key(), before_ms];
    conn.prepare_cached(
        "INSERT INTO memory_forgotten (id, scope_kind, scope_id, forgotten_at, expired_at)
         SELECT id, scope_kind, scope_id, expires_at, expires_at FROM memory
         WHERE scope_kind = ?1 AND scope_id = ?2 AND layer = 'notes' AND expires_at <= ?3
         ON CONFLICT (id) DO NOTHING",
    )?
    .execute(key)?;
    secure(conn, |conn| {
        Ok(conn
            .prepare_cached(
                "DELETE FROM memory WHERE scope_kind = ?1 AND scope_id = ?2 AND layer = 'notes'
                 AND expires_at <= ?3",
            )?
            .execute(key)?)
    })
}

/// Runs `f` with `secure_delete` on, so freed space is zeroed.
pub(super) fn secure<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    conn.execute_batch("PRAGMA secure_delete = ON")?;
    let out = f(conn);
    conn.execute_batch("PRAGMA secure_delete = OFF")?;
    out
}
