//! Turns transcript entries into the messages a model sees.
//!
//! The builder is incremental: a bot keeps one per active session and
//! appends each new entry, so the messages of a session only grow between
//! rebuilds and the prefix sent to the model stays byte-identical from step
//! to step and turn to turn (what provider prompt caches reuse).
//!
//! The chat protocol wants every tool call answered right after the
//! assistant message that made it. Entries from people that land while
//! calls are open (a message admitted mid-step) are held back and placed
//! after the answers; a call that never got an answer (its turn died)
//! gets a synthetic one, so a request is always well-formed.
//!
//! A call refused with an error keeps only the start of each long
//! argument here ([`cut_refused_arguments`]): a 1 MB SendMessage text the
//! tool refused for its size was sent back in every later request of the
//! session, and each failed at the provider as too long. The transcript
//! keeps the call whole.
//!
//! Each input (a message, an event) is preceded by a line saying when it
//! arrived, in the owner's time zone (prompts/time_note.md, [`local_time`]).
//! It is taken from the entry's stored time alone, so it is part of the
//! context like the input itself: the same in every request, after a
//! reload or a trim (which must build what a reload builds: a line left
//! out when it repeated the one before would come back at a reload) and
//! when a turn resumes, and past the cached prefix (the system prompt only
//! names the time zone).

use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;

use serde_json::Value;

use super::tail::request::clip::grapheme_prefix;
use crate::model::ChatMessage;
use crate::model::ToolCall;
use crate::prompts::prompts;

/// An entry's time as the bot reads it.
#[path = "local_time.rs"]
pub(crate) mod local_time;

/// How an input entry reads to the model, by who reads it.
#[path = "context_input.rs"]
mod input;
pub(crate) use input::Replies;
pub(crate) use input::render_input;
pub(crate) use input::render_input_for;
pub(crate) use input::reports_of_own_subagents;

/// Incremental context of one session.
#[derive(Debug, Clone)]
pub(crate) struct ContextBuilder {
    messages: Vec<ChatMessage>,
    /// Seq of the entry each message came from (0 for the system prompt),
    /// parallel to `messages`: what [`ContextBuilder::drop_through`] cuts by.
    seqs: Vec<i64>,
    /// Messages at the front that always stay: the system prompt, and the
    /// summary when the context starts from one.
    head: usize,
    pending: Vec<String>,
    /// Seq of the assistant entry whose calls are pending.
    pending_seq: i64,
    /// Index of that entry's message.
    pending_at: usize,
    /// Lowest index of a message changed after it was appended (a refused
    /// call's arguments cut), since [`ContextBuilder::take_edited`]: its
    /// cached token count is stale.
    edited: Option<usize>,
    deferred: Vec<(i64, ChatMessage)>,
    /// Who reads the context and which tools it is shown to answer
    /// messages from bots with ([`ContextBuilder::set_agent_replies`]).
    agent_replies: Replies,
    /// The seq and turn of a runtime reminder nothing answered yet:
    /// dropped when its turn ends, unless interrupted
    /// ([`ContextBuilder::drop_unanswered_reminder`]).
    trailing_reminder: Option<(i64, Option<TurnId>)>,
    /// A turn ended cancelled before it answered: the next input is told
    /// so first ([`ContextBuilder::push`], prompts/cancelled_before.md),
    /// naming the messages it had (quoted, or `None` when none is at
    /// hand, compacted away).
    cancelled_before: Option<Option<String>>,
    /// The starts of the last [`RECENT_INPUTS`] inputs: what a cancel
    /// note quotes.
    recent_inputs: std::collections::VecDeque<RecentInput>,
    /// The routine fires among the last [`RECENT_INPUTS`] inputs: seq and
    /// origin (`routine:NAME`).
    routine_fires: std::collections::VecDeque<(i64, String)>,
    /// Fires whose run failed before it delivered: the next fire of the
    /// same routine takes their place in the context
    /// ([`ContextBuilder::drop_failed_fires`]).
    failed_fires: Vec<(i64, String)>,
}

