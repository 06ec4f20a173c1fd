//! The model call of a step: the request from the session tail, the
//! loop watch on its stream, the token usage it adds to the turn, the
//! reminders that answer a looping output, an undelivered reply or a
//! tool call written as text, and what follows an answer cut off at the
//! token limit, a refusal or a call that failed after the turn's reply.
//! `impl Runner`, split from `runner.rs`.

use std::collections::HashSet;

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::model::ChatMessage;

impl Runner {
    /// What comes before a step's model request: the daily budget check
    /// (`Runner::budget_checkpoint`), a compaction when one is due, and
    /// the budget check again after it (a compaction's calls count toward
    /// the turn's usage). `Some` when the turn stopped there.
    pub(super) async fn before_request(&mut self) -> Result<Option<TurnStatus>, StoreError> {
        if let Some(status) = self.budget_checkpoint().await? {
            return Ok(Some(status));
        }
        if self.compaction_needed() {
            let keep_from = self.state.input_seqs.iter().min().copied();
            self.compact_now(keep_from).await;
            return self.budget_checkpoint().await;
        }
        Ok(None)
    }

    /// The model request of a step, over the session tail as it is (the
    /// step loop compacts first when it must, `Runner::compaction_needed`,
    /// checking the daily budget before each of the two).
    pub(super) async fn call_model(&mut self) -> Result<ModelResponse, ModelError> {
        self.shape_requests();
        // the running turn's reasoning goes back with its calls, earlier
        // turns' not at all (ContextBuilder::keep_reasoning_of)
        self.tail.context.keep_reasoning_of(Some(self.turn));
        let messages = self
            .tail
            .take_request(self.memory_update.as_deref(), &mut self.memory_update_at);
        let request = ModelRequest {
            purpose: Purpose::Turn,
            bot: self.bot.id.to_string(),
            messages,
            tools: std::mem::take(&mut self.specs),
            max_tokens: None,
        };
        let mut sink = LoopSink::new();
        // an error the server sent back may quote the host's credentials
        // (the ones tool results are scrubbed of): cleaned in the provider
        let mut result = self
            .model
            .complete_hiding(&request, &self.secrets.redactor, &mut sink, &self.soft)
            .await;
        if let (Err(ModelError::Aborted { .. }), Some(what)) = (&result, sink.tripped.take()) {
            result = Err(ModelError::Aborted {
                reason: what,
                partial: String::new(),
            });
            self.looped = true;
        }
        if let Ok(response) = &mut result {
            unique_call_ids(&request.messages, response);
        }
        let update_at = self.memory_update.as_ref().and(self.memory_update_at);
        self.tail.restore_request(request.messages, update_at);
        self.specs = request.tools;
        if let Ok(response) = &result {
            self.account(response);
        }
        result
    }

    /// Adds a model call to the turn's usage.
    fn account(&mut self, response: &ModelResponse) {
        let prefix = self.tail.tokens_of_first(self.prefix_len);
        self.usage.calls += 1;
        self.usage.prefix_tokens += prefix;
        match response.usage {
            Some(u) => {
                self.usage.prompt_tokens += u.prompt_tokens;
                self.usage.cached_tokens += u.cached_prompt_tokens;
                self.usage.completion_tokens += u.completion_tokens;
            }
            None => {
                let encoding = self.tail.encoding();
                // what this request sent (clipped, stubbed), not the
                // context's whole count
                self.usage.prompt_tokens += self.tail.last_request_tokens();
                let mut out = response.text.clone();
                for c in &response.tool_calls {
                    out.push_str(&c.arguments);
                }
                self.usage.completion_tokens += u64::from(encoding.count(&out));
            }
        }
    }

