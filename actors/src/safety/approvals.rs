//! Approvals from the runtime's side: a person's decision and the event
//! that wakes the bot, and the texts the model is shown.
//!
//! The record, its state machine and the per-bot limit live in the store
//! (memory `record/approval.rs`, `Mutation::{RequestApproval,
//! DecideApproval, ConsumeApproval, ExpireApprovals}`), so every change is
//! one transaction of the single writer. The gate (`tools/gate.rs`)
//! requests and consumes approvals; this module decides them.
//!
//! **Epoch.** An approval remembers the seq of the newest user message of
//! its session when it was asked; a user message with a higher seq in that
//! session expires it (the person moved on; the bot may ask again). Events
//! — including the decision event below — do not change the epoch.
//!
//! **Wake-up.** A decision is written together with the admission of a
//! trusted `Event { origin: "approval" }` into the approval's session, in
//! one transaction: the bot learns the outcome in a new turn, and a
//! decision never lands without its event (or the reverse). The event has
//! [`Priority::Bot`]: it runs before background work but does not interrupt
//! a running turn (an approval unblocks work; it does not change the
//! person's direction) and it does not oblige the turn to deliver a reply
//! (the texts ask the bot to report, but a routine may stay silent).

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmitRequest;
use botfleet_memory::ApprovalDecision;
use botfleet_memory::ApprovalId;
use botfleet_memory::ApprovalRecord;
use botfleet_memory::ApprovalStatus;
use botfleet_memory::AskedBy;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::ExpiryCause;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::StoreError;
use botfleet_memory::SubagentStatus;
use botfleet_memory::UserId;
use botfleet_memory::WriteLimit;

use crate::error::ActorError;
use crate::prompts::PromptError;
use crate::prompts::prompts;
use crate::runtime::Runtime;

/// Origin of the event that tells a bot about a decision.
pub const APPROVAL_ORIGIN: &str = "approval";

/// Why a decision could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No such approval, or not the user's.
    #[error("no approval {0} for you; list yours with `botfleet approvals` or GET /v1/approvals")]
    NotFound(ApprovalId),
    /// It is no longer pending.
    #[error("approval {id} is already {}; {}", status.as_str(), not_pending_hint(*status, *expired_by))]
    NotPending {
        /// The approval.
        id: ApprovalId,
        /// Its status.
        status: ApprovalStatus,
        /// Why it expired, if it did.
        expired_by: Option<ExpiryCause>,
    },
    /// It was asked in the decider's DM with a bot that now belongs to
    /// another user (its owner changed in fleet.toml): no turn runs there
    /// any more, so its action never runs, and deciding it would record a
    /// decision nobody acts on.
    #[error(
        "approval {id} was asked by bot {bot} in your conversation with it, but {bot} now belongs to another user: it can no longer be decided and its action will not run; ask {bot}'s new owner if it is still needed"
    )]
    OwnerChanged {
        /// The approval.
        id: ApprovalId,
        /// The bot that asked it.
        bot: BotId,
    },
    /// It was asked in its bot's conversation with another bot, and one
    /// of the two now belongs to another user (an owner changed in
    /// fleet.toml): no turn runs there any more (it ends `owner_changed`),
    /// so its action never runs.
    #[error(
        "approval {id} was asked by bot {bot} in its conversation with bot {peer}, which now belongs to another user than {bot} does: nothing runs in that conversation any more, so it can no longer be decided and its action will not run"
    )]
    PeerOwnerChanged {
        /// The approval.
        id: ApprovalId,
        /// The bot that asked it.
        bot: BotId,
        /// The bot it was talking with.
        peer: BotId,
    },
    /// It was asked by a subagent that has since finished its task: the
    /// decision gives it work again (a turn over the decision), which
    /// counts against its parent's `runtime.max_subagents` like a new
    /// task, and the parent has that many running.
    #[error(
        "approval {id} was asked by subagent {subagent}, which has finished its task: deciding it runs {subagent} again, and its parent {parent} already has {} (runtime.max_subagents is {max}); decide it once one of them finishes (it stays pending until it expires), or stop one", crate::tools::running_subagents(*running)
    )]
    SubagentLimit {
        /// The approval.
        id: ApprovalId,
        /// The subagent that asked it.
        subagent: BotId,
        /// Its parent.
        parent: BotId,
        /// How many of the parent's subagents run.
        running: usize,
        /// `runtime.max_subagents`.
        max: usize,
    },
    /// A prompt did not render (a bug in prompts/).
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The runtime failed (router gone while admitting the event).
    #[error(transparent)]
    Actor(#[from] ActorError),
}

