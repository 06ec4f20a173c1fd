//! The chat-completions wire format of answers: decoding streamed chunks
//! and whole responses, and assembling either into one [`ModelResponse`]
//! (requests are encoded in `encode.rs`).
//!
//! Decoding is lenient where providers differ and the meaning is clear:
//! `usage` may be null or absent, and one without both `prompt_tokens` and
//! `completion_tokens` (`{}`, nulls) counts as absent (the engine then
//! counts the tokens itself), as does one with a negative count or one
//! that is no number; a non-integer count is rounded (`usage.rs`); cached prompt tokens arrive as
//! `prompt_tokens_details.cached_tokens` (OpenAI, xAI, vLLM) or
//! `prompt_cache_hit_tokens` (DeepSeek), a tool-call delta without `index`
//! is placed by its id and its place in the chunk ([`Assembler`]), a
//! function name may come in pieces, and tool-call arguments may be an
//! object instead of a JSON string. Each call of a whole completion is a
//! call of its own, even when two share an id. A call without an id gets
//! a fresh random one, and one without a function name the name
//! `missing_function_name`, which no tool has (it is answered with an
//! error result, as a call of an unknown tool is). A lone UTF-16
//! surrogate, in the answer's JSON or escaped inside a call's arguments,
//! becomes U+FFFD (`surrogates.rs`).
//!
//! Two answers are errors, not responses: a `refusal` (OpenAI's field for
//! a model that declines, streamed as `delta.refusal`) is
//! [`ModelError::Refused`], and the finish reason `content_filter` is
//! [`ModelError::ContentFiltered`]. No caller can use either as an answer
//! (a compaction would keep the refusal as its summary). Nor an answer
//! whose finish reason is `error` or `abort` (vLLM's and SGLang's for a
//! generation that failed or was aborted on the server, sent without an
//! `error` field): it is cut, and retried as a broken answer.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::super::FinishReason;
use super::super::ModelError;
use super::super::ModelResponse;
use super::super::ToolCall;
use super::super::Usage;
use super::surrogates;

/// Content as a string, `null` or an array of typed parts.
#[path = "content.rs"]
mod content;

/// `usage`, read leniently.
#[path = "usage.rs"]
mod usage;

use usage::WireUsage;

/// The name a tool call that came without one is given. No tool has it,
/// so the call gets an error result naming it and the turn goes on, as
/// for a call of an unknown tool; it also stands where a server would
/// refuse an empty name when the call is sent back.
pub(super) const NAMELESS_CALL: &str = "missing_function_name";

/// One streamed `chat.completion.chunk`.
#[derive(Debug, Deserialize)]
pub(super) struct StreamChunk {
    #[serde(default)]
    choices: Option<Vec<StreamChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    /// `"error"` on an error object sent without the `error` wrapper
    /// (vLLM's `ErrorResponse`: `{"object": "error", "message", "type",
    /// "code"}`), which is then the error itself.
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
}

impl StreamChunk {
    /// The provider's error this chunk is: its `error` value, or the
    /// chunk itself when it is an unwrapped error object (QA: such an
    /// event was read as an empty chunk, and the turn ended without a
    /// reply and without the server's words anywhere).
    fn take_error(&mut self) -> Option<Value> {
        if let Some(error) = self.error.take() {
            return Some(error);
        }
        (self.object.as_deref() == Some("error")).then(|| {
            let mut error = serde_json::Map::new();
            for (key, value) in [
                ("message", self.message.take()),
                ("type", self.kind.take()),
                ("code", self.code.take()),
            ] {
                if let Some(value) = value {
                    error.insert(key.to_owned(), value);
                }
            }
            Value::Object(error)
        })
    }

    /// Whether this is the usage chunk OpenAI sends last with
    /// `stream_options.include_usage`: `usage`, and no choice (`choices:
    /// []`). After the finish reason it ends the answer: only `[DONE]`
    /// may follow (`openai.rs`, `read_stream`).
    pub(super) fn is_usage_only(&self) -> bool {
        self.usage.is_some() && self.choices.as_ref().is_none_or(Vec::is_empty)
    }
}

