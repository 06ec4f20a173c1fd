//! The per-entry cap of a request: no one message may take more than
//! [`entry_cap`] tokens of what a model call sends.
//!
//! A person's 500 KB paste, a huge report from another bot or a tool's
//! huge result went whole into every request until a compaction after a
//! later message summarised it; with a real endpoint the request passed
//! the model's context window and the turn failed, and compaction cannot
//! help while the message is the running turn's input (it keeps a running
//! turn's entries). A message over the cap goes as its start and its end
//! around a note (prompts/entry_clipped.md, prompts/result_clipped.md for
//! a tool's result) saying how much was cut and how to get at the rest.
//! The running turn's user-side messages share one cap between them
//! (several huge inputs batched into one turn), and a call's long
//! arguments are clipped inside their JSON (prompts/argument_clipped.md).
//! Only the request is clipped: the transcript and the session's context
//! keep the entry whole, and the clip of a message is the same in every
//! request while the same messages share its budget (the prompt prefix a
//! provider cached stays byte-identical; a reminder joining the running
//! turn changes its inputs' shares once).

use std::collections::HashMap;

use botfleet_memory::Encoding;
use botfleet_memory::TranscriptIndex;
use serde_json::Value;
use unicode_segmentation::GraphemeCursor;

use super::Sent;
use super::tool_name;
use crate::engine::context::grouped;
use crate::model::ChatMessage;
use crate::model::ToolCall;
use crate::prompts::Template;
use crate::prompts::prompts;

/// The fewest tokens the cap allows, whatever the provider's
/// `compact_at_tokens`: with a tiny threshold (tests use 1,000) a lower
/// cap would leave of a message little more than its note.
pub(crate) const MIN_ENTRY_TOKENS: u64 = 1_000;

/// The fewest tokens a shared budget leaves one clipped part
/// ([`fair_shares`]): the notes take about 80, and a clip much shorter
/// would show little of its text.
pub(crate) const MIN_SHARE_TOKENS: u64 = 256;

/// How many times the kept length is narrowed before giving up on a text
/// whose start and end count more tokens than its share (each try scales
/// the kept characters by the ratio of tokens wanted to tokens found).
const FIT_TRIES: usize = 8;

/// The most tokens one message may take in a request: half a running
/// turn's budget (`request::turn_budget`, half of `compact_at_tokens`),
/// so a quarter of `compact_at_tokens`, and at least
/// [`MIN_ENTRY_TOKENS`]. A turn's input and its newest tool result at the
/// cap together fit the turn's budget (its older results go as stubs), so
/// however large an entry is, a request grows by at most the cap for it.
pub(crate) fn entry_cap(turn_budget: u64) -> u64 {
    (turn_budget / 2).max(MIN_ENTRY_TOKENS)
}

/// What the note between a clipped text's start and end is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut<'a> {
    /// The text's start that is kept.
    pub(crate) head: &'a str,
    /// The text's end that is kept.
    pub(crate) tail: &'a str,
    /// Characters left out between them.
    pub(crate) cut: usize,
    /// Characters of the whole text.
    pub(crate) chars: usize,
}