fn not_pending_hint(status: ApprovalStatus, expired_by: Option<ExpiryCause>) -> &'static str {
    match (status, expired_by) {
        (ApprovalStatus::Expired, Some(ExpiryCause::UserMessage)) => {
            "a newer message was sent in its conversation first; the bot will ask again if it still needs to"
        }
        (ApprovalStatus::Expired, Some(ExpiryCause::Ttl) | None) => {
            "nobody decided within its time to live; the bot will ask again if it still needs to"
        }
        (ApprovalStatus::Expired, Some(ExpiryCause::SubagentStopped)) => {
            "the subagent that asked it was stopped by its parent and takes no more work, so its \
             action can no longer run; ask the parent for a new task if it is still needed"
        }
        (ApprovalStatus::Expired, Some(ExpiryCause::OwnerChanged)) => {
            "the subagent that asked it was working on a task from its parent's former owner, \
             and fleet.toml has since given the parent to a new owner: that task ended without \
             running, so its action can no longer run; ask the parent for a new task if it is \
             still needed"
        }
        (ApprovalStatus::Pending, _) => "try again",
        (ApprovalStatus::Approved | ApprovalStatus::Denied, _) => "a decision is final",
    }
}

/// What the decision's event continues of the turn that asked for an
/// approval ([`asking_origin`]).
#[derive(Debug, Default)]
struct AskingOrigin {
    hop: Option<u32>,
    chain: Option<botfleet_memory::ChainOrigin>,
    /// The question of the conversation's other bot the turn worked on.
    asked: Option<AskedBy>,
}

/// The hop and chain of the turn that asked for `record`, which its
/// decision's event continues: as a new origin at hop 0, the decision
/// gave a chain between bots its budgets again (`runtime.max_hops`,
/// `runtime.max_chain_messages`), and a cut-off of the chain was told to
/// nobody, the person's DM not being its origin (QA, 2026-12-05). None
/// (an origin of its own, as before) when the turn or its inputs are not
/// at hand.
///
/// In a conversation with another bot (`session`), also the newest
/// question of that bot among the turn's inputs: the turn the decision
/// wakes has none of them, and its answer went where that bot's newest
/// message in the conversation asked replies to go, sent from another of
/// its conversations meanwhile (QA: a routine's question took the answer
/// to the person's request, who never got it).
async fn asking_origin(
    rt: &Runtime,
    record: &ApprovalRecord,
    session: &SessionRecord,
) -> Result<AskingOrigin, ApprovalError> {
    let Some(turn) = record.turn else {
        return Ok(AskingOrigin::default());
    };
    let Some(asked) = rt.store.get_turn(turn).await? else {
        return Ok(AskingOrigin::default());
    };
    // (a turn's inputs are gids)
    let mut inputs = Vec::with_capacity(asked.inputs.len());
    for &gid in &asked.inputs {
        let found = rt.store.entries_after_gid(gid - 1, 1).await?;
        inputs.extend(found.into_iter().filter(|e| e.gid == gid));
    }
    let question = (session.key.kind == SessionKind::Agent)
        .then(|| {
            inputs
                .iter()
                .filter_map(|e| match &e.kind {
                    EntryKind::AgentMessage {
                        from,
                        reply_session,
                        answers: false,
                        ..
                    } if from.as_str() == session.key.peer => Some(AskedBy {
                        bot: from.clone(),
                        session: reply_session.unwrap_or_else(|| {
                            SessionKey {
                                bot: from.clone(),
                                kind: SessionKind::Agent,
                                peer: session.key.bot.to_string(),
                            }
                            .id()
                        }),
                        at: e.created_at,
                    }),
                    _ => None,
                })
                .max_by_key(|a| a.at)
        })
        .flatten();
    Ok(match crate::engine::origin_of(&inputs) {
        (hop, Some(chain)) => AskingOrigin {
            hop: Some(hop),
            chain: Some(chain),
            asked: question,
        },
        (_, None) => AskingOrigin {
            asked: question,
            ..AskingOrigin::default()
        },
    })
}

