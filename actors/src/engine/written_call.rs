//! A tool call written as text: a step's text that holds a call to one of
//! the turn's tools in a shape a chat template gives calls
//! ([`written_call`]), and the operator's warning that the model server
//! most likely lacks its tool-call parser ([`warn_written_call`]). Split
//! from `model_call.rs`, which answers such a step with
//! prompts/written_call_reminder.md (`Runner::reminder_due`).

use std::collections::HashSet;

use serde_json::Value;

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
pub(super) fn written_call<'a>(text: &str, tools: &[&'a str]) -> Option<&'a str> {
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
pub(super) fn warn_written_call(bot: &str, provider: &str, tool: &str) {
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