    /// One reminder after a looping output; the retry is marked in the
    /// checkpoint so a second loop (even after a restart) ends the turn.
    pub(super) async fn loop_reminder(&mut self, what: &str) -> Result<(), StoreError> {
        self.state.loop_retried = true;
        let text = prompts()
            .loop_reminder
            .render(&[("what", what)])
            .unwrap_or_default();
        let mut batch = vec![self.entry(
            EntryId::derive(self.turn, "loop", "reminder"),
            EntryKind::Reminder { text },
        )];
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.state.to_value(),
            });
        }
        self.commit(batch).await.map(|_| ())
    }

    /// A step cut off at the output token limit (finish reason `length`):
    /// its text or its last call's arguments are incomplete, so it is not
    /// acted on. The first time in a turn, the step is recorded with each
    /// of its calls answered as not run (prompts/call_cut_off.md: running
    /// the start of an unfinished plan could do harm), or, without calls,
    /// followed by prompts/cut_off.md, and the turn goes on (`None`). The
    /// second time, the turn fails naming the limit. The retry is in the
    /// checkpoint, as a loop's is.
    pub(super) async fn cut_off(
        &mut self,
        response: &ModelResponse,
    ) -> Result<Option<TurnStatus>, StoreError> {
        if self.state.cut_off_retried {
            let error = "the model's answer was cut off at its output token limit (max tokens, \
                         finish reason length) a second time in this turn; not retrying"
                .to_owned();
            return self.fail(error).await.map(Some);
        }
        self.state.cut_off_retried = true;
        let mut batch = self.step_batch(response);
        let not_run = prompts().call_cut_off.render(&[]).unwrap_or_default();
        for call in &response.tool_calls {
            let outcome = self.outcome_batch(call, not_run.clone(), true, Vec::new(), false, false);
            batch.extend(outcome);
        }
        if response.tool_calls.is_empty() {
            let text = prompts().cut_off.render(&[]).unwrap_or_default();
            batch.push(self.entry(
                EntryId::derive(self.turn, "cut_off", "reminder"),
                EntryKind::Reminder { text },
            ));
        }
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.state.to_value(),
            });
        }
        self.commit(batch).await.map(|_| None)
    }

    /// Ends a turn whose model refused to answer: the refusal is kept as
    /// the step's text (later turns see that it declined) and shown to
    /// people in a `model_refused` notice with a retry; the turn fails.
    pub(super) async fn refused(&mut self, refusal: String) -> Result<TurnStatus, StoreError> {
        let error = ModelError::Refused {
            refusal: refusal.clone(),
        }
        .to_string();
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "turn failed");
        self.error = Some(error.clone());
        let mut batch = self.step_batch(&ModelResponse {
            text: refusal.clone(),
            ..ModelResponse::default()
        });
        let turn = self.turn.to_string();
        let text = prompts()
            .model_refused
            .render(&[("refusal", &refusal), ("turn", &turn)])
            .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "refused"),
            EntryKind::Notice {
                code: "model_refused".into(),
                text,
                retry_turn: Some(self.turn),
            },
        );
        // the step and the end of the turn commit together
        batch.extend(self.end_batch(TurnStatus::Failed, Some((error, notice))));
        self.commit(batch).await?;
        Ok(TurnStatus::Failed)
    }

    /// The reminder a step without tool calls (its text `text`) is
    /// answered with, if any: once a turn, a call to one of its tools
    /// written as text (`written_call`) is told it did not run, in place of
    /// the delivery reminder; once a turn, a person owed a reply and sent
    /// none is reminded to send it. A call written as text is never run:
    /// its arguments were never checked against the tool's schema, and
    /// text the model meant as an example would run as well.
    pub(super) fn reminder_due(&self, text: &str) -> Option<Reminder> {
        let tools: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        if let Some(tool) = written_call(text, &tools) {
            warn_written_call(&self.bot.id.to_string(), &self.bot.provider, tool);
            if !self.state.written_call_reminded {
                return Some(Reminder::WrittenCall {
                    tool: tool.to_owned(),
                });
            }
        }
        (self.state.owes_delivery && self.state.delivered == 0 && !self.state.reminded)
            .then_some(Reminder::Delivery)
    }

    /// Injects `reminder` (its flag goes into the checkpoint with it, so a
    /// resumed turn does not send it twice) and the turn goes on.
    pub(super) async fn remind(&mut self, reminder: Reminder) -> Result<(), StoreError> {
        let (what, text) = match &reminder {
            Reminder::Delivery => {
                self.state.reminded = true;
                ("delivery", prompts().delivery_reminder.render(&[]))
            }
            Reminder::WrittenCall { tool } => {
                self.state.written_call_reminded = true;
                (
                    "written_call",
                    prompts().written_call_reminder.render(&[("tool", tool)]),
                )
            }
        };
        let mut batch = vec![self.entry(
            EntryId::derive(self.turn, "reminder", what),
            EntryKind::Reminder {
                text: text.unwrap_or_default(),
            },
        )];
        if self.start_pending.is_none() {
            batch.push(Mutation::Checkpoint {
                turn: self.turn,
                checkpoint: self.state.to_value(),
            });
        }
        self.commit(batch).await.map(|_| ())
    }

    /// Ends a turn whose model call failed for good (after the provider's
    /// retries). Before the turn delivered anything, it fails and the
    /// person is offered a retry (`Runner::fail`). After it delivered, the
    /// person has its reply, and the failed call is most often the one
    /// that would only have ended the turn: a failure offering a retry
    /// under a complete answer reads as if the answer were wrong, and the
    /// retry would answer twice. The turn ends `completed` (its
    /// obligation is met: clients, `botfleet send` and a room's discussion
    /// take it as answered), with the error kept on the turn
    /// (`GET /v1/turns/{turn}`) and logged, and a notice without a retry
    /// (prompts/failed_after_reply.md) says the bot stopped there, so a
    /// reply that was only a first part (a progress message before more
    /// work) is not taken for all of it. A subagent's task still fails:
    /// its report then tells its parent the task is unfinished, with its
    /// last progress, where `completed` would report that progress as
    /// the result.
    pub(super) async fn model_failed(
        &mut self,
        error: ModelError,
    ) -> Result<TurnStatus, StoreError> {
        let error = error.to_string();
        if self.state.delivered == 0 || self.scope.session.key.kind == SessionKind::Subagent {
            return self.fail(error).await;
        }
        tracing::warn!(bot = %self.bot.id, turn = %self.turn, %error, "the model call after the turn's reply failed: the reply stands, ending the turn completed without offering a retry");
        self.error = Some(error.clone());
        let text = prompts()
            .failed_after_reply
            .render(&[("error", &error)])
            .unwrap_or_default();
        let notice = self.entry(
            EntryId::derive(self.turn, "end", "failed_after_reply"),
            EntryKind::Notice {
                code: "failed_after_reply".into(),
                text,
                retry_turn: None,
            },
        );
        self.end(TurnStatus::Completed, Some((error, notice))).await
    }
}

