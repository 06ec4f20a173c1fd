//! The gate: what stands between a model's tool call and its effect.
//!
//! ```text
//! surface → review → approval → locks → run
//! ```
//!
//! 1. **surface** — may this runner use this tool with these arguments
//!    ([`surface::check_call`])? A tool that is not shown is refused here
//!    too. Refused → [`GateDecision::Refuse`].
//! 2. **review** — does the call fall on a review surface whose mode is not
//!    `off` ([`review_surface`])? Then the exact action is built (canonical
//!    arguments; for Shell, the scripts it would run, read now and hashed),
//!    the rules decide, and the reviewer model (if configured) may make it
//!    stricter. `shadow` logs the decision and goes on as if allowed;
//!    `enforce` keeps it. Anything not allowed is logged to the review log.
//!    `deny` → [`GateDecision::Refuse`] (not offered for approval). Writes
//!    in the bot's notes area are not reviewed, except files that run
//!    later (a repository's `.git/`, CI pipelines, shell start-up files).
//! 3. **approval** — only for side effects ([`is_side_effect`]): an `ask`
//!    whose exact action (same fingerprint, same script hashes) was
//!    approved runs, and the caller uses the approval up with what the
//!    call does (a call stopped before it started leaves it usable); one
//!    already used for the same request is refused as already run;
//!    otherwise the `ask` becomes a
//!    pending approval → [`GateDecision::AwaitApproval`] (a fifth pending
//!    one is refused). An allowed side effect while an approval of the bot
//!    is pending is refused: nothing new starts while a person is deciding.
//!    Reads never wait.
//! 4. **locks** — Read takes a read lock on its path, Write/Edit a write
//!    lock; Shell, which may touch any file, takes the workspace's exclusive
//!    lock. Waiting ends if the turn is cancelled or a person's new message
//!    interrupts it: the call has not started, so it does not start →
//!    [`GateDecision::Stopped`] (the caller records it as not run).
//!    A reviewed Shell call then reads its scripts again, holding the
//!    exclusive lock: if one changed while the call waited (another bot's
//!    command rewrote it), the locks are let go and the call goes back to
//!    step 2 — the changed script is reviewed, and an approval of the old
//!    one (another fingerprint) does not cover it. After `MAX_REVIEWS`
//!    passes it is refused.
//! 5. **run** — [`GateDecision::Run`]: the caller runs the tool holding the
//!    guards and drops them when it finishes; with `approval`, it commits
//!    [`Mutation::ConsumeApproval`] with the call's start record for a
//!    tool with an external effect (and does not run the call if that is
//!    refused: used or expired meanwhile), or with the call's outcome and
//!    store effects for the others (refused: none of them is written, and
//!    the refusal is the call's result).
//!
//! Every check fails closed: a store error refuses the call with a
//! retryable message.

use std::path::Path;
use std::path::PathBuf;

use botfleet_memory::ApprovalId;
use botfleet_memory::ApprovalRecord;
use botfleet_memory::ApprovalRequestOutcome;
use botfleet_memory::ApprovalStatus;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewApproval;
use botfleet_memory::SessionKind;
use serde_json::Value;

use super::Effect;
use super::Runner;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::surface;
use super::surface::SurfacePolicy;
use super::surface::ToolKind;
use crate::prompts::prompts;
use crate::safety::Action;
use crate::safety::ExclusiveGuard;
use crate::safety::LockMode;
use crate::safety::PathGuard;
use crate::safety::ReviewConfig;
use crate::safety::ReviewDecision;
use crate::safety::ReviewMode;
use crate::safety::ReviewSurface;
use crate::safety::approvals::minutes;
use crate::safety::review_rules;

#[path = "gate_review.rs"]
mod review;

use review::action_unchanged;
use review::build_action;
use review::denied;
use review::in_notes_area;
use review::log_review;
use review::reads_credentials;
use review::review;

/// Most times a Shell call is reviewed because its scripts changed while
/// it waited for the workspace; then it is refused.
const MAX_REVIEWS: usize = 3;