#[derive(Debug, Deserialize)]
struct StreamChoice {
    #[serde(default)]
    index: Option<u32>,
    /// (`message` from a server that streams each choice whole, in one
    /// chunk: it was taken for an empty answer, QA 2026-12-05)
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default, deserialize_with = "content::text")]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    /// The model's thinking (DeepSeek, Qwen, Kimi thinking mode).
    #[serde(default, deserialize_with = "content::text")]
    reasoning_content: Option<String>,
    /// The same under the name some servers use (vLLM, OpenRouter); a
    /// server may send both, and `reasoning_content` wins.
    #[serde(default, deserialize_with = "content::text")]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallPart>>,
    /// The legacy single call (`function_call`), taken as one tool call.
    #[serde(default)]
    function_call: Option<FunctionPart>,
}

/// A tool call, or a streamed piece of one.
#[derive(Debug, Deserialize)]
struct ToolCallPart {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionPart>,
}

#[derive(Debug, Deserialize)]
struct FunctionPart {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// A whole (non-streamed) `chat.completion`.
#[derive(Debug, Deserialize)]
pub(super) struct Completion {
    #[serde(default)]
    choices: Option<Vec<CompletionChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

impl Completion {
    /// Whether it has neither `choices` (`null` counts as none) nor an
    /// `error`: not a chat completion at all.
    pub(super) fn lacks_choices(&self) -> bool {
        self.choices.is_none() && self.error.is_none()
    }
}

#[derive(Debug, Deserialize)]
struct CompletionChoice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    message: Option<CompletionMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CompletionMessage {
    #[serde(default, deserialize_with = "content::text")]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    /// The model's thinking (DeepSeek, Qwen, Kimi thinking mode).
    #[serde(default, deserialize_with = "content::text")]
    reasoning_content: Option<String>,
    /// The same under the name some servers use (vLLM, OpenRouter); a
    /// server may send both, and `reasoning_content` wins.
    #[serde(default, deserialize_with = "content::text")]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallPart>>,
    /// The legacy single call (`function_call`), taken as one tool call.
    #[serde(default)]
    function_call: Option<FunctionPart>,
}

/// Accumulates a response from chunks (or from one whole completion).
///
/// Streamed tool-call pieces are placed by their `index`. A piece without
/// one (some servers leave it out) goes to the call with its `id`; a new
/// id starts a new call; a piece without an id continues the call of the
/// piece before it, unless the chunk already gave that call a piece (a
/// chunk holds one piece per call). Whichever way a piece is placed, it
/// starts a new call instead when it cannot belong to the one it was
/// placed in ([`starts_new_call`]): its id differs from that call's, or
/// it names a function after that call's arguments began with another
/// name or were already a whole JSON object. Some servers (Ollama behind
/// LiteLLM, some Qwen setups) give every parallel call index 0, and
/// placing by index alone ran them into one call. A piece without a name
/// that brings arguments continues a call whose arguments are not whole
/// yet, under a new id (servers that give every piece a new id) or at a
/// new index without an id ([`Assembler::place_at`]): a call cannot
/// start without a name. A whole completion's
/// calls are not pieces: each is its own call. The legacy `function_call`
/// is one call at index 0.
///
/// Reasoning text (`reasoning_content`, or `reasoning`) is kept apart
/// from the text: it is neither streamed to the sink nor shown, only sent
/// back with the step's calls in the turn's later requests.
#[derive(Debug, Default)]
pub(super) struct Assembler {
    text: String,
    /// The model's thinking, joined; `Some("")` when the answer had the
    /// field, empty (DeepSeek wants it back so with the calls).
    reasoning: Option<String>,
    /// The model's refusal, if it declined (`refusal` pieces, joined).
    refusal: String,
    /// The calls by (wire index, how many calls at that index came
    /// before): in index order, and at one index in arrival order.
    calls: BTreeMap<CallKey, PartialCall>,
    /// The call the last tool-call piece went to.
    current: Option<CallKey>,
    finish: Option<Finish>,
    /// Whether a choice came (an answer with none is no answer at all).
    has_choice: bool,
    /// Whether the answer went on after a finish reason (a gateway that
    /// puts one on every chunk, some in front of Gemini): its finish
    /// reason does not say the answer is over.
    went_on_after_finish: bool,
    /// Whether a choice chunk came without a finish reason.
    unfinished_chunk: bool,
    /// Whether a chunk added to the answer without a finish reason.
    grew_unfinished: bool,
    /// Whether the last chunk with a finish reason added to the answer.
    last_finish_grew: bool,
    usage: Option<Usage>,
    /// The odd counts of the last `usage` that had any (`usage.rs`).
    odd_usage: Option<String>,
    /// Bytes of text, of the refusal and of tool-call ids, names and
    /// arguments received.
    size: usize,
    /// What the chunks streamed besides text since it was last taken
    /// ([`Self::take_unshown`]): kept only for a stream (`streamed`), the
    /// same pieces `size` counts.
    unshown: String,
    /// Whether the answer is streamed (chunks applied), not whole.
    streamed: bool,
}

/// Where a call is kept: its wire index (or the place given to a piece
/// without one), then its rank among the calls at that index.
type CallKey = (u32, u32);

/// Why a choice stopped, as the provider said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// A reason a response carries.
    Reason(FinishReason),
    /// `content_filter`: the call fails ([`ModelError::ContentFiltered`]).
    ContentFilter,
    /// `error` or `abort` (the reason as sent): the server stopped
    /// generating before the answer's end (vLLM, SGLang: an engine error,
    /// a request aborted by a restart, a shutdown, a pause or
    /// preemption). What came is a cut answer, not the model's reply;
    /// the attempt is retried as a broken one (`body.rs`, `finished`).
    Failed(&'static str),
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Assembler {
    /// Text received so far.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// Cuts the text received so far at byte `at` (kept when `at` is past
    /// its end or not at a character boundary).
    pub(super) fn cut_text(&mut self, at: usize) {
        if self.text.is_char_boundary(at) {
            self.text.truncate(at);
        }
    }

    /// Bytes of text and of tool-call ids, names and arguments received so
    /// far (what a runaway answer grows); a repeated id or name counts once.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The odd token counts the answer's usage had, if any: rounded, or
    /// the usage left out (`usage.rs`).
    pub(super) fn odd_usage(&self) -> Option<&str> {
        self.odd_usage.as_deref()
    }

    /// Whether a choice has said why it stopped (so a body that ends
    /// without `[DONE]` is still complete).
    pub(super) fn has_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Whether the finish reason came and says the answer is over: only
    /// the usage chunk and `[DONE]` are still to come. Not so once the
    /// answer went on after one (a finish reason on every chunk).
    pub(super) fn only_the_end_to_come(&self) -> bool {
        self.finish.is_some() && !self.went_on_after_finish
    }

    /// Whether a stream that breaks now (a reset, an error in the body)
    /// lost only the usage chunk and `[DONE]`: the finish reason came
    /// ([`Self::only_the_end_to_come`]), and it can be told from a
    /// gateway's finish reason on every chunk: it came after chunks that
    /// added to the answer without one (vLLM puts its last token beside
    /// it), or on a chunk that added nothing after one without it
    /// (OpenAI's last choice chunk, after its role chunk). An answer whose
    /// every growing chunk carried one so far may be a gateway's, cut
    /// after its first chunk, and is retried (QA: one chunk of text with
    /// "stop", then a reset, was taken as the whole answer); so is a
    /// one-chunk answer cut before its `[DONE]`, at the cost of one call.
    pub(super) fn break_loses_only_the_end(&self) -> bool {
        self.only_the_end_to_come()
            && (self.grew_unfinished || (self.unfinished_chunk && !self.last_finish_grew))
    }

    /// The finish reason, as sent, of a choice the server stopped before
    /// its end (`error`, `abort`: [`Finish::Failed`]).
    pub(super) fn failed_finish(&self) -> Option<&'static str> {
        match self.finish {
            Some(Finish::Failed(reason)) => Some(reason),
            Some(Finish::Reason(_) | Finish::ContentFilter) | None => None,
        }
    }

    /// Whether the answer held a choice (the one with index 0), streamed
    /// or not. One without any is a broken answer, retried alike in both
    /// modes; a choice without a finish reason is accepted in both (some
    /// servers end a stream with `[DONE]` and no finish reason).
    pub(super) fn has_choice(&self) -> bool {
        self.has_choice
    }

    /// Applies one streamed chunk. Returns the new text to forward to the
    /// sink (never empty), or the provider's `error` value if the chunk is
    /// an error (its message: [`error_message`]).
    pub(super) fn apply_chunk(&mut self, mut chunk: StreamChunk) -> Result<Option<String>, Value> {
        if let Some(error) = chunk.take_error() {
            return Err(error);
        }
        // a chunk whose usage lacks the counts keeps what an earlier one said
        if let Some(read) = chunk.usage.map(WireUsage::read) {
            self.usage = read.usage.or(self.usage);
            self.odd_usage = read.odd.or(self.odd_usage.take());
        }
        self.streamed = true;
        let Some(choice) = first_choice(chunk.choices, |c| c.index) else {
            return Ok(None);
        };
        self.has_choice = true;
        let (finished_before, size_before) = (self.finish.is_some(), self.size);
        let finishes = choice.finish_reason.filter(|r| !r.trim().is_empty());
        if let Some(reason) = &finishes {
            self.finish = Some(finish_reason(reason));
        }
        let text = choice.delta.and_then(|delta| {
            let mut parts = delta.tool_calls.unwrap_or_default();
            parts.extend(delta.function_call.map(legacy_call));
            self.apply_calls(parts);
            self.apply_refusal(delta.refusal);
            self.apply_reasoning(delta.reasoning_content, delta.reasoning);
            self.apply_text(delta.content)
        });
        let grew = self.size > size_before;
        if finished_before && grew {
            self.went_on_after_finish = true;
        }
        if finishes.is_some() {
            self.last_finish_grew = grew;
        } else {
            self.unfinished_chunk = true;
            self.grew_unfinished |= grew;
        }
        Ok(text)
    }

    /// What the chunks applied since the last call streamed besides their
    /// text, taken: the provider hands it to the sink
    /// ([`crate::model::StreamSink::on_unshown`]), which counts what an
    /// answer that then fails had made (QA: a runaway of reasoning or of
    /// call arguments past `max_response_bytes` counted no tokens).
    pub(super) fn take_unshown(&mut self) -> String {
        std::mem::take(&mut self.unshown)
    }

    /// Applies a whole completion; same contract as [`Self::apply_chunk`].
    pub(super) fn apply_completion(
        &mut self,
        completion: Completion,
    ) -> Result<Option<String>, Value> {
        if let Some(error) = completion.error {
            return Err(error);
        }
        let read = completion.usage.map(WireUsage::read).unwrap_or_default();
        (self.usage, self.odd_usage) = (read.usage, read.odd);
        let Some(choice) = first_choice(completion.choices, |c| c.index) else {
            return Ok(None);
        };
        self.has_choice = true;
        // `""` is no reason (Ollama, SGLang, LocalAI, KoboldCpp send it on
        // every chunk of a stream, and some on a whole answer)
        self.finish = choice
            .finish_reason
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .map(finish_reason);
        let Some(message) = choice.message else {
            return Ok(None);
        };
        let mut calls = message.tool_calls.unwrap_or_default();
        calls.extend(message.function_call.map(legacy_call));
        self.apply_whole_calls(calls);
        self.apply_refusal(message.refusal);
        self.apply_reasoning(message.reasoning_content, message.reasoning);
        Ok(self.apply_text(message.content))
    }

    fn apply_text(&mut self, content: Option<String>) -> Option<String> {
        let delta = content.filter(|text| !text.is_empty())?;
        self.size += delta.len();
        self.text.push_str(&delta);
        Some(delta)
    }

    /// Refusal pieces are kept apart from the text and not streamed to
    /// the sink: they are not working output but the model's reason for
    /// giving none.
    fn apply_refusal(&mut self, refusal: Option<String>) {
        if let Some(piece) = refusal.filter(|piece| !piece.is_empty()) {
            self.size += piece.len();
            self.note_unshown(&piece);
            self.refusal.push_str(&piece);
        }
    }

    /// Keeps a streamed piece that is not text (a call's name or
    /// arguments, reasoning, a refusal) for [`Self::take_unshown`].
    fn note_unshown(&mut self, piece: &str) {
        if self.streamed {
            self.unshown.push_str(piece);
        }
    }

    /// Reasoning pieces, kept apart from the text (see [`Assembler`]).
    /// `reasoning_content` (DeepSeek's, Kimi's) is kept even empty: their
    /// servers want it back with the calls, empty or not. An empty
    /// `reasoning` (vLLM's and OpenRouter's name) is none: a server that
    /// sends it may refuse a `reasoning_content` it does not know (QA,
    /// 2026-12-05).
    fn apply_reasoning(&mut self, content: Option<String>, reasoning: Option<String>) {
        let piece = match (content, reasoning) {
            (Some(piece), _) => piece,
            (None, Some(piece)) if !piece.is_empty() => piece,
            (None, _) => return,
        };
        self.size += piece.len();
        self.note_unshown(&piece);
        self.reasoning.get_or_insert_default().push_str(&piece);
    }

    /// A chunk's tool-call pieces, each added to the call it belongs to.
    fn apply_calls(&mut self, parts: Vec<ToolCallPart>) {
        // the calls this chunk gave a piece
        let mut touched: Vec<CallKey> = Vec::new();
        for part in parts {
            let mut key = match part.index {
                Some(index) => self.place_at(index, &part),
                None => self.place(&part, &touched),
            };
            if self
                .calls
                .get(&key)
                .is_some_and(|call| repeats_call(call, &part))
            {
                touched.push(key);
                continue;
            }
            if self
                .calls
                .get(&key)
                .is_some_and(|call| starts_new_call(call, &part))
            {
                key = match part.index {
                    Some(_) => (key.0, key.1 + 1),
                    None => self.next_key(),
                };
            }
            touched.push(key);
            self.apply_piece(key, part);
        }
    }

    /// A whole completion's calls: each element is a call of its own,
    /// whatever its `index` or `id` says (placing by id, as for pieces,
    /// ran two calls sharing an id together into one). The engine gives a
    /// repeated id a fresh one, as for streamed calls.
    fn apply_whole_calls(&mut self, calls: Vec<ToolCallPart>) {
        for call in calls {
            self.apply_piece(self.next_key(), call);
        }
    }

    /// Adds `part` to the call at `key`.
    fn apply_piece(&mut self, key: CallKey, part: ToolCallPart) {
        self.current = Some(key);
        let call = self.calls.entry(key).or_default();
        if let Some(id) = part.id.filter(|id| !id.is_empty() && *id != call.id) {
            self.size += id.len();
            call.id = id;
        }
        let Some(function) = part.function else {
            return;
        };
        // Names are appended like arguments, as openai-python's
        // accumulator does (it concatenates every string field), so a
        // name split over deltas ("Send", "Message") is whole. vLLM,
        // llama.cpp and OpenAI send it once; a piece equal to the
        // whole name so far is a server repeating it in every delta
        // and is dropped (no tool name is two copies of one word).
        let mut added = String::new();
        if let Some(name) = function
            .name
            .filter(|name| !name.is_empty() && *name != call.name)
        {
            call.name.push_str(&name);
            added = name;
        }
        let before = call.arguments.len();
        match function.arguments {
            Some(Value::String(fragment)) => call.arguments.push_str(&fragment),
            Some(Value::Null) | None => {}
            Some(object) => call.arguments.push_str(&object.to_string()),
        }
        added.push_str(&call.arguments[before..]);
        self.size += added.len();
        self.note_unshown(&added);
    }

    /// The key of a call after all others: at the next index, or after the
    /// calls at the last one a server can name (audit: a call at index
    /// `u32::MAX` overflowed the next, a panic or a key before all others).
    fn next_key(&self) -> CallKey {
        self.calls
            .last_key_value()
            .map_or((0, 0), |(&(index, rank), _)| match index.checked_add(1) {
                Some(next) => (next, 0),
                None => (index, rank.saturating_add(1)),
            })
    }

    /// The call a piece at wire index `index` belongs to: the call there
    /// with its id, else the latest call there. A piece with neither id
    /// nor name at an index no call has yet continues the call the piece
    /// before went to while that call's arguments are not whole
    /// ([`continues`]): some servers send the rest of a call's arguments
    /// at the next index (seen from Nebius and Cerebras, and from
    /// DeepSeek behind a proxy, whose second call's head came at index 0
    /// and its arguments at index 1); a call cannot start without a name.
    fn place_at(&self, index: u32, part: &ToolCallPart) -> CallKey {
        let mut at_index = self.calls.range((index, 0)..=(index, u32::MAX));
        if let Some(id) = part.id.as_deref().filter(|id| !id.is_empty())
            && let Some((key, _)) = at_index.clone().find(|(_, call)| call.id == id)
        {
            return *key;
        }
        if let Some((key, _)) = at_index.next_back() {
            return *key;
        }
        let anonymous = part.id.as_deref().is_none_or(str::is_empty) && !names_function(part);
        match self.current {
            Some(current)
                if anonymous && self.calls.get(&current).is_some_and(|c| continues(c, part)) =>
            {
                current
            }
            _ => (index, 0),
        }
    }

    /// The call a piece without `index` belongs to (see [`Assembler`]);
    /// `touched` holds the calls this chunk already gave a piece.
    fn place(&self, part: &ToolCallPart, touched: &[CallKey]) -> CallKey {
        let next = self.next_key();
        if let Some(id) = part.id.as_deref().filter(|id| !id.is_empty()) {
            if let Some((key, _)) = self.calls.iter().find(|(_, call)| call.id == id) {
                return *key;
            }
            // an id that comes late, on a piece that goes on with the
            // current call's unfinished arguments, is that call's (as
            // `place_at` has it with an index): taken for a new call, it
            // split one call in two broken ones (audit, 2026-12-07)
            return self
                .current
                .filter(|key| !touched.contains(key))
                .filter(|key| {
                    !names_function(part)
                        && self
                            .calls
                            .get(key)
                            .is_some_and(|c| c.id.is_empty() && continues(c, part))
                })
                .unwrap_or(next);
        }
        self.current
            .filter(|key| !touched.contains(key))
            .unwrap_or(next)
    }

    /// The finished response. A call without an id gets a fresh random one
    /// ([`ToolCall::fresh_id`]: `call_<index>` would repeat in every step),
    /// one without a name [`NAMELESS_CALL`]; empty arguments become `{}`;
    /// a lone surrogate (marked, or escaped in the arguments) becomes
    /// U+FFFD; a missing finish reason is inferred.
    /// A refusal fails with [`ModelError::Refused`], a content filter's
    /// stop with [`ModelError::ContentFiltered`].
    pub(super) fn into_response(self) -> Result<ModelResponse, ModelError> {
        if !self.refusal.trim().is_empty() {
            return Err(ModelError::Refused {
                refusal: surrogates::join(self.refusal).trim().to_owned(),
                usage: self.usage,
            });
        }
        let finish = match self.finish {
            Some(Finish::ContentFilter) => {
                return Err(ModelError::ContentFiltered { usage: self.usage });
            }
            Some(Finish::Reason(reason)) => Some(reason),
            // retried before it gets here (`body.rs`, `finished`)
            Some(Finish::Failed(_)) => Some(FinishReason::Other),
            None => None,
        };
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for call in self.calls.into_values() {
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    ToolCall::fresh_id()
                } else {
                    surrogates::join(call.id)
                },
                // answered like a call of an unknown tool, not a failed turn
                name: if call.name.is_empty() {
                    NAMELESS_CALL.to_owned()
                } else {
                    surrogates::join(call.name)
                },
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    // the arguments are JSON text, and a lone surrogate
                    // escaped in it would make them invalid JSON
                    surrogates::replace_lone_escapes(surrogates::join(call.arguments))
                },
            });
        }
        let finish = finish.unwrap_or(if tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        Ok(ModelResponse {
            text: surrogates::join(self.text),
            reasoning: self.reasoning.map(surrogates::join),
            tool_calls,
            finish,
            usage: self.usage,
        })
    }
}

