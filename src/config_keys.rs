//! Which key of a fleet file a TOML error is about: toml reports the byte
//! span of the value (or key, or table) it failed on; the key there, in
//! the dotted form the validation errors use (`bots[1].tools[0]`), is
//! found by walking the parsed document for the deepest entry covering
//! that span.

use std::ops::Range;

/// What a TOML error says, naming the dotted key it is about when it
/// points into the document (`key `providers.o.timeout_s`: invalid type:
/// string "ten", expected a whole number, 0 or more (line 7, column 13)`);
/// otherwise (a syntax
/// error) toml's own report with the line it quotes.
pub(super) fn parse_detail(text: &str, e: &toml::de::Error) -> String {
    let report = crate::serde_words::in_words(e.to_string().trim_end());
    let Some(span) = e.span() else {
        return report;
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    if e.message() == "duplicate key"
        && let Some(twice) = duplicate(text, &span)
    {
        // the document does not parse, so no key is found in it; the
        // report only pointed at it with a caret (QA, 2026-12-05)
        return format!("{twice} (line {line}, column {column})");
    }
    let Some(key) = key_at(text, &span) else {
        return report;
    };
    let mut words = crate::serde_words::in_words(e.message());
    // a word key given another type: serde names no word, and its
    // "or table" is no way to write it (QA: `synchronous = 1` said only
    // "wanted string or table")
    if words.starts_with("wanted string")
        && let Some(takes) = choices(&key)
    {
        words = format!("it takes {takes}, a word in quotes");
    }
    format!("key `{key}`: {words} (line {line}, column {column})")
}

/// The words a key of the fleet file takes, for one whose value is one of
/// a few words (an enum read by serde, which names them only when given
/// a word it does not know).
fn choices(key: &str) -> Option<&'static str> {
    let last = key.rsplit('.').next().unwrap_or(key);
    match (key.split('.').next(), last) {
        (Some("host"), "synchronous") => Some(r#""normal" or "full""#),
        (
            Some("review"),
            "shell" | "file_write" | "extension" | "subagent" | "delivery" | "automation",
        ) => Some(r#""off", "shadow" or "enforce""#),
        (_, "catch_up") => Some(r#""once" or "skip""#),
        _ => None,
    }
}

/// What a `duplicate key` error at `span` of `text` is about, in words: a
/// table header given twice (`[host]`), or a key set twice in a table.
fn duplicate(text: &str, span: &Range<usize>) -> Option<String> {
    let key = text.get(span.clone())?.trim();
    if key.is_empty() {
        return None;
    }
    let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.end..]
        .find('\n')
        .map_or(text.len(), |i| span.end + i);
    let line = text[start..end].trim();
    if line.starts_with('[') && !line.starts_with("[[") {
        let header = line
            .split(']')
            .next()
            .unwrap_or(line)
            .trim_start_matches('[')
            .trim();
        return Some(format!(
            "key `{header}`: the table [{header}] is given twice; merge the two into one"
        ));
    }
    let dotted = match table_at(&text[..start]) {
        Some(table) => format!("{table}.{key}"),
        None => key.to_owned(),
    };
    Some(format!(
        "key `{dotted}`: it is set twice in the same table; keep one"
    ))
}

/// The multi-line string (`"""` or `'''`) open after `line`, given the one
/// open before it: each delimiter opens one, or closes the one open.
fn after_multiline_quotes<'a>(line: &str, mut open: Option<&'a str>) -> Option<&'a str> {
    const BASIC: &str = "\"\"\"";
    const LITERAL: &str = "'''";
    let mut rest = line;
    loop {
        match open {
            Some(delimiter) => match rest.find(delimiter) {
                Some(at) => {
                    rest = &rest[at + delimiter.len()..];
                    open = None;
                }
                None => return open,
            },
            None => {
                let (at, delimiter) = match (rest.find(BASIC), rest.find(LITERAL)) {
                    (Some(b), Some(l)) if l < b => (l, LITERAL),
                    (Some(b), _) => (b, BASIC),
                    (None, Some(l)) => (l, LITERAL),
                    (None, None) => return None,
                };
                rest = &rest[at + delimiter.len()..];
                open = Some(delimiter);
            }
        }
    }
}