/// What the gate needs that lives as long as the fleet: the surface
/// policy. The file locks are each owner's workspace's
/// ([`crate::tools::Workspace::locks`]); the review settings are in
/// [`crate::FleetSettings::review`]; approvals are in the store.
#[derive(Debug, Clone, Default)]
pub struct Safety {
    /// Fleet policy over the tool surfaces.
    pub surfaces: SurfacePolicy,
}

/// Locks held while a call runs; released on drop.
#[derive(Debug)]
#[must_use = "the locks are released when dropped: hold them while the tool runs"]
pub enum LockGuards {
    /// The call takes no lock.
    None,
    /// A lock on the call's path.
    Path(PathGuard),
    /// The workspace's exclusive lock (Shell).
    All(ExclusiveGuard),
}

/// The gate's answer.
#[derive(Debug)]
pub enum GateDecision {
    /// Run the call now, holding `locks` until it has finished.
    Run {
        /// Hold until the tool returns.
        locks: LockGuards,
        /// The approval this run needs: the caller uses it up
        /// ([`Mutation::ConsumeApproval`]) with the call's start record
        /// (an external effect: not run if that is refused) or with its
        /// outcome and store effects (none written if it is refused).
        approval: Option<ApprovalId>,
    },
    /// Do not run: this is the call's (error) result.
    Refuse(ToolError),
    /// Do not run: a person must decide first. `message` is the call's
    /// result for the model (record it like an error: nothing happened).
    AwaitApproval {
        /// The pending approval.
        approval: ApprovalId,
        /// What the model is told.
        message: String,
    },
    /// Do not run: the turn stopped before the call could start (while it
    /// waited for its lock, say). Record it as not run, like the calls
    /// after it; the turn ends at its next safe point.
    Stopped(TurnStop),
}

/// Why a turn stopped a call that had not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStop {
    /// A person's new message interrupted the turn.
    Interrupted,
    /// The turn was cancelled for good.
    Cancelled,
}

/// The orchestrator; see the module docs for the sequence.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gate;

impl Gate {
    /// The gate's first step alone: whether this runner may use the tool
    /// `name` with `args` at all ([`surface::check_call`]). Asked before a
    /// tool's own checks of its arguments too ([`Tool::precheck`]): a
    /// webhook's turn calling Shell with an absolute path was told to use
    /// paths inside the workspace, and only when it did, that Shell is
    /// not for it (QA).
    pub fn surface(ctx: &ToolContext<'_>, name: &str, args: &Value) -> Result<(), ToolError> {
        surface::check_call(
            ctx.scope.runner,
            &ctx.bot.tools,
            name,
            args,
            &ctx.rt.safety.surfaces,
        )
    }

    /// Decides whether `tool` may run with `args` in this call's turn, and
    /// takes its locks. Call it before running any tool call (after the
    /// arguments parsed as JSON); run only on [`GateDecision::Run`].
    /// `name` is the tool's name (its spec's, as registered).
    pub async fn check(
        ctx: &ToolContext<'_>,
        name: &str,
        tool: &dyn Tool,
        args: &Value,
    ) -> GateDecision {
        let rt = ctx.rt;
        let runner = ctx.scope.runner;
        // 1. surface
        if let Err(e) = surface::check_call(runner, &ctx.bot.tools, name, args, &rt.safety.surfaces)
        {
            return GateDecision::Refuse(e);
        }
        let kind = effective_kind(ctx, name);
        for _ in 0..MAX_REVIEWS {
            let (decision, action) = review_to_locks(ctx, name, tool, args, kind).await;
            let recheck = matches!(decision, GateDecision::Run { .. })
                && action.as_ref().is_some_and(|a| {
                    matches!(a.surface, ReviewSurface::Shell | ReviewSurface::FileWrite)
                });
            if !recheck {
                return decision;
            }
            if let Some(action) = &action
                && action_unchanged(ctx, args, action).await
            {
                return decision;
            }
            // let go of the workspace before reviewing again
            drop(decision);
            tracing::info!(
                bot = %ctx.bot.id,
                call = ctx.call_id,
                "what the call runs or writes (a script, a link on its path or its cwd) changed while it waited for the workspace: reviewing it again"
            );
        }
        GateDecision::Refuse(ToolError::new(
            format!(
                "not run: what this call runs or writes (the scripts it runs, or where a link on its path or its cwd leads) changed each time it waited for the workspace ({MAX_REVIEWS} times), so what would run was never reviewed"
            ),
            "try again once the other commands changing those files have finished",
        ))
    }
}

