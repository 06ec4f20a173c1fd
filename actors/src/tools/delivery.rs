//! SendMessage and ReactToMessage: the only ways a bot reaches people.

use async_trait::async_trait;
use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use icu_properties::CodePointSetData;
use icu_properties::props::ExtendedPictographic;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use unicode_segmentation::UnicodeSegmentation;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::agents::message_to_bot;
use super::parse_args;
use crate::group;
use crate::model::ToolSpec;

#[path = "delivery_card.rs"]
mod card;

pub(crate) use card::clip;

/// Delivers a message to the session's people.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendMessage;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    text: String,
    #[serde(default)]
    card: Option<Value>,
}

#[async_trait]
impl Tool for SendMessage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "SendMessage".into(),
            description: "Send a message to the people of this conversation. This is the only way they see anything from you.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The message, in Markdown (at most 16,000 characters)."},
                    "card": {"type": "object", "description": "Optional interactive card rendered by clients: `title`, `text`, `fields` ([{\"name\", \"value\"}]), `buttons` ([label or {\"label\", \"value\"|\"url\"}], urls http(s) only); at most 8,000 characters of JSON."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        // internal: committed with the outcome, never re-run
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: SendArgs = parse_args("SendMessage", args)?;
        let text = crate::message_text(&args.text);
        if text.is_empty() {
            return Err(ToolError::new(
                "the message text is empty",
                "call SendMessage with the text you want the person to read",
            ));
        }
        if botfleet_memory::shows_nothing(text) {
            // a blank message counted as the turn's reply (QA): refused
            // as the API refuses one from a person
            return Err(ToolError::new(
                "the message text is empty (nothing but spaces or invisible characters such as \
                 U+200B)",
                "call SendMessage with the text you want the person to read",
            ));
        }
        let chars = text.chars().count();
        if chars > ctx.limits().max_message_chars {
            return Err(ToolError::new(
                format!(
                    "the message has {chars} characters; the limit is {}",
                    ctx.limits().max_message_chars
                ),
                "shorten it, or split it into several SendMessage calls",
            ));
        }
        if let Some(card) = &args.card {
            card::check_card(card)?;
        }
        let key = &ctx.scope.session.key;
        let target = match key.kind {
            SessionKind::Routine | SessionKind::Hook => owner_dm(ctx).id(),
            SessionKind::Dm
            | SessionKind::Room
            | SessionKind::Group
            | SessionKind::Agent
            | SessionKind::Subagent => ctx.session(),
        };
        refuse_repeat(ctx, target, text).await?;
        let id = EntryId::derive(ctx.turn, ctx.call_id, "delivery");
        let delivery = |session| {
            Mutation::Append(Box::new(NewEntry {
                id,
                session,
                author: ctx.bot.id.to_string(),
                turn: Some(ctx.turn),
                kind: EntryKind::Delivery {
                    text: text.to_owned(),
                    card: args.card.clone(),
                    call_id: ctx.call_id.to_owned(),
                },
            }))
        };
        // who "the people" of the session are decides where the message goes.
        // The result names no entry id: the model has no use for it, and a
        // unique id in every result would be resent (~25 tokens) in every
        // later prompt of the session; the id lives in the delivery entry.
        let (effects, content) = match key.kind {
            SessionKind::Dm | SessionKind::Room => {
                (vec![delivery(ctx.session())], "delivered".to_owned())
            }
            SessionKind::Group => {
                // a room member speaks only in its turn of a discussion;
                // otherwise nobody would read it: hold it, and say so
                let unreadable = |e: botfleet_memory::StoreError| {
                    ToolError::new(
                        format!("cannot read the room conversation: {e}"),
                        "try again",
                    )
                };
                // the floor is the turn's that took the input the
                // discussion awaits: another turn of the member session
                // still running when that input came (a reply from a bot
                // it asked) had not read the room, and spoke in its place
                let awaited = group::held::floor_input(ctx.store(), ctx.session(), &key.peer)
                    .map_err(unreadable)?;
                let held = match awaited {
                    Some(input_seq) if ctx.inputs.contains(&input_seq) => {
                        // past the room's limit per member turn or its reply
                        // cap it would be withheld after the turn: say so
                        // now, not "delivered"
                        let kept = group::publish::kept_back(
                            ctx.store(),
                            ctx.session(),
                            &key.peer,
                            input_seq,
                            ctx.step_effects,
                        )
                        .await
                        .map_err(unreadable)?;
                        let Some(kept) = kept else {
                            return Ok(ToolOutput {
                                content: "delivered".to_owned(),
                                effects: vec![delivery(ctx.session())],
                                delivered: true,
                            });
                        };
                        group::publish::over_limit(
                            ctx.session(),
                            &key.peer,
                            &ctx.bot.id,
                            ctx.turn,
                            ctx.call_id,
                            text,
                            kept,
                        )
                    }
                    awaited => group::held::hold(
                        ctx.session(),
                        &key.peer,
                        &ctx.bot.id,
                        (ctx.turn, ctx.call_id),
                        text,
                        awaited.is_some(),
                    ),
                };
                return Ok(ToolOutput {
                    content: held.result,
                    effects: vec![Mutation::Append(Box::new(held.notice))],
                    delivered: false,
                });
            }
            SessionKind::Agent => {
                // the other bot of the conversation
                let peer = peer_bot(ctx, &key.peer).await?;
                let admits = message_to_bot(
                    ctx,
                    "SendMessage",
                    &peer,
                    text,
                    Priority::Bot,
                    "forward",
                    None,
                )
                .await?;
                let mut effects = vec![delivery(ctx.session())];
                effects.extend(admits);
                (effects, format!("delivered to {}", peer.id))
            }
            SessionKind::Subagent => {
                // progress: recorded in the subagent's session, where the
                // parent reads it with CheckSubagent; the last message
                // when the work ends is the report, which the engine sends
                // to the parent with the end of the turn (one message that
                // wakes it, not one per SendMessage)
                (
                    vec![delivery(ctx.session())],
                    format!(
                        "recorded as progress; when you finish, your last message is reported to {}",
                        key.peer
                    ),
                )
            }
            SessionKind::Routine | SessionKind::Hook => {
                // nobody reads a routine's session: deliver to the owner's DM
                let dm = owner_dm(ctx);
                let record = SessionRecord {
                    id: dm.id(),
                    key: dm.clone(),
                    owner: ctx.bot.owner.clone(),
                    epoch: 0,
                    last_seq: 0,
                    created_at: 0,
                };
                (
                    vec![Mutation::EnsureSession(record), delivery(dm.id())],
                    format!("delivered to {}", ctx.bot.owner),
                )
            }
        };
        Ok(ToolOutput {
            content,
            effects,
            delivered: true,
        })
    }
}

