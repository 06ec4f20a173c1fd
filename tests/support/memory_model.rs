//! Pieces of the models the memory suites script on a loopback
//! OpenAI-compatible server: telling a fact extraction's request from a
//! bot's turn, a message's text, an extraction's answer and a bot's step
//! after a tool result.

use serde_json::Value;
use serde_json::json;

use super::openai_server::Reply;
use super::openai_server::without_time;

/// How the extraction's system prompt (`prompts/extract_facts.md`) starts.
pub const EXTRACTOR: &str = "You maintain the long-term memory of the bot";

/// Whether `body` is a fact extraction's request (by its system prompt).
pub fn is_extraction(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(EXTRACTOR))
}

/// A message's text content ("" when it has none), without the time
/// lines at its start ([`without_time`]).
pub fn content(m: &Value) -> &str {
    without_time(m["content"].as_str().unwrap_or(""))
}

/// The text between `<<` and `>>` right after `command` in `text` (a
/// room turn's input frames the messages in quotes of its own, so the
/// tests mark the part a bot is to act on).
pub fn after<'t>(text: &'t str, command: &str) -> Option<&'t str> {
    let rest = &text[text.find(command)? + command.len()..];
    let rest = rest.strip_prefix("<<")?;
    Some(&rest[..rest.find(">>")?])
}

/// An extraction's answer that adds `fact` and replaces or removes
/// nothing.
pub fn adds(fact: &str) -> Reply {
    let answer = json!({ "add": [{ "text": fact }], "replace": [], "remove": [] });
    Reply::text(answer.to_string())
}

/// How a memory update, which follows a turn's input, starts.
pub const UPDATE: &str = "[memory update]";

/// A request's messages without the memory updates at its end: a bot
/// acts on the input before them.
pub fn without_updates(body: &Value) -> Vec<&Value> {
    let mut messages: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    while messages
        .last()
        .is_some_and(|m| m["role"] == "user" && content(m).starts_with(UPDATE))
    {
        messages.pop();
    }
    messages
}

/// A SendMessage call of `text`, call id `id`.
pub fn send_message(id: &str, text: &str) -> Reply {
    Reply::tool_call(id, "SendMessage", json!({ "text": text }).to_string())
}

/// A bot's next step over `messages`: the id of the call it makes
/// (`call_<number of messages>`) and the message it answers, or, when that
/// is a tool result, the whole step: after SendMessage it stops; after
/// any other tool it passes on what the tool answered, SendMessage
/// `done: <the result>`.
pub fn bot_step<'b>(messages: &[&'b Value]) -> Result<(String, &'b Value), Box<Reply>> {
    let id = format!("call_{}", messages.len());
    let last = *messages.last().unwrap();
    if last["role"] != "tool" {
        return Ok((id, last));
    }
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["tool_calls"][0]["function"]["name"].clone())
        .unwrap_or(Value::Null);
    // boxed: a Reply is large and the Ok side small
    Err(Box::new(if asked == "SendMessage" {
        Reply::text("")
    } else {
        send_message(&id, &format!("done: {}", content(last)))
    }))
}

/// [`bot_step`] over a request's messages [`without_updates`].
pub fn step_past_updates(body: &Value) -> Result<(String, &Value), Box<Reply>> {
    bot_step(&without_updates(body))
}