/// `text`, if it counts more than `budget` tokens, as the rendering of
/// `render` (its start, a note, its end) of about `budget` tokens: the
/// start and the end are equal shares of the characters kept. `None`
/// when the text fits. Deterministic: the same text and budget give the
/// same clip.
pub(crate) fn clip(
    text: &str,
    budget: u64,
    encoding: Encoding,
    render: &dyn Fn(Cut<'_>) -> String,
) -> Option<String> {
    let tokens = u64::from(encoding.count(text));
    if tokens <= budget {
        return None;
    }
    let chars = text.chars().count();
    // the note's own tokens, with numbers as long as they can get
    let note = u64::from(encoding.count(&render(Cut {
        head: "",
        tail: "",
        cut: chars,
        chars,
    })));
    let room = budget.saturating_sub(note).max(1);
    let mut keep = scale(chars, room, tokens);
    let mut parts = split(text, chars, keep);
    for _ in 0..FIT_TRIES {
        let found = u64::from(encoding.count(parts.0)) + u64::from(encoding.count(parts.1));
        if found <= room || keep == 0 {
            break;
        }
        // a little under the ratio, so a text whose start and end are
        // denser than its middle gets there in a few tries
        keep = scale(keep, room, found).saturating_sub(keep / 32 + 1);
        parts = split(text, chars, keep);
    }
    let (head, tail) = parts;
    let kept = head.chars().count() + tail.chars().count();
    Some(render(Cut {
        head,
        tail,
        cut: chars - kept,
        chars,
    }))
}

/// Most tokens a time note takes (`[time: 2026-12-05 08:00 Sat]` is
/// about 20): a longer message that starts like one is a person's.
const TIME_NOTE_TOKENS: u32 = 64;

/// Which of `messages` (with their `seqs` and token `counts`, all three
/// parallel) take more than their budget, and what a request sends for
/// each instead, by index: a user-side message or a tool's result clipped
/// to its start and its end around a note, an assistant message with its
/// text and its calls' long arguments clipped ([`clip_calls`]: a call's
/// arguments are re-sent in every later request, and a Write of 1 MB
/// went whole into each). The system prompt is the bot's own, not an
/// entry, and is never clipped.
///
/// A message's budget is `cap`, but the running turn's user-side messages
/// (from `turn_start`, the index of its first message; the inputs' time
/// notes aside) share one `cap` between them ([`fair_shares`]): each was
/// clipped to the cap alone, so
/// ten huge inputs batched into one turn sent ten caps, two and a half
/// times `compact_at_tokens`, and a compaction keeps the running turn.
pub(crate) fn plan_clips(
    messages: &[ChatMessage],
    seqs: &[i64],
    counts: &[u32],
    cap: u64,
    turn_start: Option<usize>,
    encoding: Encoding,
) -> HashMap<usize, Sent> {
    let count_of = |i: usize| counts.get(i).copied().unwrap_or(0);
    let mut budgets: HashMap<usize, u64> = HashMap::new();
    if let Some(start) = turn_start {
        // an input's time note is no part of the share: with it, a lone
        // input got the cap less the note's size while its turn ran and
        // the whole cap in the next turns, so its clip changed and broke
        // the byte-identical prefix there (QA)
        let inputs: Vec<usize> = (start..messages.len())
            .filter(|&i| {
                matches!(messages[i], ChatMessage::User { .. })
                    && !(count_of(i) <= TIME_NOTE_TOKENS
                        && crate::engine::context::is_time_note(&messages[i]))
            })
            .collect();
        let sizes: Vec<u64> = inputs.iter().map(|&i| u64::from(count_of(i))).collect();
        for (&i, share) in inputs.iter().zip(fair_shares(&sizes, cap)) {
            if let Some(share) = share {
                budgets.insert(i, share);
            }
        }
    }
    let mut out = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let count = count_of(i);
        let budget = budgets.get(&i).copied().unwrap_or(cap);
        if u64::from(count) <= budget {
            continue;
        }
        let seq = seqs.get(i).copied().unwrap_or(0).to_string();
        // a message's count is its text's and 4 for its role
        let text_cap = budget.saturating_sub(4);
        let clipped = match message {
            ChatMessage::System { .. } => None,
            ChatMessage::User { content } => {
                clip(content, text_cap, encoding, &|c| entry_note(c, &seq))
                    .map(|text| Sent::text(text, encoding))
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                let tool = tool_name(&messages[..i], tool_call_id).unwrap_or("the tool");
                clip(content, text_cap, encoding, &|c| result_note(c, tool, &seq))
                    .map(|text| Sent::text(text, encoding))
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
                reasoning,
            } => clip_assistant(
                (
                    content,
                    tool_calls,
                    reasoning.as_deref().unwrap_or_default(),
                ),
                count,
                budget,
                encoding,
                &seq,
            ),
        };
        if let Some(clipped) = clipped {
            out.insert(i, clipped);
        }
    }
    out
}

/// An assistant message (text, calls, reasoning) of `count` tokens over
/// its `budget`: its calls take what its text leaves (at least half the
/// budget) and their long arguments are clipped to it; its text takes
/// what the calls then leave (at least half the budget). Its reasoning
/// goes back whole (a thinking-mode server wants it as it came) and is
/// counted in what is sent: left out, a session of a thinking model
/// seemed to stay under `compact_at_tokens` and never compacted (QA,
/// 2026-12-05: 39,000 characters of reasoning in a request of a
/// 6,000-token session). `None` when neither is clipped.
fn clip_assistant(
    (content, tool_calls, reasoning): (&str, &[ToolCall], &str),
    count: u32,
    budget: u64,
    encoding: Encoding,
    seq: &str,
) -> Option<Sent> {
    let text_cap = budget.saturating_sub(4);
    let own = u64::from(encoding.count(content));
    let thought = if reasoning.is_empty() {
        0
    } else {
        u64::from(encoding.count(reasoning))
    };
    let calls_tokens = u64::from(count).saturating_sub(own).saturating_sub(thought);
    let calls_cap = text_cap.saturating_sub(own).max(budget / 2);
    let calls = if calls_tokens > calls_cap {
        clip_calls(tool_calls, calls_cap, encoding, seq)
    } else {
        None
    };
    let calls_sent = calls.as_ref().map_or(calls_tokens, |calls| {
        calls
            .iter()
            .map(|c| u64::from(encoding.count(&c.arguments)) + u64::from(encoding.count(&c.name)))
            .sum()
    });
    let share = text_cap.saturating_sub(calls_sent).max(budget / 2);
    let text = clip(content, share, encoding, &|c| entry_note(c, seq));
    if text.is_none() && calls.is_none() {
        return None;
    }
    let text = text.unwrap_or_else(|| content.to_owned());
    // counted as the context counts it (`ChatMessage::token_text`)
    let counted = crate::model::assistant_token_text(
        reasoning,
        &text,
        calls
            .as_deref()
            .unwrap_or(tool_calls)
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str())),
    );
    Some(Sent {
        text,
        calls,
        tokens: encoding.count_message(&counted),
    })
}

