//! The write vocabulary: a batch of mutations is applied atomically.

use serde_json::Value;

use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::TurnId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::NewEntry;
use crate::record::SessionRecord;
use crate::record::TurnStatus;

/// Most secrets one user stores (`PUT /v1/secrets`): each turn of a bot
/// that uses one reads them all, and every command's output is searched
/// for each. Checked by the writer as it writes ([`Mutation::SetSecret`]),
/// so concurrent writes of new names cannot pass it.
pub const MAX_SECRETS_PER_USER: usize = 256;

/// One change to the store. A `Vec<Mutation>` submitted together commits
/// together or not at all.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Create or replace a bot (the fleet's config sync, UpdateAgent, a
    /// subagent's bot).
    UpsertBot(BotRecord),
    /// Create a bot that does not exist yet. Fails with
    /// [`StoreError::Taken`](crate::StoreError::Taken), rolling back its
    /// batch, when any bot (of any owner) holds the id: of two creations
    /// of one id, only the first committed creates it.
    CreateBot(BotRecord),
    /// Create a session if it does not exist (its record is left unchanged
    /// if it does).
    EnsureSession(SessionRecord),
    /// Admit an input through the idempotency ledger: on `accepted`, the
    /// ledger row, the session, the transcript entry and the inbox row are
    /// written together.
    Admit(Box<AdmitRequest>),
    /// Append an entry to an existing session (gets the next seq).
    Append(Box<NewEntry>),
    /// Append `notice`, about the chain of bots `origin` started being cut
    /// off, unless one was appended for that chain before: its person is
    /// told once however many of its calls are refused, restarts
    /// included. `Appended` when written, else `Done`.
    TellChain {
        /// The chain's start.
        origin: crate::record::ChainOrigin,
        /// The notice.
        notice: Box<NewEntry>,
    },
    /// Start a turn: create its record and mark its inputs consumed.
    StartTurn {
        /// Turn id.
        turn: TurnId,
        /// Bot.
        bot: BotId,
        /// Session the turn works in.
        session: crate::ids::SessionId,
        /// Inbox gids it consumes.
        inputs: Vec<i64>,
        /// Initial checkpoint.
        checkpoint: Value,
        /// When the turn began (ms since the epoch). The row is written
        /// with the turn's first step, which may come much later (a slow
        /// first model call, or a cancel during it).
        started_at: i64,
    },
    /// Replace a turn's checkpoint.
    Checkpoint {
        /// Turn.
        turn: TurnId,
        /// New engine state.
        checkpoint: Value,
    },
    /// Count one more start of a turn at its current step (a resume after
    /// a crash or a restart). A clean close of the store takes back the
    /// count of each start it recorded whose turn is still running: only
    /// starts cut off by a crash count (`writer.rs`).
    BumpAttempts {
        /// Turn.
        turn: TurnId,
    },
    /// The turn finished a step: the start that did is the first at its
    /// next step (`attempts` = 1), so a long turn restarted between its
    /// steps is not failed for it.
    ResetAttempts {
        /// Turn.
        turn: TurnId,
    },
    /// Count one more start of a turn over `inputs` (gids of `bot`'s
    /// inbox) that no stored turn has taken yet: a turn is stored with its
    /// first step, so a crash during its first model call leaves only
    /// this count. Each input is counted at most once per process (a
    /// panic resumed or an interrupt in the same process is counted by
    /// its bot, or is no crash), and a clean close of the store takes
    /// back what it counted for inputs still pending; the turn whose row
    /// takes an input (`StartTurn`) sets its count back to 0. Answers
    /// `StartCounts` with the count of each input still pending (one no
    /// longer pending is left out): a turn over inputs of different counts
    /// fails only those past the limit (QA: deliveries that came during a
    /// crash loop, started once or twice, failed with the one that had
    /// crashed the host three times).
    CountStart {
        /// The inputs' bot.
        bot: BotId,
        /// The inputs' gids.
        inputs: Vec<i64>,
    },
    /// Record that a tool call with an external effect is starting. Calls
    /// with only internal effects are not recorded here: their outcome and
    /// effects commit together, and the transcript says whether they ran.
    ToolStarted {
        /// Turn.
        turn: TurnId,
        /// Call id.
        call_id: String,
        /// Order in the turn.
        ordinal: i64,
        /// Tool name.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
    },
    /// Record the outcome of a started tool call.
    ToolFinished {
        /// Turn.
        turn: TurnId,
        /// Call id.
        call_id: String,
        /// What the model is told.
        outcome: String,
        /// Whether it is an error.
        is_error: bool,
    },
    /// End a turn.
    EndTurn {
        /// Turn.
        turn: TurnId,
        /// Final status.
        status: TurnStatus,
        /// Error text for a failed turn.
        error: Option<String>,
    },
    /// Put the inputs a finished, not completed, turn still holds back in
    /// the inbox (a person's retry, or an interrupted turn's own requeue).
    RequeueInputs {
        /// The turn whose inputs are retried.
        turn: TurnId,
    },
    /// A person's retry of a subagent's task turn (a turn in its session
    /// with its parent): its inputs back in the inbox as `RequeueInputs`
    /// does, and the subagent (the turn's bot) set back to `running` when
    /// any was requeued, so its parent's CheckSubagent and count of
    /// running subagents see it. Refused with nothing written, answering
    /// [`MutationResult::SubagentLimit`], when the subagent is not running
    /// and its parent already has `max_running` running subagents: the
    /// check and the change in one transaction, so two retries (or a
    /// retry and a parent's new task committed before it) cannot both
    /// pass the limit. Fails, rolling back its batch, for a subagent
    /// stopped (by its parent) since it was read. Otherwise answers
    /// `Count` as `RequeueInputs`.
    RequeueSubagentTask {
        /// The subagent's task turn.
        turn: TurnId,
        /// `runtime.max_subagents`: running subagents a parent may have.
        max_running: usize,
    },
    /// Writes bounded by limits the writer checks as it applies them, in
    /// their transaction: `within` when every limit has room, else the
    /// `refused` writes of the first limit that has none (for a tool call:
    /// its result and effects, or its refusal as its result). The writer
    /// applies batches one after another, so steps committed at the same
    /// moment cannot pass a limit together. Answers
    /// [`MutationResult::Limited`]; a failing write of the branch taken
    /// fails the batch as any other.
    Limited(Box<Limited>),
    /// Add token usage to its bot's daily totals: a turn's (`turns: 1`),
    /// or a background model call's such as fact extraction (`turns: 0`).
    AddUsage {
        /// The bot.
        bot: crate::ids::BotId,
        /// UTC day, `YYYY-MM-DD`.
        day: String,
        /// Turns this usage is from (0 for work outside a turn).
        turns: u32,
        /// The usage.
        usage: crate::record::TokenUsage,
    },
    /// Record that a completed turn's fact extraction has to run (the
    /// row of `extractions_owed`, migration 12); a turn already owed is
    /// left as it is. Written in the batch that ends the turn, so an
    /// extraction cut off by a crash or a restart runs again at the next
    /// start.
    OweExtraction(Box<crate::store::OwedExtraction>),
    /// The turn's extraction has finished (applied, or failed for good):
    /// it is no longer owed. Answers `Count` (rows removed, 0 or 1).
    ClearExtraction {
        /// The turn.
        turn: TurnId,
    },
    /// Count one more re-run of an owed extraction after a restart.
    /// Answers `Attempts` (0 when the turn is no longer owed).
    BumpExtraction {
        /// The turn.
        turn: TurnId,
    },
    /// Set a session's compaction epoch.
    SetEpoch {
        /// The session.
        session: crate::ids::SessionId,
        /// The new epoch.
        epoch: i64,
    },
    /// Store (or replace) a secret a person supplied.
    SetSecret {
        /// The person.
        owner: crate::ids::UserId,
        /// Its name (an environment-variable name).
        name: String,
        /// The value.
        value: crate::record::SecretValue,
    },
    /// Delete a person's secret.
    DeleteSecret {
        /// The person.
        owner: crate::ids::UserId,
        /// Its name.
        name: String,
    },
    /// Create a subagent record (its bot is created with `UpsertBot`).
    CreateSubagent(crate::record::SubagentRecord),
    /// Change a subagent's status (and its last result).
    SetSubagentStatus {
        /// The subagent's bot id.
        id: crate::ids::BotId,
        /// New status.
        status: crate::record::SubagentStatus,
        /// Report or error, if any.
        result: Option<String>,
    },
    /// A subagent's task title (`description`) replaced, and its last
    /// report or error, if it has one, replaced by `result`: the task was
    /// given in a conversation that stays another person's when the bot
    /// changed owner, and its title and report are that person's words.
    /// The title and report it had are kept, for
    /// [`Mutation::RestoreSubagentTask`]; one withheld already keeps the
    /// ones it had before.
    WithholdSubagentTask {
        /// The subagent's bot id.
        id: crate::ids::BotId,
        /// What its task reads as now.
        description: String,
        /// What a result it has reads as now.
        result: String,
    },
    /// A withheld subagent's task title put back, and its report too when
    /// its result still reads `withheld_result` (a later one stays): the
    /// bot was given back to the person whose task it is.
    RestoreSubagentTask {
        /// The subagent's bot id.
        id: crate::ids::BotId,
        /// What a withheld result reads as.
        withheld_result: String,
    },
    /// A parent's stop of its subagent (StopSubagent), decided on the
    /// status it has as this commits, not as the call read it: its status
    /// set to `stopped` (its result kept), its open approvals expired with
    /// their cards, and how it was stopped recorded
    /// ([`crate::record::SubagentStop`], read with
    /// `Store::subagent_stop`). A subagent stopped already is left as it
    /// was. Answers `Count(1)` when this stopped it, `Count(0)` when it was
    /// stopped before.
    StopSubagent {
        /// The subagent's bot id.
        id: crate::ids::BotId,
        /// The call that stops it: `<turn id>:<call id>`.
        call: String,
    },
    /// The end of a subagent's task turn: its status and result, and its
    /// report to its parent admitted with them. Nothing is written when
    /// the subagent is stopped, also by a stop that landed after its turn
    /// read its status: a parent's stop is final, and a stopped subagent
    /// reports nothing. Nor is the task over while more work for it waits
    /// in its session (a message of its parent committed while the turn
    /// ran, not taken by it): the subagent stays `running`, with this
    /// result, and the turn over that work reports. Answers `Admitted`
    /// when the report was admitted, `Count(1)` when the status was
    /// written without a report, `Count(0)` when the subagent was stopped.
    EndSubagentTask {
        /// The subagent's bot id.
        id: crate::ids::BotId,
        /// Its status after the turn (not `Stopped`).
        status: crate::record::SubagentStatus,
        /// Report or error, if any.
        result: Option<String>,
        /// The report that wakes the parent.
        report: Option<Box<AdmitRequest>>,
    },
    /// Create a group room; refused if its id is taken.
    CreateRoom(Box<crate::record::RoomRecord>),
    /// Admit a user's message to a room's timeline through the idempotency
    /// ledger. No inbox row is written (no bot runs a timeline; the room's
    /// coordinator does). On `accepted` the ledger row, the entry, the run
    /// it starts (with the coordinator's initial `state`) and `notices`
    /// (appended right after it) are written together. An accepted
    /// message fails instead, rolling back its batch, when the room is
    /// closed, its members or `shared` are no longer `members` and
    /// `shared` (a change landed since they were read: the addressed
    /// members and notices were decided from them), or `poster` may not
    /// use it (checked in the same transaction that gives the message its
    /// seq).
    AdmitToRoom {
        /// The admission (its session is the room's timeline).
        request: Box<AdmitRequest>,
        /// The room.
        room: crate::ids::RoomId,
        /// The user who posts.
        poster: crate::ids::UserId,
        /// The room's members the message was decided from.
        members: Vec<BotId>,
        /// The room's `shared` flag the message was decided from.
        shared: bool,
        /// Initial coordinator state of the run.
        state: Value,
        /// Entries appended after the message when it is accepted (e.g.
        /// the notice of unknown mentions).
        notices: Vec<NewEntry>,
    },
    /// Replace a room's members (and its `shared` flag) and append
    /// `notice` (who joined and who left) to its timeline, together.
    /// Answers `Count(1)`, or `Count(0)` with nothing written when the
    /// members already are `to`. Fails, rolling back its batch, when the
    /// room is closed or its members are no longer `from` (another change
    /// landed since they were read).
    SetRoomMembers {
        /// The room.
        room: crate::ids::RoomId,
        /// The members the change was decided from.
        from: Vec<BotId>,
        /// The new members, in speaking order.
        to: Vec<BotId>,
        /// Whether the new members belong to more than one user.
        shared: bool,
        /// The timeline notice of the change.
        notice: Box<NewEntry>,
        /// When the change gives the room to users who could not read it
        /// (a user's first bot joins): the text of the `summary` entry
        /// that starts a new context epoch in each member's session of the
        /// room, in the same transaction, so nothing said there before
        /// reaches the new audience through a member. Those users read the
        /// timeline from the notice on (`room_audience`), with or without
        /// it.
        fresh_start: Option<String>,
    },
    /// Close a room and append `notice` to its timeline, together.
    /// Answers `Count(1)`, or `Count(0)` with nothing written when it was
    /// closed already.
    CloseRoom {
        /// The room.
        room: crate::ids::RoomId,
        /// The timeline notice of the close.
        notice: Box<NewEntry>,
    },
    /// Replace a room run's status and coordinator state.
    SaveRoomRun {
        /// The room.
        room: crate::ids::RoomId,
        /// The run (seq of its user message in the timeline).
        trigger_seq: i64,
        /// New status.
        status: crate::record::RoomRunStatus,
        /// New coordinator state.
        state: Value,
    },
    /// Ask a person to approve an action: expires the bot's stale
    /// approvals, then creates a pending one with its card entry, unless the
    /// same action is pending or the bot has too many pending (answers
    /// [`MutationResult::ApprovalRequested`]; nothing fails).
    RequestApproval(Box<crate::record::NewApproval>),
    /// A person's decision on a pending approval (appends its card).
    /// Fails unless the approval is pending (as of now) and `by` owns it.
    DecideApproval {
        /// The approval.
        id: crate::ids::ApprovalId,
        /// Approve or deny.
        decision: crate::record::ApprovalDecision,
        /// The deciding user (must be the approval's owner).
        by: crate::ids::UserId,
    },
    /// Use an approved approval (once). Fails unless it is approved,
    /// unused and within its use window.
    ConsumeApproval {
        /// The approval.
        id: crate::ids::ApprovalId,
    },
    /// Persist the expiry of open approvals that are expired as of now
    /// (TTL passed, a newer user message, or its subagent was stopped),
    /// with their cards; of one bot
    /// or all. Answers `Count`.
    ExpireApprovals {
        /// The bot, or every bot.
        bot: Option<BotId>,
    },
    /// Add a row to the review log.
    RecordReview(Box<crate::record::ReviewRecord>),
    /// A write to one memory scope instance (limits are checked in the
    /// transaction; a refusal is a result, not an error).
    Memory(Box<crate::layers::MemoryOp>),
    /// Remember a webhook delivery's signature with the delivery id (the
    /// ledger nonce) it came with, so that a replay of it under another id
    /// is answered as that delivery after a restart too (table
    /// `hook_signatures`, migration 20; `Store::remembered_signature`).
    /// Batched before the delivery's `Admit`: the row counts only while
    /// the ledger holds `delivery` with `digest`. A signature remembered
    /// already (not expired, its delivery in the ledger) keeps its first
    /// delivery; past `max_kept` rows of `source`, the oldest go.
    RememberSignature {
        /// The ledger source of the delivery (`hook:<bot>/<hook>`).
        source: String,
        /// A digest of the signature as sent (the signature itself is not
        /// stored).
        signature: crate::digest::InputDigest,
        /// The delivery id.
        delivery: String,
        /// The digest of the delivery's admission.
        digest: crate::digest::InputDigest,
        /// Remembered until then (ms).
        until_ms: i64,
        /// Most signatures kept for `source`.
        max_kept: usize,
    },
    /// Drop ledger rows older than `before_ms`; later lookups of nonces
    /// from before that time answer `unknown`. Expired webhook signatures
    /// (`RememberSignature`) go too.
    PruneLedger {
        /// Cut-off time (ms).
        before_ms: i64,
    },
    /// Keys stamped before `at_ms` (a UUIDv7's time) answer `unknown`
    /// from now on, as after a restore: the database lost writes it had
    /// committed (found at the start, `index/repair.rs`), so its ledger
    /// cannot vouch for what came before. Keeps every ledger row.
    LedgerHorizon {
        /// The new horizon (ms).
        at_ms: i64,
    },
    /// Drop the rows of the chains (table `chains`) started by `origins`
    /// that were last written before `before_ms`, each by key; a chain
    /// written since stays. The caller finds them a page at a time
    /// (`Store::silent_chains`), so the writer is not held long. Answers
    /// `Count`.
    PruneChains {
        /// Cut-off time (ms).
        before_ms: i64,
        /// The entries that started the chains (`SilentChains::silent`).
        origins: Vec<crate::ids::EntryId>,
    },
    /// Create or replace a routine: its definition and schedule state (the
    /// creation time of an existing one is kept).
    PutRoutine(Box<crate::record::RoutineRecord>),
    /// Delete a routine (`Count` of rows removed: 0 or 1).
    DeleteRoutine {
        /// The bot.
        bot: BotId,
        /// The routine's name.
        name: String,
    },
    /// Record that a routine's slot was handled (fired, or skipped as
    /// missed) and move it to its next slot. Fails, rolling back its batch,
    /// unless the routine is still waiting for exactly `slot_ms`: batched
    /// with the fire's admission, a slot can never fire twice.
    AdvanceRoutine {
        /// The bot.
        bot: BotId,
        /// The routine's name.
        name: String,
        /// The slot handled (ms).
        slot_ms: i64,
        /// Whether it fired (`last_fire_ms` becomes `slot_ms`).
        fired: bool,
        /// The next slot, if the schedule has one.
        next_fire_ms: Option<i64>,
    },
    /// A write of its own that tells whether the store takes writes now:
    /// one row of `meta` set to `at` (ms). A bot whose turn the store
    /// refused writes this before it runs the turn again, so that a store
    /// still refusing costs no model call (`bot_store_wait.rs`).
    Probe {
        /// When the probe was written (ms): the row changes each time,
        /// so the write reaches the database's file.
        at: i64,
    },
}

