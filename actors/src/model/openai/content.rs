//! Message content as providers send it: a string, `null`, or (Mistral,
//! some vLLM and LiteLLM setups) an array of typed parts such as
//! `[{"type": "text", "text": "…"}]`, in a whole message and in a
//! streamed delta. The text parts are joined; parts of other types
//! (images, references) carry nothing a bot's turn can use and are left
//! out.

use serde::Deserialize;
use serde::Deserializer;
use serde_json::Value;

/// One element of a content array; only text parts are read.
#[derive(Debug, Deserialize)]
struct Part {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<Value>,
}

/// The content as one string: a string as it is, an array's text parts
/// joined, `null` as `None`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// Deserializes a `content` (or `reasoning_content`) field that may be a
/// string, `null`, or an array of parts.
pub(super) fn text<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(
        match Option::<Content>::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "content is neither a string, null, nor an array of {\"type\":\"text\",\"text\":…} parts",
            )
        })? {
            None => None,
            Some(Content::Text(text)) => Some(text),
            Some(Content::Parts(parts)) => Some(
                parts
                    .into_iter()
                    .filter(|part| part.kind.as_deref().is_none_or(|kind| kind == "text"))
                    .filter_map(|part| match part.text {
                        Some(Value::String(text)) => Some(text),
                        // `{"type":"text","text":{"value":…}}` (an older
                        // Azure shape)
                        Some(Value::Object(fields)) => match fields.get("value") {
                            Some(Value::String(text)) => Some(text.clone()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect(),
            ),
        },
    )
}
