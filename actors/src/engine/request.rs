//! The messages a model call sends, shaped from a session's context
//! without changing it: the context keeps what was said, the request is
//! what a provider accepts and what fits.
//!
//! - **Roles alternate** (for a model that wants it,
//!   `Model::alternating_roles`: not the scripted one, whose rules read
//!   each message on its own). Consecutive user-side messages go as one, joined
//!   by a blank line (each keeps its own header and quoting), and an
//!   assistant message with no text and no tool call (the closing step of
//!   every turn) is left out. Two user messages in a row are routine (a
//!   failed turn's input and the next one, a memory update after the
//!   inputs, the summary and the first message after it), and the chat
//!   templates of Mistral and Gemma under vLLM refuse them.
//! - **A running turn stays bounded.** Once the turn's messages pass its
//!   budget ([`turn_budget`]: half the provider's `compact_at_tokens`),
//!   its older tool results are sent as a short stub
//!   (prompts/result_cut.md) until its messages are at half the budget
//!   again; the newest result is never stubbed, and every call keeps its
//!   result message. A compaction keeps a running turn's entries, so
//!   before this, ten 32 KB reads grew each request of the turn by 33 KB.
//!   Results are cut oldest first and stay cut for the rest of the turn
//!   (a watermark, [`TurnCut`]), so a stub changes the prompt prefix only
//!   when the budget is passed again, not at every step.
//! - **No one entry fills the request.** A message over the per-entry
//!   cap ([`clip::entry_cap`]: a quarter of `compact_at_tokens`) is sent
//!   as its start and its end around a note saying how much was cut and
//!   where the whole is (prompts/entry_clipped.md; a tool's result,
//!   the newest too, prompts/result_clipped.md). A person's 500 KB paste
//!   went whole into every request until a compaction after a later
//!   message summarised it. An older result the turn's budget cuts goes
//!   as its stub instead. The running turn's user-side messages share one
//!   cap (ten huge inputs batched into a turn each took a cap, 2.5 times
//!   `compact_at_tokens`), and an assistant message's calls have their
//!   long argument strings clipped inside their JSON (a Write of 1 MB went
//!   whole into every later request).
//!
//! What compaction compares with `compact_at_tokens` is what a request
//! sends ([`SessionTail::sent_tokens`]): the context's whole count, stubs
//! and clips aside, asked a long turn for a compaction at each step
//! (which keeps the running turn, so it could not bring the count down).
//! The plan it makes is kept for the step's request ([`Shaping`]), which
//! clipped every huge message a second time.
//!
//! Nothing is copied but what changes: the messages move into the request
//! and back ([`Undo`]); with nothing to shape, the request is the
//! context's own vector and goes back whole.

use std::collections::HashMap;

use botfleet_memory::Encoding;

use super::SessionTail;
use crate::engine::context::grouped;
use crate::model::ChatMessage;
use crate::model::ToolCall;
use crate::prompts::prompts;

/// The per-entry cap and the clip of a message over it.
#[path = "entry_clip.rs"]
pub(crate) mod clip;

/// The step's plan of what is sent, made once for the compaction check
/// and the request.
#[path = "request_plan.rs"]
mod plan;
pub(crate) use plan::Shaping;

/// What joins consecutive user-side messages.
const JOIN: &str = "\n\n";

/// A tool result shorter than this many characters is never cut: its stub
/// (prompts/result_cut.md, about 100 characters) would save little. At
/// four times the stub a cut saves three quarters or more (QA: at 1,000, a
/// turn of many reads of ~500 characters each was never cut, and grew its
/// requests to five times the turn's budget).
pub(crate) const MIN_CUT_CHARS: usize = 400;

/// The budget of a running turn's messages in a request, in tokens: half
/// the provider's `compact_at_tokens`. What came before the turn is kept
/// under `compact_at_tokens` by compaction (it compacts before a request
/// that would pass it, keeping the running turn), so a request stays near
/// that mark however many steps the turn takes.
pub(crate) fn turn_budget(compact_at_tokens: u64) -> u64 {
    compact_at_tokens / 2
}

/// What a request sends for a context message it does not send as it
/// is: a clip or a stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Its text.
    pub(crate) text: String,
    /// An assistant message's calls with long arguments clipped (`None`:
    /// its calls as they are).
    pub(crate) calls: Option<Vec<ToolCall>>,
    /// Its tokens as sent.
    pub(crate) tokens: u32,
}

impl Sent {
    /// A message sent as `text` (its calls, if any, as they are).
    pub(crate) fn text(text: String, encoding: Encoding) -> Self {
        let tokens = encoding.count_message(&text);
        Self {
            text,
            calls: None,
            tokens,
        }
    }
}