/// The start of an input, kept for a cancel note to quote.
#[derive(Debug, Clone)]
struct RecentInput {
    seq: i64,
    /// Its first [`KEPT_CHARS`] characters.
    start: String,
    /// Whether it goes on after them.
    cut: bool,
}

/// Characters of an input kept to quote from: a quote of
/// [`QUOTED_CHARS`] once its white space is folded.
const KEPT_CHARS: usize = 4 * QUOTED_CHARS;

/// How many inputs' starts a context keeps to name a cancelled turn's.
const RECENT_INPUTS: usize = 32;

/// Characters of an input a cancel note quotes.
const QUOTED_CHARS: usize = 60;

impl ContextBuilder {
    /// A context with only the system prompt.
    pub(crate) fn new(system: String) -> Self {
        Self {
            messages: vec![ChatMessage::System { content: system }],
            seqs: vec![0],
            head: 1,
            pending: Vec::new(),
            pending_seq: 0,
            pending_at: 0,
            edited: None,
            deferred: Vec::new(),
            agent_replies: Replies::default(),
            trailing_reminder: None,
            cancelled_before: None,
            recent_inputs: std::collections::VecDeque::new(),
            routine_fires: std::collections::VecDeque::new(),
            failed_fires: Vec::new(),
        }
    }

    /// Replaces the system prompt (only when it really changed).
    pub(crate) fn set_system(&mut self, system: &str) {
        match self.messages.first_mut() {
            Some(ChatMessage::System { content }) if content == system => {}
            Some(ChatMessage::System { content }) => *content = system.to_owned(),
            _ => {
                self.messages.insert(
                    0,
                    ChatMessage::System {
                        content: system.to_owned(),
                    },
                );
                self.seqs.insert(0, 0);
                self.head += 1;
            }
        }
    }

    /// Sets who reads the context and the tools it is shown to answer
    /// bots with, for the messages from bots pushed from now on (those
    /// already in keep their text: the prefix a provider cached stays the
    /// same).
    pub(crate) fn set_agent_replies(&mut self, replies: Replies) {
        self.agent_replies = replies;
    }

    /// Who reads the context and what it answers bots with
    /// ([`ContextBuilder::set_agent_replies`]).
    pub(crate) fn agent_replies(&self) -> Replies {
        self.agent_replies.clone()
    }

