//! The shape and size of a SendMessage card, checked before it is
//! delivered.
//!
//! A card is stored in the delivery entry, fetched by every client that
//! shows the conversation and resent to the model in every later prompt
//! of the session, so it is bounded as the message text is: per field
//! and in total. Its shape is what the web page draws (`src/api/cards.js`):
//! `title`, `text` (or `description` / `body`), `fields`, `buttons`, and
//! for a secret request `type: "secret_request"` with the secret's
//! `name`. A button's `url` must be an `http(s)` address: the page opens
//! no other, so another (`javascript:`, `data:`) could only mislead.

use serde_json::Map;
use serde_json::Value;

use super::ToolError;
use crate::vault::secret_name_problem;

/// Most characters of a card's JSON, all its fields together.
pub(crate) const MAX_CARD_CHARS: usize = 8_000;
/// Most characters of `title`.
const MAX_TITLE: usize = 200;
/// Most characters of `text`, `description` or `body`.
const MAX_BODY: usize = 4_000;
/// Most entries of `fields`.
const MAX_FIELDS: usize = 20;
/// Most characters of a field's label.
const MAX_FIELD_LABEL: usize = 200;
/// Most characters of a field's value (its JSON when not a string).
const MAX_FIELD_VALUE: usize = 1_000;
/// Most entries of `buttons`.
const MAX_BUTTONS: usize = 10;
/// Most characters of a button's label.
const MAX_LABEL: usize = 80;
/// Most characters of a button's reply (`value`, `reply` or `message`).
const MAX_REPLY: usize = 1_000;
/// Most characters of a button's `url`.
const MAX_URL: usize = 2_000;

/// The keys a card may have.
const CARD_KEYS: &[&str] = &[
    "type",
    "name",
    "title",
    "text",
    "description",
    "body",
    "fields",
    "buttons",
];
/// The keys a button given as an object may have.
const BUTTON_KEYS: &[&str] = &["label", "text", "title", "value", "reply", "message", "url"];
/// The keys a field given as an object may have.
const FIELD_KEYS: &[&str] = &["name", "label", "title", "key", "value"];

/// What to do about a card that is refused.
fn fix() -> String {
    format!(
        "send the card again within its limits (title up to {MAX_TITLE} characters, text up to \
         {MAX_BODY}, up to {MAX_FIELDS} fields of up to {MAX_FIELD_VALUE} characters, up to \
         {MAX_BUTTONS} buttons with labels up to {MAX_LABEL}, {MAX_CARD_CHARS} characters of \
         JSON in all), or put long content in the message text"
    )
}

/// Refuses a card whose shape the clients do not draw, or that is larger
/// than its limits, naming the field, the limit and what to do.
pub(crate) fn check_card(card: &Value) -> Result<(), ToolError> {
    let Value::Object(card) = card else {
        return Err(refused(
            "`card` must be an object",
            "give the card as {\"title\": …, \"text\": …, \"fields\": …, \"buttons\": […]}, or leave it out",
        ));
    };
    unknown_keys("card", card, CARD_KEYS)?;
    check_type(card)?;
    for (key, max) in [
        ("title", MAX_TITLE),
        ("text", MAX_BODY),
        ("description", MAX_BODY),
        ("body", MAX_BODY),
    ] {
        if let Some(value) = card.get(key) {
            string(&format!("card.{key}"), value, max)?;
        }
    }
    if let Some(fields) = card.get("fields") {
        check_fields(fields)?;
    }
    if let Some(buttons) = card.get("buttons") {
        check_buttons(buttons)?;
    }
    let total = Value::Object(card.clone()).to_string().chars().count();
    if total > MAX_CARD_CHARS {
        return Err(refused(
            format!("the card has {total} characters of JSON; the limit is {MAX_CARD_CHARS}"),
            fix(),
        ));
    }
    Ok(())
}

fn refused(message: impl Into<String>, hint: impl Into<String>) -> ToolError {
    ToolError::new(
        format!("SendMessage refused the card: {}", message.into()),
        hint,
    )
}

/// Refuses the keys of `object` that are not in `known`, naming them all.
fn unknown_keys(what: &str, object: &Map<String, Value>, known: &[&str]) -> Result<(), ToolError> {
    let mut unknown: Vec<String> = object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| format!("`{}`", clip(k)))
        .collect();
    unknown.sort();
    if unknown.is_empty() {
        return Ok(());
    }
    let known: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    Err(refused(
        format!(
            "{what} has {} that clients do not show: {}",
            if unknown.len() == 1 {
                "a field"
            } else {
                "fields"
            },
            unknown.join(", ")
        ),
        format!("use only {}", known.join(", ")),
    ))
}

/// A name as the refusal quotes it: a long one (a key can be as large
/// as the request) cut to its start.
pub(crate) fn clip(name: &str) -> String {
    const MAX: usize = 40;
    match name.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_owned(),
    }
}

/// `type` is absent (an ordinary card) or `secret_request`, which needs
/// the secret's `name`; `name` means nothing on another card.
fn check_type(card: &Map<String, Value>) -> Result<(), ToolError> {
    match (card.get("type"), card.get("name")) {
        (None, None) => Ok(()),
        (Some(Value::String(t)), Some(name)) if t == "secret_request" => {
            let Value::String(name) = name else {
                return Err(refused(
                    "`card.name` must be a string, the name of the secret",
                    "name the secret, such as \"GITHUB_TOKEN\"",
                ));
            };
            match secret_name_problem(name) {
                None => Ok(()),
                Some(problem) => Err(refused(format!("`card.name`: {problem}"), "fix the name")),
            }
        }
        (Some(Value::String(t)), None) if t == "secret_request" => Err(refused(
            "a secret_request card needs `name`, the name of the secret",
            "add \"name\": \"GITHUB_TOKEN\" (the secret's name)",
        )),
        (Some(t), _) => Err(refused(
            format!("`card.type` is {t}; the only card type is \"secret_request\""),
            "leave `type` out for an ordinary card (title, text, fields, buttons)",
        )),
        (None, Some(_)) => Err(refused(
            "`card.name` belongs to a secret_request card only",
            "use `title` to name an ordinary card, or add \"type\": \"secret_request\"",
        )),
    }
}

