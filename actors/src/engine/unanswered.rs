//! The event that tells a bot its message will get no answer: the bot it
//! wrote to was removed by its owner (`DELETE /v1/bots/{bot}`) before it
//! answered, in the turn the removal cancelled or while the message still
//! waited in its queue; or a start found it no longer in the fleet file
//! while the message waited in its queue.
//!
//! The asker may have ended its turn right after sending, telling its
//! person it would report back (`awaiting_replies`): with no answer and no
//! word, it never woke again and the person was never told (QA: the turn
//! ended `cancelled`, and only the removed bot's session said so). The
//! event wakes the asker in the conversation it asked from, as the answer
//! would have. So does a bot that fleet.toml gave to another user before it
//! answered: its turn over the message ends unanswered
//! (`owner_changed.rs`), and the asker was not told either (audit). And a
//! bot whose turn over a message owed a reply ended without one, after its
//! reminder (`owed_replies.rs`; QA: its answer written as text reached
//! nobody).

use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::Store;
use botfleet_memory::StoreError;

use crate::prompts::Template;
use crate::prompts::prompts;

/// The origin of the event, followed by the removed bot's id.
const ORIGIN: &str = "bot_removed:";

/// The origin of the event for a bot given to another user, followed by
/// its id.
const OWNER_CHANGED_ORIGIN: &str = "bot_owner_changed:";

/// How the bot that will not answer was removed: the words of the notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Its owner removed it (`DELETE /v1/bots/{bot}`).
    ByOwner,
    /// The fleet file no longer lists it (a start marked it removed).
    FromConfig,
}

/// The event to the bot that wrote `question` (an `AgentMessage` to
/// `answerer`), saying `answerer` will not answer it since fleet.toml gave
/// it to another user: its turn `turn` over the message ended unanswered.
/// `None` for any other entry, and for a sender that is gone, removed, or
/// (still) of `answerer`'s owner. One per turn and asking conversation:
/// the nonce names both, so a resumed turn's end sends it once.
pub(crate) async fn owner_changed_notice(
    store: &Store,
    answerer: &BotRecord,
    question: &Entry,
    turn: botfleet_memory::TurnId,
) -> Result<Option<AdmitRequest>, StoreError> {
    notice(
        store,
        answerer,
        question,
        // the asker that fleet.toml moved itself wrote for its former
        // owner, whose conversation it asked from is theirs, closed to it:
        // nothing to tell it (nor its new owner) there
        |asked| asked.asker.owner != answerer.owner && asked.where_asked,
        &prompts().agent_owner_changed_unanswered,
        Mark {
            origin: OWNER_CHANGED_ORIGIN,
            digest: "bot_owner_changed",
            nonce: "owner_changed",
            when: turn.to_string(),
            error: None,
        },
    )
    .await
}

/// The origin of the event for a bot whose message another's turn ended
/// without answering, followed by that bot's id (`owed_replies.rs`).
const NO_REPLY_ORIGIN: &str = "bot_no_reply:";

/// The event to the bot that wrote `question` (an `AgentMessage` to
/// `answerer` owed a reply), saying `answerer`'s turn `turn` over it ended
/// without answering, after its reminder. `None` for any other entry, and
/// for a sender that is gone, removed, or another user's. One per turn and
/// asking conversation: the nonce names both, so a resumed turn's end
/// sends it once.
///
/// When `answerer`'s hop budget is spent (`budget_spent`), `None` too for
/// an asker that could not act on the event: in a conversation with a bot
/// (or a room), every message it sends there is refused past the budget
/// (agent-load: each chain's bot before the last had its send refused once
/// more); the chain's person is told instead (`owed_replies.rs`).
pub(crate) async fn no_reply_notice(
    store: &Store,
    answerer: &BotRecord,
    question: &Entry,
    turn: botfleet_memory::TurnId,
    budget_spent: bool,
) -> Result<Option<AdmitRequest>, StoreError> {
    notice(
        store,
        answerer,
        question,
        |asked| asked.asker.owner == answerer.owner && asked.can_act(budget_spent),
        &prompts().agent_no_reply,
        Mark {
            origin: NO_REPLY_ORIGIN,
            digest: "bot_no_reply",
            nonce: "no_reply",
            when: turn.to_string(),
            error: None,
        },
    )
    .await
}