/// Steps 2 to 4 (review, approval, locks), with the action review built
/// (none when the call is not reviewed).
async fn review_to_locks(
    ctx: &ToolContext<'_>,
    name: &str,
    tool: &dyn Tool,
    args: &Value,
    kind: ToolKind,
) -> (GateDecision, Option<Action>) {
    let runner = ctx.scope.runner;
    let config = &ctx.rt.settings.review;
    let reviewed = review_surface(
        kind,
        runner,
        || in_notes_area(ctx, args),
        || reads_credentials(ctx, args).is_some(),
    )
    .filter(|s| config.modes.get(*s) != ReviewMode::Off);
    let enforced = reviewed.filter(|s| config.modes.get(*s) == ReviewMode::Enforce);
    // 2. review
    let mut decision = ReviewDecision::Allow;
    let mut action = None;
    if let Some(surface) = reviewed {
        let built = build_action(ctx, name, surface, args).await;
        let mode = config.modes.get(surface);
        // (a message is never asked about for approval: nothing to find)
        let reviewed_decision =
            if kind != ToolKind::Delivery && approved_here(ctx, &built, config).await {
                // a person approved this exact action in this conversation:
                // the approval decides (step 3), not another look by the
                // reviewer model, which may answer otherwise the second time
                // (QA, 2026-12-05: an approved action was refused on its
                // re-run by the model's "deny", its approval left unused)
                ReviewDecision::Ask {
                    reason: "a person approved this exact action".into(),
                }
            } else {
                let reviewed = review(ctx, &built, config).await;
                if reviewed != ReviewDecision::Allow {
                    log_review(ctx, &built, mode, &reviewed).await;
                }
                reviewed
            };
        if mode == ReviewMode::Enforce {
            decision = reviewed_decision;
        }
        action = Some(built);
    }
    if let ReviewDecision::Deny { reason } = &decision {
        return (GateDecision::Refuse(denied(ctx, reason)), action);
    }
    if let ReviewDecision::Ask { reason } = &decision
        && kind == ToolKind::Delivery
        && matches!(runner, Runner::GroupMember { .. })
    {
        // a room's message waiting for a person's approval could never
        // be published: the discussion does not wait, and a later turn
        // speaks out of its order (what it sends is held)
        let refusal = ToolError::new(
            format!(
                "not published: auto-review wants a person to approve this message ({reason}), \
                 and a room discussion does not wait for approvals"
            ),
            "say it without that, or leave it to a private conversation with your owner",
        );
        return (GateDecision::Refuse(refusal), action);
    }
    // 3. approval. Not for SendMessage: the bot's own messages to its
    // people go on while a person decides (one that review would ask
    // about was refused above), also in a shared room, where review
    // looks at them
    let mut approval = None;
    if kind != ToolKind::Delivery
        && is_side_effect(tool.effect(), tool.mutates(), enforced.is_some())
    {
        match approval_stage(ctx, action.as_ref(), &decision).await {
            Ok(Stage::Proceed(a)) => approval = a,
            Ok(Stage::Stop(d)) => return (d, action),
            Err(e) => return (GateDecision::Refuse(e), action),
        }
    }
    // 4. locks
    (
        run_with_locks(ctx, kind, name, args, approval).await,
        action,
    )
}

impl Gate {
    /// Whether a call falls on a review surface that is not `off` (then
    /// [`Gate::check`] may read files, write to the store and wait for a
    /// person). A call that is not reviewed and has no external effect
    /// passes the gate without I/O.
    pub fn reviewed(ctx: &ToolContext<'_>, tool: &str, args: &Value) -> bool {
        let modes = &ctx.rt.settings.review.modes;
        review_surface(
            effective_kind(ctx, tool),
            ctx.scope.runner,
            || in_notes_area(ctx, args),
            || reads_credentials(ctx, args).is_some(),
        )
        .is_some_and(|s| modes.get(s) != ReviewMode::Off)
    }