/// A reminder that answers a step without tool calls
/// (`Runner::reminder_due`).
pub(super) enum Reminder {
    /// A person is owed a reply and the turn sent none
    /// (prompts/delivery_reminder.md).
    Delivery,
    /// The step wrote a call to the turn's tool `tool` as text
    /// (prompts/written_call_reminder.md).
    WrittenCall {
        /// The tool named in the text.
        tool: String,
    },
}

/// Markers of the tool-call syntax of chat templates, which a model
/// writes when its server does not parse calls out of its output: the
/// call follows, naming its tool somewhere in the next `WINDOW` bytes
/// (Hermes and Qwen `<tool_call>{"name": …}`, Mistral
/// `[TOOL_CALLS][{"name": …}]` or `[TOOL_CALLS]Name[ARGS]{…}`).
const CALL_MARKERS: [&str; 2] = ["<tool_call>", "[TOOL_CALLS]"];

/// Markers the tool's name follows at once (gpt-oss harmony
/// `<|channel|>commentary to=functions.Name`, `functions.Name:`, the
/// `<function=Name>` of Llama 3.1 and Qwen3-Coder).
const NAME_MARKERS: [&str; 2] = ["functions.", "<function="];

/// How far after a `CALL_MARKERS` marker the tool's name is looked for.
const WINDOW: usize = 200;

/// The tool of `tools` that `text` writes a call to, if it holds one in
/// a shape a model uses for calls: a marker of `CALL_MARKERS` with a
/// tool's name after it, a tool's name right after a marker of
/// `NAME_MARKERS`, or (the whole text, or a fenced block in it) a JSON
/// object `{"name": tool, "arguments" | "parameters": …}` (also an array
/// of them, or one wrapped as `{"type": "function", "function": {…}}`).
/// Conservative: nothing without one of the turn's tool names.
fn written_call<'a>(text: &str, tools: &[&'a str]) -> Option<&'a str> {
    for marker in CALL_MARKERS {
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            let window = &rest[..floor_boundary(rest, WINDOW)];
            if let Some(tool) = tools.iter().find(|t| holds_word(window, t)) {
                return Some(tool);
            }
        }
    }
    for marker in NAME_MARKERS {
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            if let Some(tool) = tools.iter().find(|t| {
                rest.strip_prefix(**t)
                    .is_some_and(|after| !after.starts_with(is_name_char))
            }) {
                return Some(tool);
            }
        }
    }
    let trimmed = text.trim();
    std::iter::once(trimmed)
        .chain(fenced_blocks(trimmed))
        .find_map(|json| json_call(json, tools))
}

/// The contents of the ```` ``` ```` fenced blocks of `text` (the fence
/// line's language tag, `json` or another, left out).
fn fenced_blocks(text: &str) -> impl Iterator<Item = &str> {
    text.split("```").skip(1).step_by(2).map(|block| {
        // the first line is the language tag (empty for a bare fence)
        block
            .split_once('\n')
            .map_or(block, |(_, body)| body)
            .trim()
    })
}

/// The tool of `tools` that a JSON call in `json` names.
fn json_call<'a>(json: &str, tools: &[&'a str]) -> Option<&'a str> {
    if !(json.starts_with('{') || json.starts_with('[')) {
        return None;
    }
    let value: Value = serde_json::from_str(json).ok()?;
    let calls = match &value {
        Value::Array(items) => items.as_slice(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => {
            std::slice::from_ref(&value)
        }
    };
    calls.iter().find_map(|call| {
        let call = call
            .get("function")
            .filter(|f| f.is_object())
            .unwrap_or(call);
        let name = call.get("name")?.as_str()?;
        let has_arguments = call.get("arguments").is_some() || call.get("parameters").is_some();
        tools.iter().find(|t| **t == name && has_arguments).copied()
    })
}