/// The event (in the words of `template`, told apart by `mark`) to the
/// bot that wrote `question` to `answerer`, when `tell` takes the asking:
/// `None` for any other entry, and for a sender that is gone or removed.
async fn notice(
    store: &Store,
    answerer: &BotRecord,
    question: &Entry,
    tell: impl FnOnce(&Asked<'_>) -> bool,
    template: &Template,
    mark: Mark,
) -> Result<Option<AdmitRequest>, StoreError> {
    Ok(Asked::of(store, answerer, question)
        .await?
        .filter(|asked| tell(asked))
        .map(|asked| asked.event(answerer, template, mark)))
}

/// The origin of the event for a bot whose message another's turn failed
/// over, followed by that bot's id (`owed_replies.rs`).
const TURN_FAILED_ORIGIN: &str = "bot_turn_failed:";

/// The event to the bot that wrote `question` (an `AgentMessage` to
/// `answerer` owed a reply), saying `answerer`'s turn `turn` over it
/// failed for good with `error`: no answer comes unless its owner retries
/// that turn. As [`no_reply_notice`] otherwise (QA: a delegate's turn
/// failed, its notice only in the two bots' conversation, and the asker
/// and its person waited for good).
pub(crate) async fn turn_failed_notice(
    store: &Store,
    answerer: &BotRecord,
    question: &Entry,
    turn: botfleet_memory::TurnId,
    error: &str,
    budget_spent: bool,
) -> Result<Option<AdmitRequest>, StoreError> {
    let error = botfleet_memory::quote_short(error);
    notice(
        store,
        answerer,
        question,
        |asked| asked.asker.owner == answerer.owner && asked.can_act(budget_spent),
        &prompts().agent_turn_failed_asker,
        Mark {
            origin: TURN_FAILED_ORIGIN,
            digest: "bot_turn_failed",
            nonce: "turn_failed",
            when: turn.to_string(),
            error: Some(error),
        },
    )
    .await
}

/// What tells one notice from another: its origin (before the bot's id),
/// the tag of its digest, its nonce's word, and what it is of (the
/// removal's time, the turn that ended unanswered). Each notice's nonce
/// and digest are what they were when it was written first: a notice sent
/// again after a restart is the same admission.
struct Mark {
    origin: &'static str,
    digest: &'static str,
    nonce: &'static str,
    when: String,
    /// What went wrong, for a notice that says (`{{error}}`).
    error: Option<String>,
}

/// A bot's message to another that will not be answered: who asked, what,
/// and the conversation the answer would have gone to.
struct Asked<'a> {
    asker: BotRecord,
    text: &'a str,
    hop: u32,
    chain: Option<botfleet_memory::ChainOrigin>,
    key: SessionKey,
    /// Whether `key` is the conversation the asker wrote from (still its
    /// owner's), not the bots' own it falls back to.
    where_asked: bool,
}

impl<'a> Asked<'a> {
    /// `question` as a message to `answerer` from a bot that is there and
    /// not removed; `None` for any other entry.
    async fn of(
        store: &Store,
        answerer: &BotRecord,
        question: &'a Entry,
    ) -> Result<Option<Self>, StoreError> {
        let EntryKind::AgentMessage {
            from,
            text,
            hop,
            reply_session,
            chain,
            ..
        } = &question.kind
        else {
            return Ok(None);
        };
        let Some(asker) = store.get_bot(from).await? else {
            return Ok(None);
        };
        if asker.removed_at().is_some() {
            return Ok(None);
        }
        // where the answer would have gone: the conversation the asker
        // wrote from while it is still its owner's, else the bots' own
        let asked_from = match reply_session {
            Some(id) => store
                .get_session(*id)
                .await?
                .filter(|rec| rec.key.bot == asker.id && rec.owner == asker.owner),
            None => None,
        };
        let where_asked = asked_from.is_some();
        let key = asked_from.map_or_else(|| own_key(&asker.id, &answerer.id), |rec| rec.key);
        Ok(Some(Self {
            asker,
            text,
            hop: *hop,
            chain: *chain,
            key,
            where_asked,
        }))
    }