    /// Whether review lets a call through on its rules alone: the call is
    /// on no review surface that is not `off`, or the rules allow its
    /// exact action and no reviewer model is configured (one would be
    /// asked too). Reads what review reads and writes nothing: a call
    /// that passes may run before its step is recorded, since
    /// [`Gate::check`] will neither ask a person about it nor log a
    /// review of it (the rules decide the same action the same way).
    pub async fn passes_review_rules(ctx: &ToolContext<'_>, name: &str, args: &Value) -> bool {
        let config = &ctx.rt.settings.review;
        let surface = review_surface(
            effective_kind(ctx, name),
            ctx.scope.runner,
            || in_notes_area(ctx, args),
            || reads_credentials(ctx, args).is_some(),
        )
        .filter(|s| config.modes.get(*s) != ReviewMode::Off);
        let Some(surface) = surface else {
            return true;
        };
        if config.reviewer.is_some() {
            return false;
        }
        let action = build_action(ctx, name, surface, args).await;
        review(ctx, &action, config).await == ReviewDecision::Allow
    }
}

/// The kind of a call as the gate treats it: SendMessage in a bot-to-bot
/// conversation hands its text to the other bot, as SendToAgent does, so
/// it is reviewed and asked about the same way (a SendToAgent that review
/// asked about or denied could otherwise be made as a reply).
fn effective_kind(ctx: &ToolContext<'_>, name: &str) -> ToolKind {
    match ToolKind::of(name) {
        ToolKind::Delivery if ctx.scope.session.key.kind == SessionKind::Agent => {
            ToolKind::AgentMessage
        }
        other => other,
    }
}

/// Steps 4 and 5: the call's locks, then run. A turn cancelled by then
/// does not run what it was waiting to run.
async fn run_with_locks(
    ctx: &ToolContext<'_>,
    kind: ToolKind,
    name: &str,
    args: &Value,
    approval: Option<ApprovalId>,
) -> GateDecision {
    match take_locks(ctx, kind, name, args).await {
        Ok(_) if ctx.cancel.is_cancelled() => GateDecision::Stopped(TurnStop::Cancelled),
        Ok(locks) => GateDecision::Run { locks, approval },
        Err(stop) => GateDecision::Stopped(stop),
    }
}

/// The review surface of a call, if it has one: the kind of tool, who
/// runs it, and (for Write/Edit) whether it stays in the bot's notes area.
pub fn review_surface(
    kind: ToolKind,
    runner: Runner,
    in_notes_area: impl FnOnce() -> bool,
    reads_credentials: impl FnOnce() -> bool,
) -> Option<ReviewSurface> {
    match kind {
        // the same read as `cat .env` in Shell, reviewed as that is (QA,
        // 2026-12-05: Read returned a private key that Shell asked about)
        ToolKind::FileRead if reads_credentials() => Some(ReviewSurface::Shell),
        ToolKind::Shell => Some(ReviewSurface::Shell),
        ToolKind::FileWrite => (!in_notes_area()).then_some(ReviewSurface::FileWrite),
        ToolKind::Extension => Some(ReviewSurface::Extension),
        ToolKind::SubagentLaunch => Some(ReviewSurface::SubagentLaunch),
        ToolKind::AgentMessage => Some(ReviewSurface::Delivery),
        ToolKind::Delivery => matches!(runner, Runner::GroupMember { shared: true })
            .then_some(ReviewSurface::Delivery),
        ToolKind::AgentAdmin => Some(ReviewSurface::Automation),
        ToolKind::Reaction
        | ToolKind::FileRead
        | ToolKind::SubagentControl
        | ToolKind::Recall
        | ToolKind::MemoryWrite => None,
    }
}

/// Whether a call starts a side effect that must wait while an approval
/// is pending: it is on an enforced review surface, or it changes
/// something outside the store. Reads, and the bot's own messages to its
/// people, never wait.
pub fn is_side_effect(effect: Effect, mutates: bool, enforced_surface: bool) -> bool {
    enforced_surface || (effect == Effect::External && mutates)
}

fn store_failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(
        format!("the safety check could not run ({e}); nothing ran"),
        "try the call again in a moment",
    )
}

enum Stage {
    Proceed(Option<ApprovalId>),
    Stop(GateDecision),
}

