//! What a turn asked of other bots and subagents (SendToAgent, Task,
//! MessageSubagent) whose answers wake the bot in a later turn.
//!
//! A turn that accepted a person's message and asked others for what the
//! answer needs may end without the answer: it comes in the turn their
//! replies wake (issue 4: "R's turn ends right after sending"). Such a
//! turn is not reminded to "send your answer now", which pushed a model
//! to make one up before the replies existed (QA); it is reminded once to
//! tell the person what it asked and that it will report back
//! (prompts/delivery_reminder_awaiting.md). If it still says nothing, it
//! ends `completed`, not `undelivered`: a retry would ask them all again.
//! Its `awaiting_replies` notice tells the person what it waits for.

use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use serde_json::Value;

use super::Runner;
use crate::model::ToolCall;

/// Most askings a turn names (the rest are counted).
const NAMED: usize = 8;

/// The label of what a successful call of `tool` with `arguments`, which
/// answered `content`, asked, if its answer wakes the bot later: the bot a
/// SendToAgent went to (by the id its result names), the subagent a
/// MessageSubagent steered, or a subagent Task started.
fn asked_of(tool: &str, arguments: &str, content: &str) -> Option<String> {
    // before parsing: every SendMessage of the hot path comes here
    if !matches!(tool, "SendToAgent" | "MessageSubagent" | "Task") {
        return None;
    }
    let args: Value = serde_json::from_str(arguments).ok()?;
    let text = |field: &str| {
        args.get(field)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    match tool {
        "SendToAgent" => crate::tools::recipient_in(content)
            .map(str::to_owned)
            .or_else(|| text("agent")),
        "MessageSubagent" => text("id").map(|id| format!("subagent {id}")),
        "Task" => Some(
            match (crate::tools::started_in(content), text("description")) {
                (Some(id), Some(d)) => {
                    format!("subagent {id} ({})", botfleet_memory::quote_short(&d))
                }
                (Some(id), None) => format!("subagent {id}"),
                (None, Some(d)) => format!("a subagent ({})", botfleet_memory::quote_short(&d)),
                (None, None) => "a subagent".to_owned(),
            },
        ),
        _ => None,
    }
}

/// Who `label` names: a subagent by its id (`subagent <id>` with or
/// without its task's title), else the label.
fn asked_whom(label: &str) -> &str {
    match label.strip_prefix("subagent ") {
        Some(rest) => rest.split(' ').next().unwrap_or(rest),
        None => label,
    }
}

/// Adds `label` to `asked` unless it names one asked already.
fn note(asked: &mut Vec<String>, label: String) {
    let whom = asked_whom(&label);
    if !asked.iter().any(|a| asked_whom(a) == whom) {
        asked.push(label);
    }
}

impl Runner {
    /// Notes what `call`, answered without an error, asked of others.
    pub(super) fn note_asked(&mut self, call: &ToolCall, content: &str, is_error: bool) {
        if is_error {
            return;
        }
        if let Some(label) = asked_of(&call.name, &call.arguments, content) {
            note(&mut self.state.asked, label);
        }
    }

    /// What the turn asked, read back from its own entries `mine` (a
    /// resumed turn: the checkpoint may predate its last outcomes).
    pub(super) fn asked_from(&mut self, mine: &[Entry]) {
        let mut calls = std::collections::HashMap::new();
        self.state.asked.clear();
        for e in mine {
            match &e.kind {
                EntryKind::Assistant { tool_calls, .. } => {
                    for c in tool_calls {
                        calls.insert(c.id.clone(), (c.name.clone(), c.arguments.clone()));
                    }
                }
                EntryKind::ToolResult {
                    call_id,
                    content,
                    is_error: false,
                    ..
                } => {
                    if let Some((name, arguments)) = calls.get(call_id)
                        && let Some(label) = asked_of(name, arguments, content)
                    {
                        note(&mut self.state.asked, label);
                    }
                }
                _ => {}
            }
        }
    }

    /// Whether the turn waits for answers it asked for.
    pub(super) fn awaits_answers(&self) -> bool {
        !self.state.asked.is_empty()
    }

    /// What the turn asked, for a person or the model: "a, b and 2 more".
    pub(super) fn asked_text(&self) -> String {
        let asked = &self.state.asked;
        let named: Vec<&str> = asked.iter().take(NAMED).map(String::as_str).collect();
        let more = asked.len().saturating_sub(NAMED);
        match (named.as_slice(), more) {
            ([], _) => String::new(),
            ([one], 0) => (*one).to_owned(),
            (names, 0) => {
                let (last, rest) = names.split_last().unwrap_or((&"", &[]));
                format!("{} and {last}", rest.join(", "))
            }
            (names, n) => format!("{} and {n} more", names.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::asked_of;

    #[test]
    fn each_asking_tool_names_what_it_asked() {
        assert_eq!(
            asked_of("SendToAgent", r#"{"agent": " a ", "text": "x"}"#, "").as_deref(),
            Some("a")
        );
        assert_eq!(
            asked_of("MessageSubagent", r#"{"id": "r.sub-1", "text": "x"}"#, "").as_deref(),
            Some("subagent r.sub-1")
        );
        assert_eq!(
            asked_of("Task", r#"{"description": "audit", "prompt": "x"}"#, "").as_deref(),
            Some("a subagent (\"audit\")")
        );
        assert_eq!(asked_of("SendMessage", r#"{"text": "x"}"#, ""), None);
        assert_eq!(asked_of("SendToAgent", "not json", ""), None);
    }

    /// Regression (QA): a subagent started by Task, then steered in the
    /// same turn, was named twice; two tasks of one title were one.
    #[test]
    fn a_subagent_is_named_once_by_its_id() {
        let mut asked = Vec::new();
        let started = |id: &str| {
            format!(
                "started subagent {id} for \"Sub\"; it works on its own and its report will arrive later as a new message. Check it with CheckSubagent."
            )
        };
        let task = r#"{"description": "Sub", "prompt": "x"}"#;
        for (tool, args, content) in [
            ("Task", task, started("b1.sub-1")),
            (
                "MessageSubagent",
                r#"{"id": "b1.sub-1", "text": "x"}"#,
                String::new(),
            ),
            ("Task", task, started("b1.sub-2")),
        ] {
            super::note(&mut asked, asked_of(tool, args, &content).unwrap());
        }
        assert_eq!(
            asked,
            ["subagent b1.sub-1 (\"Sub\")", "subagent b1.sub-2 (\"Sub\")"]
        );
    }

    /// Regression (QA): one bot asked by its name, its id and `@NAME`
    /// was listed three times ("You asked Beta, b and @BETA"): the label
    /// is the id the call's result names.
    #[test]
    fn a_bot_asked_by_any_spelling_is_named_by_its_id() {
        for agent in ["Beta", "b", "@BETA"] {
            let args = format!(r#"{{"agent": "{agent}", "text": "x"}}"#);
            assert_eq!(
                asked_of(
                    "SendToAgent",
                    &args,
                    "delivered to b as message 01a2; its reply will arrive later as a new message"
                )
                .as_deref(),
                Some("b"),
                "{agent}"
            );
        }
    }
}
