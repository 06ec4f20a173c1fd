//! Config errors that keep the file's credentials out. A TOML error quotes
//! the line it is about (`3 | token = bob-token-BBBB`, an unquoted or
//! unclosed value) and serde's message quotes the value it refused
//! (`invalid type: integer `123456789012``): printed by `check-config`
//! and `run`, and kept in logs, they would show a user's token, a hook's
//! signing secret or a `[[secrets]]` value. [`hide_credentials`] shows
//! such a value as `***` and keeps the line, the column and the key, so
//! the user still finds what to fix.
//!
//! The file did not parse, so the key is read from the line itself: a
//! line assigning a key named like a credential (`token`, `secret`,
//! `value`, `password`, `api_key`, `…_token`, `…_secret`, `…_key`, but
//! not `…_env`, which names a variable), wherever it stands (a misspelt
//! table keeps real values), a continuation of such a value (a multi-line
//! string), or a URL with userinfo (`base_url =
//! "http://user:pass@host"`).

use std::ops::Range;

/// What stands in for a hidden value.
const HIDDEN: &str = "***";

/// Key names that hold a credential, whole.
const CREDENTIAL_NAMES: &[&str] = &[
    "token",
    "secret",
    "value",
    "password",
    "passwd",
    "key",
    "apikey",
    "api_key",
    "auth",
    "authorization",
    "bearer",
    "credential",
    "credentials",
];

/// Endings of key names that hold a credential (`access_token`,
/// `client_secret`, `private_key`).
const CREDENTIAL_ENDINGS: &[&str] = &[
    "_token",
    "_secret",
    "_password",
    "_passwd",
    "_key",
    "_apikey",
];

/// Values shorter than this are not searched for in the message: a value
/// of a few characters is no secret, and replacing every `1` would
/// garble the line numbers.
const MIN_VALUE_CHARS: usize = 4;

/// `detail`, the text of TOML error `e` on `text`, with the credential
/// values of the lines the error points at hidden (module docs).
pub(super) fn hide_credentials(text: &str, e: &toml::de::Error, detail: String) -> String {
    let Some(span) = e.span() else {
        return detail;
    };
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    // the lines the error is about, and those its excerpt shows (an
    // unclosed `"""` is reported at the end of the file, its excerpt
    // showing the line that opened it)
    let mut at: Vec<usize> = lines_of(text, &span)
        .chain(
            detail
                .split('\n')
                .filter_map(excerpt_line)
                .filter_map(|(_, n)| n.checked_sub(1)),
        )
        .collect();
    at.sort_unstable();
    at.dedup();
    let hits: Vec<Hit> = at
        .into_iter()
        .filter_map(|i| credential_at(&lines, i))
        .collect();
    if hits.is_empty() {
        return detail;
    }
    let values: Vec<String> = hits.iter().flat_map(|h| h.values.iter().cloned()).collect();
    let mut out = Vec::new();
    let mut masked_above = false;
    for line in detail.split('\n') {
        if masked_above && is_caret_line(line) {
            // it points into the value that is no longer shown
            masked_above = false;
            continue;
        }
        masked_above = false;
        if let Some((number_end, n)) = excerpt_line(line)
            && let Some(hit) = hits.iter().find(|h| h.line + 1 == n)
        {
            out.push(format!("{}{}", &line[..number_end], hit.masked));
            masked_above = true;
            continue;
        }
        out.push(hide_values(&hide_refused_value(line), &values));
    }
    let shown = out.join("\n");
    if !shown.contains(HIDDEN) {
        // the message quoted no value of theirs (an unknown key such as
        // `compact_at_token` reads as a credential's name): no note of a
        // `***` that is not there (QA)
        return shown;
    }
    let names: Vec<String> = hits
        .iter()
        .map(|h| format!("`{}` on line {}", h.key, h.line + 1))
        .collect();
    format!(
        "{}\n({HIDDEN} stands for the credential of {}, which is never shown)",
        shown.trim_end(),
        names.join(", ")
    )
}

/// A line of the file whose credential the error would show.
struct Hit {
    /// Index of the line in the file.
    line: usize,
    /// The key, as written.
    key: String,
    /// The line as it may be shown.
    masked: String,
    /// The forms of the value a message may quote.
    values: Vec<String>,
}