/// `calls` with their arguments clipped to `budget` tokens together
/// ([`fair_shares`] among the calls, then [`clip_arguments`]); `None`
/// when none is clipped.
pub(crate) fn clip_calls(
    calls: &[ToolCall],
    budget: u64,
    encoding: Encoding,
    seq: &str,
) -> Option<Vec<ToolCall>> {
    let names: u64 = calls
        .iter()
        .map(|c| u64::from(encoding.count(&c.name)) + 1)
        .sum();
    let sizes: Vec<u64> = calls
        .iter()
        .map(|c| u64::from(encoding.count(&c.arguments)))
        .collect();
    let shares = fair_shares(&sizes, budget.saturating_sub(names));
    let mut out = calls.to_vec();
    let mut any = false;
    for (call, share) in out.iter_mut().zip(shares) {
        let Some(share) = share else { continue };
        if let Some(arguments) = clip_arguments(&call.arguments, share, encoding, &call.name, seq) {
            call.arguments = arguments;
            any = true;
        }
    }
    any.then_some(out)
}

/// A call's `arguments` in about `budget` tokens, still JSON (servers
/// refuse a request whose arguments are not, and the OpenAI wire sends
/// arguments that are no JSON object as `{}`): the long strings of the
/// JSON value clipped to their start and their end around
/// prompts/argument_clipped.md, sharing what the value's other parts
/// leave ([`fair_shares`]); arguments that are no JSON at all as a JSON
/// string of their clip. Object keys, numbers and the structure stay.
/// `None` when they fit or nothing could be clipped.
pub(crate) fn clip_arguments(
    arguments: &str,
    budget: u64,
    encoding: Encoding,
    tool: &str,
    seq: &str,
) -> Option<String> {
    let tokens = u64::from(encoding.count(arguments));
    if tokens <= budget {
        return None;
    }
    let note = |c: Cut<'_>| argument_note(c, tool, seq);
    let Ok(mut value) = serde_json::from_str::<Value>(arguments) else {
        return clip(arguments, budget, encoding, &note)
            .map(|text| Value::String(text).to_string());
    };
    let mut sizes = Vec::new();
    each_string(&mut value, &mut |s| {
        sizes.push(u64::from(encoding.count(s)))
    });
    let skeleton = tokens.saturating_sub(sizes.iter().sum());
    let shares = fair_shares(&sizes, budget.saturating_sub(skeleton));
    let mut k = 0;
    let mut any = false;
    each_string(&mut value, &mut |s| {
        if let Some(Some(share)) = shares.get(k)
            && let Some(text) = clip(s, *share, encoding, &note)
        {
            *s = text;
            any = true;
        }
        k += 1;
    });
    any.then(|| value.to_string())
}

