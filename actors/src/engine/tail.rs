//! A session's context kept in memory by its bot between turns.
//!
//! The context is `[system: identity + long-lived state] [summary?]
//! [entries since the summary…]`. Within one compaction epoch it only
//! grows, so what was sent to the model before is a byte-identical prefix of
//! what is sent next. The state block (memory snapshot) is frozen when the
//! tail loads and changes only at the next epoch — except when something
//! it shows was forgotten: then it is replaced at once
//! ([`SessionTail::refresh_state`]), since a forgotten fact must leave the
//! prompt from the next turn on. Token counts are cached per message: each
//! message is counted once.
//!
//! The window and the summary: a tail holds the newest
//! `runtime.context_entries` entries after the summary (summaries among
//! them take no place in the window; a running turn's inputs and
//! entries stay, however many), so when it is (re)loaded or
//! trimmed its oldest entries leave it. Every entry older than the first
//! one it holds must be covered by the summary. The tail records the seq
//! through which the window left entries out (`dropped_through`); past
//! `covers_to_seq` the entries between are in neither, and the next model
//! request compacts first ([`SessionTail::drops_unsummarised`]), covering
//! at least up to where the window now starts (`compaction::cut_at`).
//! That is the guarantee; the background compaction after a turn, once
//! more than half the window is unsummarised
//! ([`SessionTail::unsummarised_past`]), makes it rarely needed: after a
//! compaction at most a quarter window stays unsummarised (half for the
//! newest input with its turn; a running turn's inputs and entries aside),
//! so the window only cuts into unsummarised entries after at least half
//! a window more was written. Cost
//! stays bounded: within a turn the window only grows (a turn compacts
//! for the window at most once, at its first request), a compaction
//! leaves at most a quarter window for the next, and after one that
//! fails every check (the token marks before a step and after a turn
//! too) waits a quarter window of entries
//! ([`SessionTail::hold_compaction`]); after one that finds nothing, they
//! wait for the end of the turn and the next one's start
//! ([`SessionTail::hold_compaction_for_turn`]). While the summariser
//! is down, entries do leave the window unsummarised; the next summary
//! covers them (it reads every entry after the previous one from the
//! store).

use std::collections::HashSet;

use botfleet_memory::Encoding;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::SessionRecord;
use botfleet_memory::SessionView;
use botfleet_memory::covers_to_seq;

use super::context::ContextBuilder;
use super::context::message_text;
use crate::runtime::StateBlock;

/// Shaping a request from the context (`SessionTail::take_request`).
#[path = "request.rs"]
pub(crate) mod request;
use request::TurnCut;

/// The rendered context of one session and what it already holds.
#[derive(Debug, Clone)]
pub(crate) struct SessionTail {
    pub(crate) session: SessionId,
    pub(crate) context: ContextBuilder,
    /// The session's record (loaded with the tail).
    pub(crate) record: Option<SessionRecord>,
    /// The identity part of the system message.
    identity: String,
    /// The long-lived state part, frozen for the epoch, and its hash.
    pub(crate) state: String,
    pub(crate) state_hash: [u8; 32],
    /// Ids of the items the frozen state block shows (memory ids).
    pub(crate) state_shown: Vec<String>,
    /// The compaction epoch of the loaded context.
    pub(crate) epoch: i64,
    /// The last seq the current summary covers (0: none).
    pub(crate) covers_to_seq: i64,
    /// The seq through which the window leaves entries out: the entries
    /// up to it are in the context only through the summary. Past
    /// `covers_to_seq`, the entries between are in neither.
    dropped_through: i64,
    /// Tokens of each message counted so far, in order.
    counted: Vec<u32>,
    encoding: Encoding,
    /// Highest seq read from the store by the last load.
    loaded_upto: Option<i64>,
    /// Seqs pushed after the load (inputs and the turns' own entries).
    pushed: HashSet<i64>,
    /// Seqs the load read but left out (inputs of later turns); they are
    /// pushed when their turn claims them.
    skipped: HashSet<i64>,
    /// Entries since the last load.
    since_load: usize,
    /// Seqs of the summaries among the entries the tail holds (the
    /// context leaves them out: the latest is its head). The window counts
    /// entries of the transcript, not summaries, as a load does
    /// (`Store::session_view`).
    summaries: Vec<i64>,
    /// The newest seq when a compaction last found nothing or failed, plus
    /// a quarter window: neither the entry count nor the window asks for
    /// another before then (0 after a compaction that wrote a summary).
    compact_retry_at: i64,
    /// Whether that hold is for one turn only: a compaction found nothing
    /// to summarise, everything after the summary being the newest turn's
    /// own ([`SessionTail::hold_compaction_for_turn`]).
    hold_for_turn: bool,
    /// The running turn whose older tool results requests may cut
    /// ([`SessionTail::shape_requests`]).
    turn_cut: Option<TurnCut>,
    /// Whether requests alternate user and assistant roles.
    alternate: bool,
    /// The most tokens one message may take in a request
    /// (`request::clip::entry_cap`, set with the turn's budget).
    entry_cap: u64,
    /// How to give the context back its messages while a request is out.
    undo: Option<request::Undo>,
    /// The step's plan of what requests send, and the last one's tokens.
    shaping: request::Shaping,
    /// The memory update as the last request sent it: its place among
    /// the context's messages and its text. A later turn whose update is
    /// the same text sends it at the same place, so its request begins
    /// with the last one's messages (`request.rs`,
    /// [`SessionTail::take_request`]). Forgotten where the context's
    /// messages are rebuilt or its start cut (a load, a trim, a refreshed
    /// state block), where places no longer hold.
    update_anchor: Option<(usize, String)>,
}

