//! Bot names a person can tell apart. A room's `@Name` and SendToAgent's
//! `agent` address a bot by its id or display name, ignoring case: two bots
//! that answer to the same word would both be woken by a mention, and a
//! message would go to whichever came first. Names compare by
//! [`name_key`] everywhere (case, full width, spaces and invisible
//! characters aside: `Ｈｅｌｐｅｒ` is `Helper`, `σίσυφος` is `ΣΊΣΥΦΟΣ`),
//! the one folding rooms use for mentions. So CreateAgent and UpdateAgent
//! refuse a name (or id) another bot already answers to, among the bots a
//! person can address together (the same owner's, and bots marked
//! `shareable`); and a lookup that still finds several bots (records made
//! before this check) is refused, not guessed. Ids are global: a new id
//! may not differ from any bot's only in case, whoever owns that bot (the
//! store refuses it as it inserts the bot). Nor may a bot be named like
//! one of the fleet's users (`[[users]]` ids, by the same folding), as
//! fleet.toml refuses for its own bots: in a room its messages could pass
//! for that person's.

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::name_key;

use super::ToolContext;
use super::ToolError;
use super::store_error;
use crate::group::mentions::EVERYONE;
use crate::group::mentions::MemberName;

use crate::group::room::shareable;

/// Refuses giving bot `target` (being created, or renamed) the display
/// name `name` when another bot that a person could address
/// along with it answers to the same mention (its id or name, compared by
/// [`name_key`]).
pub(super) async fn check_name_free(
    ctx: &ToolContext<'_>,
    target: &BotRecord,
    name: &str,
) -> Result<(), ToolError> {
    let me = MemberName {
        id: target.id.to_string(),
        name: name.to_owned(),
    };
    // only bots answering to one of its words can clash with it: a few
    // index searches, not every record of the fleet (it read them all,
    // every owner's and every subagent's, at each call)
    if me.answers_to(EVERYONE) {
        return Err(ToolError::new(
            format!(
                "an agent answering to @{EVERYONE} could never be mentioned alone in a room: \
                 @{EVERYONE} addresses every member"
            ),
            // the name first: CreateAgent without an `id` makes one from
            // the name, and advice to choose another `id` sent the model
            // after one it never gave (QA)
            if name_key(name) == EVERYONE {
                "choose another name"
            } else {
                "choose another `id`"
            },
        ));
    }
    let keys = [name_key(&me.id), name_key(name)];
    let mut bots = ctx
        .store()
        .bots_answering_to(&keys)
        .await
        .map_err(store_error)?;
    // as the step's earlier calls left them: a bot made or renamed there
    // answers to its new name already (two made in one step under one
    // name stopped the next start)
    for written in super::targets::written_in_step(ctx) {
        bots.retain(|b| b.id != written.id);
        bots.push(written.clone());
    }
    // a fleet.toml bot renamed since the start answers to its file's name
    // again at the next one: a clash with that name stopped the start
    // (each with its name of the moment, for the refusal)
    let mut renamed = Vec::new();
    let mut now_named: Vec<(BotId, String)> = Vec::new();
    for (id, declared) in &ctx.rt.settings.fleet_names {
        if *id == target.id || !keys.contains(&name_key(declared)) {
            continue;
        }
        let Some(mut other) = ctx.store().get_bot(id).await.map_err(store_error)? else {
            continue;
        };
        if other.name != *declared {
            now_named.push((other.id.clone(), std::mem::take(&mut other.name)));
            other.name.clone_from(declared);
            renamed.push(other);
        }
    }
    for other in bots.iter().chain(&renamed).filter(|b| b.id != target.id) {
        // bots of two owners meet only when one of them is shareable
        if other.owner != target.owner && !shareable(target) && !shareable(other) {
            continue;
        }
        // a made bot its owner removed does not come back and answers to
        // no mention: its name is free again (it refused the name with a
        // clash no model could see, QA), its id stays its own (a message
        // to that id says the bot left)
        let removed_made = other.removed_at().is_some() && other.made_by_agent();
        let them = MemberName {
            id: other.id.to_string(),
            name: if removed_made {
                other.id.to_string()
            } else {
                other.name.clone()
            },
        };
        if let Some(token) = them.clash(&me)
            && removed_made
        {
            // it wakes nothing: its id is kept, by its conversations (QA:
            // "@token in a room would wake both")
            return Err(ToolError::new(
                format!(
                    "{token:?} reads as the id of {}, a bot its owner removed: the id stays \
                     its, with its conversations, though it does not come back",
                    other.id
                ),
                if name_key(&me.id) == name_key(&token) && name_key(name) != name_key(&token) {
                    "choose another `id`"
                } else {
                    "choose another name"
                },
            ));
        }
        if let Some(token) = them.clash(&me) {
            // a renamed one: named now, and by the file's name it gets
            // back (it read `("Second" (its name in fleet.toml, …))`)
            // the stored record, named as now, clashes as well as the
            // copy under the file's name (QA: "named \"Pingy\" now, and
            // \"Pingy\" again", or no word of the file's name)
            let declared = ctx.rt.settings.fleet_names.get(&other.id);
            let now = now_named
                .iter()
                .find(|(id, _)| *id == other.id)
                .map_or(&other.name, |(_, now)| now);
            let named = match declared {
                Some(declared) if declared != now => format!(
                    "named {now:?} now, and {declared:?} again when the host restarts: its \
                     name in fleet.toml"
                ),
                _ => format!("{:?}", other.name),
            };
            return Err(ToolError::new(
                format!(
                    "the agent {} ({named}) already answers to {token:?} (a bot's id or \
                     name, ignoring case): @{token} in a room would wake both, and a message \
                     to {token:?} could not tell them apart",
                    other.id
                ),
                if name_key(&me.id) == name_key(&token) && name_key(name) != name_key(&token) {
                    "choose another `id`"
                } else {
                    "choose another name"
                },
            ));
        }
    }
    Ok(())
}