/// Indexes of the lines `span` covers (at most 50: an excerpt shows few).
fn lines_of(text: &str, span: &Range<usize>) -> impl Iterator<Item = usize> {
    let line = |at: usize| text[..at.min(text.len())].matches('\n').count();
    let first = line(span.start);
    let last = line(span.end).max(first).min(first + 50);
    first..=last
}

/// Whether a key name holds a credential.
fn is_credential(key: &str) -> bool {
    let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
    let key = key
        .rsplit('.')
        .next()
        .unwrap_or(key)
        .trim()
        .trim_matches(|c| c == '"' || c == '\'');
    let key = key.to_ascii_lowercase().replace('-', "_");
    !key.ends_with("_env")
        && (CREDENTIAL_NAMES.contains(&key.as_str())
            || CREDENTIAL_ENDINGS.iter().any(|end| key.ends_with(end)))
}

/// The credential line `i` shows, if it shows one.
fn credential_at(lines: &[&str], i: usize) -> Option<Hit> {
    let line = lines.get(i)?;
    if let Some(key) = inside_multi_line(lines, i) {
        // a line of a multi-line value: its words are the value's, never
        // a key (a PEM line ending `-SECRET` was named the key)
        let indent = &line[..line.len() - line.trim_start().len()];
        return (is_credential(&key) && !line.trim().is_empty()).then(|| Hit {
            line: i,
            key,
            masked: format!("{indent}{HIDDEN}"),
            values: forms(line.trim()),
        });
    }
    if let Some(hit) = assigned_credential(line, i).or_else(|| userinfo(line, i)) {
        return Some(hit);
    }
    if !assignments(line).is_empty() || is_header(line) {
        return None;
    }
    // a line without a key of its own: a continuation of the value of the
    // key above (a multi-line string or array), or a key missing its `=`
    let word: String = line
        .trim_start()
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    let owner = if is_credential(&word) && !word.is_empty() {
        Some(word)
    } else {
        lines[..i]
            .iter()
            .rev()
            .take_while(|l| !is_header(l))
            .find_map(|l| assignments(l).into_iter().next().map(|(k, _)| k))
            .filter(|k| is_credential(k))
    };
    let key = owner?;
    let indent = &line[..line.len() - line.trim_start().len()];
    Some(Hit {
        line: i,
        key,
        masked: format!("{indent}{HIDDEN}"),
        values: forms(line.trim()),
    })
}

/// The key of the multi-line string (`"""`, `'''`) that line `i` is
/// inside, if it is inside one: read from the top of the file, each
/// delimiter opening a string or closing the one it opened (close enough:
/// the file did not parse anyway, and a `"""` inside a basic string is
/// escaped).
fn inside_multi_line(lines: &[&str], i: usize) -> Option<String> {
    const DELIMITERS: [&str; 2] = ["\"\"\"", "'''"];
    let mut open: Option<(&str, String)> = None;
    for line in lines.iter().take(i) {
        let mut rest = *line;
        loop {
            if let Some((delimiter, _)) = &open {
                match rest.find(delimiter) {
                    Some(at) => {
                        rest = &rest[at + delimiter.len()..];
                        open = None;
                    }
                    None => break,
                }
                continue;
            }
            // a comment opens nothing
            let code = rest.find('#').map_or(rest, |hash| &rest[..hash]);
            let first = DELIMITERS
                .iter()
                .filter_map(|d| code.find(d).map(|at| (at, *d)))
                .min();
            let Some((at, delimiter)) = first else {
                break;
            };
            let key = assignments(line)
                .into_iter()
                .next()
                .map(|(k, _)| k)
                .unwrap_or_default();
            open = Some((delimiter, key));
            rest = &rest[at + delimiter.len()..];
        }
    }
    open.map(|(_, key)| key)
}

/// The first key of `line` named like a credential, with the line shown
/// up to its `=`.
fn assigned_credential(line: &str, i: usize) -> Option<Hit> {
    let (key, eq) = assignments(line)
        .into_iter()
        .find(|(k, _)| is_credential(k))?;
    Some(Hit {
        line: i,
        key,
        masked: format!("{} {HIDDEN}", &line[..=eq]),
        values: forms(line[eq + 1..].trim()),
    })
}