/// What of a session a turn's context may hold (`tail_bound.rs`).
#[path = "tail_bound.rs"]
mod bound;
pub(crate) use bound::ContextBound;

impl SessionTail {
    /// An empty tail that loads from the store before first use.
    pub(crate) fn new(session: SessionId) -> Self {
        Self {
            session,
            context: ContextBuilder::new(String::new()),
            record: None,
            identity: String::new(),
            state: String::new(),
            state_hash: [0; 32],
            state_shown: Vec::new(),
            epoch: 0,
            covers_to_seq: 0,
            dropped_through: 0,
            counted: Vec::new(),
            encoding: Encoding::default(),
            loaded_upto: None,
            pushed: HashSet::new(),
            skipped: HashSet::new(),
            since_load: 0,
            summaries: Vec::new(),
            compact_retry_at: 0,
            hold_for_turn: false,
            turn_cut: None,
            alternate: true,
            entry_cap: request::clip::entry_cap(request::turn_budget(
                crate::settings::ContextSettings::default().compact_at_tokens,
            )),
            undo: None,
            shaping: request::Shaping::default(),
            update_anchor: None,
        }
    }

    /// Whether the tail must (re)load before a turn: never loaded, told to
    /// (after a compaction), or grown past its window (then it is rebuilt
    /// from the newest `window` entries after the summary).
    pub(crate) fn needs_load(&self, window: usize) -> bool {
        self.loaded_upto.is_none() || self.since_load > window.max(1)
    }

    /// Trims a tail grown past its window in memory, to what a reload
    /// would read: the summary and the messages of the newest `window`
    /// entries, under a new system message (`identity`, and `state` for the
    /// new epoch of the prompt prefix, which changes here anyway). Like a
    /// reload bounded by the turn ([`ContextBound`]), it keeps every entry
    /// from `keep_from` (the first input of the turn about to run) on,
    /// however many: a compaction keeps the running turn too, so inputs cut
    /// here would be in neither the context nor a summary (after a string
    /// of interrupted turns had pushed their inputs, a turn answered 600
    /// messages having seen the newest 389). Returns false, changing
    /// nothing, when the tail cannot tell what a reload would read — it
    /// skipped entries, holds some out of order, or has calls open — and
    /// must reload from the store instead.
    pub(crate) fn trim(
        &mut self,
        window: usize,
        keep_from: Option<i64>,
        identity: &str,
        state: &StateBlock,
    ) -> bool {
        let Some(top) = self.trim_top(window) else {
            return false;
        };
        let window = i64::try_from(window).unwrap_or(i64::MAX);
        let cut = top.saturating_sub(window);
        let cut = keep_from.map_or(cut, |from| cut.min(from.saturating_sub(1)));
        let Some((dropped, through)) = self.context.drop_through(cut) else {
            return false;
        };
        self.dropped_through = self.dropped_through.max(through);
        self.summaries.retain(|&seq| seq > cut);
        let head = self.context.head();
        if self.counted.len() > head {
            let end = (head + dropped).min(self.counted.len());
            self.counted.drain(head..end);
        }
        self.identity = identity.to_owned();
        self.refresh_state(state);
        self.update_anchor = None;
        self.loaded_upto = Some(top);
        self.pushed.clear();
        self.since_load = 0;
        true
    }