/// What one mutation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum MutationResult {
    /// Applied; nothing to report.
    Done,
    /// The ledger's answer.
    Admitted(AdmitOutcome),
    /// Where an appended entry landed.
    Appended {
        /// Entry id.
        id: EntryId,
        /// Seq in its session.
        seq: i64,
        /// Global order.
        gid: i64,
        /// Time written.
        created_at: i64,
    },
    /// The attempt count after a bump.
    Attempts(i64),
    /// What [`Mutation::CountStart`] counted: each input still pending, by
    /// its gid, with its count of starts, in the order given.
    StartCounts(Vec<(i64, i64)>),
    /// How many rows a maintenance mutation touched.
    Count(usize),
    /// A retry of a subagent's task was refused: its parent already has
    /// `running` running subagents, the limit (nothing was written).
    SubagentLimit {
        /// The subagent's parent.
        parent: BotId,
        /// Its running subagents (the retried one not among them).
        running: usize,
    },
    /// What a [`Mutation::Limited`] wrote: the index of the limit that
    /// had no room (its `refused` writes were applied), `None` when
    /// `within` was; the results of the writes applied, in order.
    Limited {
        /// The limit that refused, by its place in `limits`.
        refused: Option<usize>,
        /// The results of the branch applied.
        results: Vec<MutationResult>,
    },
    /// A new secret was refused: its owner has [`MAX_SECRETS_PER_USER`]
    /// already (nothing was written; a stored name takes a new value).
    SecretLimit {
        /// How many the owner stores.
        stored: usize,
    },
    /// What a memory write did.
    Memory(Box<crate::layers::MemoryOpResult>),
    /// The answer to an approval request.
    ApprovalRequested(Box<crate::record::ApprovalRequestOutcome>),
    /// An approval after a decision or its use.
    ApprovalChanged(Box<crate::record::ApprovalRecord>),
}