/// The DM of the bot with its owner, where a routine's or a webhook's
/// messages go.
fn owner_dm(ctx: &ToolContext<'_>) -> SessionKey {
    SessionKey {
        bot: ctx.bot.id.clone(),
        kind: SessionKind::Dm,
        peer: ctx.bot.owner.to_string(),
    }
}

/// Most recent entries of the conversation searched for this turn's
/// deliveries: a turn's own entries are the newest ones of its session.
const REPEAT_WINDOW: i64 = 256;

/// Refuses `text` when this turn already delivered it, word for word
/// (trimmed), to `target`: small models often send their answer again in
/// the next step, and the person would read it twice. Counted: the
/// deliveries of the step's earlier calls (not yet committed) and those of
/// the turn's earlier steps in the store. A delivery of this very call id
/// (the same call run again) is not a repeat.
async fn refuse_repeat(
    ctx: &ToolContext<'_>,
    target: botfleet_memory::SessionId,
    text: &str,
) -> Result<(), ToolError> {
    let same = |turn: Option<botfleet_memory::TurnId>, session, kind: &EntryKind| {
        turn == Some(ctx.turn)
            && session == target
            && if let EntryKind::Delivery {
                text: sent,
                call_id,
                ..
            } = kind
            {
                // white space around it aside: kept indented, the text sent
                // again with a leading space was delivered twice
                call_id != ctx.call_id && sent.trim() == text.trim()
            } else {
                false
            }
    };
    let in_step = ctx.step_effects.iter().any(|m| {
        if let Mutation::Append(e) = m {
            same(e.turn, e.session, &e.kind)
        } else {
            false
        }
    });
    // nothing delivered in a committed step (the common first send of a
    // turn): no store read on every turn's path
    let earlier = in_step
        || ctx.delivered_before > 0
            && ctx
                .store()
                .tail_entries(target, REPEAT_WINDOW)
                .await
                .map_err(|e| {
                    ToolError::new(format!("cannot read the conversation: {e}"), "try again")
                })?
                .iter()
                .any(|e| same(e.turn, e.session, &e.kind));
    if earlier {
        return Err(ToolError::new(
            "this exact message was already delivered in this turn; the person already \
             sees it, and sending it again would show it twice",
            "do not send it again: if your reply is complete, end your turn now (answer \
             without calling a tool); otherwise send only something new",
        ));
    }
    Ok(())
}