/// The running turn whose older tool results may be cut, and how far
/// they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnCut {
    /// Seq of the turn's first input: its messages start at the first one
    /// from there.
    pub(crate) from_seq: i64,
    /// Tokens its messages may take ([`turn_budget`]).
    pub(crate) budget: u64,
    /// Results up to this seq are cut (0: none yet).
    pub(crate) through: i64,
}

/// Which of `messages` (with their `seqs` and token `counts`, all three
/// parallel; `head` messages at the front always stay) are sent as a stub
/// and what the stub says, by index. Advances `cut.through` when the
/// turn's messages pass the budget.
pub(crate) fn plan_cuts(
    messages: &[ChatMessage],
    seqs: &[i64],
    counts: &[u32],
    head: usize,
    cut: &mut TurnCut,
    encoding: Encoding,
) -> HashMap<usize, String> {
    let mut stubs = HashMap::new();
    let Some(start) = (head..messages.len()).find(|&i| seqs.get(i) >= Some(&cut.from_seq)) else {
        return stubs;
    };
    let count = |i: usize| u64::from(counts.get(i).copied().unwrap_or(0));
    let mut total: u64 = (start..messages.len()).map(count).sum();
    if cut.through == 0 && total <= cut.budget {
        // the usual turn: nothing cut, nothing to cut
        return stubs;
    }
    let results: Vec<usize> = (start..messages.len())
        .filter(|&i| matches!(messages[i], ChatMessage::Tool { .. }))
        .collect();
    // the newest result is never cut: the model is reading it
    let Some((_, older)) = results.split_last() else {
        return stubs;
    };
    let stub_of = |number: usize, i: usize| -> Option<(String, u32)> {
        let ChatMessage::Tool {
            tool_call_id,
            content,
        } = &messages[i]
        else {
            return None;
        };
        // bytes first: a text of fewer bytes has fewer characters
        if content.len() < MIN_CUT_CHARS {
            return None;
        }
        let chars = content.chars().count();
        if chars < MIN_CUT_CHARS {
            return None;
        }
        let tool = tool_name(&messages[..i], tool_call_id).unwrap_or("tool");
        let text = prompts()
            .result_cut
            .render(&[
                ("tool", tool),
                ("number", &number.to_string()),
                ("chars", &grouped(chars)),
            ])
            .unwrap_or_default();
        let tokens = encoding.count_message(&text);
        Some((text, tokens))
    };
    let mut candidates = Vec::new();
    for (n, &i) in older.iter().enumerate() {
        let Some((text, tokens)) = stub_of(n + 1, i) else {
            continue;
        };
        let saves = count(i).saturating_sub(u64::from(tokens));
        if seqs[i] <= cut.through {
            total = total.saturating_sub(saves);
            stubs.insert(i, text);
        } else {
            candidates.push((i, text, saves));
        }
    }
    if total > cut.budget {
        for (i, text, saves) in candidates {
            if total <= cut.budget / 2 {
                break;
            }
            total = total.saturating_sub(saves);
            cut.through = cut.through.max(seqs[i]);
            stubs.insert(i, text);
        }
    }
    stubs
}

/// The name of the tool whose call `id` the newest assistant message in
/// `before` holding it made.
fn tool_name<'a>(before: &'a [ChatMessage], id: &str) -> Option<&'a str> {
    before.iter().rev().find_map(|m| match m {
        ChatMessage::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.as_str()),
        ChatMessage::System { .. } | ChatMessage::User { .. } | ChatMessage::Tool { .. } => None,
    })
}

/// How the context gets its messages back from a request.
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    /// The request is the context's messages as they are (no update, no
    /// clip or stub, roles not joined), this many: the same vector goes
    /// back. The common step moves no message and keeps the vector's
    /// spare room, where rebuilding it copied the whole context twice a
    /// step and the next entry pushed copied it once more to grow it.
    Same(usize),
    /// One part per message of the context, in order.
    Parts(Vec<Part>),
}

#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// The request holds the message unchanged, at this index.
    At(usize),
    /// The request holds it changed or not at all; this is the original.
    Held(ChatMessage),
}