/// Minutes of a TTL, for texts.
pub(crate) fn minutes(ms: i64) -> String {
    ((ms + 59_999) / 60_000).max(1).to_string()
}

/// Records `user`'s decision on approval `id` and wakes its bot with an
/// `approval` event in the approval's session, in one transaction.
/// Returns the decided approval.
pub async fn decide(
    rt: &Runtime,
    user: &UserId,
    id: ApprovalId,
    decision: ApprovalDecision,
) -> Result<ApprovalRecord, ApprovalError> {
    let record = match rt.store.approval(id).await? {
        Some(r) if r.owner == *user => r,
        _ => return Err(ApprovalError::NotFound(id)),
    };
    if !record.is_pending() {
        return Err(ApprovalError::NotPending {
            id,
            status: record.status,
            expired_by: record.expired_by,
        });
    }
    let session = rt
        .store
        .get_session(record.session)
        .await?
        .ok_or(ApprovalError::NotFound(id))?;
    let bot = rt.store.get_bot(&record.bot).await?;
    if session.key.kind == SessionKind::Dm
        && let Some(bot) = &bot
        && session.key.is_former_owners_dm(&bot.owner)
    {
        // the DM's person no longer owns the bot: the decision's event
        // would start no turn there (`Runner::former_owners_dm`)
        return Err(ApprovalError::OwnerChanged {
            id,
            bot: record.bot,
        });
    }
    if let Some(bot) = &bot
        && let Some(peer) = other_owners_peer(&rt.store, &session, bot).await?
    {
        // the conversation's turns end `owner_changed`: the decision would
        // be read by none (QA: approving answered 200, and nothing ran)
        return Err(ApprovalError::PeerOwnerChanged {
            id,
            bot: record.bot,
            peer,
        });
    }
    let p = prompts();
    let ttl = minutes(rt.settings.review.approval_ttl.as_millis() as i64);
    let id_text = id.to_string();
    // a tool taken out of the bot's `tools` while the approval waited:
    // the repeat would be refused (`there is no tool …`), so the bot is
    // not asked to make it
    let tool_gone = bot
        .as_ref()
        .is_some_and(|b| !b.tools.contains(&record.tool));
    // outside a DM, SendMessage answers whoever the conversation is with
    // (a subagent's parent, another bot): the event does not tell the bot
    // to tell the owner with it (it did, and a subagent's SendMessage
    // reaches its parent)
    let in_dm = session.key.kind == SessionKind::Dm;
    let (approved, approved_tool_gone, denied) = if in_dm {
        (
            &p.approval_approved,
            &p.approval_approved_tool_gone,
            &p.approval_denied,
        )
    } else {
        (
            &p.approval_approved_elsewhere,
            &p.approval_approved_tool_gone_elsewhere,
            &p.approval_denied_elsewhere,
        )
    };
    let text = match decision {
        ApprovalDecision::Approve if tool_gone => approved_tool_gone.render(&[
            ("owner", user.as_str()),
            ("id", &id_text),
            ("summary", &record.summary),
            ("tool", &record.tool),
        ])?,
        ApprovalDecision::Approve => approved.render(&[
            ("owner", user.as_str()),
            ("id", &id_text),
            ("summary", &record.summary),
            ("tool", &record.tool),
            ("ttl_minutes", &ttl),
        ])?,
        ApprovalDecision::Deny => denied.render(&[
            ("owner", user.as_str()),
            ("id", &id_text),
            ("summary", &record.summary),
            ("reason", &record.reason),
        ])?,
    };
    let word = match decision {
        ApprovalDecision::Approve => "approve",
        ApprovalDecision::Deny => "deny",
    };
    let AskingOrigin { hop, chain, asked } = asking_origin(rt, &record, &session).await?;
    let event = AdmitRequest {
        source: format!("approval:{id}"),
        nonce: word.to_owned(),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([
            b"approval".as_slice(),
            id_text.as_bytes(),
            word.as_bytes(),
        ]),
        session: session.key.clone(),
        owner: session.owner.clone(),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: session.id,
            author: user.to_string(),
            turn: None,
            kind: EntryKind::Event {
                origin: APPROVAL_ORIGIN.to_owned(),
                text,
                trusted: true,
                hop,
                chain,
                asked,
            },
        },
        priority: Priority::Bot,
    };
    let mut before = vec![Mutation::DecideApproval {
        id,
        decision,
        by: user.clone(),
    }];
    // a finished subagent the decision runs again: an approval counted
    // against its parent's limit by the writer, as the decision commits; a
    // denial is never held up by it (the safe choice always goes through:
    // QA, a deny was refused while the parent ran its most subagents), its
    // short run to hear it may be one over
    let rerun = finished_subagent(rt, &record, bot.as_ref(), session.key.kind).await?;
    if rerun.is_some() {
        before.push(Mutation::SetSubagentStatus {
            id: record.bot.clone(),
            status: SubagentStatus::Running,
            result: None,
        });
    }
    let bound = rerun
        .as_ref()
        .filter(|_| decision == ApprovalDecision::Approve)
        .map(|(parent, max)| WriteLimit::RunningSubagents {
            parent: parent.clone(),
            subagent: record.bot.clone(),
            max: *max,
        });
    let (results, outcome) = match rt.admit_after_within(before, event, bound).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            // its parent has as many running as it may (only a bounded
            // decision is refused so)
            let Some((parent, max)) = rerun else {
                return Err(ApprovalError::NotFound(id));
            };
            let running = rt.store.running_subagents_of(&parent).await?.len();
            return Err(ApprovalError::SubagentLimit {
                id,
                subagent: record.bot.clone(),
                parent,
                running,
                max,
            });
        }
        Err(ActorError::Store(StoreError::Rejected(_) | StoreError::NotFound { .. })) => {
            // it changed between the read and the write: report its state now
            let now = rt
                .store
                .approval(id)
                .await?
                .ok_or(ApprovalError::NotFound(id))?;
            return Err(ApprovalError::NotPending {
                id,
                status: now.status,
                expired_by: now.expired_by,
            });
        }
        Err(e) => return Err(e.into()),
    };
    if !matches!(outcome, AdmitOutcome::Accepted(_)) {
        tracing::warn!(%id, ?outcome, "approval event was not accepted");
    }
    match results.into_iter().next() {
        Some(MutationResult::ApprovalChanged(r)) => Ok(*r),
        _ => rt
            .store
            .approval(id)
            .await?
            .ok_or(ApprovalError::NotFound(id)),
    }
}