/// A string of at most `max` characters.
fn string(at: &str, value: &Value, max: usize) -> Result<(), ToolError> {
    let Value::String(text) = value else {
        return Err(refused(format!("`{at}` must be a string"), fix()));
    };
    within(at, text.chars().count(), max)
}

fn within(at: &str, chars: usize, max: usize) -> Result<(), ToolError> {
    if chars > max {
        return Err(refused(
            format!("`{at}` has {chars} characters; the limit is {max}"),
            fix(),
        ));
    }
    Ok(())
}

/// A field's value: any JSON, bounded by its text.
fn field_value(at: &str, value: &Value) -> Result<(), ToolError> {
    within(at, text_len(value), MAX_FIELD_VALUE)
}

/// `fields`: a list of `[label, value]` pairs or `{name, value}`
/// objects, or one object of label → value.
fn check_fields(fields: &Value) -> Result<(), ToolError> {
    let count = match fields {
        Value::Array(list) => list.len(),
        Value::Object(map) => map.len(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            return Err(refused(
                "`card.fields` must be a list of {\"name\": …, \"value\": …} or an object of label → value",
                fix(),
            ));
        }
    };
    if count > MAX_FIELDS {
        return Err(refused(
            format!("`card.fields` has {count} entries; the limit is {MAX_FIELDS}"),
            fix(),
        ));
    }
    match fields {
        Value::Object(map) => {
            for (label, value) in map {
                within(
                    "card.fields (a label)",
                    label.chars().count(),
                    MAX_FIELD_LABEL,
                )?;
                field_value(&format!("card.fields.{label}"), value)?;
            }
        }
        Value::Array(list) => {
            for (i, field) in list.iter().enumerate() {
                let at = format!("card.fields[{i}]");
                match field {
                    Value::Array(pair) if pair.len() == 2 => {
                        within(&format!("{at}[0]"), text_len(&pair[0]), MAX_FIELD_LABEL)?;
                        field_value(&format!("{at}[1]"), &pair[1])?;
                    }
                    Value::Object(object) => {
                        unknown_keys(&format!("`{at}`"), object, FIELD_KEYS)?;
                        for key in ["name", "label", "title", "key"] {
                            if let Some(label) = object.get(key) {
                                string(&format!("{at}.{key}"), label, MAX_FIELD_LABEL)?;
                            }
                        }
                        if let Some(value) = object.get("value") {
                            field_value(&format!("{at}.value"), value)?;
                        }
                    }
                    Value::Array(_)
                    | Value::Null
                    | Value::Bool(_)
                    | Value::Number(_)
                    | Value::String(_) => {
                        return Err(refused(
                            format!(
                                "`{at}` must be {{\"name\": …, \"value\": …}} or a [label, value] pair"
                            ),
                            fix(),
                        ));
                    }
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
    Ok(())
}

/// The characters a value shows as text.
fn text_len(value: &Value) -> usize {
    match value {
        Value::String(text) => text.chars().count(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => {
            value.to_string().chars().count()
        }
    }
}

/// `buttons`: a list of labels, or of `{label, value?, url?}` objects.
fn check_buttons(buttons: &Value) -> Result<(), ToolError> {
    let Value::Array(list) = buttons else {
        return Err(refused(
            "`card.buttons` must be a list of labels or {\"label\": …, \"value\"|\"url\": …} objects",
            fix(),
        ));
    };
    if list.len() > MAX_BUTTONS {
        return Err(refused(
            format!(
                "`card.buttons` has {} entries; the limit is {MAX_BUTTONS}",
                list.len()
            ),
            fix(),
        ));
    }
    for (i, button) in list.iter().enumerate() {
        let at = format!("card.buttons[{i}]");
        match button {
            Value::String(label) => within(&at, label.chars().count(), MAX_LABEL)?,
            Value::Object(object) => {
                unknown_keys(&format!("`{at}`"), object, BUTTON_KEYS)?;
                for key in ["label", "text", "title"] {
                    if let Some(label) = object.get(key) {
                        string(&format!("{at}.{key}"), label, MAX_LABEL)?;
                    }
                }
                for key in ["value", "reply", "message"] {
                    if let Some(reply) = object.get(key) {
                        string(&format!("{at}.{key}"), reply, MAX_REPLY)?;
                    }
                }
                if let Some(url) = object.get("url") {
                    check_url(&format!("{at}.url"), url)?;
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                return Err(refused(
                    format!(
                        "`{at}` must be a label or a {{\"label\": …, \"value\"|\"url\": …}} object"
                    ),
                    fix(),
                ));
            }
        }
    }
    Ok(())
}

/// An absolute `http://` or `https://` address, without spaces or
/// control characters.
fn check_url(at: &str, url: &Value) -> Result<(), ToolError> {
    string(at, url, MAX_URL)?;
    let Value::String(url) = url else {
        return Ok(());
    };
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    let clean = !url.chars().any(|c| c.is_whitespace() || c.is_control());
    match rest {
        Some(rest) if clean && !rest.is_empty() && !rest.starts_with('/') => Ok(()),
        Some(_) | None => Err(refused(
            format!("`{at}` is {url:?}; a button opens only an http:// or https:// address"),
            "give a full web address such as https://example.org/page, or leave the url out",
        )),
    }
}
