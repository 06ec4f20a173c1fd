//! The JSON object in an extractor's answer. The extraction prompt asks
//! for the object alone, but models served by OpenAI-compatible servers
//! wrap it: a thinking model without a reasoning parser (vLLM without
//! `--reasoning-parser`, llama.cpp with `--reasoning-format none`, some
//! Ollama and LM Studio versions) puts a `<think>…</think>` block first,
//! small models add a sentence or a Markdown fence. Each of those answers
//! was refused whole, so such a bot never remembered anything.
//!
//! What is taken, first match wins: the answer as it is (after a leading
//! reasoning block); the content of a Markdown code fence; the first JSON
//! object in the text that has an `add`, `replace` or `remove` key. An
//! object the answer holds as it is is taken whatever its keys, so its
//! validation names what is wrong with it.

use serde_json::Value;

use crate::model::reasoning_text;

/// The keys of a proposal (`prompts/extract_facts.md`).
const PROPOSAL_KEYS: [&str; 3] = ["add", "replace", "remove"];

/// JSON objects in prose tried at most: each try parses from an opening
/// brace, and an answer is at most `EXTRACT_MAX_TOKENS` long.
const MAX_EMBEDDED_TRIES: usize = 32;

/// The proposal object in `answer`, or why there is none.
pub(super) fn proposal_json(answer: &str) -> Result<Value, String> {
    let text = reasoning_text::after_reasoning(answer).map_err(|unclosed| {
        format!(
            "the answer is a reasoning block ({}) that never closes: the model ran out of \
             tokens while thinking; turn its reasoning off for short answers or use a model \
             that answers with the JSON",
            unclosed.open
        )
    })?;
    if text.is_empty() {
        return Err("the answer is empty".into());
    }
    let whole = serde_json::from_str::<Value>(text);
    if let Ok(v @ Value::Object(_)) = whole {
        return Ok(v);
    }
    if let Some(v) = fenced(text).or_else(|| embedded(text)) {
        return Ok(v);
    }
    let start: String = text.chars().take(120).collect();
    Err(match whole {
        Err(e) => format!("{e} (answer starts {start:?})"),
        Ok(_) => format!("the answer is JSON but not an object (answer starts {start:?})"),
    })
}

/// The first Markdown code fence whose content is a JSON object.
fn fenced(text: &str) -> Option<Value> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        // the fence's info string (`json`) ends its first line
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let close = body.find("```")?;
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(body[..close].trim()) {
            return Some(v);
        }
        rest = &body[close + 3..];
    }
    None
}

/// The first JSON object in prose with a proposal's key: each opening
/// brace in turn, parsed as far as one JSON value goes.
fn embedded(text: &str) -> Option<Value> {
    text.match_indices('{')
        .take(MAX_EMBEDDED_TRIES)
        .find_map(|(i, _)| {
            let mut values = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
            match values.next() {
                Some(Ok(Value::Object(map)))
                    if PROPOSAL_KEYS.iter().any(|k| map.contains_key(*k)) =>
                {
                    Some(Value::Object(map))
                }
                Some(Ok(_) | Err(_)) | None => None,
            }
        })
}

#[cfg(test)]
#[path = "extract_answer_tests.rs"]
mod tests;
