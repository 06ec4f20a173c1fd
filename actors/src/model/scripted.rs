//! The scripted model: deterministic replies from a TOML file, for offline
//! use and tests. The format is documented in docs/scripted-model.md.
//!
//! A script is a list of rules. For each request the model picks the first
//! rule whose filters match (purpose, bot, a regex on the newest user-side
//! message, a regex on the newest tool result), then answers with the rule's
//! step number `k`, where `k` counts the assistant messages after the newest
//! user-side message. Past the last step it stops with no tool call.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Model;
use super::types::ChatMessage;
use super::types::FinishReason;
use super::types::ModelError;
use super::types::ModelRequest;
use super::types::ModelResponse;
use super::types::Purpose;
use super::types::SinkControl;
use super::types::StreamSink;
use super::types::ToolCall;
use super::types::Usage;
use crate::prompts::prompts;

/// A script that failed to load.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The TOML did not match the format.
    #[error("script {path} is invalid: {detail} (see docs/scripted-model.md)")]
    Invalid {
        /// File.
        path: String,
        /// What is wrong.
        detail: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default, rename = "rule")]
    rules: Vec<RuleFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    purpose: Option<Purpose>,
    #[serde(default)]
    bot: Option<String>,
    #[serde(default, rename = "match")]
    match_input: Option<String>,
    #[serde(default)]
    match_tool: Option<String>,
    #[serde(default)]
    steps: Vec<StepFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFile {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    calls: Vec<CallFile>,
    #[serde(default)]
    delay_ms: Option<u64>,
    #[serde(default)]
    fail: Option<String>,
    #[serde(default)]
    repeat: Option<u32>,
    #[serde(default)]
    chunk: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallFile {
    tool: String,
    #[serde(default)]
    args: Option<Value>,
}

/// A parsed, validated script.
#[derive(Debug)]
pub struct Script {
    source: String,
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    name: String,
    purpose: Purpose,
    bot: Option<String>,
    match_input: Option<Regex>,
    match_tool: Option<Regex>,
    steps: Vec<StepFile>,
}

impl Script {
    /// Loads a script file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses script text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, ScriptError> {
        let invalid = |detail: String| ScriptError::Invalid {
            path: source.to_owned(),
            detail,
        };
        let file: ScriptFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.rules.is_empty() {
            return Err(invalid("it has no [[rule]]; add at least one".into()));
        }
        let known = crate::tools::ToolRegistry::builtin();
        let mut rules = Vec::with_capacity(file.rules.len());
        for (i, r) in file.rules.into_iter().enumerate() {
            let name = r.name.unwrap_or_else(|| format!("rule {}", i + 1));
            let compile = |re: Option<String>, key: &str| -> Result<Option<Regex>, ScriptError> {
                re.map(|s| {
                    Regex::new(&s)
                        .map_err(|e| invalid(format!("{name}: `{key}` is not a valid regex: {e}")))
                })
                .transpose()
            };
            let match_input = compile(r.match_input, "match")?;
            let match_tool = compile(r.match_tool, "match_tool")?;
            // steps are counted from 0, as docs/scripted-model.md and
            // `{{step}}` count them (QA: errors counted from 1)
            for (k, step) in r.steps.iter().enumerate() {
                if step.tool.is_some() && !step.calls.is_empty() {
                    return Err(invalid(format!(
                        "{name}, step {k}: use either `tool` or `calls`, not both"
                    )));
                }
                if step.args.is_some() && step.tool.is_none() {
                    return Err(invalid(format!("{name}, step {k}: `args` needs `tool`")));
                }
                // a step that fails says nothing and calls nothing (QA:
                // its text and call were dropped without a word)
                if step.fail.is_some()
                    && (step.text.is_some() || step.tool.is_some() || !step.calls.is_empty())
                {
                    return Err(invalid(format!(
                        "{name}, step {k}: a step with `fail` fails the call and does nothing \
                         else; move its `text`, `tool` or `calls` to a step of their own"
                    )));
                }
                // a tool no bot has, or arguments that are no table: every
                // call would be refused, found only when the rule fires (QA)
                let calls = step.tool.iter().map(|tool| (tool, &step.args, None)).chain(
                    step.calls
                        .iter()
                        .enumerate()
                        .map(|(j, c)| (&c.tool, &c.args, Some(j))),
                );
                for (tool, args, j) in calls {
                    let at = match j {
                        Some(j) => format!("{name}, step {k}, calls[{j}]"),
                        None => format!("{name}, step {k}"),
                    };
                    if !known.contains(tool) {
                        let mut names = known.names();
                        names.sort_unstable();
                        return Err(invalid(format!(
                            "{at}: there is no tool {tool:?}; the tools are {}",
                            names.join(", ")
                        )));
                    }
                    if args.as_ref().is_some_and(|a| !a.is_object()) {
                        return Err(invalid(format!(
                            "{at}: `args` of {tool} must be a table of its arguments \
                             (`args = {{ command = \"ls\" }}`), not a {}",
                            json_kind(args.as_ref())
                        )));
                    }
                }
                // (QA: `repeat = 0` streamed the text once, `chunk = 0`
                // cut it in pieces of one character)
                if step.repeat == Some(0) {
                    return Err(invalid(format!(
                        "{name}, step {k}: `repeat = 0` would stream nothing; give 1 or more, \
                         or leave `text` out"
                    )));
                }
                if step.chunk == Some(0) {
                    return Err(invalid(format!(
                        "{name}, step {k}: `chunk = 0` is no size; give the bytes per \
                         streamed piece, 1 or more"
                    )));
                }
                // they shape how `text` streams: without it (or with
                // `fail`, which streams nothing) they were ignored without
                // a word (QA)
                if (step.repeat.is_some() || step.chunk.is_some()) && step.text.is_none() {
                    return Err(invalid(format!(
                        "{name}, step {k}: `repeat` and `chunk` shape how `text` streams, and \
                         this step has no `text`{}: give it one, or leave them out",
                        if step.fail.is_some() {
                            " (a step with `fail` streams nothing)"
                        } else {
                            ""
                        }
                    )));
                }
            }
            rules.push(Rule {
                name,
                purpose: r.purpose.unwrap_or_default(),
                bot: r.bot,
                match_input,
                match_tool,
                steps: r.steps,
            });
        }
        Ok(Self {
            source: source.to_owned(),
            rules,
        })
    }
}