/// Whether `text` holds `word` with no name character on either side.
fn holds_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        !text[..at].ends_with(is_name_char) && !text[at + word.len()..].starts_with(is_name_char)
    })
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Bots and providers already warned of calls written as text. Process
/// wide: the operator needs the warning once per bot and provider in a
/// host's run, not once per turn (bounded by bots × providers).
static WARNED: std::sync::LazyLock<std::sync::Mutex<HashSet<(String, String)>>> =
    std::sync::LazyLock::new(Default::default);

/// Warns the operator, once per bot and provider, that the bot wrote a
/// tool call as text: its server most likely does not parse the model's
/// calls, and every turn of the bot will miss its tools.
fn warn_written_call(bot: &str, provider: &str, tool: &str) {
    let first = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((bot.to_owned(), provider.to_owned()));
    if first {
        tracing::warn!(
            bot,
            provider,
            tool,
            "the model wrote a call to {tool} as text instead of through the tools interface; it \
             was not run (the bot is reminded once per turn). The model server probably lacks its \
             tool-call parser: vLLM needs --enable-auto-tool-choice --tool-call-parser <parser of \
             the model>, llama.cpp's llama-server --jinja, Ollama a model template that handles \
             tools. Logged once per bot and provider"
        );
    }
}

/// Gives each call of `response` an id that no call in `messages` (the
/// request: this turn's earlier steps and the session before them) and no
/// other call of the response has. A provider may repeat ids (`call_0` in
/// every step): the turn keys a call's start record, its result entry and
/// its recovery by (turn, id), so a repeated id would make a later call
/// look already started and never run, and strict servers refuse a
/// conversation with two calls of one id. A renamed call is stored and
/// answered under its new id, so the model sees one consistent id.
fn unique_call_ids(messages: &[ChatMessage], response: &mut ModelResponse) {
    if response.tool_calls.is_empty() {
        return;
    }
    // the response's ids are few (one to a handful) and the context's
    // calls many: each context call is compared with the response's ids
    // directly, which is cheaper than hashing every id of the context at
    // every model call (2.4% of fleet-load's samples when it hashed them)
    let given: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    let earlier: HashSet<String> = messages
        .iter()
        .flat_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            ChatMessage::System { .. } | ChatMessage::User { .. } | ChatMessage::Tool { .. } => &[],
        })
        .filter(|c| given.contains(&c.id.as_str()))
        .map(|c| c.id.clone())
        .collect();
    let mut taken: HashSet<String> = HashSet::with_capacity(response.tool_calls.len());
    for call in &mut response.tool_calls {
        if earlier.contains(&call.id) || !taken.insert(call.id.clone()) {
            let fresh = ToolCall::fresh_id();
            tracing::debug!(given = %call.id, %fresh, "repeated tool call id renamed");
            call.id = fresh;
            taken.insert(call.id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::written_call;

    const TOOLS: [&str; 2] = ["SendMessage", "Remember"];

    #[test]
    fn calls_written_as_text_are_found_by_their_tool() {
        let cases = [
            (
                "<tool_call>\n{\"name\": \"Remember\", \"arguments\": {}}\n</tool_call>",
                Some("Remember"),
            ),
            (
                "{\"name\": \"SendMessage\", \"arguments\": {\"text\": \"hi\"}}",
                Some("SendMessage"),
            ),
            (
                "[{\"type\": \"function\", \"function\": {\"name\": \"SendMessage\", \"arguments\": \"{}\"}}]",
                Some("SendMessage"),
            ),
            (
                "Here:\n```json\n{\"name\": \"SendMessage\", \"parameters\": {}}\n```\ndone",
                Some("SendMessage"),
            ),
            (
                "<|channel|>commentary to=functions.SendMessage <|constrain|>json<|message|>{}",
                Some("SendMessage"),
            ),
            ("functions.Remember:\n{}", Some("Remember")),
            ("<function=SendMessage>{}</function>", Some("SendMessage")),
            (
                "[TOOL_CALLS]SendMessage[ARGS]{\"text\": \"hi\"}",
                Some("SendMessage"),
            ),
            // prose, a tool the bot lacks, a longer name, JSON without
            // arguments, a marker without a tool: no call
            ("I will reply with SendMessage soon.", None),
            ("{\"name\": \"Shell\", \"arguments\": {}}", None),
            ("functions.SendMessageLater: {}", None),
            ("{\"name\": \"SendMessage\"}", None),
            ("<tool_call>{\"name\": \"Shell\"}</tool_call>", None),
            ("```json\n{\"text\": \"SendMessage\"}\n```", None),
            ("", None),
        ];
        for (text, tool) in cases {
            assert_eq!(written_call(text, &TOOLS), tool, "{text}");
        }
    }
}