async fn peer_bot(
    ctx: &ToolContext<'_>,
    peer: &str,
) -> Result<botfleet_memory::BotRecord, ToolError> {
    let id = BotId::new(peer)
        .map_err(|e| ToolError::new(e.to_string(), "this conversation has no bot to answer"))?;
    ctx.store()
        .get_bot(&id)
        .await
        .map_err(|e| ToolError::new(format!("cannot read the bot record: {e}"), "try again"))?
        .ok_or_else(|| {
            ToolError::new(
                format!("the bot {peer} of this conversation no longer exists"),
                "nobody can receive this message; tell your person instead",
            )
        })
}

/// Puts a reaction on an entry of the session.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReactToMessage;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReactArgs {
    seq: i64,
    emoji: String,
}

#[async_trait]
impl Tool for ReactToMessage {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ReactToMessage".into(),
            description:
                "React to a message of this conversation with an emoji (e.g. to acknowledge it)."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "seq": {"type": "integer", "minimum": 1, "description": "Sequence number of a message people see: theirs, another bot's, an event, or one you delivered."},
                    "emoji": {"type": "string", "description": "One emoji."}
                },
                "required": ["seq", "emoji"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Internal
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: ReactArgs = parse_args("ReactToMessage", args)?;
        let emoji = check_emoji(&args.emoji)?;
        let found = ctx
            .store()
            .entries_between(ctx.session(), args.seq, args.seq)
            .await
            .map_err(|e| {
                ToolError::new(format!("could not read the conversation: {e}"), "try again")
            })?;
        let Some(target) = found.first() else {
            return Err(ToolError::new(
                format!(
                    "there is no message with seq {} in this conversation",
                    args.seq
                ),
                "use the seq of an existing message",
            ));
        };
        if !people_see(&target.kind) {
            return Err(ToolError::new(
                format!(
                    "entry {} is {} {}, which people do not see as a message",
                    args.seq,
                    article(target.kind.name()),
                    target.kind.name()
                ),
                "react only to a message people see: one of theirs (user_message), another \
                 bot's (agent_message), an event, or one you delivered",
            ));
        }
        let id = EntryId::derive(ctx.turn, ctx.call_id, "reaction");
        Ok(ToolOutput {
            content: format!("reacted {emoji} to message {}", args.seq),
            effects: vec![Mutation::Append(Box::new(NewEntry {
                id,
                session: ctx.session(),
                author: ctx.bot.id.to_string(),
                turn: Some(ctx.turn),
                kind: EntryKind::Reaction {
                    target_seq: args.seq,
                    emoji: emoji.to_owned(),
                    call_id: ctx.call_id.to_owned(),
                },
            }))],
            delivered: false,
        })
    }
}