/// What kind of TOML value `value` was, in words.
fn json_kind(value: Option<&Value>) -> &'static str {
    match value {
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "list",
        Some(Value::Number(_)) => "number",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Object(_)) => "table",
        Some(Value::Null) | None => "nothing",
    }
}

/// The deterministic model.
#[derive(Debug)]
pub struct ScriptedModel {
    script: Script,
}

impl ScriptedModel {
    /// A model answering from `script`.
    pub fn new(script: Script) -> Self {
        Self { script }
    }
}

/// What the templates may refer to.
struct Vars<'a> {
    input: &'a str,
    inputs: String,
    tool_result: &'a str,
    bot: &'a str,
    step: usize,
}

impl Vars<'_> {
    /// The value of placeholder `name`, `None` for an unknown name.
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "input" => Some(Cow::Borrowed(self.input)),
            "inputs" => Some(Cow::Borrowed(&self.inputs)),
            "tool_result" => Some(Cow::Borrowed(self.tool_result)),
            "bot" => Some(Cow::Borrowed(self.bot)),
            "step" => Some(Cow::Owned(self.step.to_string())),
            _ => None,
        }
    }
}

/// Fills the placeholders of `template` in one pass over the template
/// text: a value put in is never scanned again, so a user input holding
/// `{{bot}}` is echoed as written. Unknown placeholders stay as they are.
fn render_str(template: &str, vars: &Vars<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let value = after
            .find("}}")
            .and_then(|close| Some((vars.get(&after[..close])?, close)));
        match value {
            Some((value, close)) => {
                out.push_str(&value);
                rest = &after[close + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn render_value(value: &Value, vars: &Vars<'_>) -> Value {
    match value {
        Value::String(s) => Value::String(render_str(s, vars)),
        Value::Array(items) => Value::Array(items.iter().map(|v| render_value(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), render_value(v, vars)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
    }
}

/// Whether `m` is a user-side message a step counts from: anything but a
/// memory update, a compaction summary, an input's time note or the note
/// on a cancelled turn (the runtime's notes that memory changed, of what
/// came before, of when an input arrived and that an earlier message was
/// not done, not something anyone said: they are
/// neither matched nor echoed, and the steps after them are the turn's).
/// A runtime reminder counts: it asks for a new answer.
fn is_input(m: &ChatMessage) -> bool {
    match m {
        ChatMessage::User { content } => {
            let p = prompts();
            // each a whole rendering: a person's message may begin as
            // one does (`[time: 3pm] call mom`: QA)
            !p.memory_update.is_rendering(content)
                && !p.summary.is_rendering(content)
                && !p.time_note.is_rendering(content)
                && !p.cancelled_before.is_rendering(content)
        }
        ChatMessage::System { .. } | ChatMessage::Assistant { .. } | ChatMessage::Tool { .. } => {
            false
        }
    }
}

/// Whether `m` is a user-side message someone sent (a person, another
/// bot, an event): an input that is not a runtime reminder either.
fn is_said(m: &ChatMessage) -> bool {
    match m {
        ChatMessage::User { content } => {
            let p = prompts();
            // every reminder of the runtime (QA: `{{inputs}}` after the
            // reminder of a turn that asked another bot, or of a call
            // written as text, was that reminder)
            is_input(m)
                && !p.delivery_reminder.is_rendering(content)
                && !p.delivery_reminder_awaiting.is_rendering(content)
                && !p.written_call_reminder.is_rendering(content)
                && !p.loop_reminder.is_rendering(content)
                && !p.cut_off.is_rendering(content)
        }
        ChatMessage::System { .. } | ChatMessage::Assistant { .. } | ChatMessage::Tool { .. } => {
            false
        }
    }
}

/// Position of the newest user-side message, the step index and the
/// newest tool result after it.
fn conversation_position(messages: &[ChatMessage]) -> (Option<usize>, usize, &str, bool) {
    let last_user = messages.iter().rposition(is_input);
    let after = last_user.map(|i| i + 1).unwrap_or(0);
    let step = messages[after..]
        .iter()
        .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
        .count();
    let tool_result = messages[after..].iter().rev().find_map(|m| match m {
        ChatMessage::Tool { content, .. } => Some(content.as_str()),
        _ => None,
    });
    (
        last_user,
        step,
        tool_result.unwrap_or(""),
        tool_result.is_some(),
    )
}

/// `{{inputs}}`: what was said since the bot's last output before the
/// newest of it, one per line. Runtime texts (a summary, a memory update,
/// a reminder) are left out: after a reminder, what it reminds of is the
/// messages said before the step that did not answer them.
fn user_texts_since_assistant(messages: &[ChatMessage]) -> String {
    let Some(newest) = messages.iter().rposition(is_said) else {
        return String::new();
    };
    let start = messages[..newest]
        .iter()
        .rposition(|m| matches!(m, ChatMessage::Assistant { .. } | ChatMessage::Tool { .. }))
        .map(|i| i + 1)
        .unwrap_or(0);
    messages[start..=newest]
        .iter()
        .filter(|m| is_said(m))
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[async_trait]
impl Model for ScriptedModel {
    fn describe(&self) -> String {
        format!("scripted:{}", self.script.source)
    }

    fn answers(&self, purpose: Purpose) -> bool {
        self.script.rules.iter().any(|r| r.purpose == purpose)
    }

    fn alternating_roles(&self) -> bool {
        // its rules match the newest user-side message on its own and
        // count the assistant messages after it
        false
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let (last_user, step, tool_result, after_tool) = conversation_position(&request.messages);
        let input = last_user
            .and_then(|i| match &request.messages[i] {
                ChatMessage::User { content } => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or("");
        let rule = self.script.rules.iter().find(|r| {
            r.purpose == request.purpose
                && r.bot.as_deref().is_none_or(|b| b == request.bot)
                && r.match_input.as_ref().is_none_or(|re| re.is_match(input))
                // no tool result yet (step 0): a `match_tool` rule does
                // not answer, as documented, even one whose regex matches
                // an empty text (`.*`: QA)
                && r.match_tool
                    .as_ref()
                    .is_none_or(|re| after_tool && re.is_match(tool_result))
        });
        let Some(rule) = rule else {
            return Ok(ModelResponse::default());
        };
        let Some(step_def) = rule.steps.get(step) else {
            return Ok(ModelResponse::default());
        };
        tracing::debug!(rule = %rule.name, step, "scripted model step");
        let vars = Vars {
            input,
            inputs: user_texts_since_assistant(&request.messages),
            tool_result,
            bot: &request.bot,
            step,
        };
        if let Some(ms) = step_def.delay_ms {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = cancel.cancelled() => return Err(ModelError::Cancelled),
            }
        }
        if let Some(msg) = &step_def.fail {
            return Err(ModelError::Scripted(render_str(msg, &vars)));
        }
        let mut text = String::new();
        if let Some(t) = &step_def.text {
            let piece = render_str(t, &vars);
            let times = step_def.repeat.unwrap_or(1).max(1);
            let chunk = step_def.chunk.unwrap_or(usize::MAX).max(1);
            for _ in 0..times {
                for delta in chunks(&piece, chunk) {
                    if cancel.is_cancelled() {
                        return Err(ModelError::Cancelled);
                    }
                    text.push_str(delta);
                    if let SinkControl::Abort { reason } = sink.on_text(delta) {
                        return Err(ModelError::Aborted {
                            reason,
                            partial: text,
                        });
                    }
                }
                // let other tasks run between repetitions of long streams
                if times > 1 {
                    tokio::task::yield_now().await;
                }
            }
        }
        let n = request.messages.len();
        let mut calls: Vec<(String, Value)> = Vec::new();
        if let Some(tool) = &step_def.tool {
            calls.push((
                tool.clone(),
                step_def
                    .args
                    .clone()
                    .unwrap_or(Value::Object(Default::default())),
            ));
        }
        for c in &step_def.calls {
            calls.push((
                c.tool.clone(),
                c.args.clone().unwrap_or(Value::Object(Default::default())),
            ));
        }
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall {
                id: format!("call_{n}_{i}"),
                name,
                arguments: render_value(&args, &vars).to_string(),
            })
            .collect();
        let prompt_chars: usize = request.messages.iter().map(message_len).sum();
        // a turn that only calls tools (SendMessage with the whole reply)
        // generates its calls, not text: counting only the text reported 0
        // completion tokens for it, and `daily_token_budget` under-counted
        let completion_chars = text.len()
            + tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>();
        Ok(ModelResponse {
            finish: if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            usage: Some(Usage {
                prompt_tokens: (prompt_chars / 4) as u64,
                completion_tokens: (completion_chars / 4) as u64,
                cached_prompt_tokens: 0,
            }),
            text,
            reasoning: None,
            tool_calls,
        })
    }
}

fn message_len(m: &ChatMessage) -> usize {
    match m {
        ChatMessage::System { content } | ChatMessage::User { content } => content.len(),
        ChatMessage::Assistant {
            content,
            tool_calls,
            reasoning: _,
        } => content.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>(),
        ChatMessage::Tool { content, .. } => content.len(),
    }
}

/// Splits at char boundaries into pieces of about `size` bytes.
fn chunks(s: &str, size: usize) -> Vec<&str> {
    if s.len() <= size {
        return vec![s];
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + size).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

#[cfg(test)]
#[path = "scripted_tests.rs"]
mod tests;