/// Builds the request from the context's `messages`: `update` (a user
/// message) goes before the message at its index (at the end when the
/// index is past it), the messages in `sent` are sent as it says (a
/// result's stub, a clip; an assistant message with its calls, clipped
/// or not), and,
/// with `alternate`, consecutive user-side messages as one and empty
/// assistant messages not at all. Returns the request and how to undo it.
pub(crate) fn shape(
    messages: Vec<ChatMessage>,
    update: Option<(usize, String)>,
    sent: &HashMap<usize, Sent>,
    alternate: bool,
) -> (Vec<ChatMessage>, Undo) {
    let len = messages.len();
    if update.is_none() && sent.is_empty() && !alternate {
        // nothing to shape: every message would move as it is, in order
        return (messages, Undo::Same(len));
    }
    let mut b = Builder {
        out: Vec::with_capacity(len + 1),
        origin: Vec::with_capacity(len + 1),
        parts: Vec::with_capacity(len),
        alternate,
    };
    let (update_at, mut update) = match update {
        Some((at, text)) => (at.min(len), Some(text)),
        None => (len, None),
    };
    for (i, message) in messages.into_iter().enumerate() {
        if i == update_at
            && let Some(text) = update.take()
        {
            b.user(text, Source::Request);
        }
        match message {
            ChatMessage::Assistant {
                ref content,
                ref tool_calls,
                reasoning: _,
            } if alternate && content.is_empty() && tool_calls.is_empty() => {
                b.parts.push(Part::Held(message));
            }
            ChatMessage::User { content } => match sent.get(&i) {
                Some(sent) => b.user(sent.text.clone(), Source::Clipped(content)),
                None => b.user(content, Source::Context),
            },
            ChatMessage::Assistant {
                content,
                tool_calls,
                reasoning,
            } => match sent.get(&i) {
                Some(sent) => {
                    b.made(ChatMessage::Assistant {
                        content: sent.text.clone(),
                        tool_calls: sent.calls.clone().unwrap_or_else(|| tool_calls.clone()),
                        reasoning: reasoning.clone(),
                    });
                    b.parts.push(Part::Held(ChatMessage::Assistant {
                        content,
                        tool_calls,
                        reasoning,
                    }));
                }
                None => b.moved(ChatMessage::Assistant {
                    content,
                    tool_calls,
                    reasoning,
                }),
            },
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => match sent.get(&i) {
                Some(sent) => {
                    b.made(ChatMessage::Tool {
                        tool_call_id: tool_call_id.clone(),
                        content: sent.text.clone(),
                    });
                    b.parts.push(Part::Held(ChatMessage::Tool {
                        tool_call_id,
                        content,
                    }));
                }
                None => b.moved(ChatMessage::Tool {
                    tool_call_id,
                    content,
                }),
            },
            other @ ChatMessage::System { .. } => b.moved(other),
        }
    }
    if let Some(text) = update {
        b.user(text, Source::Request);
    }
    (b.out, Undo::Parts(b.parts))
}

/// Where a user-side message of the request comes from.
enum Source {
    /// The context's message, sent as it is.
    Context,
    /// The context's message (this is its original), sent clipped.
    Clipped(String),
    /// The request's own (the memory update).
    Request,
}

/// The request being built and how to undo it.
struct Builder {
    out: Vec<ChatMessage>,
    /// For each message of `out`, the part that points at it (`None`: made
    /// here, dropped when the context takes its messages back).
    origin: Vec<Option<usize>>,
    parts: Vec<Part>,
    /// Whether user-side messages in a row are joined.
    alternate: bool,
}

impl Builder {
    /// A context message sent as it is.
    fn moved(&mut self, message: ChatMessage) {
        self.parts.push(Part::At(self.out.len()));
        self.origin.push(Some(self.parts.len() - 1));
        self.out.push(message);
    }

    /// A message of the request's own.
    fn made(&mut self, message: ChatMessage) {
        self.origin.push(None);
        self.out.push(message);
    }

    /// A user-side message, joined to the one before it when that is one
    /// too.
    fn user(&mut self, content: String, source: Source) {
        let last = self.out.len().checked_sub(1);
        let previous = match self.out.last_mut() {
            Some(ChatMessage::User { content }) if self.alternate => Some(content),
            Some(ChatMessage::User { .. }) => None,
            Some(
                ChatMessage::System { .. }
                | ChatMessage::Assistant { .. }
                | ChatMessage::Tool { .. },
            )
            | None => None,
        };
        let Some(previous) = previous else {
            match source {
                Source::Context => self.moved(ChatMessage::User { content }),
                Source::Clipped(original) => {
                    self.made(ChatMessage::User { content });
                    self.parts
                        .push(Part::Held(ChatMessage::User { content: original }));
                }
                Source::Request => self.made(ChatMessage::User { content }),
            }
            return;
        };
        if let Some(last) = last
            && let Some(p) = self.origin[last].take()
        {
            // the context's message changes in the request: the context
            // gets its original back
            self.parts[p] = Part::Held(ChatMessage::User {
                content: previous.clone(),
            });
        }
        previous.push_str(JOIN);
        previous.push_str(&content);
        match source {
            Source::Context => self.parts.push(Part::Held(ChatMessage::User { content })),
            Source::Clipped(original) => {
                self.parts
                    .push(Part::Held(ChatMessage::User { content: original }));
            }
            Source::Request => {}
        }
    }
}

/// Spare room, in messages, of a context rebuilt from a shaped request.
const RESTORE_ROOM: usize = 16;

