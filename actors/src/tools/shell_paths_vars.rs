//! Paths built from variables, for the Shell tool's path check
//! (shell_paths.rs): a variable's value is not in the command text, so a
//! path through one can only be judged when the value is known.
//!
//! - A path that goes up (a `..` component) after an expansion (`$PWD/..`,
//!   `${HOME}/../x`, `"$PWD"/..`, `${d:-..}`) climbs out of a value the
//!   check cannot see: refused, whatever the variable (`cd $dir/..` too).
//! - A path that starts with a variable (`$A/x`, also after `=` or `:`,
//!   as in `--file=$A/x`) is judged by the variable: `$HOME` and `$PWD`
//!   are inside (the workspace root and the working directory) unless the
//!   text names them otherwise (`HOME=…`, `read PWD`, `unset HOME`); a
//!   variable the text only assigns (`A=sub; cat $A/x`) is replaced by
//!   each value it is given and the result checked like any path (an empty
//!   value makes it absolute: `A=; cat $A/etc/x` is refused); any other
//!   (unset, from the environment, a secret, `$1`, `${A:-/etc}`, set by
//!   `read` or `for`) is refused, as it may be empty or name a place
//!   outside.
//! - `~` is the workspace only while HOME is: a text naming HOME otherwise
//!   gets `~` paths refused.

use std::ops::Range;
use std::path::Path;

use super::Strictness;
use super::check_tokens;
use super::is_name;
use super::words::Command;
use crate::tools::ToolError;
use crate::tools::Workspace;

/// What the text lets the check know of a variable's value.
#[derive(Debug, PartialEq, Eq)]
enum Known {
    /// A place inside the workspace (HOME, PWD untouched by the text).
    Inside,
    /// The values the text's assignments give it.
    Assigned(Vec<String>),
    /// Nothing.
    Unknown,
}

/// One expansion at the start of a part of a word.
struct Expansion<'a> {
    /// The variable (a name, or a special parameter such as `1` or `@`).
    name: &'a str,
    /// What follows the name inside braces (`:-x`, `%/*`), if anything.
    operator: &'a str,
    /// Where the expansion ends in the word.
    end: usize,
}

/// Refuses a word whose path goes up after an expansion, starts with a
/// variable whose value the text does not show, or starts with `~` when
/// the text changes HOME. `reparsed`: something in the text runs a word
/// as shell code again, so a quoted `$` may be expanded too.
///
/// Returns where the words are (in the text) that are paths starting with
/// a variable whose value was known and judged here: the caller need not
/// read their raw text again, where quotes would split `"$PWD"/sub` into
/// `PWD` and the absolute `/sub`.
pub(super) fn check_expansions(
    workspace: &Workspace,
    cwd: &Path,
    text: &str,
    commands: &[Command],
    reparsed: bool,
) -> Result<Vec<Range<usize>>, ToolError> {
    let home_changed = known(text, commands, "HOME") != Known::Inside;
    let mut judged = Vec::new();
    for word in commands.iter().flat_map(|c| &c.words) {
        let value = word.value.as_str();
        let dollars: Vec<usize> = if reparsed {
            value.match_indices('$').map(|(at, _)| at).collect()
        } else {
            word.expansions.clone()
        };
        if dollars.iter().any(|&at| climbs(&value[at..])) {
            return Err(ToolError::new(
                format!("`{value}` climbs out of a variable's value, which the check cannot see"),
                "write the path relative to the workspace (relative paths start at the \
                 working directory), without `..` after a `$`",
            ));
        }
        for &at in &word.expansions {
            let path_start = at == 0 || value[..at].ends_with(['=', ':']);
            let Some(expansion) = path_start.then(|| parse(value, at)).flatten() else {
                continue;
            };
            // the raw text is skipped only for a word that is this one path:
            // no expansion before it, no list after it (`"$PWD"/a:/etc`)
            if check_start(workspace, cwd, text, commands, value, &expansion)?
                && !value[..at].contains('$')
                && !value[at..].contains([':', '=', ','])
            {
                judged.push(word.span.clone());
            }
        }
        let tilde =
            word.loose && (value.starts_with('~') || value.contains("=~") || value.contains(":~"));
        if tilde && home_changed {
            return Err(ToolError::new(
                format!(
                    "`{value}` uses `~`, but the command changes the HOME variable, so where \
                     `~` leads is a value the check cannot see"
                ),
                "write the path relative to the workspace, and leave HOME as it is (it is \
                 the workspace root)",
            ));
        }
    }
    Ok(judged)
}

/// Whether the text from an expansion on holds a `..` component (also in
/// a default value: `${d:-..}`).
fn climbs(from: &str) -> bool {
    from.split(|c: char| c.is_whitespace() || "/{}:=+?#%-".contains(c))
        .any(|part| part == "..")
}