/// Whether `part`, placed in `call`, is the start of another call: its id
/// differs from the call's, or it names a function once the call's
/// arguments are a whole JSON object (under another name, or under the
/// same name with arguments of its own: a server repeating the name with
/// an empty piece continues the call). A name piece while the arguments
/// are still unfinished continues the call's name.
///
/// Not a new call: a name for a call that has none yet (a server that
/// sends the name after the first arguments: the call was split in two,
/// QA 2026-12-05), or a piece of only whitespace (a trailing `"\n"` that
/// repeated the id and name made a phantom call with no arguments).
fn starts_new_call(call: &PartialCall, part: &ToolCallPart) -> bool {
    if only_whitespace(part) {
        return false;
    }
    if let Some(id) = part.id.as_deref()
        && !id.is_empty()
        && !call.id.is_empty()
        && id != call.id
    {
        // a server that gives every piece a new id (Poolside's API;
        // mlx-openai-server before its fix) sends the rest of a call's
        // arguments under another id and no name
        return names_function(part) || !continues(call, part);
    }
    let Some(function) = &part.function else {
        return false;
    };
    let Some(name) = function.name.as_deref().filter(|name| !name.is_empty()) else {
        return false;
    };
    if call.arguments.is_empty() || call.name.is_empty() {
        return false;
    }
    if name != call.name {
        // another name once the arguments are whole; before, a name
        // streamed in pieces with arguments between them (`"SendMess"`
        // with `{"tex`, then `"age"`: QA, two calls `SendMess` and `age`)
        return is_whole_object(&call.arguments);
    }
    brings_arguments(part) && is_whole_object(&call.arguments)
}

