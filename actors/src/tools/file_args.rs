//! Checks of Read's, Write's and Edit's arguments that their types do not
//! make: every unknown field named at once (serde names only the first it
//! meets), with the field meant when the name is a known slip; control
//! characters in a path; and Read's 1-based `offset` and `limit`.

use serde_json::Value;

use super::ToolError;
use crate::tools::delivery::clip;

/// Names other tools' contracts use for our fields, and ours: a model
/// used to them gets the right name in the refusal.
const MEANT: &[(&str, &str)] = &[
    ("old_string", "old_text"),
    ("old_str", "old_text"),
    ("old", "old_text"),
    ("search", "old_text"),
    ("new_string", "new_text"),
    ("new_str", "new_text"),
    ("new", "new_text"),
    ("replace", "new_text"),
    ("replacement", "new_text"),
    ("file_path", "path"),
    ("filepath", "path"),
    ("filename", "path"),
    ("file", "path"),
    ("text", "content"),
    ("contents", "content"),
    ("data", "content"),
    ("line", "offset"),
    ("start", "offset"),
    ("start_line", "offset"),
    ("lines", "limit"),
    ("count", "limit"),
];

/// Refuses the fields of `args` that `tool` does not have, naming all of
/// them and, where it is known, the field meant.
pub(super) fn known_fields(tool: &str, args: &Value, known: &[&str]) -> Result<(), ToolError> {
    let Value::Object(args) = args else {
        // not an object: parse_args says so
        return Ok(());
    };
    let mut unknown: Vec<&str> = args
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    unknown.sort_unstable();
    if unknown.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = unknown
        .iter()
        .map(|k| {
            match MEANT
                .iter()
                .find(|(slip, meant)| slip == k && known.contains(meant))
            {
                Some((_, meant)) => format!("`{k}` (did you mean `{meant}`?)"),
                None => format!("`{}`", clip(k)),
            }
        })
        .collect();
    let fields: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    Err(ToolError::new(
        format!(
            "invalid arguments for {tool}: unknown field{} {}",
            if unknown.len() == 1 { "" } else { "s" },
            named.join(", ")
        ),
        format!(
            "call {tool} again with only its fields: {}",
            fields.join(", ")
        ),
    ))
}

/// Refuses a path with a control character (a newline, a tab, an escape):
/// such a name is made by mistake, and breaks every listing it is in.
pub(super) fn plain_path(given: &str) -> Result<(), ToolError> {
    match given.chars().find(|c| c.is_control()) {
        None => Ok(()),
        Some(c) => Err(ToolError::new(
            format!(
                "path {given:?} has a control character (U+{:04X}); file names here may not have \
                 control characters",
                u32::from(c)
            ),
            "give the path without it (a newline or tab in a path is usually a slip)",
        )),
    }
}

/// The longest path the system opens (`PATH_MAX`, its final NUL included).
const PATH_MAX: usize = 4096;
/// The longest name of one file or directory (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// Refuses a path the system would refuse as too long once joined to the
/// workspace `root`, before anything of it is made: a Write of one left
/// every directory it could make on the way (2,048 of them) and echoed
/// the whole path (tester H3, round 22). The error shows a short form.
pub(super) fn short_enough(given: &str, root: &std::path::Path) -> Result<(), ToolError> {
    let total = root.as_os_str().len() + 1 + given.len();
    let long_name = given.split('/').find(|name| name.len() > NAME_MAX);
    let why = match long_name {
        Some(name) => format!(
            "has a name of {} bytes ({}); the system allows {NAME_MAX} per name",
            name.len(),
            shortened(name)
        ),
        None if total >= PATH_MAX => format!(
            "is {total} bytes long within the workspace; the system allows {} in all",
            PATH_MAX - 1
        ),
        None => return Ok(()),
    };
    Err(ToolError::new(
        format!("path {} {why}; nothing was created", shortened(given)),
        "use a shorter path: fewer or shorter directory names",
    ))
}

/// `text` as a message shows it: whole when short, else its start and
/// end around the count of what is left out.
fn shortened(text: &str) -> String {
    const KEEP: usize = 40;
    let chars = text.chars().count();
    if chars <= 2 * KEEP + 20 {
        return format!("{text:?}");
    }
    let start: String = text.chars().take(KEEP).collect();
    let end: String = text.chars().skip(chars - KEEP).collect();
    format!("{start:?}…({} chars)…{end:?}", chars - 2 * KEEP)
}

/// Refuses the `fields` of `args` whose schema minimum is 1 given as 0
/// or less (lines and characters count from 1; a window of 0 lines shows
/// nothing), before serde reads them: it would call -1 "not a whole
/// number (0 or more)", and 0 would then be refused too.
pub(super) fn from_one(tool: &str, args: &Value, fields: &[&str]) -> Result<(), ToolError> {
    for field in fields {
        let n = match args.get(*field) {
            Some(Value::Number(n)) => n,
            // a number in quotes: serde's error called it "a whole number
            // (0 or more)", though 0 is refused (QA, 2026-12-06)
            Some(Value::String(text)) if text.trim().parse::<f64>().is_ok_and(f64::is_finite) => {
                return Err(ToolError::new(
                    format!(
                        "invalid arguments for {tool}: `{field}` is the text {text:?}; it must be \
                         a whole number, 1 or more"
                    ),
                    format!(
                        "write `{field}` as a number without quotes ({}), or leave it out",
                        text.trim()
                    ),
                ));
            }
            _ => continue,
        };
        let problem = match n.as_i64() {
            Some(n) if n < 1 => format!("`{field}` is {n}; its smallest value is 1"),
            Some(_) => continue,
            // a fraction (`-1.5`, `2.5`) or past i64: serde's error called
            // the smallest value 0 (QA, 2026-12-05)
            None if n.as_u64().is_some() => continue,
            None => format!("`{field}` is {n}; it must be a whole number, 1 or more"),
        };
        return Err(ToolError::new(
            format!("invalid arguments for {tool}: {problem}"),
            format!("give `{field}` as 1 or more, or leave it out"),
        ));
    }
    Ok(())
}