    /// The seq through which the tail holds every entry of the session,
    /// when it knows one: loaded, nothing skipped, every entry pushed since
    /// in order, and no call open.
    fn held_through(&self) -> Option<i64> {
        let upto = self.loaded_upto?;
        // the pushed seqs are distinct: all in upto+1..=top means they are
        // exactly that range
        let top = upto + i64::try_from(self.pushed.len()).ok()?;
        let contiguous = self.pushed.iter().all(|&seq| seq > upto && seq <= top);
        (self.skipped.is_empty() && contiguous && self.context.can_drop()).then_some(top)
    }

    /// [`SessionTail::held_through`], when the newest `window` seqs it
    /// holds are the newest `window` entries of the transcript too: a
    /// summary among them widens a load's window
    /// (`Store::session_view`), which a trim does not follow — the tail
    /// reloads instead.
    fn trim_top(&self, window: usize) -> Option<i64> {
        let top = self.held_through()?;
        let start = top.saturating_sub(i64::try_from(window).unwrap_or(i64::MAX));
        self.summaries
            .iter()
            .all(|&seq| seq <= start)
            .then_some(top)
    }

    /// Whether a tail due for a (re)load can instead be trimmed in memory
    /// ([`SessionTail::trim`]): it was loaded and only grew past its window.
    pub(crate) fn can_trim(&self, window: usize) -> bool {
        self.since_load > window.max(1) && self.trim_top(window).is_some()
    }

    /// Whether the tail holds an input (a user-side message) newer than
    /// `seq`. A new turn whose last input is older than one the tail holds
    /// (a retried input, with later messages already pushed by their own
    /// turns) must reload up to its input instead: it answers its inputs,
    /// not the later messages. Outputs of an earlier turn that came after
    /// its input (a message sent while that turn ran) do not count.
    pub(crate) fn holds_input_after(&self, seq: i64) -> bool {
        self.context.newest_input_seq() > seq
    }

    /// The newest seq of the session the tail holds or skipped.
    fn newest_seq(&self) -> i64 {
        let pushed = self.pushed.iter().copied().max().unwrap_or(0);
        let skipped = self.skipped.iter().copied().max().unwrap_or(0);
        self.loaded_upto.unwrap_or(0).max(pushed).max(skipped)
    }

    /// Whether the entries since the summary have passed half the `window`:
    /// a background compaction is due after the turn, well before they
    /// leave the window (a person's constraint said early in a chat of
    /// short messages dropped out with no summary keeping it, as tokens
    /// never reached the threshold). A summary leaves at most a quarter
    /// window unsummarised (half for the newest input with its turn), so
    /// this asks again only after another quarter (or after the next turn).
    pub(crate) fn unsummarised_past(&self, window: usize) -> bool {
        let window = i64::try_from(window).unwrap_or(i64::MAX);
        let newest = self.newest_seq();
        // summaries are no part of it (a catch-up compaction writes one
        // per chunk after the running turn's input)
        let summaries = self
            .summaries
            .iter()
            .filter(|&&seq| seq > self.covers_to_seq)
            .count();
        let unsummarised =
            (newest - self.covers_to_seq).saturating_sub(i64::try_from(summaries).unwrap_or(0));
        unsummarised.saturating_mul(2) > window && !self.compaction_held()
    }

    /// Whether the window left out entries no summary covers: the next
    /// model request must compact first (unless a compaction failed or
    /// found nothing less than a quarter window ago).
    pub(crate) fn drops_unsummarised(&self) -> bool {
        self.dropped_through > self.covers_to_seq && !self.compaction_held()
    }

    /// Whether a compaction that failed or found nothing holds the next
    /// one off ([`SessionTail::hold_compaction`]): until a quarter window
    /// of entries more, no check asks for one — the token marks before a
    /// step and after a turn included, or a summariser that is down was
    /// called before every step of every turn of a long session.
    pub(crate) fn compaction_held(&self) -> bool {
        self.newest_seq() < self.compact_retry_at
    }

    /// A compaction found nothing to summarise, or failed: no check (the
    /// entry count, the window, the token marks) asks for the next before
    /// another quarter `window` of entries, so a summariser that is down
    /// is not called at every step or after every turn.
    pub(crate) fn hold_compaction(&mut self, window: usize) {
        let quarter = i64::try_from(window / 4).unwrap_or(i64::MAX).max(1);
        self.compact_retry_at = self.newest_seq().saturating_add(quarter);
        self.hold_for_turn = false;
    }