/// Whether `part` brings arguments that are only whitespace.
fn only_whitespace(part: &ToolCallPart) -> bool {
    matches!(
        part.function.as_ref().and_then(|f| f.arguments.as_ref()),
        Some(Value::String(fragment)) if !fragment.is_empty() && fragment.trim().is_empty()
    )
}

/// Whether `part` is `call` sent again whole: the same id, no other name,
/// and the same arguments, which are a whole JSON object. A server that
/// repeats a finished call in its last chunk had it run twice (QA,
/// 2026-12-05: a Shell command ran twice). Ids tell calls apart, so two
/// calls with one id are one call.
fn repeats_call(call: &PartialCall, part: &ToolCallPart) -> bool {
    let same_id = part
        .id
        .as_deref()
        .is_some_and(|id| !id.is_empty() && id == call.id);
    let Some(function) = &part.function else {
        return false;
    };
    let same_name = function
        .name
        .as_deref()
        .is_none_or(|name| name.is_empty() || name == call.name);
    let same_arguments = match function.arguments.as_ref() {
        Some(Value::String(fragment)) => fragment.trim() == call.arguments.trim(),
        Some(Value::Null) | None => false,
        Some(object) => serde_json::from_str::<Value>(&call.arguments).is_ok_and(|v| v == *object),
    };
    same_id && same_name && same_arguments && is_whole_object(&call.arguments)
}