/// Most code points one emoji may have: the longest real ones (a kiss
/// with two skin tones, a subdivision flag) have 10; a base with a
/// hundred variation selectors is one cluster too, but no emoji.
const MAX_EMOJI_CHARS: usize = 16;

/// The trimmed emoji, or why it is not one: exactly one grapheme cluster
/// (what people see as one symbol: 👩🏽‍❤️‍💋‍👨🏿 is ten code points) that
/// is an emoji ([`is_emoji`]: "abc", "中文" or a lone U+200B are not),
/// with no control, bidi or whitespace character (a newline would break
/// the line it is shown on, a U+202E reverse the text after it).
fn check_emoji(given: &str) -> Result<&str, ToolError> {
    let emoji = given.trim();
    let retry = "call ReactToMessage again with a single emoji such as 👍";
    if emoji.is_empty() {
        return Err(ToolError::new("the emoji is empty; give one emoji", retry));
    }
    if let Some(c) = emoji.chars().find(|&c| c.is_control() || c.is_whitespace()) {
        return Err(ToolError::new(
            format!(
                "the emoji {emoji:?} has a control or space character (U+{:04X}); an emoji has neither",
                u32::from(c)
            ),
            retry,
        ));
    }
    if let Some(c) = emoji.chars().find(|&c| is_bidi(c)) {
        return Err(ToolError::new(
            format!(
                "the emoji {emoji:?} has a bidi control character (U+{:04X}), which reorders \
                 the text around it",
                u32::from(c)
            ),
            retry,
        ));
    }
    let symbols = emoji.graphemes(true).count();
    if symbols != 1 {
        return Err(ToolError::new(
            format!("{emoji:?} is {symbols} symbols; the emoji must be exactly one"),
            retry,
        ));
    }
    let chars = emoji.chars().count();
    if chars > MAX_EMOJI_CHARS {
        return Err(ToolError::new(
            format!("{emoji:?} has {chars} code points; an emoji has at most {MAX_EMOJI_CHARS}"),
            retry,
        ));
    }
    if !is_emoji(emoji) {
        return Err(ToolError::new(format!("{emoji:?} is not an emoji"), retry));
    }
    Ok(emoji)
}

/// Whether one grapheme cluster is an emoji: it has an
/// Extended_Pictographic character (👍, 👍🏽, ❤️, ZWJ sequences), is a
/// flag (two regional indicators) or a keycap (0-9, # or * with U+20E3).
fn is_emoji(cluster: &str) -> bool {
    let pictographic = CodePointSetData::new::<ExtendedPictographic>();
    let regional = |c: char| ('\u{1F1E6}'..='\u{1F1FF}').contains(&c);
    let chars: Vec<char> = cluster.chars().collect();
    let flag = chars.len() == 2 && chars.iter().all(|&c| regional(c));
    let keycap =
        matches!(chars.first(), Some('0'..='9' | '#' | '*')) && chars.last() == Some(&'\u{20E3}');
    flag || keycap || chars.iter().any(|&c| pictographic.contains(c))
}

/// The characters that change the direction of text around them: the
/// marks, embeddings, overrides and isolates.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether people see entries of this kind as messages one can react to:
/// theirs, other bots', events and the bot's deliveries; not its internal
/// steps, notices, cards, reactions or turn ends.
fn people_see(kind: &EntryKind) -> bool {
    match kind {
        EntryKind::UserMessage { .. }
        | EntryKind::AgentMessage { .. }
        | EntryKind::Event { .. }
        | EntryKind::Delivery { .. } => true,
        EntryKind::Assistant { .. }
        | EntryKind::ToolResult { .. }
        | EntryKind::Reaction { .. }
        | EntryKind::Reminder { .. }
        | EntryKind::Notice { .. }
        | EntryKind::Approval { .. }
        | EntryKind::TurnEnd { .. }
        | EntryKind::Summary { .. } => false,
    }
}

/// "an" before a vowel, "a" otherwise.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod tests;
