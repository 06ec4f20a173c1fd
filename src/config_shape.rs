//! The fleet file's tables written as something else. serde reads a
//! struct from a TOML array too, field by field in order, so `review =
//! ["off"]` set `review.shell = "off"` and started (Shell unreviewed),
//! `host = ["/dir", "127.0.0.1:1"]` set the data directory and the
//! address, and `[[host]]` failed as "invalid type: map, expected path
//! string" (QA). Each table is checked to be one before the file is read
//! into the schema, and the error names the key and how to write it.

/// Top-level keys that are tables: `[host]`.
const TABLES: [&str; 3] = ["host", "runtime", "review"];
/// Top-level keys that are arrays of tables: `[[users]]`.
const TABLE_ARRAYS: [&str; 3] = ["users", "bots", "secrets"];
/// Keys of a `[[bots]]` table that are arrays of tables.
const BOT_TABLE_ARRAYS: [&str; 2] = ["routines", "hooks"];

/// The first key of `text` that should be a table (or an array of
/// tables) and is not, with what to write instead. `None` for a text that
/// is no TOML document (the schema's parse reports that) or whose shape
/// is right.
pub(super) fn shape_problem(text: &str) -> Option<(String, String)> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    for key in TABLES {
        if let Some(v) = doc.get(key)
            && !v.is_table()
        {
            return Some((
                key.to_owned(),
                format!(
                    "must be a table, written `[{key}]` with its keys below it; it is {}",
                    kind(v)
                ),
            ));
        }
    }
    if let Some(v) = doc.get("providers") {
        let Some(providers) = v.as_table() else {
            return Some((
                "providers".into(),
                format!(
                    "must be a table of providers, each written `[providers.NAME]`; it is {}",
                    kind(v)
                ),
            ));
        };
        for (name, p) in providers {
            if !p.is_table() {
                return Some((
                    format!("providers.{name}"),
                    format!(
                        "must be a table, written `[providers.{name}]` with `kind` and its keys \
                         below it; it is {}",
                        kind(p)
                    ),
                ));
            }
        }
    }
    for key in TABLE_ARRAYS {
        if let Some(problem) = table_array(&doc, key, key) {
            return Some(problem);
        }
    }
    let bots = doc.get("bots").and_then(toml::Value::as_array);
    for (i, bot) in bots.into_iter().flatten().enumerate() {
        let Some(bot) = bot.as_table() else { continue };
        for key in BOT_TABLE_ARRAYS {
            if let Some(problem) = table_array(bot, key, &format!("bots[{i}].{key}")) {
                return Some(problem);
            }
        }
    }
    None
}

/// `table[key]`, if present, as an array of tables; else the problem,
/// named `path` (`bots[0].routines`).
fn table_array(table: &toml::Table, key: &str, path: &str) -> Option<(String, String)> {
    let v = table.get(key)?;
    let header = path.replace(|c: char| c == '[' || c.is_ascii_digit() || c == ']', "");
    let Some(items) = v.as_array() else {
        return Some((
            path.to_owned(),
            format!(
                "must be a list of tables, each written `[[{header}]]` with its keys below it; \
                 it is {}",
                kind(v)
            ),
        ));
    };
    items.iter().enumerate().find_map(|(i, item)| {
        (!item.is_table()).then(|| {
            (
                format!("{path}[{i}]"),
                format!(
                    "must be a table, written `[[{header}]]` with its keys below it; it is {}",
                    kind(item)
                ),
            )
        })
    })
}

/// What a TOML value is, for a message.
fn kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}