/// The parent and its `runtime.max_subagents` of the subagent that asked
/// `record` in its task and has finished it since (its Shell call was
/// refused "pending", it reported what it had), if so: the decision's
/// event runs it again, so it is `running` again, as a retry or a
/// MessageSubagent makes it, and counts against that limit. (QA,
/// 2026-12-05: it ran while CheckSubagent, the bot list and its session
/// said `done`, and a parent at the limit had one more running.)
async fn finished_subagent(
    rt: &Runtime,
    record: &ApprovalRecord,
    bot: Option<&BotRecord>,
    kind: SessionKind,
) -> Result<Option<(BotId, usize)>, ApprovalError> {
    if kind != SessionKind::Subagent {
        // a person's DM with the subagent: no task runs there
        return Ok(None);
    }
    let Some(parent) = bot
        .and_then(|b| b.origin.strip_prefix("subagent:"))
        .and_then(|p| BotId::new(p).ok())
    else {
        return Ok(None);
    };
    let Some(sub) = rt.store.subagent_of(&parent, record.bot.as_str()).await? else {
        return Ok(None);
    };
    // running: counted already; stopped: its approvals are expired
    Ok(
        matches!(sub.status, SubagentStatus::Done | SubagentStatus::Failed)
            .then(|| (parent, rt.settings.max_subagents)),
    )
}