/// The dotted key (`host`, `bots[1]`, `bots[1].routines[0]`) of the table
/// the last header of `before` opens, counting each array of tables'
/// entries as the document's keys do; `None` before any header (the
/// root table). Read from the lines, since a document with a key set
/// twice does not parse (QA: `key `data_dir`` named no table).
fn table_at(before: &str) -> Option<String> {
    // each array of tables' full name → its entries so far
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut last: Option<String> = None;
    // the delimiter of the multi-line string a line is in, if any: a line
    // of one that starts with `[` (a Markdown link in a `role`) is text,
    // not a header (QA: the error named `the guide.owner`)
    let mut open: Option<&str> = None;
    for line in before.lines() {
        let inside = open.is_some();
        open = after_multiline_quotes(line, open);
        if inside {
            continue;
        }
        let line = line.trim();
        let (array, name) = if let Some(rest) = line.strip_prefix("[[") {
            (true, rest.split("]]").next().unwrap_or(rest))
        } else if let Some(rest) = line.strip_prefix('[') {
            (false, rest.split(']').next().unwrap_or(rest))
        } else {
            continue;
        };
        let name: String = name
            .split('.')
            .map(|s| s.trim().trim_matches('"'))
            .collect::<Vec<_>>()
            .join(".");
        if array {
            // a new entry starts its own nested arrays afresh
            let nested = format!("{name}.");
            counts.retain(|k, _| !k.starts_with(&nested));
            *counts.entry(name.clone()).or_default() += 1;
        }
        last = Some(name);
    }
    let last = last?;
    let mut dotted = String::new();
    let mut prefix = String::new();
    for segment in last.split('.') {
        if !prefix.is_empty() {
            prefix.push('.');
            dotted.push('.');
        }
        prefix.push_str(segment);
        dotted.push_str(segment);
        if let Some(n) = counts.get(&prefix) {
            dotted.push_str(&format!("[{}]", n.saturating_sub(1)));
        }
    }
    Some(dotted)
}

/// The dotted key (`bots[1].tools[0]`) of the deepest key or value of
/// `text` whose source covers `span`.
fn key_at(text: &str, span: &Range<usize>) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut best = Vec::new();
    deepest_table(doc.get_ref(), span, &mut Vec::new(), &mut best);
    (!best.is_empty()).then(|| best.concat())
}

fn covers(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

fn deepest_table(
    table: &toml::de::DeTable<'_>,
    span: &Range<usize>,
    path: &mut Vec<String>,
    best: &mut Vec<String>,
) {
    for (k, v) in table.iter() {
        let dot = if path.is_empty() { "" } else { "." };
        path.push(format!("{dot}{}", k.get_ref()));
        if (covers(&k.span(), span) || covers(&v.span(), span)) && path.len() > best.len() {
            best.clone_from(path);
        }
        deepest_value(v.get_ref(), span, path, best);
        path.pop();
    }
}

fn deepest_value(
    value: &toml::de::DeValue<'_>,
    span: &Range<usize>,
    path: &mut Vec<String>,
    best: &mut Vec<String>,
) {
    use toml::de::DeValue;
    match value {
        DeValue::Table(table) => deepest_table(table, span, path, best),
        DeValue::Array(array) => {
            for (i, v) in array.into_iter().enumerate() {
                path.push(format!("[{i}]"));
                if covers(&v.span(), span) && path.len() > best.len() {
                    best.clone_from(path);
                }
                deepest_value(v.get_ref(), span, path, best);
                path.pop();
            }
        }
        DeValue::String(_)
        | DeValue::Integer(_)
        | DeValue::Float(_)
        | DeValue::Boolean(_)
        | DeValue::Datetime(_) => {}
    }
}