    /// Whether the asker, woken by the event, can act on it: past the
    /// answerer's spent hop budget (`budget_spent`), not in a
    /// conversation with a bot or a room, where every message it sends is
    /// refused (agent-load: each chain's bot before the last had its send
    /// refused once more).
    fn can_act(&self, budget_spent: bool) -> bool {
        !(budget_spent && matches!(self.key.kind, SessionKind::Agent | SessionKind::Room))
    }

    /// The trusted event from `answerer` that wakes the asker, in the
    /// words of `template`, told apart by `mark`.
    fn event(self, answerer: &BotRecord, template: &Template, mark: Mark) -> AdmitRequest {
        let text = template
            .render(&[
                ("bot", answerer.id.as_str()),
                ("asked", &botfleet_memory::quote_short(self.text)),
                ("error", mark.error.as_deref().unwrap_or_default()),
            ])
            .unwrap_or_default();
        let told = self.key.id().to_string();
        let digest = InputDigest::of_parts([
            mark.digest.as_bytes(),
            self.asker.id.as_str().as_bytes(),
            mark.when.as_bytes(),
            told.as_bytes(),
        ]);
        let origin = format!("{}{}", mark.origin, answerer.id);
        AdmitRequest {
            source: format!("bot:{}", answerer.id),
            nonce: format!("{}:{}:{told}", mark.nonce, mark.when),
            nonce_time_ms: None,
            digest,
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: self.key.id(),
                author: answerer.id.to_string(),
                turn: None,
                kind: EntryKind::Event {
                    origin,
                    text,
                    // the host's words, not the other bot's
                    trusted: true,
                    // one hop on, as the answer would have been; sent past
                    // the budget too (as a subagent's report is): the chain
                    // ends in the turn it wakes, which may still tell its
                    // person
                    hop: Some(self.hop.saturating_add(1)),
                    chain: self.chain,
                    asked: None,
                },
            },
            session: self.key,
            owner: self.asker.owner,
            priority: Priority::Bot,
        }
    }
}

/// The event to the bot that wrote `question` (an `AgentMessage` to
/// `removed`), saying `removed` will not answer it: `None` for any other
/// entry, and for a sender that is gone, removed too, or another user's
/// (bots message only their owner's bots).
///
/// Its nonce names the removal (the bot and when it was removed), the
/// asker and the conversation the notice goes to, whichever path finds
/// the question (the cancelled turn's end or the removal's read of the
/// queue), so the ledger admits one notice per asking conversation: the
/// turn's newest input and the queue's newest message were told apart
/// (QA: two notices for one conversation, each quoting another message).
pub(crate) async fn removal_notice(
    store: &Store,
    removed: &BotRecord,
    question: &Entry,
    how: Removal,
) -> Result<Option<AdmitRequest>, StoreError> {
    let prompt = match how {
        Removal::ByOwner => &prompts().agent_removed_unanswered,
        Removal::FromConfig => &prompts().agent_removed_from_config_unanswered,
    };
    notice(
        store,
        removed,
        question,
        // bots message only their owner's bots
        |asked| asked.asker.owner == removed.owner,
        prompt,
        Mark {
            origin: ORIGIN,
            digest: "bot_removed",
            nonce: "removed",
            when: removed.removed_at().unwrap_or_default().to_string(),
            error: None,
        },
    )
    .await
}

/// Of `entries`, the messages of bots that `keep` takes, to be told about:
/// the newest of each bot and the conversation it wrote from (one notice
/// each, whichever path finds them: the cancelled turn's inputs, or the
/// removed bot's queue).
pub(crate) fn newest_questions(
    entries: &[Entry],
    keep: impl Fn(&Entry, &BotId) -> bool,
) -> Vec<&Entry> {
    let mut told: Vec<(&BotId, Option<SessionId>)> = Vec::new();
    let mut out = Vec::new();
    for question in entries.iter().rev() {
        let EntryKind::AgentMessage {
            from,
            reply_session,
            ..
        } = &question.kind
        else {
            continue;
        };
        let asker = (from, *reply_session);
        if told.contains(&asker) || !keep(question, from) {
            continue;
        }
        told.push(asker);
        out.push(question);
    }
    out
}

/// The sessions between `asker` and `removed`, on the asker's side.
fn own_key(asker: &BotId, removed: &BotId) -> SessionKey {
    SessionKey {
        bot: asker.clone(),
        kind: SessionKind::Agent,
        peer: removed.to_string(),
    }
}
