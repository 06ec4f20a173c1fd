//! A tool's arguments of the wrong JSON type, explained in the model's
//! terms. serde says `invalid type: string "5", expected u8`: no field,
//! and a Rust type the model never saw. Small models (and the tool-call
//! parsers of local servers) most often send a number as a string; the
//! model needs the field's name and the JSON type it takes to fix it.

use serde::de::DeserializeOwned;
use serde_json::Map;
use serde_json::Value;

/// serde's `error` for `args` (read as `T`), with the field and the JSON
/// types named when it is a wrong type or value; as serde said otherwise
/// (a missing or unknown field is named already).
pub(super) fn explain<T: DeserializeOwned>(
    args: &Map<String, Value>,
    error: &serde_json::Error,
) -> String {
    let said = error.to_string();
    let Some((got, want)) = ["invalid type: ", "invalid value: "]
        .iter()
        .find_map(|p| said.strip_prefix(p))
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return said;
    };
    let want = json_type(want);
    let got_text = given(got);
    let quoted_number = got
        .strip_prefix("string \"")
        .and_then(|s| s.strip_suffix('"'))
        // a JSON number as written: `NaN`, `inf`, `+5`, `.5`, `007` parse
        // as f64 but are none (QA: the advice to write them without
        // quotes was no valid JSON)
        .filter(|s| serde_json::from_str::<f64>(s.trim()).is_ok_and(f64::is_finite))
        .filter(|_| want.contains("number") || want.contains("integer"));
    let hint = match quoted_number {
        Some(n) => format!(" (write the number without quotes: {})", n.trim()),
        None => String::new(),
    };
    match culprit::<T>(args, &said) {
        Some((field, nested)) if nested => {
            format!("in field `{field}`, a value must be {want}, not {got_text}{hint}")
        }
        Some((field, _)) => format!("field `{field}` must be {want}, not {got_text}{hint}"),
        None => format!("a value must be {want}, not {got_text}{hint}"),
    }
}

/// The top-level field serde failed on, and whether the failure is inside
/// it (an array or object). serde reads the fields in the map's order and
/// stops at the first bad one: without that field the error changes (it
/// reads, or fails later or on the missing field); without a field before
/// it, it does not.
fn culprit<T: DeserializeOwned>(args: &Map<String, Value>, said: &str) -> Option<(String, bool)> {
    args.iter().find_map(|(key, value)| {
        let mut without = args.clone();
        without.remove(key);
        let changed = match T::deserialize(&Value::Object(without)) {
            Ok(_) => true,
            Err(e) => e.to_string() != said,
        };
        changed.then(|| {
            let nested = matches!(value, Value::Array(_) | Value::Object(_));
            (key.clone(), nested)
        })
    })
}

/// The JSON type for serde's `expected …` text.
fn json_type(want: &str) -> String {
    let text = match want {
        "u8" => "an integer from 0 to 255",
        "u16" => "an integer from 0 to 65535",
        "u32" | "u64" | "u128" | "usize" => "a whole number (0 or more)",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a string" | "a borrowed string" | "a string or bytes" => "a string",
        "a boolean" => "true or false",
        "a sequence" => "an array",
        "a map" => "an object",
        "a character" => "a string of one character",
        "unit" => "null",
        other if other.starts_with("struct ") => "an object",
        other if other.starts_with("a tuple") || other.starts_with("tuple") => "an array",
        other => other,
    };
    text.to_owned()
}

/// What was given, from serde's `Unexpected` text.
fn given(got: &str) -> String {
    let number = ["integer `", "floating point `"]
        .iter()
        .find_map(|p| got.strip_prefix(p))
        .and_then(|s| s.strip_suffix('`'));
    if let Some(n) = number {
        return format!("the number {n}");
    }
    if let Some(b) = got
        .strip_prefix("boolean `")
        .and_then(|s| s.strip_suffix('`'))
    {
        return b.to_owned();
    }
    match got {
        "sequence" => "an array".to_owned(),
        "map" => "an object".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        other if other.starts_with("string ") => format!("the {other}"),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde::Deserialize;
    use serde_json::json;

    use super::super::parse_args;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Remember {
        text: String,
        #[serde(default)]
        importance: Option<u8>,
        #[serde(default)]
        limit: Option<u64>,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        urgent: bool,
    }

    fn message(args: serde_json::Value) -> String {
        parse_args::<Remember>("Remember", args)
            .unwrap_err()
            .message
    }

    /// Regression (round 21, H2): `"importance": "5"` was told as
    /// `invalid type: string "5", expected u8`: no field, a Rust type.
    #[test]
    fn a_wrong_type_names_the_field_and_the_json_type() {
        assert_eq!(
            message(json!({"text": "tea", "importance": "5"})),
            "invalid arguments for Remember: field `importance` must be an integer from 0 to \
             255, not the string \"5\" (write the number without quotes: 5)"
        );
        assert_eq!(
            message(json!({"text": "tea", "limit": "10"})),
            "invalid arguments for Remember: field `limit` must be a whole number (0 or more), \
             not the string \"10\" (write the number without quotes: 10)"
        );
        assert_eq!(
            message(json!({"text": 12345})),
            "invalid arguments for Remember: field `text` must be a string, not the number 12345"
        );
        assert_eq!(
            message(json!({"text": "x", "importance": 300})),
            "invalid arguments for Remember: field `importance` must be an integer from 0 to \
             255, not the number 300"
        );
        assert_eq!(
            message(json!({"text": "x", "urgent": "yes"})),
            "invalid arguments for Remember: field `urgent` must be true or false, not the \
             string \"yes\""
        );
        assert_eq!(
            message(json!({"text": "x", "tags": "a"})),
            "invalid arguments for Remember: field `tags` must be an array, not the string \"a\""
        );
        assert_eq!(
            message(json!({"text": "x", "tags": ["a", 2]})),
            "invalid arguments for Remember: in field `tags`, a value must be a string, not \
             the number 2"
        );
        // a field before the bad one, valid, is not blamed; nor one after it
        assert_eq!(
            message(json!({"importance": 2, "limit": -1, "text": "x"})),
            "invalid arguments for Remember: field `limit` must be a whole number (0 or more), \
             not the number -1"
        );
    }

    /// A quoted `NaN` or `inf` is no number JSON has: no advice to write
    /// it without quotes.
    #[test]
    fn a_quoted_non_number_gets_no_advice_to_unquote_it() {
        for given in ["NaN", "inf", "-infinity", "+5", ".5", "5.", "007", "1e400"] {
            let said = message(json!({"text": "x", "limit": given}));
            assert!(!said.contains("without quotes"), "{given}: {said}");
        }
        assert!(message(json!({"text": "x", "limit": "10"})).contains("without quotes: 10"));
    }

    /// What serde already names well stays as it was.
    #[test]
    fn missing_and_unknown_fields_keep_their_message() {
        assert_eq!(
            message(json!({})),
            "invalid arguments for Remember: missing field `text`"
        );
        assert!(
            message(json!({"text": "x", "msg": 1})).contains("unknown field `msg`"),
            "{}",
            message(json!({"text": "x", "msg": 1}))
        );
    }
}