/// Refuses a path starting with `expansion` when the variable's value is
/// not known to keep it inside. Whether the path was judged (the value
/// known, a `/` after it, and what it then names checked).
fn check_start(
    workspace: &Workspace,
    cwd: &Path,
    text: &str,
    commands: &[Command],
    value: &str,
    expansion: &Expansion<'_>,
) -> Result<bool, ToolError> {
    let rest = &value[expansion.end..];
    let name = expansion.name;
    let unseen = || {
        ToolError::new(
            format!(
                "`{value}` starts with the value of `${name}`, which the check cannot see \
                 (the command does not set the variable to a path: it may be empty or lead \
                 outside the workspace)"
            ),
            "write the path relative to the workspace, or set the variable in the same \
             command to a path inside it (d=sub; ls $d/x)",
        )
    };
    if !expansion.operator.is_empty() {
        // `${PWD%/*}` is the parent, `${A:-/etc}` a path of its own
        let changes_place = expansion.operator.contains('/')
            || rest.starts_with('/')
            || matches!(name, "HOME" | "PWD");
        return if changes_place {
            Err(unseen())
        } else {
            Ok(false)
        };
    }
    if !rest.starts_with('/') {
        // the whole word (`cat $f`): a path only if the value is one
        return Ok(false);
    }
    match known(text, commands, name) {
        Known::Inside => {
            // relative to the place the variable holds
            let base = if name == "HOME" {
                workspace.root()
            } else {
                cwd
            };
            check_tokens(workspace, base, &format!(".{rest}"), Strictness::Strict)?;
        }
        Known::Assigned(values) => {
            for assigned in values {
                let path = format!("{assigned}{rest}");
                check_tokens(workspace, cwd, &path, Strictness::Strict)?;
            }
        }
        Known::Unknown => return Err(unseen()),
    }
    Ok(true)
}

/// The expansion starting at `at` in `value` (a `$`), unless it is a
/// command substitution or no expansion at all (`$` at the end).
fn parse(value: &str, at: usize) -> Option<Expansion<'_>> {
    let after = &value[at + 1..];
    if let Some(inner) = after.strip_prefix('{') {
        let close = inner.find('}')?;
        let inner = &inner[..close];
        if inner.starts_with('#') && inner.len() > 1 {
            // `${#A}` is a length
            return None;
        }
        let len = name_len(inner);
        return Some(Expansion {
            name: &inner[..len],
            operator: &inner[len..],
            end: at + 2 + close + 1,
        });
    }
    let len = name_len(after);
    (len > 0).then(|| Expansion {
        name: &after[..len],
        operator: "",
        end: at + 1 + len,
    })
}

/// The length of the variable name (or special parameter) `text` starts with.
fn name_len(text: &str) -> usize {
    match text.chars().next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len()),
        Some(c) if "0123456789@*#?$!-".contains(c) => 1,
        Some(_) | None => 0,
    }
}

/// What the text shows of variable `name`'s value: every mention of the
/// name must be an expansion of it or a plain assignment (`name=value` at
/// a word's start); any other (`read name`, `unset name`, `for name in`,
/// `name+=x`, `${name:=x}`, or the word in some other text) may set it to
/// anything.
fn known(text: &str, commands: &[Command], name: &str) -> Known {
    if !is_name(name) {
        // `$1`, `$@`: set by whoever runs the text
        return Known::Unknown;
    }
    let bytes = text.as_bytes();
    let name_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (at, _) in text.match_indices(name) {
        let end = at + name.len();
        let before = &text[..at];
        if before.bytes().last().is_some_and(name_byte)
            || bytes.get(end).is_some_and(|&b| name_byte(b))
        {
            continue;
        }
        let expanded = before.ends_with('$')
            || (before.ends_with("${")
                && !text[end..].starts_with('=')
                && !text[end..].starts_with(":="));
        let assigned = text[end..].starts_with('=')
            && before
                .bytes()
                .last()
                .is_none_or(|b| b.is_ascii_whitespace() || b";|&(){".contains(&b));
        if !expanded && !assigned {
            return Known::Unknown;
        }
    }
    let mut values = Vec::new();
    for word in commands.iter().flat_map(|c| &c.words) {
        let Some((assigned, value)) = word.value.split_once('=') else {
            continue;
        };
        if assigned != name || !is_name(assigned) {
            continue;
        }
        // a value holding an expansion is as unknown as that one
        if !word.expansions.is_empty() || value.contains('`') {
            return Known::Unknown;
        }
        values.push(value.to_owned());
    }
    match (values.is_empty(), name) {
        (true, "HOME" | "PWD") => Known::Inside,
        (true, _) => Known::Unknown,
        (false, _) => Known::Assigned(values),
    }
}