/// Why an approval's action cannot run as things stand, for the person
/// who decides it, or `None` when nothing stands in its way: its bot is no
/// longer in the fleet's config (it runs no turns, so it neither reads a
/// decision nor repeats the call until a config lists it again), or the
/// approved call's tool is no longer among the bot's tools (the repeat
/// would be refused). Said only of a pending approval or an approved one
/// not used yet: the others cannot run anyway, and one whose action ran
/// (`consumed_at`) has nothing left to run. A stopped subagent's open
/// approvals read `expired` (`subagent_stopped`), and so do those of a
/// subagent whose task came from its parent's former owner
/// (`owner_changed`), so nothing is said of them here. A subagent's tools
/// are only ever cut (`fleet_derived.rs`): for a tool it lost, the advice
/// is a new task of its parent, never to give the tool back.
/// `bot` is the approval's bot as the store has it now.
pub fn obstacle(record: &ApprovalRecord, bot: &BotRecord) -> Option<String> {
    match record.status {
        ApprovalStatus::Pending => {}
        ApprovalStatus::Approved if record.consumed_at.is_none() => {}
        ApprovalStatus::Approved | ApprovalStatus::Denied | ApprovalStatus::Expired => {
            return None;
        }
    }
    let bot_id = &record.bot;
    // a subagent is in no config of its own: its parent's table lists it
    let parent = bot.origin.strip_prefix("subagent:");
    let table = parent.map_or_else(|| bot_id.to_string(), str::to_owned);
    if bot.removed_at().is_some() && bot.made_by_agent() {
        // made by CreateAgent: no config lists it, it does not come back
        return Some(format!(
            "bot {bot_id} was removed by its owner: it runs no more turns, so it will not read \
             the decision on this approval or run its action; if the action is still needed, \
             ask another of your bots"
        ));
    }
    if bot.removed_at().is_some() {
        let listed = match parent {
            Some(parent) => format!(
                "subagent {bot_id} was removed with its parent {parent}, which is no longer in \
                 the fleet's config"
            ),
            None => format!("bot {bot_id} is no longer in the fleet's config"),
        };
        return Some(format!(
            "{listed}: it runs no turns, so it will not read the decision on this approval \
             or run its action; list {table} in fleet.toml again and restart the host before \
             the approval expires if the action is still needed"
        ));
    }
    if asked_of_a_former_owner(record, bot) {
        // asked in the DM of a person who no longer owns the bot: deciding
        // it answers `409` (`ApprovalError::OwnerChanged`); it showed as
        // decidable until then (QA)
        return Some(format!(
            "bot {bot_id} now belongs to another user: nothing runs in your conversation with \
             it any more, so this approval can no longer be decided and its action will not \
             run; ask {bot_id}'s new owner if it is still needed"
        ));
    }
    if !bot.tools.contains(&record.tool) {
        let tool = &record.tool;
        if let Some(parent) = parent {
            return Some(format!(
                "{tool} is no longer among subagent {bot_id}'s tools (a subagent's tools are \
                 only ever cut, never given back), so this action can no longer run; ask \
                 {parent} for a new task if it is still needed"
            ));
        }
        return Some(format!(
            "{tool} is no longer among bot {bot_id}'s tools, so this action can no longer \
             run; add {tool} to the `tools` of {table} in fleet.toml again and restart the \
             host if it is still needed"
        ));
    }
    None
}

/// The other bot of `session` when it is `bot`'s conversation with a bot
/// that now belongs to another user than `bot` does (an owner changed in
/// fleet.toml; a bot messages only bots of its own owner): its turns end
/// `owner_changed` (`Runner::owner_changed` asks this), so an approval
/// asked there can no longer be decided. A peer that names no bot, or no
/// bot any more, has no owner to differ.
pub async fn other_owners_peer(
    store: &botfleet_memory::Store,
    session: &botfleet_memory::SessionRecord,
    bot: &BotRecord,
) -> Result<Option<BotId>, botfleet_memory::StoreError> {
    if session.key.kind != SessionKind::Agent {
        return Ok(None);
    }
    let Ok(peer) = BotId::new(&session.key.peer) else {
        return Ok(None);
    };
    Ok(store
        .get_bot(&peer)
        .await?
        .filter(|p| p.owner != bot.owner)
        .map(|p| p.id))
}

/// Whether approval `record` was asked in the DM of a person who no longer
/// owns `bot`, its bot as the store has it now: deciding it answers `409`
/// (`ApprovalError::OwnerChanged`), so it is not to be decided.
fn asked_of_a_former_owner(record: &ApprovalRecord, bot: &BotRecord) -> bool {
    let former_owners_dm = botfleet_memory::SessionKey {
        bot: record.bot.clone(),
        kind: SessionKind::Dm,
        peer: record.owner.to_string(),
    }
    .id()
        == record.session;
    former_owners_dm && record.owner != bot.owner
}

/// What an approval can still come to, as people are shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// Why its action cannot run as things stand ([`obstacle`], or its
    /// conversation ended by an owner change), if it cannot.
    pub cannot_run: Option<String>,
    /// Whether a decision of it is taken: pending, and not asked of a
    /// person who no longer owns the bot nor in a conversation an owner
    /// change ended ([`decide`] answers those `OwnerChanged` and
    /// `PeerOwnerChanged`): what a client offers Approve and Deny for.
    pub decidable: bool,
}