/// Step 3 for a side effect: use a matching approval, ask, or wait.
/// Whether a reviewer model is configured and a person's approval of
/// `action` in this conversation waits to be used: then the model is not
/// asked again (its rules still apply: [`review`] is skipped only when
/// they would let the model decide). A failed read counts as none.
async fn approved_here(ctx: &ToolContext<'_>, action: &Action, config: &ReviewConfig) -> bool {
    if config.reviewer.is_none() || review_rules(action, config) != ReviewDecision::Allow {
        return false;
    }
    let Ok(open) = ctx.store().open_approvals(&ctx.bot.id).await else {
        return false;
    };
    let fingerprint = action.fingerprint();
    let session = ctx.session();
    open.iter()
        .any(|a| a.is_usable() && a.fingerprint == fingerprint && a.session == session)
}

async fn approval_stage(
    ctx: &ToolContext<'_>,
    action: Option<&Action>,
    decision: &ReviewDecision,
) -> Result<Stage, ToolError> {
    let store = ctx.store();
    let open = store
        .open_approvals(&ctx.bot.id)
        .await
        .map_err(store_failed)?;
    let pending: Vec<&ApprovalRecord> = open.iter().filter(|a| a.is_pending()).collect();
    let (ReviewDecision::Ask { reason }, Some(action)) = (decision, action) else {
        // allowed: it may start unless a person is deciding on something
        return match pending.first() {
            None => Ok(Stage::Proceed(None)),
            Some(p) => Err(waiting(p, pending.len(), ctx)),
        };
    };
    let fingerprint = action.fingerprint();
    // An approval covers the action in the session it was asked in: its
    // owner decided for that conversation, not for the bot's others.
    let session = ctx.session();
    if let Some(approved) = open
        .iter()
        .find(|a| a.is_usable() && a.fingerprint == fingerprint && a.session == session)
    {
        // used up by the caller with what the call does (a call stopped
        // while waiting for its locks did not use it)
        tracing::info!(bot = %ctx.bot.id, approval = %approved.id, "an approved action may run");
        return Ok(Stage::Proceed(Some(approved.id)));
    }
    // Approved, and already used for this request: the bot ran it before
    // it read the decision (a repeat in the turn that asked), and the
    // decision's note, read later, asks for the call again. A new approval
    // of it would look to the person like the one they gave, and run the
    // action twice. An approval is used only with what the call did: a
    // call with an external effect uses it with its start record (which
    // guards the effect), one with only store effects (SendToAgent, Task,
    // UpdateAgent, a reply to a bot) in the commit of its outcome and
    // effects. (Such a call used it a commit before its outcome, so a used
    // approval could not tell that it ran, and it was asked about again: a
    // second card for a message already sent, and approving it sent the
    // message twice.)
    //
    // Denied for this request: asked again, the person saw a second card
    // for what they had just refused. One read finds either.
    if let Some(decided) = store
        .decided_approval(
            &ctx.scope.session.owner,
            session,
            (&fingerprint, &action.tool, &action.summary),
        )
        .await
        .map_err(store_failed)?
    {
        return Err(match decided.status {
            ApprovalStatus::Denied => denied_already(&decided),
            _ => used_already(&decided),
        });
    }
    let config = &ctx.rt.settings.review;
    let new = NewApproval {
        id: ApprovalId::new_v7(),
        bot: ctx.bot.id.clone(),
        session,
        turn: Some(ctx.turn),
        call_id: ctx.call_id.to_owned(),
        tool: action.tool.clone(),
        fingerprint,
        // the summary is made of scrubbed arguments (`build_action`); a
        // rule's reason may quote a word of the command (a reviewer's is
        // scrubbed as it is read)
        summary: action.summary.clone(),
        reason: ctx.secrets.redactor.scrub(reason).into_owned(),
        action: shown(action.details(), &ctx.secrets.redactor),
        ttl_ms: config.approval_ttl.as_millis() as i64,
        max_pending: config.max_pending,
    };
    let outcome = store
        .write(vec![Mutation::RequestApproval(Box::new(new))])
        .await
        .map_err(store_failed)?
        .pop();
    match outcome {
        Some(MutationResult::ApprovalRequested(o)) => match *o {
            ApprovalRequestOutcome::Created(r) | ApprovalRequestOutcome::Existing(r) => {
                // the store reuses an approval only within its session, so
                // this session is the approval's own: in a DM the owner is
                // the person there, their next message expires it, and
                // SendMessage reaches them
                debug_assert_eq!(r.session, session, "an approval of another session");
                let p = prompts();
                let template = match ctx.scope.session.key.kind {
                    SessionKind::Dm => &p.approval_requested,
                    SessionKind::Agent
                    | SessionKind::Group
                    | SessionKind::Routine
                    | SessionKind::Hook
                    | SessionKind::Subagent
                    | SessionKind::Room => &p.approval_requested_elsewhere,
                };
                let message = template
                    .render(&[
                        ("owner", r.owner.as_str()),
                        ("reason", &r.reason),
                        ("id", &r.id.to_string()),
                        (
                            "ttl_minutes",
                            &minutes(r.expires_at - ctx.rt.store.clock().now_ms()),
                        ),
                    ])
                    .unwrap_or_else(|e| e.to_string());
                Ok(Stage::Stop(GateDecision::AwaitApproval {
                    approval: r.id,
                    message,
                }))
            }
            ApprovalRequestOutcome::TooMany { pending } => Err(ToolError::new(
                format!(
                    "not run: this action needs approval ({reason}), but {} approvals of yours are already waiting for a decision (the most allowed)",
                    pending.len()
                ),
                if reaches_owner(ctx) {
                    "wait until your owner decides on them; tell them with SendMessage what is waiting, and do not try another way meanwhile"
                } else {
                    WAIT_ELSEWHERE
                },
            )),
        },
        other => Err(store_failed(format!("unexpected answer {other:?}"))),
    }
}