/// Whether `part` brings some of its call's arguments.
fn brings_arguments(part: &ToolCallPart) -> bool {
    match part.function.as_ref().and_then(|f| f.arguments.as_ref()) {
        Some(Value::String(fragment)) => !fragment.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    }
}

/// Whether `part` gives a function name.
fn names_function(part: &ToolCallPart) -> bool {
    part.function
        .as_ref()
        .and_then(|f| f.name.as_deref())
        .is_some_and(|name| !name.is_empty())
}

/// Whether `part`, a piece without a name, brings more of `call`'s
/// arguments: the call has a name, its arguments are not a whole JSON
/// object yet, and the piece brings some.
fn continues(call: &PartialCall, part: &ToolCallPart) -> bool {
    brings_arguments(part) && !call.name.is_empty() && !is_whole_object(&call.arguments)
}

/// Whether `arguments` is already one whole JSON object. Asked at every
/// piece of a server that gives each piece a new id, so the parse runs
/// only when the text so far can be one (it ends in `}`): parsing the
/// growing arguments at each piece cost the square of their length.
fn is_whole_object(arguments: &str) -> bool {
    arguments.trim_end().ends_with('}')
        && serde_json::from_str::<serde_json::Map<String, Value>>(arguments).is_ok()
}

/// The legacy `function_call` as a tool call at index 0 (it has no id and
/// no index: a message holds at most one).
fn legacy_call(function: FunctionPart) -> ToolCallPart {
    ToolCallPart {
        index: Some(0),
        id: None,
        function: Some(function),
    }
}