/// Refuses the display name `name` for a bot (being created, or renamed)
/// when it reads as the id of one of the fleet's users (compared by
/// [`name_key`], as fleet.toml compares its own bots' names): in a room
/// the bot's messages could pass for that person's.
pub(super) fn check_not_a_user(ctx: &ToolContext<'_>, name: &str) -> Result<(), ToolError> {
    let key = name_key(name);
    match ctx
        .rt
        .settings
        .user_ids
        .iter()
        .find(|user| name_key(user.as_str()) == key)
    {
        Some(user) => Err(ToolError::new(
            format!(
                "the name {name:?} reads as the user {:?}: in a room the agent's messages \
                 could pass for that person's",
                user.as_str()
            ),
            "choose another name, one that is not a person's id (e.g. one that says what \
             the agent does)",
        )),
        None => Ok(()),
    }
}

/// The one bot of `bots` that answers to `name` (its id, else its id or
/// display name as a mention matches them: [`MemberName::answers_to`]),
/// `None` if none does; several is an error
/// naming them, so a message never goes to whichever was listed first.
pub(super) fn pick<'a>(
    bots: &'a [BotRecord],
    name: &str,
) -> Result<Option<&'a BotRecord>, ToolError> {
    if let Some(b) = bots.iter().find(|b| b.id.as_str() == name) {
        return Ok(Some(b));
    }
    let found: Vec<&BotRecord> = bots
        .iter()
        .filter(|b| {
            MemberName {
                id: b.id.to_string(),
                name: b.name.clone(),
            }
            .answers_to(name)
        })
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|b| format!("{} ({:?})", b.id, b.name))
                .collect();
            Err(ToolError::new(
                format!(
                    "{name:?} is ambiguous: {} bots answer to it: {}",
                    many.len(),
                    ids.join(", ")
                ),
                "pass the id of the one you mean",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use botfleet_memory::UserId;

    use super::*;
    use crate::tools::test_support::bot_record;

    /// SendToAgent finds a bot as a room's mention does: `σίσυφος` is the
    /// bot named `ΣΊΣΥΦΟΣ`, full-width and spaced spellings find theirs
    /// (it compared ignoring ASCII case only).
    #[test]
    fn a_name_finds_its_bot_in_any_case_and_width() {
        let owner = UserId::new("alice").unwrap();
        let bots = vec![
            bot_record("sis", "ΣΊΣΥΦΟΣ", &owner, &["SendMessage"]),
            bot_record("r2", "Research Bot", &owner, &["SendMessage"]),
        ];
        for (name, want) in [
            ("σίσυφος", "sis"),
            ("ＳＩＳ", "sis"),
            ("researchbot", "r2"),
            ("Ｒｅｓｅａｒｃｈ Ｂｏｔ", "r2"),
        ] {
            let found = pick(&bots, name).unwrap().map(|b| b.id.to_string());
            assert_eq!(found.as_deref(), Some(want), "{name}");
        }
        assert!(pick(&bots, "nobody").unwrap().is_none());
    }
}