    /// A compaction found nothing to summarise: what is left after the
    /// summary is the newest turn's own (its input and what follows are
    /// kept verbatim; a running turn's are never summarised). Held as
    /// [`SessionTail::hold_compaction`] holds, but only until that turn
    /// ends and until the next begins ([`SessionTail::end_turn_hold`]),
    /// when they can be summarised: held for a quarter window, a turn of
    /// many calls and long results went unsummarised into the requests of
    /// the next turns, each far past `compact_at_tokens` (QA, 2026-12-05:
    /// eight turns at 4× the mark).
    pub(crate) fn hold_compaction_for_turn(&mut self, window: usize) {
        self.hold_compaction(window);
        self.hold_for_turn = true;
    }

    /// A run (a turn, a background compaction) ended: a hold that was for
    /// it goes, and the checks (after the turn, the background
    /// compaction; before the next turn's steps, the token mark) see its
    /// entries as any others.
    pub(crate) fn end_turn_hold(&mut self) {
        if std::mem::take(&mut self.hold_for_turn) {
            self.compact_retry_at = 0;
        }
    }

    /// A compaction wrote a summary: no hold (the summary leaves at most a
    /// quarter window unsummarised, so neither check asks again soon).
    pub(crate) fn release_compaction(&mut self) {
        self.compact_retry_at = 0;
        self.hold_for_turn = false;
    }

    /// Forgets the loaded context: the next turn reloads it.
    pub(crate) fn invalidate(&mut self) {
        self.loaded_upto = None;
    }

    fn system(&self) -> String {
        if self.state.is_empty() {
            self.identity.clone()
        } else {
            format!("{}\n\n{}", self.identity, self.state)
        }
    }

    /// Loads the session: its record, its latest summary and the newest
    /// `window` entries after it (and, with a `bound`, every entry from the
    /// turn's first input on: a turn that wrote more than `window` entries
    /// must still see what it answers), only those `bound` lets in.
    /// `state` is the long-lived state block for the new epoch. (A turn
    /// reads and fills in two, naming its subagents' reports between:
    /// `Runner::load_tail`.)
    #[cfg(test)]
    pub(crate) async fn load(
        &mut self,
        store: &botfleet_memory::Store,
        identity: &str,
        state: &StateBlock,
        window: usize,
        encoding: Encoding,
        bound: Option<ContextBound>,
    ) -> Result<(), botfleet_memory::StoreError> {
        let view = store
            .session_view(self.session, window as i64, bound.as_ref().map(|b| b.from))
            .await?;
        self.fill_view(view, identity, state, encoding, bound);
        Ok(())
    }

    /// Builds the context from a [`SessionView`] (one read of the store:
    /// [`SessionTail::load`], or the turn's first read when it needs the
    /// record before it can render the identity).
    ///
    /// A turn's context is what its [`ContextBound`] lets in: the session
    /// up to its last input, its own entries and those of the turns before
    /// it. A message admitted while the turn was starting, running or
    /// down in a crash belongs to the turn that claims it, which pushes it
    /// then; this turn must not answer it without claiming it.
    pub(crate) fn fill_view(
        &mut self,
        view: SessionView,
        identity: &str,
        state: &StateBlock,
        encoding: Encoding,
        bound: Option<ContextBound>,
    ) {
        let SessionView {
            record,
            summary,
            mut entries,
            floor,
        } = view;
        let last = record.as_ref().map(|r| r.last_seq).unwrap_or(0);
        // the window starts after the summary, or later: the entries
        // before the first one read are left out (seqs are contiguous)
        let first_read = entries.first().map(|e| e.seq);
        let mut skipped = HashSet::new();
        if let Some(bound) = bound {
            let others = bound.others(&entries);
            entries.retain(|e| {
                // before the session's floor (it came to its owner with the
                // bot since), only what is the turn's own: its inputs and
                // its steps (QA: a run resumed across an owner change read
                // the former owner's run before it)
                let keep =
                    floor.is_none_or(|f| e.seq >= f || bound.owns(e)) && bound.admits(e, &others);
                if !keep {
                    skipped.insert(e.seq);
                }
                keep
            });
            bound.order(&mut entries, &others);
        }
        self.fill(
            record,
            identity,
            state,
            summary.as_ref(),
            &entries,
            encoding,
        );
        self.loaded_upto = Some(last.max(self.covers_to_seq));
        self.skipped = skipped;
        if let Some(first) = first_read {
            self.dropped_through = (first - 1).max(self.covers_to_seq);
        }
    }