/// The provider's error (its message: [`error_message`]) when a body
/// that should have been SSE holds a bare JSON error object instead
/// (`{"error": …}`, no `data:` lines), as some servers send on failure,
/// or an `error:` line (llama.cpp's server sends a failure in a stream as
/// `error: {"code": 500, "message": …}`, which was read as a stream that
/// "ended early", its message lost); `None` when it holds anything else.
pub(super) fn bare_error(body: &[u8]) -> Option<Value> {
    let body = body.trim_ascii();
    if let Ok(mut value) = serde_json::from_slice::<Value>(body) {
        return value.get_mut("error").map(Value::take);
    }
    body.split(|b| *b == b'\n').find_map(|line| {
        let error = line.trim_ascii().strip_prefix(b"error:")?;
        serde_json::from_slice(error).ok()
    })
}

/// The choice with index 0 (we never ask for more than one).
fn first_choice<C>(choices: Option<Vec<C>>, index: impl Fn(&C) -> Option<u32>) -> Option<C> {
    choices?
        .into_iter()
        .find(|choice| index(choice).unwrap_or(0) == 0)
}

fn finish_reason(reason: &str) -> Finish {
    Finish::Reason(match reason {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
        "length" | "max_tokens" => FinishReason::Length,
        "content_filter" => return Finish::ContentFilter,
        "error" => return Finish::Failed("error"),
        "abort" => return Finish::Failed("abort"),
        _ => FinishReason::Other,
    })
}

/// The human part of an OpenAI-style error value (`{"message": ..}` or a
/// bare string), else the value as JSON.
pub(super) fn error_message(error: &Value) -> String {
    match error {
        Value::String(message) => message.clone(),
        Value::Object(fields) => match fields.get("message") {
            Some(Value::String(message)) => message.clone(),
            _ => error.to_string(),
        },
        _ => error.to_string(),
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "wire_dialect_tests.rs"]
mod dialect_tests;