/// Calls `f` on every string value of `value` (not object keys), in one
/// fixed order.
fn each_string(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| each_string(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| each_string(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// How `budget` tokens are shared among parts of `sizes` tokens, in
/// order: `None` for a part that stays whole, `Some(share)` for one
/// clipped to `share`. Max-min fair: the parts that fit an even share
/// stay whole, and the others (the largest) take equal shares of what is
/// left, never less than [`MIN_SHARE_TOKENS`] (so with very many large
/// parts the sum passes `budget`: a clip that small would be little but
/// its note). Nothing is clipped when all fit `budget` together.
/// Deterministic: the same sizes give the same shares.
pub(crate) fn fair_shares(sizes: &[u64], budget: u64) -> Vec<Option<u64>> {
    let mut shares = vec![None; sizes.len()];
    if sizes.iter().sum::<u64>() <= budget {
        return shares;
    }
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&k| (sizes[k], k));
    let mut left = budget;
    for (n, &k) in order.iter().enumerate() {
        let parts = u64::try_from(order.len() - n).unwrap_or(u64::MAX);
        let even = left / parts;
        if sizes[k] <= even {
            left -= sizes[k];
            continue;
        }
        // this part and every larger one take the even share
        let share = even.max(MIN_SHARE_TOKENS);
        for &j in &order[n..] {
            shares[j] = Some(share);
        }
        break;
    }
    shares
}

/// A clipped message: prompts/entry_clipped.md.
fn entry_note(c: Cut<'_>, seq: &str) -> String {
    // where the cut begins in the message (the text ReadTranscript's
    // `offset` counts in, give or take what renders the message)
    let from = c.head.chars().count().to_string();
    note(
        &prompts().entry_clipped,
        c,
        &[("seq", seq), ("from", &from)],
    )
}

/// A clipped argument of a call of `tool`: prompts/argument_clipped.md.
fn argument_note(c: Cut<'_>, tool: &str, seq: &str) -> String {
    note(
        &prompts().argument_clipped,
        c,
        &[("tool", tool), ("seq", seq)],
    )
}

/// A clipped result of `tool`: prompts/result_clipped.md, or
/// result_clipped_quoting.md for a tool whose results the index leaves
/// out (QA: a clipped SearchTranscript result sent the bot to search for
/// words in it, which search never finds).
fn result_note(c: Cut<'_>, tool: &str, seq: &str) -> String {
    let template = if TranscriptIndex::QUOTING_TOOLS.contains(&tool) {
        &prompts().result_clipped_quoting
    } else {
        &prompts().result_clipped
    };
    note(
        template,
        c,
        &[
            ("tool", tool),
            ("seq", seq),
            ("smaller", smaller_part(tool)),
        ],
    )
}

/// How to ask `tool` for less than a result that was clipped: the
/// arguments it has for that (a ReadTranscript result was told to "Read
/// with `offset` and `limit`", which ReadTranscript does not take).
fn smaller_part(tool: &str) -> &'static str {
    match tool {
        "Read" => "Read again with `offset` and `limit`",
        "Shell" => "run a command that prints less (through `head`, `tail`, `sed -n` or `grep`)",
        "ReadTranscript" => "ReadTranscript again with smaller `before` and `after`",
        _ => "call the tool again with narrower arguments",
    }
}

/// The cut's start and end around `template`, which also gets `more`.
fn note(template: &Template, c: Cut<'_>, more: &[(&str, &str)]) -> String {
    let cut = grouped(c.cut);
    let chars = grouped(c.chars);
    let mut vars = vec![
        ("head", c.head),
        ("tail", c.tail),
        ("cut", cut.as_str()),
        ("chars", chars.as_str()),
    ];
    vars.extend_from_slice(more);
    template
        .render(&vars)
        .unwrap_or_else(|e| format!("{}\n[{e}]\n{}", c.head, c.tail))
}

/// `n * wanted / found`, in integers that do not overflow.
fn scale(n: usize, wanted: u64, found: u64) -> usize {
    let scaled = u128::from(wanted) * (n as u128) / u128::from(found.max(1));
    usize::try_from(scaled).unwrap_or(usize::MAX).min(n)
}

/// The first half of `keep` characters of `text` (of `chars` characters)
/// and its last other half, each cut at a grapheme-cluster boundary
/// inside it: an accent, a skin tone or half a flag is never split from
/// what it belongs to (so a part may be a few characters shorter).
fn split(text: &str, chars: usize, keep: usize) -> (&str, &str) {
    let keep = keep.min(chars);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(b, _)| b);
    let head_end = floor_grapheme(text, at(head));
    let tail_start = ceil_grapheme(text, at(chars - tail)).max(head_end);
    (&text[..head_end], &text[tail_start..])
}

/// The longest start of `text` of at most `max` characters that ends at
/// a grapheme-cluster boundary: a clip that keeps "e" drops the accent
/// U+0301 after it too, not leave it to combine with what follows.
pub(crate) fn grapheme_prefix(text: &str, max: usize) -> &str {
    let at = text.char_indices().nth(max).map_or(text.len(), |(b, _)| b);
    &text[..floor_grapheme(text, at)]
}

/// The last grapheme-cluster boundary of `text` at or before the char
/// boundary `at`.
fn floor_grapheme(text: &str, at: usize) -> usize {
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    // the whole text is the one chunk, so the cursor never asks for more
    // context; were it to, the char boundary is the fallback
    match cursor.is_boundary(text, 0) {
        Ok(true) | Err(_) => at,
        Ok(false) => cursor.prev_boundary(text, 0).ok().flatten().unwrap_or(0),
    }
}

/// The first grapheme-cluster boundary of `text` at or after the char
/// boundary `at`.
fn ceil_grapheme(text: &str, at: usize) -> usize {
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    match cursor.is_boundary(text, 0) {
        Ok(true) | Err(_) => at,
        Ok(false) => cursor
            .next_boundary(text, 0)
            .ok()
            .flatten()
            .unwrap_or(text.len()),
    }
}

#[cfg(test)]
#[path = "entry_clip_tests.rs"]
mod tests;