    /// Appends one entry.
    pub(crate) fn push(&mut self, entry: &Entry) {
        match &entry.kind {
            EntryKind::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                self.close_pending();
                // an empty answer (nothing said, nothing called) is no
                // answer to a reminder (a request leaves it out)
                if !text.is_empty() || !tool_calls.is_empty() {
                    self.trailing_reminder = None;
                }
                // a thinking model's reasoning, stored with a step that
                // made calls, goes back with those calls in every later
                // request, of later turns too: DeepSeek (V4) and Kimi
                // refuse a request without it (400 "reasoning_content …
                // must be passed back"); it is counted in tokens
                // (`ChatMessage::token_text`)
                self.pending_at = self.messages.len();
                self.messages.push(ChatMessage::Assistant {
                    content: text.clone(),
                    tool_calls: tool_calls
                        .iter()
                        .map(|c| ToolCall {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    reasoning: reasoning.clone(),
                });
                self.seqs.push(entry.seq);
                self.pending = tool_calls.iter().map(|c| c.id.clone()).collect();
                self.pending_seq = entry.seq;
            }
            EntryKind::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => {
                if let Some(pos) = self.pending.iter().position(|p| p == call_id) {
                    self.pending.remove(pos);
                    if *is_error && content.starts_with(TOOL_ERROR_PREFIX) {
                        self.cut_refused(call_id);
                    }
                    self.messages.push(ChatMessage::Tool {
                        tool_call_id: call_id.clone(),
                        content: content.clone(),
                    });
                    self.seqs.push(entry.seq);
                    if self.pending.is_empty() {
                        self.release_deferred();
                    }
                }
            }
            EntryKind::UserMessage { .. }
            | EntryKind::AgentMessage { .. }
            | EntryKind::Event { .. } => {
                if let Some(quoted) = self.cancelled_before.take() {
                    // the message a person cancelled the answer to was
                    // in the next turn's context as if still asked, and
                    // the bot did what they had stopped (QA, 2026-12-05);
                    // named, as earlier messages left unanswered (a
                    // failed turn's, saved to retry) are not cancelled
                    let messages = quoted.unwrap_or_else(|| "above".to_owned());
                    if let Ok(note) = prompts()
                        .cancelled_before
                        .render(&[("messages", &messages)])
                    {
                        self.push_input(entry.seq, note);
                    }
                }
                if let EntryKind::Event { origin, .. } = &entry.kind
                    && origin.starts_with("routine:")
                {
                    self.drop_failed_fires(origin);
                    if self.routine_fires.len() == RECENT_INPUTS {
                        self.routine_fires.pop_front();
                    }
                    self.routine_fires.push_back((entry.seq, origin.clone()));
                }
                self.remember_input(entry);
                // when it arrived
                if let Some(note) = local_time::note(entry.created_at, self.agent_replies.timezone)
                {
                    self.push_input(entry.seq, note);
                }
                self.push_input(entry.seq, render_input_for(entry, &self.agent_replies));
            }
            // the runtime's own reminder inside a turn: no time of its own
            EntryKind::Reminder { .. } => {
                self.push_input(entry.seq, render_input_for(entry, &self.agent_replies));
                if self.pending.is_empty() {
                    self.trailing_reminder = Some((entry.seq, entry.turn));
                }
            }
            EntryKind::TurnEnd {
                status,
                deliveries,
                inputs,
                ..
            } => {
                // stopped before it answered (an interrupted turn's inputs
                // go on in the next, and are answered there)
                self.cancelled_before = (*status == TurnStatus::Cancelled && *deliveries == 0)
                    .then(|| self.quoted_inputs(inputs));
                if *status == TurnStatus::Failed && *deliveries == 0 {
                    let failed = self
                        .routine_fires
                        .iter()
                        .filter(|(seq, _)| inputs.contains(seq))
                        .cloned();
                    self.failed_fires.extend(failed);
                }
                if let Some((seq, turn)) = self.trailing_reminder
                    && turn == entry.turn
                {
                    self.trailing_reminder = None;
                    // (an interrupted turn's inputs go on in the next; a
                    // turn that asked others and said nothing to its
                    // reminder ends `completed`, and the reply that wakes
                    // it would read as the reminder's tail)
                    if *status != TurnStatus::Interrupted {
                        self.drop_unanswered_reminder(seq);
                    }
                }
            }
            // approval cards are for people: the model learns of the
            // request from its tool result and of the decision from the
            // `approval` event that wakes it, so a card would say it twice
            EntryKind::Delivery { .. }
            | EntryKind::Reaction { .. }
            | EntryKind::Notice { .. }
            | EntryKind::Approval { .. } => {}
            // a summary is placed by the tail when it loads (it replaces the
            // entries it covers); pushed incrementally it would come too late
            EntryKind::Summary { .. } => {}
        }
    }

    /// Drops the runtime reminder of entry `seq` if nothing answered it
    /// (its turn ended after it, other than interrupted): it was
    /// about that turn, and as the newest message its text ran into the
    /// next one (QA, 2026-12-05: "[runtime reminder] You ended your turn
    /// without sending anything …" read as the start of the person's next
    /// message). Done as the entries are pushed (at the turn's
    /// `turn_end`), so a context rebuilt from the store drops it alike.
    /// Keeps the start of input `entry` for a cancel note to quote.
    fn remember_input(&mut self, entry: &Entry) {
        // a bounded start, quoted only when a turn ends cancelled: every
        // input passes here, a long one need not be read to its end
        let text = entry.kind.text();
        let end = text
            .char_indices()
            .nth(KEPT_CHARS)
            .map_or(text.len(), |(at, _)| at);
        if self.recent_inputs.len() == RECENT_INPUTS {
            self.recent_inputs.pop_front();
        }
        self.recent_inputs.push_back(RecentInput {
            seq: entry.seq,
            start: text[..end].to_owned(),
            cut: end < text.len(),
        });
    }

    /// The quoted starts of the inputs of `seqs` at hand, joined; `None`
    /// when none is (compacted away, or older than the ones kept).
    fn quoted_inputs(&self, seqs: &[i64]) -> Option<String> {
        let quoted: Vec<String> = seqs
            .iter()
            .filter_map(|seq| self.recent_inputs.iter().find(|r| r.seq == *seq))
            .map(|r| {
                let text = r.start.split_whitespace().collect::<Vec<_>>().join(" ");
                let shown = grapheme_prefix(&text, QUOTED_CHARS);
                let more = if r.cut || shown.len() < text.len() {
                    "\u{2026}"
                } else {
                    ""
                };
                format!("\u{201c}{shown}{more}\u{201d}")
            })
            .collect();
        (!quoted.is_empty()).then(|| quoted.join(", "))
    }

    /// Drops from the context the fires of routine `origin` whose run
    /// failed before it delivered: the fire being pushed runs the same
    /// prompt again. Each failed run's prompt stayed, unanswered, and the
    /// next run read one copy more per failure, with nothing saying they
    /// were one routine's missed runs (QA: after three failures the model
    /// was asked four times over, `catch_up = "skip"` or not). The fire's
    /// time note goes with it (the same seq); its entry stays in the
    /// transcript, with its failure notice.
    fn drop_failed_fires(&mut self, origin: &str) {
        if !self.pending.is_empty() {
            // calls open: the messages' places are held (`pending_at`)
            return;
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.failed_fires)
            .into_iter()
            .partition(|(_, o)| o == origin);
        self.failed_fires = kept;
        for (seq, _) in gone {
            while let Some(at) = self.seqs.iter().rposition(|s| *s == seq) {
                if at < self.head {
                    break;
                }
                self.messages.remove(at);
                self.seqs.remove(at);
                self.edited = Some(self.edited.map_or(at, |e| e.min(at)));
            }
        }
    }

    fn drop_unanswered_reminder(&mut self, seq: i64) {
        let Some(at) = self.seqs.iter().rposition(|s| *s == seq) else {
            return;
        };
        let unanswered = self.messages[at + 1..].iter().all(|m| {
            matches!(m, ChatMessage::Assistant { content, tool_calls, .. }
                if content.is_empty() && tool_calls.is_empty())
        });
        if unanswered && at >= self.head && self.pending.is_empty() {
            self.messages.remove(at);
            self.seqs.remove(at);
            self.edited = Some(self.edited.map_or(at, |e| e.min(at)));
        }
    }

    /// A user-side message of entry `seq`, held back while calls are open.
    fn push_input(&mut self, seq: i64, content: String) {
        let msg = ChatMessage::User { content };
        if self.pending.is_empty() {
            self.messages.push(msg);
            self.seqs.push(seq);
        } else {
            self.deferred.push((seq, msg));
        }
    }

    /// Cuts the long arguments of the pending call `call_id`, refused with
    /// an error. The assistant message is the newest step's, sent in no
    /// request yet (its results come before the next one), so the prefix
    /// the provider cached is untouched.
    fn cut_refused(&mut self, call_id: &str) {
        let Some(ChatMessage::Assistant { tool_calls, .. }) =
            self.messages.get_mut(self.pending_at)
        else {
            return;
        };
        let Some(call) = tool_calls.iter_mut().find(|c| c.id == call_id) else {
            return;
        };
        if let Some(cut) = cut_refused_arguments(&call.arguments) {
            call.arguments = cut;
            self.edited = Some(
                self.edited
                    .map_or(self.pending_at, |e| e.min(self.pending_at)),
            );
        }
    }

    /// The lowest index of a message changed since the last call, if any
    /// (its token count must be taken again).
    pub(crate) fn take_edited(&mut self) -> Option<usize> {
        self.edited.take()
    }

    /// Appends a compaction summary as the first message after the system
    /// prompt (used when a tail loads from a summary).
    pub(crate) fn push_summary(&mut self, entry: &Entry) {
        self.messages.push(ChatMessage::User {
            content: render_input(entry),
        });
        self.seqs.push(entry.seq);
        self.head = self.messages.len();
    }

    /// Answers open calls with a "no result recorded" note and releases
    /// held-back messages, so the messages form a valid request.
    pub(crate) fn close_pending(&mut self) {
        for id in std::mem::take(&mut self.pending) {
            self.messages.push(ChatMessage::Tool {
                tool_call_id: id,
                content: prompts().missing_result.render(&[]).unwrap_or_default(),
            });
            self.seqs.push(self.pending_seq);
        }
        self.release_deferred();
    }

    fn release_deferred(&mut self) {
        for (seq, msg) in self.deferred.drain(..) {
            self.messages.push(msg);
            self.seqs.push(seq);
        }
    }

    /// Drops the messages of the entries up to `seq`, as a reload of the
    /// entries after `seq` would leave them: the system prompt and a
    /// summary stay, and what remains starts at a message that is not a
    /// tool result (whose call would be gone). Returns how many messages
    /// were dropped, starting at index [`ContextBuilder::head`], and the
    /// seq through which no entry is left (`seq`, or the last tool result
    /// dropped with its call when that is later); `None` (nothing changed)
    /// while calls are open or messages are out on a request.
    pub(crate) fn drop_through(&mut self, seq: i64) -> Option<(usize, i64)> {
        if !self.can_drop() {
            return None;
        }
        let cut = (self.head..self.messages.len())
            .find(|&i| self.seqs[i] > seq && !matches!(self.messages[i], ChatMessage::Tool { .. }))
            .unwrap_or(self.messages.len());
        let through = self.seqs[self.head..cut]
            .iter()
            .copied()
            .fold(seq, i64::max);
        self.messages.drain(self.head..cut);
        self.seqs.drain(self.head..cut);
        Some((cut - self.head, through))
    }

    /// Whether [`ContextBuilder::drop_through`] can cut: no call open, no
    /// message held back, the messages not out on a request.
    pub(crate) fn can_drop(&self) -> bool {
        self.pending.is_empty()
            && self.deferred.is_empty()
            && self.seqs.len() == self.messages.len()
    }

    /// The newest seq of a user-side message (an input), held back ones
    /// included; 0 when there is none.
    pub(crate) fn newest_input_seq(&self) -> i64 {
        let shown = self
            .messages
            .iter()
            .zip(&self.seqs)
            .filter(|(m, _)| matches!(m, ChatMessage::User { .. }))
            .map(|(_, &seq)| seq);
        let held = self.deferred.iter().map(|(seq, _)| *seq);
        shown.chain(held).max().unwrap_or(0)
    }

    /// Number of messages at the front that [`ContextBuilder::drop_through`]
    /// keeps.
    pub(crate) fn head(&self) -> usize {
        self.head
    }

    /// The messages so far.
    pub(crate) fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// The seq of each message's entry, parallel to
    /// [`ContextBuilder::messages`] (0 for the system prompt).
    pub(crate) fn seqs(&self) -> &[i64] {
        &self.seqs
    }

    /// The messages, for a request (call [`ContextBuilder::close_pending`] first).
    pub(crate) fn take_messages(&mut self) -> Vec<ChatMessage> {
        std::mem::take(&mut self.messages)
    }

    /// Gives the messages back after a request.
    pub(crate) fn restore_messages(&mut self, messages: Vec<ChatMessage>) {
        self.messages = messages;
    }
}

/// How a tool's refusal starts: `ToolError`'s display (`error: … Next
/// step: …`). The tool or the gate refused the call and nothing ran; the
/// model is not asked to make the same call again, as it is after an
/// approval (whose result is a prompt of its own, and whose call must be
/// repeated exactly).
const TOOL_ERROR_PREFIX: &str = "error: ";

/// An argument string of a refused call longer than this many characters
/// is cut in the context. The SendMessage limit is 16,000 characters, so a
/// text refused for its size is always cut; a short argument the model
/// may want to correct stays whole.
pub(crate) const CUT_ARGUMENT_CHARS: usize = 2_000;

/// Characters kept at the start of a cut argument.
pub(crate) const KEPT_ARGUMENT_CHARS: usize = 500;

/// The arguments of a refused call as later requests show them: every
/// string longer than [`CUT_ARGUMENT_CHARS`] cut to its first
/// [`KEPT_ARGUMENT_CHARS`] characters and prompts/argument_cut.md; `{}`
/// for long arguments that are not JSON (what the OpenAI wire sends for
/// them anyway). `None` when nothing is cut.
pub(crate) fn cut_refused_arguments(arguments: &str) -> Option<String> {
    // a string of n bytes has at most n characters
    if arguments.len() <= CUT_ARGUMENT_CHARS {
        return None;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(arguments) else {
        return Some("{}".to_owned());
    };
    if !cut_strings(&mut value) {
        return None;
    }
    Some(value.to_string())
}

/// Cuts the long strings in `value`; whether any was cut.
fn cut_strings(value: &mut Value) -> bool {
    match value {
        Value::String(s) => {
            let chars = s.chars().count();
            if chars <= CUT_ARGUMENT_CHARS {
                return false;
            }
            // cut between grapheme clusters: an accent or half a flag
            // is not left to join the note
            let kept = grapheme_prefix(s, KEPT_ARGUMENT_CHARS).to_owned();
            let note = prompts()
                .argument_cut
                .render(&[("chars", &grouped(chars))])
                .unwrap_or_default();
            *s = format!("{kept}{note}");
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |cut, v| cut_strings(v) | cut),
        Value::Object(map) => map.values_mut().fold(false, |cut, v| cut_strings(v) | cut),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `n` with its thousands separated by commas (`1,048,576`), as the
/// notes a model reads write sizes.
pub(crate) fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Put into a run of `<` or `>` in quoted data to break it up.
const RUN_BREAK: char = '\u{200b}';

/// Data shown inside a `<<< … >>>` quote, with no `>>>` or `<<<` left in
/// it, so the data can neither end the quote early (and pose as
/// instructions after it) nor open a quote of its own.
///
/// One pass: every run of `<` (or of `>`) longer than two is cut into pairs
/// by zero-width spaces, so no three of them stay adjacent whatever the
/// run's length (`>>>>>` → `>>` ZWSP `>>` ZWSP `>`). Only zero-width spaces are added;
/// everything else, including zero-width spaces already in the data, is
/// kept as it is (a character other than the run's own ends the run).
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // the marker character of the current run and how many of it are adjacent
    let mut run: Option<(char, usize)> = None;
    for c in text.chars() {
        if c != '<' && c != '>' {
            run = None;
            out.push(c);
            continue;
        }
        let adjacent = match run {
            Some((r, n)) if r == c && n < 2 => n,
            Some((r, _)) if r == c => {
                out.push(RUN_BREAK);
                0
            }
            Some(_) | None => 0,
        };
        out.push(c);
        run = Some((c, adjacent + 1));
    }
    out
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;

/// Whether `m` reads as an input's time note (prompts/time_note.md): tests
/// that look at what was said leave them out, and a running turn's inputs
/// share their clip budget without them (with a size check there: a
/// person may start a message so).
pub(crate) fn is_time_note(m: &ChatMessage) -> bool {
    matches!(m, ChatMessage::User { content } if prompts().time_note.is_rendering(content))
}

/// The text of a message that counts toward its tokens.
pub(crate) fn message_text(m: &ChatMessage) -> String {
    m.token_text()
}