/// A URL with userinfo in `line` (`http://user:pass@host`): the line with
/// each userinfo shown as `***`.
fn userinfo(line: &str, i: usize) -> Option<Hit> {
    let mut masked = String::with_capacity(line.len());
    let mut values = Vec::new();
    let mut rest = line;
    while let Some(found) = rest.find("://") {
        let start = found + 3;
        masked.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '/' | '?' | '#'))
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            values.extend(forms(&rest[..at]));
            values.extend(rest[..at].split(':').flat_map(forms));
            masked.push_str(HIDDEN);
            rest = &rest[at..];
        }
    }
    masked.push_str(rest);
    if values.is_empty() && masked == line {
        return None;
    }
    let key = assignments(line)
        .into_iter()
        .next()
        .map_or_else(|| "a URL".to_owned(), |(k, _)| k);
    Some(Hit {
        line: i,
        key,
        masked,
        values,
    })
}

/// The keys `line` assigns (outside strings: at its start, or after `{`
/// or `,` of an inline table), each with the byte index of its `=`.
fn assignments(line: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut key_start = Some(0);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '#' => break,
            '=' => {
                if let Some(start) = key_start.take() {
                    let key = line[start..at].trim();
                    if !key.is_empty() {
                        found.push((key.to_owned(), at));
                    }
                }
            }
            '{' | ',' => key_start = Some(at + 1),
            '"' | '\'' => {
                // a quoted key (`"token" = …`) is part of the key
                quote = Some(c);
            }
            '[' if key_start.is_some_and(|s| line[s..at].trim().is_empty()) => key_start = None,
            _ => {}
        }
    }
    found
}

fn is_header(line: &str) -> bool {
    line.trim_start().starts_with('[')
}

/// The forms of a value as written (`"abc"`, `123_456`) a message may
/// quote: as written, unquoted, and a number without its `_`.
fn forms(raw: &str) -> Vec<String> {
    let raw = raw.trim();
    let unquoted = raw
        .trim_start_matches(['"', '\''])
        .trim_end_matches(['"', '\''])
        .trim();
    let mut out = vec![
        raw.to_owned(),
        unquoted.to_owned(),
        unquoted.replace('_', ""),
    ];
    out.retain(|v| v.chars().count() >= MIN_VALUE_CHARS);
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

/// `line` with every value of `values` as `***`.
fn hide_values(line: &str, values: &[String]) -> String {
    let mut line = line.to_owned();
    for v in values {
        if line.contains(v.as_str()) {
            line = line.replace(v.as_str(), HIDDEN);
        }
    }
    line
}

/// serde's message about a refused value (`invalid type: integer
/// `123`, expected a string`) with the value quoted in it as `***`.
fn hide_refused_value(line: &str) -> String {
    let mut out = line.to_owned();
    for lead in ["invalid type: ", "invalid value: ", "invalid length "] {
        let Some(start) = out.find(lead).map(|at| at + lead.len()) else {
            continue;
        };
        let end = out[start..]
            .find(", expected")
            .map_or(out.len(), |at| start + at);
        let what = &out[start..end];
        let shown = match what.find(['`', '"']) {
            Some(q) => {
                let quote = &what[q..=q];
                format!("{}{quote}{HIDDEN}{quote}", &what[..q])
            }
            None => what.to_owned(),
        };
        out.replace_range(start..end, &shown);
    }
    out
}

/// `(end of the "N | " prefix, N)` of an excerpt line of toml's report.
fn excerpt_line(line: &str) -> Option<(usize, usize)> {
    let digits = line.trim_start();
    let lead = line.len() - digits.len();
    let n_len = digits.find(|c: char| !c.is_ascii_digit())?;
    let n = digits[..n_len].parse().ok()?;
    let after = &digits[n_len..];
    after
        .strip_prefix(" | ")
        .or_else(|| (after == " |").then_some(""))?;
    Some((lead + n_len + 3.min(after.len()), n))
}

/// The `  |   ^^^` line under an excerpt.
fn is_caret_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('|') && t[1..].trim().starts_with('^')
}

#[cfg(test)]
#[path = "config_hidden_tests.rs"]
mod tests;