/// The refusal of a call whose exact action ran with approval `used`
/// ([`botfleet_memory::Store::decided_approval`]): nothing is asked until the
/// approval's window ends or the person writes again.
fn used_already(used: &ApprovalRecord) -> ToolError {
    let owner = used.owner.as_str();
    let message = prompts()
        .approval_used
        .render(&[
            ("ran_at", &utc(used.consumed_at.unwrap_or(used.created_at))),
            ("id", &used.id.to_string()),
            ("owner", owner),
        ])
        .unwrap_or_else(|e| e.to_string());
    ToolError::new(
        message,
        format!(
            "use that result, and report it as you were asked to; the same call asks {owner} \
             for a new approval only after their next message, or from {}",
            utc(used.expires_at)
        ),
    )
}

/// The refusal of a call whose exact action `denied` refused
/// ([`botfleet_memory::Store::decided_approval`]): nothing is asked until
/// the denial's window ends or the person writes again.
fn denied_already(denied: &ApprovalRecord) -> ToolError {
    let owner = denied.owner.as_str();
    let message = prompts()
        .approval_denied_again
        .render(&[
            ("id", &denied.id.to_string()),
            ("owner", owner),
            (
                "denied_at",
                &utc(denied.decided_at.unwrap_or(denied.created_at)),
            ),
        ])
        .unwrap_or_else(|e| e.to_string());
    ToolError::new(
        message,
        format!(
            "do not try it again or another way; tell {owner} with SendMessage that you will not \
             do it, and ask what they would like instead"
        ),
    )
    .or_without(
        "SendMessage",
        "do not try it again or another way; say in your answer that it was denied",
    )
}

/// A time in ms since the epoch as the tools write it.
fn utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// What a bot waiting for approvals may do outside its owner's DM, where
/// SendMessage does not reach the owner: in a conversation with another
/// bot it goes to that bot, and is refused too while an approval waits
/// (QA: told to tell the owner with SendMessage, a bot did, was refused,
/// retried until its turn failed as a loop).
const WAIT_ELSEWHERE: &str = "wait for the decision, which wakes you where the approval was asked: end your turn (you may read and look things up first), and do not try another way meanwhile";

/// Whether SendMessage reaches the bot's owner from this turn's
/// conversation: in their DM, and from a routine's or a webhook's (it
/// goes to their DM); elsewhere it goes to another bot or a room.
fn reaches_owner(ctx: &ToolContext<'_>) -> bool {
    matches!(
        ctx.scope.session.key.kind,
        SessionKind::Dm | SessionKind::Routine | SessionKind::Hook
    )
}

