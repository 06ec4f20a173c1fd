//! serde's refusals in words a person reads: a number field refused a
//! value with "expected u32" or "expected u64", naming a Rust type where
//! a person editing fleet.toml needs the range the field takes (QA:
//! `deliveries_per_minute = -1` was answered "invalid value: integer
//! `-1`, expected u32").

/// The Rust number types serde names after "expected ", with what they
/// take in words (the widest ones without their bound, which no one
/// reaches by hand).
const NUMBERS: [(&str, &str); 10] = [
    ("u8", "a whole number from 0 to 255"),
    ("u16", "a whole number from 0 to 65535"),
    ("u32", "a whole number from 0 to 4294967295"),
    ("u64", "a whole number, 0 or more"),
    ("usize", "a whole number, 0 or more"),
    ("i8", "a whole number from -128 to 127"),
    ("i16", "a whole number from -32768 to 32767"),
    ("i32", "a whole number from -2147483648 to 2147483647"),
    ("i64", "a whole number"),
    ("f64", "a number"),
];

/// `message` with each "expected <number type>" of serde's in words
/// (`expected u32` → `expected a whole number from 0 to 4294967295`);
/// anything else as it is.
pub(crate) fn in_words(message: &str) -> String {
    const LEAD: &str = "expected ";
    // a number past every integer TOML has is named by the type the
    // parser read it as (audit: "integer `99999999999999999999` as i128")
    let message = message.replace("` as i128, expected ", "` (too large), expected ");
    let mut out = String::with_capacity(message.len());
    let mut rest = message.as_str();
    while let Some(at) = rest.find(LEAD) {
        let after = at + LEAD.len();
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        let word_end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        if let Some((_, words)) = NUMBERS.iter().find(|(ty, _)| *ty == &rest[..word_end]) {
            out.push_str(words);
            rest = &rest[word_end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::in_words;

    #[test]
    fn a_number_too_large_for_toml_is_said_to_be_too_large() {
        assert_eq!(
            in_words("invalid type: integer `99999999999999999999` as i128, expected u64"),
            "invalid type: integer `99999999999999999999` (too large), expected a whole number, 0 or more"
        );
    }

    #[test]
    fn number_types_are_named_by_the_values_they_take() {
        assert_eq!(
            in_words("invalid value: integer `-1`, expected u32"),
            "invalid value: integer `-1`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            in_words("invalid type: string \"ten\", expected u64 (line 7, column 13)"),
            "invalid type: string \"ten\", expected a whole number, 0 or more (line 7, column 13)"
        );
        assert_eq!(
            in_words("invalid type: floating point `1.5`, expected u8 at line 1 column 9"),
            "invalid type: floating point `1.5`, expected a whole number from 0 to 255 at line 1 column 9"
        );
    }

    #[test]
    fn other_words_stay_as_they_are() {
        for same in [
            "invalid type: integer `5`, expected a string",
            "expected a boolean",
            "expected u128ish",
            "expected ",
            "unknown field `u32`, expected one of `a`, `b`",
            "",
        ] {
            assert_eq!(in_words(same), same);
        }
    }
}