/// The [`Standing`] of approval `record`, whose bot is `bot` as the store
/// has it now (`None`: no record of it). Reads the approval's session
/// only while it is pending.
pub async fn standing(
    store: &botfleet_memory::Store,
    record: &ApprovalRecord,
    bot: Option<&BotRecord>,
) -> Result<Standing, StoreError> {
    let pending = record.status == ApprovalStatus::Pending;
    let Some(bot) = bot else {
        return Ok(Standing {
            cannot_run: None,
            decidable: pending,
        });
    };
    if pending
        && let Some(session) = store.get_session(record.session).await?
        && let Some(peer) = other_owners_peer(store, &session, bot).await?
    {
        // its turns end `owner_changed` (QA: it was listed as decidable,
        // and approving it ran nothing)
        return Ok(Standing {
            cannot_run: Some(format!(
                "it was asked in {}'s conversation with bot {peer}, which now belongs to another \
                 user: nothing runs in that conversation any more, so this approval can no \
                 longer be decided and its action will not run",
                record.bot
            )),
            decidable: false,
        });
    }
    let cannot_run = match obstacle(record, bot) {
        None if pending || record.is_usable() => paused_past_use(store, record, bot).await?,
        other => other,
    };
    Ok(Standing {
        cannot_run,
        decidable: pending && !asked_of_a_former_owner(record, bot),
    })
}

/// Why approval `record` (pending, or approved and not used) cannot run
/// because its bot is paused by its daily token budget until after the
/// approval's use would end: the end of its window of use (for a pending
/// one, as if approved now, a window as long as its wait for a decision).
/// A paused bot runs no turn, so it does not repeat the call in time (QA:
/// approving answered "runs only if the bot repeats this exact call by
/// 03:26" of a bot paused until midnight, and `cannot_run` was null).
async fn paused_past_use(
    store: &botfleet_memory::Store,
    record: &ApprovalRecord,
    bot: &BotRecord,
) -> Result<Option<String>, StoreError> {
    let Some(until) = crate::engine::stored_budget_pause(store, bot).await? else {
        return Ok(None);
    };
    let use_ends = if record.status == ApprovalStatus::Pending {
        let window = (record.expires_at - record.created_at).max(1);
        store.clock().now_ms().saturating_add(window)
    } else {
        record.expires_at
    };
    if until < use_ends {
        return Ok(None);
    }
    let at = |ms: i64| {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
            .unwrap_or_default()
            .format("%Y-%m-%d %H:%M UTC")
            .to_string()
    };
    let budget_of = match bot.origin.strip_prefix("subagent:") {
        Some(parent) => format!("its parent {parent}'s"),
        None => "its".to_owned(),
    };
    Ok(Some(format!(
        "bot {} is paused by {budget_of} daily token budget until {}, and the approved \
         action may run only until {}: it runs no turn before then, so it will not repeat \
         the call in time; raise `daily_token_budget` in fleet.toml and restart the host if \
         the action is still needed",
        record.bot,
        at(until),
        at(use_ends)
    )))
}

/// Writes the expiry of `owner`'s approvals that expired since they were
/// last written (TTL passed, a newer user message, or approved and left
/// unused past its window), with a card each, so the cards in their
/// sessions say what every read already reports.
///
/// **One truth.** An approval's state is computed at every read from its
/// stored times (`ApprovalRecord::effective`): the listings, the CLI
/// (through them) and the gate agree whether or not this ran. It only
/// brings the cards up to date, and every approvals route of the API
/// calls it before it reads, so no listing leaves a card behind another.
/// Writes only if something expired. Returns how many did.
pub async fn write_expiries(rt: &Runtime, owner: &UserId) -> Result<usize, StoreError> {
    let bots = rt.store.bots_with_unwritten_expiry(owner).await?;
    if bots.is_empty() {
        return Ok(0);
    }
    let writes = bots
        .into_iter()
        .map(|bot| Mutation::ExpireApprovals { bot: Some(bot) })
        .collect();
    Ok(rt
        .store
        .write(writes)
        .await?
        .into_iter()
        // each `ExpireApprovals` answers `Count`
        .map(|r| {
            if let MutationResult::Count(n) = r {
                n
            } else {
                0
            }
        })
        .sum())
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