/// Writes bounded by limits ([`Mutation::Limited`]).
#[derive(Debug, Clone)]
pub struct Limited {
    /// The limits, checked in order.
    pub limits: Vec<Limit>,
    /// Written when every limit has room.
    pub within: Vec<Mutation>,
}

/// One limit of a [`Limited`] and what is written when it has no room.
#[derive(Debug, Clone)]
pub struct Limit {
    /// What is bounded.
    pub bound: WriteLimit,
    /// Written instead of `within` when `bound` has no room.
    pub refused: Vec<Mutation>,
}

/// A limit the writer checks in the transaction that applies the writes
/// it bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteLimit {
    /// `runtime.max_chain_messages`: the chain `origin` started has sent
    /// (table `chains`) at most `max - needed` messages between bots, so
    /// `needed` more fit (the message written, and what comes back
    /// without asking: a task's report).
    ChainMessages {
        /// The chain's start.
        origin: crate::record::ChainOrigin,
        /// The chain's bound.
        max: u64,
        /// Messages that must fit.
        needed: u64,
    },
    /// `runtime.max_subagents`: `subagent` is running already, or its
    /// parent has fewer than `max` other subagents running (so one more
    /// may start: a new one, or a finished one given more work).
    RunningSubagents {
        /// The parent.
        parent: BotId,
        /// The subagent that would run.
        subagent: BotId,
        /// Running subagents the parent may have.
        max: usize,
    },
    /// `subagent` is still `running`: a message its parent sent while it
    /// worked on its task (MessageSubagent) goes to that task only if the
    /// task has not ended since the call read it running. Once ended, its
    /// report is written, and the message would start new work the
    /// parent did not ask for: a second report of what it took for one
    /// task.
    SubagentRunning {
        /// The subagent.
        subagent: BotId,
    },
    /// The stored record of `bot` is not marked removed
    /// ([`BotRecord::removed_at`]): UpdateAgent's write of a bot it read
    /// before its owner removed it (`DELETE /v1/bots/{bot}`) would put
    /// back the record as read, without `removed_at`, and so bring back
    /// a bot removed for good. A bot with no record has room (nothing to
    /// bring back).
    BotNotRemoved {
        /// The bot written.
        bot: BotId,
    },
}

impl Mutation {
    /// The writes this mutation makes when its limits have room: itself,
    /// or a [`Mutation::Limited`]'s `within` (flattened). What a limit
    /// counted before the batch commits (a step's earlier calls) counts.
    pub fn within_limits(&self) -> Vec<&Mutation> {
        match self {
            Mutation::Limited(l) => l.within.iter().flat_map(Mutation::within_limits).collect(),
            other => vec![other],
        }
    }

    /// Every write this mutation may make, whichever branch of a
    /// [`Mutation::Limited`] is taken (flattened): what a cache kept
    /// beside the store must forget.
    pub fn every_write(&self) -> Vec<&Mutation> {
        match self {
            Mutation::Limited(l) => l
                .within
                .iter()
                .chain(l.limits.iter().flat_map(|limit| &limit.refused))
                .flat_map(Mutation::every_write)
                .collect(),
            other => vec![other],
        }
    }
}