/// The refusal of a side effect while `n` approvals of the bot wait,
/// `first` the oldest. Its action is quoted only to a turn of the person
/// who decides it (the owner of the turn's session): what the bot asked
/// in one person's conversation is not told in another's.
fn waiting(first: &ApprovalRecord, n: usize, ctx: &ToolContext<'_>) -> ToolError {
    let reader = &ctx.scope.session.owner;
    let first_one = if first.owner == *reader {
        format!("{} — {}", first.id, first.summary)
    } else {
        format!("{}, asked in a conversation of another person", first.id)
    };
    ToolError::new(
        format!(
            "not run: {n} approval(s) of yours are waiting for a decision (first: {first_one}), and no new action with side effects starts until they are decided",
        ),
        if reaches_owner(ctx) {
            "wait for the decision; you may read and look things up meanwhile, or tell your owner with SendMessage what is waiting"
        } else {
            WAIT_ELSEWHERE
        },
    )
}

/// Step 4: the lock the call needs, waiting in FIFO order. The wait ends
/// when the turn stops (cancelled, or interrupted by a person's new
/// message); a turn that stopped before does not queue at all.
async fn take_locks(
    ctx: &ToolContext<'_>,
    kind: ToolKind,
    name: &str,
    args: &Value,
) -> Result<LockGuards, TurnStop> {
    // the owner's workspace's: Shell holds only that directory
    let locks = ctx.workspace().locks();
    let holder = format!("{}/{}/{} {name}", ctx.bot.id, ctx.turn, ctx.call_id);
    // an interrupt fires with a cancel too: the cancel, checked first, wins
    let stopped = async {
        ctx.interrupt.cancelled().await;
        if ctx.cancel.is_cancelled() {
            TurnStop::Cancelled
        } else {
            TurnStop::Interrupted
        }
    };
    let mode = match kind {
        ToolKind::FileRead => LockMode::Read,
        ToolKind::FileWrite => LockMode::Write,
        ToolKind::Shell => {
            return tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => Err(TurnStop::Cancelled),
                stop = stopped => Err(stop),
                g = locks.lock_all(&holder) => Ok(LockGuards::All(g)),
            };
        }
        ToolKind::Delivery
        | ToolKind::Reaction
        | ToolKind::AgentMessage
        | ToolKind::AgentAdmin
        | ToolKind::SubagentLaunch
        | ToolKind::SubagentControl
        | ToolKind::Recall
        | ToolKind::MemoryWrite
        | ToolKind::Extension => return Ok(LockGuards::None),
    };
    let Some(path) = lock_path(ctx, args) else {
        return Ok(LockGuards::None);
    };
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(TurnStop::Cancelled),
        stop = stopped => Err(stop),
        g = locks.lock_path(&path, mode, &holder) => Ok(LockGuards::Path(g)),
    }
}

/// The resolved path of a file call (none if it does not resolve: the tool
/// refuses it anyway).
fn lock_path(ctx: &ToolContext<'_>, args: &Value) -> Option<PathBuf> {
    let given = args.get("path").and_then(Value::as_str)?;
    ctx.workspace()
        .resolve(given)
        .ok()
        .filter(|p: &PathBuf| p.starts_with(Path::new(ctx.workspace().root())))
}

/// An action's details as its approval shows them to people: every string
/// (the arguments, the scripts' text) with the bot's secret values
/// scrubbed out, and then each script's text cut
/// ([`crate::safety::shown_script`]: scrubbed first, so a secret the cut
/// goes through is hidden whole; QA). What is approved is the action
/// itself, by its fingerprint; this is only what the card says.
fn shown(mut details: Value, redactor: &crate::safety::Redactor) -> Value {
    fn scrub(v: &mut Value, redactor: &crate::safety::Redactor) {
        match v {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(clean) = redactor.scrub(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, redactor)),
            Value::Object(map) => map.values_mut().for_each(|i| scrub(i, redactor)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    scrub(&mut details, redactor);
    if let Some(scripts) = details.get_mut("scripts").and_then(Value::as_array_mut) {
        for script in scripts {
            if let Some(Value::String(text)) = script.get_mut("text") {
                *text = crate::safety::shown_script(text);
            }
        }
    }
    details
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