    /// Builds the context from what [`SessionTail::load`] read: the
    /// session's record, its latest summary and the entries after it
    /// (counts start empty: each message is counted when first needed).
    pub(crate) fn fill(
        &mut self,
        record: Option<SessionRecord>,
        identity: &str,
        state: &StateBlock,
        summary: Option<&Entry>,
        entries: &[Entry],
        encoding: Encoding,
    ) {
        self.record = record;
        self.epoch = self.record.as_ref().map(|r| r.epoch).unwrap_or(0);
        let last = self.record.as_ref().map(|r| r.last_seq).unwrap_or(0);
        self.covers_to_seq = covers_to_seq(summary);
        self.dropped_through = entries
            .first()
            .map_or(self.covers_to_seq, |e| e.seq - 1)
            .max(self.covers_to_seq);
        self.identity = identity.to_owned();
        self.state = state.text.clone();
        self.state_hash = state.hash;
        self.state_shown = state.shown.clone();
        self.encoding = encoding;
        let mut context = ContextBuilder::new(self.system());
        // the tools the bot is shown did not change with the reload
        context.set_agent_replies(self.context.agent_replies());
        if let Some(s) = summary {
            context.push_summary(s);
        }
        for e in entries {
            context.push(e);
        }
        self.summaries = entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Summary { .. }))
            .map(|e| e.seq)
            .collect();
        self.context = context;
        self.counted.clear();
        self.update_anchor = None;
        self.loaded_upto = Some(entries.last().map(|e| e.seq).unwrap_or(last));
        self.pushed.clear();
        self.skipped.clear();
        self.since_load = 0;
    }

    /// Replaces the identity (the bot's role or tools changed); the frozen
    /// state block stays.
    pub(crate) fn set_identity(&mut self, identity: &str) {
        if self.identity != identity {
            self.identity = identity.to_owned();
            self.reset_system();
        }
    }

    /// Replaces the frozen state block inside the epoch (something it
    /// showed was forgotten): the system message changes, so the prompt
    /// prefix changes once; the entries stay.
    pub(crate) fn refresh_state(&mut self, state: &StateBlock) {
        if self.state_hash != state.hash {
            self.update_anchor = None;
        }
        self.state = state.text.clone();
        self.state_hash = state.hash;
        self.state_shown = state.shown.clone();
        self.reset_system();
    }

    /// Puts the current identity and state block in the system message
    /// (its token count with it, when counted).
    fn reset_system(&mut self) {
        let system = self.system();
        self.context.set_system(&system);
        if !self.counted.is_empty() {
            self.counted[0] = self.encoding.count_message(&system);
        }
    }

    /// Appends an entry unless the tail already holds it.
    pub(crate) fn push(&mut self, entry: &Entry) {
        if entry.session != self.session {
            return;
        }
        let Some(upto) = self.loaded_upto else {
            return;
        };
        if entry.seq <= upto && !self.skipped.remove(&entry.seq) {
            return;
        }
        if !self.pushed.insert(entry.seq) {
            return;
        }
        if matches!(entry.kind, EntryKind::Summary { .. }) {
            self.summaries.push(entry.seq);
        }
        self.context.push(entry);
        if let Some(i) = self.context.take_edited() {
            // a refused call's arguments were cut: counted again when needed
            self.counted.truncate(i);
        }
        self.since_load += 1;
    }

    /// Tokens of the first `n` messages (all when `n` is larger), counting
    /// only messages not counted before.
    pub(crate) fn tokens_of_first(&mut self, n: usize) -> u64 {
        let messages = self.context.messages();
        while self.counted.len() < messages.len() {
            let i = self.counted.len();
            self.counted
                .push(self.encoding.count_message(&message_text(&messages[i])));
        }
        self.counted.iter().take(n).map(|&t| u64::from(t)).sum()
    }

    /// Tokens of the whole context.
    pub(crate) fn tokens(&mut self) -> u64 {
        self.tokens_of_first(usize::MAX)
    }

    /// Number of messages.
    pub(crate) fn len(&self) -> usize {
        self.context.messages().len()
    }

    /// The encoding counts use.
    pub(crate) fn encoding(&self) -> Encoding {
        self.encoding
    }
}

#[cfg(test)]
#[path = "tail_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "tail_trim_tests.rs"]
mod trim_tests;

#[cfg(test)]
#[path = "tail_order_tests.rs"]
mod order_tests;