impl Undo {
    /// The context's messages, from the request's.
    pub(crate) fn restore(self, request: Vec<ChatMessage>) -> Vec<ChatMessage> {
        let parts = match self {
            Undo::Same(len) => {
                let mut request = request;
                request.truncate(len);
                return request;
            }
            Undo::Parts(parts) => parts,
        };
        let mut request = request.into_iter().enumerate();
        // room for the entries the turn pushes next (a step's message and
        // its results), which would otherwise copy the context to grow it
        let mut out = Vec::with_capacity(parts.len() + RESTORE_ROOM);
        for part in parts {
            match part {
                Part::Held(m) => out.push(m),
                Part::At(j) => {
                    if let Some((_, m)) = request.find(|(k, _)| *k == j) {
                        out.push(m);
                    }
                }
            }
        }
        out
    }
}

impl SessionTail {
    /// How the next requests are shaped: the running turn's messages
    /// start at its first input (`from_seq`; `None`: no turn, nothing is
    /// cut) and may take `budget` tokens before its older tool results are
    /// cut ([`turn_budget`]; the results cut so far stay cut
    /// while the turn runs), no message may take more than half of it
    /// ([`clip::entry_cap`]), and whether roles `alternate`
    /// (`Model::alternating_roles`).
    pub(crate) fn shape_requests(&mut self, from_seq: Option<i64>, budget: u64, alternate: bool) {
        self.alternate = alternate;
        self.entry_cap = clip::entry_cap(budget);
        self.turn_cut = match (from_seq, self.turn_cut.take()) {
            (None, _) => None,
            (Some(from), Some(cut)) if cut.from_seq == from => Some(TurnCut { budget, ..cut }),
            (Some(from), Some(_) | None) => Some(TurnCut {
                from_seq: from,
                budget,
                through: 0,
            }),
        };
    }

    /// The messages of the next model request: open tool calls answered,
    /// then `memory_update` (memory changed inside the epoch), if any, as a
    /// user message at `at`. `at` is set by the turn's first request (its
    /// end: right after the turn's inputs; or where the last request put
    /// the same update, `update_anchor`) and kept for the turn's later
    /// steps, so the update stays put and the steps follow it. At the end
    /// of every request it read as a new message from the person after each
    /// tool result, and a model answered again at each step. The request
    /// is shaped as this module describes: roles alternate, and the running
    /// turn's older tool results are cut past its budget. The context is
    /// empty until the messages are given back with
    /// [`SessionTail::restore_request`].
    pub(crate) fn take_request(
        &mut self,
        memory_update: Option<&str>,
        at: &mut Option<usize>,
    ) -> Vec<ChatMessage> {
        self.context.close_pending();
        // the compaction check's plan when nothing changed since (no
        // compaction ran, no call was open): planned once a step
        self.plan();
        let planned = self.shaping.planned.take();
        let (sent, through) =
            planned.map_or_else(|| (HashMap::new(), None), |p| (p.sent, p.through));
        if let (Some(cut), Some(through)) = (self.turn_cut.as_mut(), through) {
            cut.through = through;
        }
        let update_tokens = memory_update.map_or(0, |u| u64::from(self.encoding.count_message(u)));
        self.shaping.last_sent = self.sent_with(&sent) + update_tokens;
        self.shaping.last_replaced = sent.iter().map(|(&i, s)| (i, s.tokens)).collect();
        let messages = self.context.take_messages();
        // a turn's first request puts the update where the last request
        // put the same update (a turn before, in this epoch), else at its
        // end; the turn's later steps keep it there. Put at each turn's
        // end, it left the turn before's inputs in the next request
        // without it: the request differed from the last from there on,
        // at every turn until the next compaction (QA, 2026-12-05)
        let anchor = self
            .update_anchor
            .as_ref()
            .filter(|(i, text)| memory_update == Some(text.as_str()) && *i <= messages.len())
            .map(|(i, _)| *i);
        let update = memory_update.map(|update| {
            let i = (*at.get_or_insert(anchor.unwrap_or(messages.len()))).min(messages.len());
            *at = Some(i);
            (i, update.to_owned())
        });
        self.update_anchor = update.clone();
        let (request, undo) = shape(messages, update, &sent, self.alternate);
        self.undo = Some(undo);
        request
    }

    /// Gives back the messages of [`SessionTail::take_request`] after the
    /// call: the context's own, as they were (what the request added —
    /// the memory update at `_update_at`, joined texts, stubs, clips — is
    /// dropped).
    pub(crate) fn restore_request(
        &mut self,
        messages: Vec<ChatMessage>,
        _update_at: Option<usize>,
    ) {
        let messages = match self.undo.take() {
            Some(undo) => undo.restore(messages),
            None => messages,
        };
        self.context.restore_messages(messages);
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
